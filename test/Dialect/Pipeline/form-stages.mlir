// Tests that ops marked with their stage are wrapped into pipeline.stage
// regions: each stage takes the arguments and earlier values it uses, yields
// what later stages and the return use, and gets its own copy of constants
// and of a zero fill the two stages share (rather than receiving it).
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(pipeline-form-stages))' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-annotate-stages{stages=2 machine=peak=1G,mem-bw=1G}, pipeline-form-stages))' | FileCheck %s --check-prefix=AUTO

// CHECK-LABEL: func.func @marked
// CHECK-SAME: (%[[X:.*]]: tensor<16x64xf32>, %[[W0:.*]]: tensor<64x64xf32> {{.*}}, %[[W1:.*]]: tensor<64x64xf32>
// CHECK: %[[S0:.*]] = pipeline.stage 0 ins(%[[X]], %[[W0]] : tensor<16x64xf32>, tensor<64x64xf32>) -> (tensor<16x64xf32>) {
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: linalg.matmul
// CHECK: pipeline.yield
// CHECK: %[[S1:.*]] = pipeline.stage 1 ins(%[[S0]], %[[W1]] : tensor<16x64xf32>, tensor<64x64xf32>) -> (tensor<16x64xf32>) {
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK-NOT: cleave.stage
// CHECK: return %[[S1]]

// The stage partition and the stages together: a layer a stage.
// AUTO-LABEL: func.func @marked
// AUTO: pipeline.stage 0
// AUTO: pipeline.stage 1
// AUTO-NOT: pipeline.stage
func.func @marked(%x: tensor<16x64xf32>, %w0: tensor<64x64xf32> {cleave.param = "w0"}, %w1: tensor<64x64xf32> {cleave.param = "w1"}) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() {cleave.stage = 0} : tensor<16x64xf32>
  %f = linalg.fill {cleave.stage = 0} ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m0 = linalg.matmul {cleave.stage = 0} ins(%x, %w0 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m1 = linalg.matmul {cleave.stage = 1} ins(%m0, %w1 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %m1 : tensor<16x64xf32>
}
