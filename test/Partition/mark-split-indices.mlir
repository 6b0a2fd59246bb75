// Tests that a loop index partition makes rank-local is marked where its
// uses need the position in the whole loop (arithmetic, a lookup into a
// whole tensor), and left alone where it reads a tensor split like its loop
// or where its loop is not split.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-mark-split-indices))' | FileCheck %s

#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#all = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#mask = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

// A table of buckets x heads, whole on every rank, read at the heads the
// loop is split into (T5's relative position bias).
// CHECK-LABEL: func.func @whole_table
// CHECK: %[[H:.*]] = linalg.index 2 {cleave.split_axes = array<i16: 0>} : index
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[H]]] : tensor<8x4xf32>
func.func @whole_table(%ids: tensor<4x4xindex>, %table: tensor<8x4xf32>) -> tensor<4x4x4xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %pinned = shard.shard %table to %whole : tensor<8x4xf32>
  %heads = shard.sharding @mesh split_axes = [[], [], [0]] : !shard.sharding
  %ids_w = shard.shard %ids to %whole annotate_for_users : tensor<4x4xindex>
  %e = tensor.empty() : tensor<4x4x4xf32>
  %e_s = shard.shard %e to %heads annotate_for_users : tensor<4x4x4xf32>
  %r = linalg.generic {indexing_maps = [#rows, #all], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids_w : tensor<4x4xindex>) outs(%e_s : tensor<4x4x4xf32>) {
  ^bb0(%bucket: index, %o: f32):
    %h = linalg.index 2 : index
    %v = tensor.extract %table[%bucket, %h] : tensor<8x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4x4xf32>
  %r_s = shard.shard %r to %heads : tensor<4x4x4xf32>
  return %r_s : tensor<4x4x4xf32>
}

// A table split by columns like the loop: the rank's block of the table is
// read at the local index. A second use of the index, in arithmetic, needs
// the whole loop's position and gets a marked copy.
// CHECK-LABEL: func.func @aligned_table
// CHECK-DAG: %[[LOCAL:.*]] = linalg.index 2 : index
// CHECK-DAG: %[[GLOBAL:.*]] = linalg.index 2 {cleave.split_axes = array<i16: 0>} : index
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[LOCAL]]] : tensor<8x4xf32>
// CHECK: arith.index_cast %[[GLOBAL]]
func.func @aligned_table(%ids: tensor<4x4xindex>, %table: tensor<8x4xf32>) -> tensor<4x4x4xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %cols = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %pinned = shard.shard %table to %cols : tensor<8x4xf32>
  %heads = shard.sharding @mesh split_axes = [[], [], [0]] : !shard.sharding
  %ids_w = shard.shard %ids to %whole annotate_for_users : tensor<4x4xindex>
  %e = tensor.empty() : tensor<4x4x4xf32>
  %e_s = shard.shard %e to %heads annotate_for_users : tensor<4x4x4xf32>
  %r = linalg.generic {indexing_maps = [#rows, #all], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids_w : tensor<4x4xindex>) outs(%e_s : tensor<4x4x4xf32>) {
  ^bb0(%bucket: index, %o: f32):
    %h = linalg.index 2 : index
    %v = tensor.extract %table[%bucket, %h] : tensor<8x4xf32>
    %i = arith.index_cast %h : index to i64
    %f = arith.sitofp %i : i64 to f32
    %s = arith.addf %v, %f : f32
    linalg.yield %s : f32
  } -> tensor<4x4x4xf32>
  %r_s = shard.shard %r to %heads : tensor<4x4x4xf32>
  return %r_s : tensor<4x4x4xf32>
}

// A causal mask split by key positions: the compare needs the key's
// position in the whole sequence; the query loop is whole.
// CHECK-LABEL: func.func @mask
// CHECK-DAG: %[[Q:.*]] = linalg.index 0 : index
// CHECK-DAG: %[[K:.*]] = linalg.index 1 {cleave.split_axes = array<i16: 0>} : index
// CHECK: arith.cmpi ule, %[[K]], %[[Q]] : index
func.func @mask() -> tensor<8x8xf32> {
  %keys = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %e = tensor.empty() : tensor<8x8xf32>
  %e_s = shard.shard %e to %keys annotate_for_users : tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [#mask], iterator_types = ["parallel", "parallel"]} outs(%e_s : tensor<8x8xf32>) {
  ^bb0(%o: f32):
    %q = linalg.index 0 : index
    %k = linalg.index 1 : index
    %seen = arith.cmpi ule, %k, %q : index
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %v = arith.select %seen, %zero, %ninf : f32
    linalg.yield %v : f32
  } -> tensor<8x8xf32>
  %r_s = shard.shard %r to %keys : tensor<8x8xf32>
  return %r_s : tensor<8x8xf32>
}

// Nothing split: nothing marked.
// CHECK-LABEL: func.func @whole
// CHECK-NOT: cleave.split_axes
// CHECK: return
func.func @whole() -> tensor<8x8xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %e = tensor.empty() : tensor<8x8xf32>
  %e_s = shard.shard %e to %whole annotate_for_users : tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [#mask], iterator_types = ["parallel", "parallel"]} outs(%e_s : tensor<8x8xf32>) {
  ^bb0(%o: f32):
    %q = linalg.index 0 : index
    %k = linalg.index 1 : index
    %seen = arith.cmpi ule, %k, %q : index
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %v = arith.select %seen, %zero, %ninf : f32
    linalg.yield %v : f32
  } -> tensor<8x8xf32>
  %r_s = shard.shard %r to %whole : tensor<8x8xf32>
  return %r_s : tensor<8x8xf32>
}
