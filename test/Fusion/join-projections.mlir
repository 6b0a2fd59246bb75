// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-join-projections))' --split-input-file | FileCheck %s

// Tests Q, K and V with biases (cleave-bias-into-gemm's form), K and V
// narrower (grouped-query attention) and split over a mesh axis: one matmul
// over the weights side by side, one broadcast of the biases side by side,
// each old result a column slice. The joined parameters take the first
// part's place, keep each part's attributes and width, and the parts go.
// CHECK-LABEL: func.func @qkv(
// CHECK-SAME: %arg0: tensor<6x4xf32> {cleave.input = "x"},
// CHECK-SAME: %arg1: tensor<4x16xf32> {cleave.joined = [{cleave.param = "wq", cleave.sharding = [array<i16>, array<i16: 0>], cleave.stages = array<i64: 1>}, {cleave.param = "wk", cleave.sharding = [array<i16>, array<i16: 0>], cleave.stages = array<i64: 1>}, {cleave.param = "wv", cleave.sharding = [array<i16>, array<i16: 0>], cleave.stages = array<i64: 1>}], cleave.joined_axis = 1 : i64, cleave.joined_widths = array<i64: 8, 4, 4>, cleave.param = "wq+wk+wv", cleave.stages = array<i64: 1>},
// CHECK-SAME: %arg2: tensor<16xf32> {cleave.joined = [{cleave.param = "bq", cleave.stages = array<i64: 1>}, {cleave.param = "bk", cleave.stages = array<i64: 1>}, {cleave.param = "bv", cleave.stages = array<i64: 1>}], cleave.joined_axis = 0 : i64, cleave.joined_widths = array<i64: 8, 4, 4>, cleave.param = "bq+bk+bv", cleave.stages = array<i64: 1>})
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<16xf32>) outs(%{{.*}} : tensor<6x16xf32>)
// CHECK: %[[P:.*]] = linalg.matmul ins(%arg0, %arg1 : tensor<6x4xf32>, tensor<4x16xf32>) outs(%[[B]] : tensor<6x16xf32>)
// CHECK-NEXT: %[[Q:.*]] = tensor.extract_slice %[[P]][0, 0] [6, 8] [1, 1]
// CHECK-NEXT: %[[K:.*]] = tensor.extract_slice %[[P]][0, 8] [6, 4] [1, 1]
// CHECK-NEXT: %[[V:.*]] = tensor.extract_slice %[[P]][0, 12] [6, 4] [1, 1]
// CHECK-NOT: linalg.matmul
// CHECK: return %[[Q]], %[[K]], %[[V]]
#row = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @qkv(%x: tensor<6x4xf32> {cleave.input = "x"},
               %wq: tensor<4x8xf32> {cleave.param = "wq", cleave.sharding = [array<i16>, array<i16: 0>], cleave.stages = array<i64: 1>},
               %bq: tensor<8xf32> {cleave.param = "bq", cleave.stages = array<i64: 1>},
               %wk: tensor<4x4xf32> {cleave.param = "wk", cleave.sharding = [array<i16>, array<i16: 0>], cleave.stages = array<i64: 1>},
               %bk: tensor<4xf32> {cleave.param = "bk", cleave.stages = array<i64: 1>},
               %wv: tensor<4x4xf32> {cleave.param = "wv", cleave.sharding = [array<i16>, array<i16: 0>], cleave.stages = array<i64: 1>},
               %bv: tensor<4xf32> {cleave.param = "bv", cleave.stages = array<i64: 1>})
    -> (tensor<6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %e8 = tensor.empty() : tensor<6x8xf32>
  %e4 = tensor.empty() : tensor<6x4xf32>
  %sq = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bq : tensor<8xf32>) outs(%e8 : tensor<6x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<6x8xf32>
  %q = linalg.matmul ins(%x, %wq : tensor<6x4xf32>, tensor<4x8xf32>) outs(%sq : tensor<6x8xf32>) -> tensor<6x8xf32>
  %sk = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bk : tensor<4xf32>) outs(%e4 : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<6x4xf32>
  %k = linalg.matmul ins(%x, %wk : tensor<6x4xf32>, tensor<4x4xf32>) outs(%sk : tensor<6x4xf32>) -> tensor<6x4xf32>
  %sv = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bv : tensor<4xf32>) outs(%e4 : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<6x4xf32>
  %v = linalg.matmul ins(%x, %wv : tensor<6x4xf32>, tensor<4x4xf32>) outs(%sv : tensor<6x4xf32>) -> tensor<6x4xf32>
  return %q, %k, %v : tensor<6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// Tests weights stored (N, K) and transposed into the matmuls (an ONNX Gemm
// with transB): joined along their rows, the joined weight transposed once.
// CHECK-LABEL: func.func @transposed(
// CHECK-SAME: %arg1: tensor<12x4xf32> {cleave.joined = [{cleave.param = "wq"}, {cleave.param = "wk"}], cleave.joined_axis = 0 : i64, cleave.joined_widths = array<i64: 8, 4>, cleave.param = "wq+wk"})
// CHECK: %[[T:.*]] = linalg.transpose ins(%arg1 : tensor<12x4xf32>) outs(%{{.*}} : tensor<4x12xf32>) permutation = [1, 0]
// CHECK: %[[P:.*]] = linalg.matmul ins(%arg0, %[[T]] : tensor<6x4xf32>, tensor<4x12xf32>)
// CHECK-NEXT: %[[Q:.*]] = tensor.extract_slice %[[P]][0, 0] [6, 8] [1, 1]
// CHECK-NEXT: %[[K:.*]] = tensor.extract_slice %[[P]][0, 8] [6, 4] [1, 1]
// CHECK-NOT: linalg.transpose
// CHECK: return %[[Q]], %[[K]]
func.func @transposed(%x: tensor<6x4xf32> {cleave.input = "x"},
                      %wq: tensor<8x4xf32> {cleave.param = "wq"},
                      %wk: tensor<4x4xf32> {cleave.param = "wk"})
    -> (tensor<6x8xf32>, tensor<6x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e8 = tensor.empty() : tensor<6x8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<6x8xf32>) -> tensor<6x8xf32>
  %t8 = tensor.empty() : tensor<4x8xf32>
  %wqt = linalg.transpose ins(%wq : tensor<8x4xf32>) outs(%t8 : tensor<4x8xf32>) permutation = [1, 0]
  %q = linalg.matmul ins(%x, %wqt : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z8 : tensor<6x8xf32>) -> tensor<6x8xf32>
  %e4 = tensor.empty() : tensor<6x4xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<6x4xf32>) -> tensor<6x4xf32>
  %t4 = tensor.empty() : tensor<4x4xf32>
  %wkt = linalg.transpose ins(%wk : tensor<4x4xf32>) outs(%t4 : tensor<4x4xf32>) permutation = [1, 0]
  %k = linalg.matmul ins(%x, %wkt : tensor<6x4xf32>, tensor<4x4xf32>) outs(%z4 : tensor<6x4xf32>) -> tensor<6x4xf32>
  return %q, %k : tensor<6x8xf32>, tensor<6x4xf32>
}

