// Tests that a marked loop index becomes the local index plus the rank's
// first position in the loop (its linear position over the marked axes,
// the first axis slowest, times the op's local loop size), and that an
// unmarked index is left alone.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-offset-split-indices))' | FileCheck %s

#all = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2x4)

// CHECK-LABEL: func.func @offset
// CHECK: %[[POS:.*]]:2 = shard.process_multi_index on @mesh axes = [0, 1] : index, index
// CHECK: %[[TIMES:.*]] = arith.muli %[[POS]]#0, %c4{{.*}} : index
// CHECK: %[[LINEAR:.*]] = arith.addi %[[TIMES]], %[[POS]]#1 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[LINEAR]], %c2{{.*}} : index
// CHECK: linalg.generic
// CHECK-DAG: %[[I:.*]] = linalg.index 0 : index
// CHECK-DAG: %[[LOCAL:.*]] = linalg.index 1 : index
// CHECK: %[[J:.*]] = arith.addi %[[LOCAL]], %[[FIRST]] : index
// CHECK: tensor.extract %{{.*}}[%[[I]], %[[J]]] : tensor<4x16xf32>
// CHECK-NOT: cleave.split_axes
func.func @offset(%table: tensor<4x16xf32>) -> tensor<4x2xf32> {
  %e = tensor.empty() : tensor<4x2xf32>
  %r = linalg.generic {indexing_maps = [#all], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x2xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 {cleave.split_axes = array<i16: 0, 1>} : index
    %v = tensor.extract %table[%i, %j] : tensor<4x16xf32>
    linalg.yield %v : f32
  } -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
