// Tests that cleave-shard refuses the megatron preset on a mesh without a
// 'tp' axis, reporting it on the module.
// RUN: cleave-opt %s --cleave-shard='mesh=pp=2 preset=megatron' -verify-diagnostics -o /dev/null

// expected-error @below {{--shard-preset megatron splits the 'tp' axis, which the mesh (pp=2) does not have}}
module {
  func.func @main(%x: tensor<2x16xf32> {cleave.input = "x"},
                  %w: tensor<16x16xf32> {cleave.param = "w"})
      -> (tensor<2x16xf32> {cleave.output = "y"}) {
    %zero = arith.constant 0.000000e+00 : f32
    %e = tensor.empty() : tensor<2x16xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x16xf32>) -> tensor<2x16xf32>
    %y = linalg.matmul ins(%x, %w : tensor<2x16xf32>, tensor<16x16xf32>) outs(%f : tensor<2x16xf32>) -> tensor<2x16xf32>
    return %y : tensor<2x16xf32>
  }
}
