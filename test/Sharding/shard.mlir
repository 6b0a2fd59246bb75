// Tests cleave-shard, the sharding step of cleave-compile as a pass, on an
// imported module: the megatron preset splits a transformer MLP's up
// projection by columns (with its bias) and its down projection by rows,
// with no hints and no names; a hints file's shardings are taken and the
// preset adds the rest; a mesh without 'tp' gives the preset nothing to split
// on; a bad mesh and an unknown preset are refused. The module is the MLP
// make_model.py writes, as cleave-compile --compile-to=import imports it.
// RUN: cleave-opt %s --cleave-shard='mesh=tp=2 preset=megatron' | FileCheck %s --check-prefix=PRESET
// RUN: cleave-opt %s --cleave-shard='mesh=tp=2 preset=megatron hints=%S/Inputs/mlp-hints.yaml' | FileCheck %s --check-prefix=HINTS
// RUN: cleave-opt %s --cleave-shard='mesh=pp=2,tp=2 preset=megatron' | FileCheck %s --check-prefix=PIPELINE
// RUN: not cleave-opt %s --cleave-shard='mesh=pp=2 preset=megatron' 2>&1 | FileCheck %s --check-prefix=NOTP
// RUN: not cleave-opt %s --cleave-shard='mesh=tp=x' 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: not cleave-opt %s --cleave-shard='mesh=tp=2 preset=nemo' 2>&1 | FileCheck %s --check-prefix=PRESETNAME
// RUN: cleave-opt %s --cleave-shard | FileCheck %s --check-prefix=NOMESH

#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @main(%x: tensor<2x16xf32> {cleave.input = "x"},
                  %fc_w: tensor<16x64xf32> {cleave.param = "fc.weight"},
                  %fc_b: tensor<64xf32> {cleave.param = "fc.bias"},
                  %proj_w: tensor<64x16xf32> {cleave.param = "proj.weight"},
                  %proj_b: tensor<16xf32> {cleave.param = "proj.bias"})
      -> (tensor<2x16xf32> {cleave.output = "y"}) {
    %zero = arith.constant 0.000000e+00 : f32
    %e0 = tensor.empty() : tensor<2x64xf32>
    %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x64xf32>) -> tensor<2x64xf32>
    %up = linalg.matmul ins(%x, %fc_w : tensor<2x16xf32>, tensor<16x64xf32>) outs(%f0 : tensor<2x64xf32>) -> tensor<2x64xf32> loc("/mlp/fc/MatMul")
    %e1 = tensor.empty() : tensor<2x64xf32>
    %biased = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%up, %fc_b : tensor<2x64xf32>, tensor<64xf32>) outs(%e1 : tensor<2x64xf32>) {
    ^bb0(%in: f32, %b: f32, %out: f32):
      %s = arith.addf %in, %b : f32
      linalg.yield %s : f32
    } -> tensor<2x64xf32>
    %e2 = tensor.empty() : tensor<2x64xf32>
    %act = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%biased : tensor<2x64xf32>) outs(%e2 : tensor<2x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %half = arith.constant 5.000000e-01 : f32
      %one = arith.constant 1.000000e+00 : f32
      %rsqrt2 = arith.constant 0.707106769 : f32
      %a = arith.mulf %in, %rsqrt2 : f32
      %erf = math.erf %a : f32
      %b = arith.addf %one, %erf : f32
      %c = arith.mulf %half, %in : f32
      %d = arith.mulf %c, %b : f32
      linalg.yield %d : f32
    } -> tensor<2x64xf32>
    %e3 = tensor.empty() : tensor<2x16xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x16xf32>) -> tensor<2x16xf32>
    %down = linalg.matmul ins(%act, %proj_w : tensor<2x64xf32>, tensor<64x16xf32>) outs(%f1 : tensor<2x16xf32>) -> tensor<2x16xf32> loc("/mlp/proj/MatMul")
    %e4 = tensor.empty() : tensor<2x16xf32>
    %y = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%down, %proj_b : tensor<2x16xf32>, tensor<16xf32>) outs(%e4 : tensor<2x16xf32>) {
    ^bb0(%in: f32, %b: f32, %out: f32):
      %s = arith.addf %in, %b : f32
      linalg.yield %s : f32
    } -> tensor<2x16xf32>
    return %y : tensor<2x16xf32>
  }
}

// PRESET-LABEL: module attributes {cleave.mesh = "tp=2"}
// PRESET: shard.grid @mesh(shape = 2)
// PRESET: func.func @main(%[[X:.*]]: tensor<2x16xf32> {cleave.input = "x"}, %[[FCW:.*]]: tensor<16x64xf32> {cleave.param = "fc.weight", cleave.sharding_origin = "preset megatron: column-parallel projection at ONNX node '/mlp/fc/MatMul'"}, %[[FCB:.*]]: tensor<64xf32> {{{.*}}}, %[[PW:.*]]: tensor<64x16xf32> {cleave.param = "proj.weight", cleave.sharding_origin = "preset megatron: row-parallel projection at ONNX node '/mlp/proj/MatMul'"}, %[[PB:.*]]: tensor<16xf32> {cleave.param = "proj.bias"})
// The up projection's bias and the down projection's rows: dimension 0.
// PRESET-DAG: %[[S0:.*]] = shard.sharding @mesh split_axes = {{\[\[0\]\]}}
// PRESET-DAG: shard.shard %[[FCB]] to %[[S0]]
// PRESET-DAG: %[[S1:.*]] = shard.sharding @mesh split_axes = {{\[\[0\]\]}}
// PRESET-DAG: shard.shard %[[PW]] to %[[S1]]
// The up projection's columns: dimension 1.
// PRESET-DAG: %[[S2:.*]] = shard.sharding @mesh split_axes = {{\[\[\], \[0\]\]}}
// PRESET-DAG: %[[FCWS:.*]] = shard.shard %[[FCW]] to %[[S2]]
// PRESET: linalg.matmul ins(%[[X]], %[[FCWS]]
// PRESET-NOT: shard.shard %[[PB]]
// PRESET-NOT: shard.shard %[[X]]

// The hints name the up projection's weight and bias; the preset adds the
// down projection.
// HINTS: cleave.param = "fc.weight", cleave.sharding_origin = "hint 'fc.weight'
// HINTS-SAME: cleave.param = "proj.weight", cleave.sharding_origin = "preset megatron: row-parallel
// HINTS-DAG: split_axes = {{\[\[\], \[0\]\]}}
// HINTS-DAG: split_axes = {{\[\[0\]\]}}

// With pipeline stages the grid has both axes and the split is on 'tp'.
// PIPELINE: shard.grid @mesh(shape = 2x2)
// PIPELINE-DAG: split_axes = {{\[\[\], \[1\]\]}}
// PIPELINE-DAG: split_axes = {{\[\[1\]\]}}

// NOTP: error: --shard-preset megatron splits the 'tp' axis, which the mesh (pp=2) does not have
// MESH: error: --mesh 'tp=x': expected NAME=SIZE[,NAME=SIZE]..., got 'tp=x'
// PRESETNAME: error: cleave-shard: unknown preset 'nemo' (presets: megatron)

// Without a mesh the module is left as it is.
// NOMESH-LABEL: module {
// NOMESH-NOT: shard.
// NOMESH: func.func @main
