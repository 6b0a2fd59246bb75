// Tests that pipeline.stage and pipeline.yield parse, print and parse again,
// and that a stage whose body does not match its operands or results, or
// that takes a value from a stage that does not run before it, is rejected.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics | cleave-opt | FileCheck %s

// CHECK-LABEL: func.func @two_stages
// CHECK: %[[A:.*]] = pipeline.stage 0 ins(%{{.*}} : tensor<4xf32>) -> (tensor<4xf32>) {
// CHECK: ^bb0(%[[X:.*]]: tensor<4xf32>):
// CHECK: pipeline.yield %[[X]] : tensor<4xf32>
// CHECK: pipeline.stage 1 ins(%[[A]] : tensor<4xf32>) -> (tensor<4xf32>)
func.func @two_stages(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = pipeline.stage 0 ins(%x : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%v: tensor<4xf32>):
    pipeline.yield %v : tensor<4xf32>
  }
  %b = pipeline.stage 1 ins(%a : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%v: tensor<4xf32>):
    pipeline.yield %v : tensor<4xf32>
  }
  return %b : tensor<4xf32>
}

// -----

func.func @wrong_arguments(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pipeline.stage' op takes 1 operands but its body's arguments are 0 of other types}}
  pipeline.stage 0 ins(%x : tensor<4xf32>) {
  ^bb0:
    pipeline.yield
  }
  return
}

// -----

func.func @wrong_results(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pipeline.stage' op yields 0 values whose types differ from its 1 results}}
  %a = pipeline.stage 0 ins(%x : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%v: tensor<4xf32>):
    pipeline.yield
  }
  return
}

// -----

func.func @backwards(%x: tensor<4xf32>) {
  %a = pipeline.stage 1 ins(%x : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%v: tensor<4xf32>):
    pipeline.yield %v : tensor<4xf32>
  }
  // expected-error @+1 {{'pipeline.stage' op stage 0 takes a value from stage 1, which does not run before it}}
  %b = pipeline.stage 0 ins(%a : tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%v: tensor<4xf32>):
    pipeline.yield %v : tensor<4xf32>
  }
  return
}
