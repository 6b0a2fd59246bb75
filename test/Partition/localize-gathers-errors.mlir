// Tests that a lookup into a row-split table that cannot be made local is an
// error at the lookup, and that the pass stops there.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-localize-gathers))' -verify-diagnostics

#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

func.func @column_not_whole(%ids: tensor<8xindex>, %table: tensor<8x16xf32> {cleave.sharding = [array<i16: 0>, array<i16>]}) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xindex>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%row: index, %o: f32):
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{cannot localize a lookup into a split table whose columns are not read whole}}
    %v = tensor.extract %table[%row, %c0] : tensor<8x16xf32>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
