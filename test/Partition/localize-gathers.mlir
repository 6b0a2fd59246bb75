// Tests that a lookup into a table split by rows reads only the rows this
// rank holds, shifted by its first row, and that the lookups are summed over
// the table's axes; and that a lookup into a whole table is left alone.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-localize-gathers))' | FileCheck %s

#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2x4)

// CHECK-LABEL: func.func @split_table
// CHECK-SAME: %[[IDS:.*]]: tensor<8xindex>, %[[TABLE:.*]]: tensor<8x16xf32>
// CHECK: %[[POS:.*]] = shard.process_multi_index on @mesh axes = [1] : index
// CHECK: %[[FIRST:.*]] = arith.muli %{{.*}}, %c8{{.*}} : index
// CHECK: %[[RESULT:.*]] = linalg.generic
// CHECK: %[[LOCAL:.*]] = arith.subi %{{.*}}, %[[FIRST]] : index
// CHECK: %[[HELD:.*]] = arith.andi
// CHECK: %[[ROW:.*]] = arith.select %[[HELD]], %[[LOCAL]], %{{.*}} : index
// CHECK: %[[V:.*]] = tensor.extract %[[TABLE]][%[[ROW]], %{{.*}}] : tensor<8x16xf32>
// CHECK: arith.select %[[HELD]], %[[V]], %{{.*}} : f32
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[RESULT]] on @mesh grid_axes = [1]
// CHECK: return %[[SUM]]
func.func @split_table(%ids: tensor<8xindex>, %table: tensor<8x16xf32> {cleave.sharding = [array<i16: 1>, array<i16>]}) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xindex>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%row: index, %o: f32):
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<8x16xf32>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @whole_table
// CHECK-NOT: shard.all_reduce
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<32x16xf32>
func.func @whole_table(%ids: tensor<8xindex>, %table: tensor<32x16xf32> {cleave.sharding = [array<i16>, array<i16>]}) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<8xindex>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%row: index, %o: f32):
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<32x16xf32>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