// -----

// Tests what stays apart: a weight another op reads too (a tied
// embedding), parameters of different pipeline stages, a projection with a
// bias beside one without, a weight that is not a parameter, and a lone
// projection. Each keeps its own matmul and argument.
// CHECK-LABEL: func.func @apart(
// CHECK-NOT: cleave.joined
// CHECK-COUNT-6: linalg.matmul
// CHECK-NOT: linalg.matmul
#row = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @apart(%x: tensor<6x4xf32> {cleave.input = "x"},
                 %tied: tensor<4x4xf32> {cleave.param = "tied"},
                 %a: tensor<4x4xf32> {cleave.param = "a", cleave.stages = array<i64: 0>},
                 %b: tensor<4x4xf32> {cleave.param = "b", cleave.stages = array<i64: 1>},
                 %c: tensor<4x4xf32> {cleave.param = "c", cleave.stages = array<i64: 0>},
                 %bc: tensor<4xf32> {cleave.param = "bc", cleave.stages = array<i64: 0>},
                 %notparam: tensor<4x4xf32> {cleave.input = "w"})
    -> (tensor<6x4xf32>, tensor<4x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x4xf32>) -> tensor<6x4xf32>
  %t = linalg.matmul ins(%x, %tied : tensor<6x4xf32>, tensor<4x4xf32>) outs(%z : tensor<6x4xf32>) -> tensor<6x4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %tt = linalg.transpose ins(%tied : tensor<4x4xf32>) outs(%e2 : tensor<4x4xf32>) permutation = [1, 0]
  %pa = linalg.matmul ins(%x, %a : tensor<6x4xf32>, tensor<4x4xf32>) outs(%z : tensor<6x4xf32>) -> tensor<6x4xf32>
  %pb = linalg.matmul ins(%x, %b : tensor<6x4xf32>, tensor<4x4xf32>) outs(%z : tensor<6x4xf32>) -> tensor<6x4xf32>
  %sc = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bc : tensor<4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<6x4xf32>
  %pc = linalg.matmul ins(%x, %c : tensor<6x4xf32>, tensor<4x4xf32>) outs(%sc : tensor<6x4xf32>) -> tensor<6x4xf32>
  %pn = linalg.matmul ins(%x, %notparam : tensor<6x4xf32>, tensor<4x4xf32>) outs(%z : tensor<6x4xf32>) -> tensor<6x4xf32>
  %pn2 = linalg.matmul ins(%pn, %notparam : tensor<6x4xf32>, tensor<4x4xf32>) outs(%z : tensor<6x4xf32>) -> tensor<6x4xf32>
  return %t, %tt, %pa, %pb, %pc, %pn2 : tensor<6x4xf32>, tensor<4x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}
