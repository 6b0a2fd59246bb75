// Tests that a lookup into a split tensor at a position that is not the
// rank's own block of a loop split alike is an error at the op, naming
// the dimension, and that the pass stops there; a graph input split by rows
// (the batch cut into microbatches) is checked like any tensor, not taken
// for a table (the ONNX node's name, '?' here, is checked from ONNX in
// test/Sharding/partition.test).
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(cleave-mark-split-indices))' -verify-diagnostics

#rows = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

// The table's columns are split, the loop reading them whole.
func.func @loop_whole(%ids: tensor<4xindex>, %table: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %cols = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %pinned = shard.shard %table to %cols : tensor<8x4xf32>
  %ids_w = shard.shard %ids to %whole annotate_for_users : tensor<4xindex>
  %e = tensor.empty() : tensor<4x4xf32>
  %e_w = shard.shard %e to %whole annotate_for_users : tensor<4x4xf32>
  // expected-error @+1 {{cannot partition the lookup at ONNX node '?' into a tensor split on its dimension 1 at a position other than this rank's block of a loop split alike}}
  %r = linalg.generic {indexing_maps = [#rows, #all], iterator_types = ["parallel", "parallel"]} ins(%ids_w : tensor<4xindex>) outs(%e_w : tensor<4x4xf32>) {
  ^bb0(%row: index, %o: f32):
    %c = linalg.index 1 : index
    %v = tensor.extract %table[%row, %c] : tensor<8x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %r_w = shard.shard %r to %whole : tensor<4x4xf32>
  return %r_w : tensor<4x4xf32>
}

// -----

#all = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

// The table's columns are split and read at a fixed column.
func.func @fixed_column(%table: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %cols = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %pinned = shard.shard %table to %cols : tensor<8x4xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %e_s = shard.shard %e to %cols annotate_for_users : tensor<8x4xf32>
  // expected-error @+1 {{cannot partition the lookup at ONNX node '?' into a tensor split on its dimension 1}}
  %r = linalg.generic {indexing_maps = [#all], iterator_types = ["parallel", "parallel"]} outs(%e_s : tensor<8x4xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %v = tensor.extract %table[%i, %c0] : tensor<8x4xf32>
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  %r_s = shard.shard %r to %cols : tensor<8x4xf32>
  return %r_s : tensor<8x4xf32>
}

// -----

#rows = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

// The table's rows are split (cleave-localize-gathers would sum the
// lookups over tp) and so is the lookup's result, by columns over tp.
func.func @rows_and_result(%ids: tensor<4xindex>, %table: tensor<8x4xf32> {cleave.param = "table"}) -> tensor<4x4xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %rows = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %cols = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %pinned = shard.shard %table to %rows : tensor<8x4xf32>
  %ids_w = shard.shard %ids to %whole annotate_for_users : tensor<4xindex>
  %e = tensor.empty() : tensor<4x4xf32>
  %e_s = shard.shard %e to %cols annotate_for_users : tensor<4x4xf32>
  // expected-error @+1 {{cannot partition the lookup at ONNX node '?' into a table split by rows over grid axes that also split its result}}
  %r = linalg.generic {indexing_maps = [#rows, #all], iterator_types = ["parallel", "parallel"]} ins(%ids_w : tensor<4xindex>) outs(%e_s : tensor<4x4xf32>) {
  ^bb0(%row: index, %o: f32):
    %c = linalg.index 1 : index
    %v = tensor.extract %pinned[%row, %c] : tensor<8x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %r_s = shard.shard %r to %cols : tensor<4x4xf32>
  return %r_s : tensor<4x4xf32>
}

// -----

#rows = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

// The table's 8 columns and the loop's 4 are split over the same axis, in
// blocks of different sizes: rank 1's columns 2 and 3 are on rank 0.
func.func @blocks_differ(%ids: tensor<4xindex>, %table: tensor<8x8xf32>) -> tensor<4x4xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %cols = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %pinned = shard.shard %table to %cols : tensor<8x8xf32>
  %ids_w = shard.shard %ids to %whole annotate_for_users : tensor<4xindex>
  %e = tensor.empty() : tensor<4x4xf32>
  %e_s = shard.shard %e to %cols annotate_for_users : tensor<4x4xf32>
  // expected-error @+1 {{cannot partition the lookup at ONNX node '?' into a tensor split on its dimension 1}}
  %r = linalg.generic {indexing_maps = [#rows, #all], iterator_types = ["parallel", "parallel"]} ins(%ids_w : tensor<4xindex>) outs(%e_s : tensor<4x4xf32>) {
  ^bb0(%row: index, %o: f32):
    %c = linalg.index 1 : index
    %v = tensor.extract %table[%row, %c] : tensor<8x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %r_s = shard.shard %r to %cols : tensor<4x4xf32>
  return %r_s : tensor<4x4xf32>
}

// -----

#rows = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @mesh(shape = 2)

// A graph input split by rows (the batch cut into microbatches) is no
// table that cleave-localize-gathers would handle: a lookup into it at
// run-time rows would read another rank's rows.
func.func @input_rows(%ids: tensor<4xindex>, %x: tensor<8x4xf32> {cleave.input = "x"}) -> tensor<4x4xf32> {
  %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %rows = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %pinned = shard.shard %x to %rows : tensor<8x4xf32>
  %ids_w = shard.shard %ids to %whole annotate_for_users : tensor<4xindex>
  %e = tensor.empty() : tensor<4x4xf32>
  %e_s = shard.shard %e to %whole annotate_for_users : tensor<4x4xf32>
  // expected-error @+1 {{cannot partition the lookup at ONNX node '?' into a tensor split on its dimension 0 at a position other than this rank's block of a loop split alike}}
  %r = linalg.generic {indexing_maps = [#rows, #all], iterator_types = ["parallel", "parallel"]} ins(%ids_w : tensor<4xindex>) outs(%e_s : tensor<4x4xf32>) {
  ^bb0(%row: index, %o: f32):
    %c = linalg.index 1 : index
    %v = tensor.extract %pinned[%row, %c] : tensor<8x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %r_s = shard.shard %r to %whole : tensor<4x4xf32>
  return %r_s : tensor<4x4xf32>
}
