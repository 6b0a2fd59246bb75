// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-approximate-math))' | FileCheck %s

// Tests that erf, exp and tanh become arithmetic (no libm call left to make),
// while sqrt, which LLVM vectorizes itself, stays.
// CHECK-LABEL: func.func @gelu_parts
// CHECK-NOT: math.erf
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK: math.sqrt
func.func @gelu_parts(%x: f32) -> (f32, f32, f32, f32) {
  %a = math.erf %x : f32
  %b = math.exp %x : f32
  %c = math.tanh %x : f32
  %d = math.sqrt %x : f32
  return %a, %b, %c, %d : f32, f32, f32, f32
}

// Tests powers by constants: x^3 (GPT-2's tanh GELU) becomes two multiplies
// and x^0.5 a square root, no powf call; a power by a non-constant, or by a
// constant upstream does not rewrite (1.7), stays a powf.
// CHECK-LABEL: func.func @powers
// CHECK-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK: %[[SQ:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK: %[[CUBE:.*]] = arith.mulf %[[X]], %[[SQ]]
// CHECK: %[[ROOT:.*]] = math.sqrt %[[X]]
// CHECK: %[[VAR:.*]] = math.powf %[[X]], %[[Y]]
// CHECK: %[[ODD:.*]] = math.powf %[[X]], %{{.*}}
// CHECK: return %[[CUBE]], %[[ROOT]], %[[VAR]], %[[ODD]]
func.func @powers(%x: f32, %y: f32) -> (f32, f32, f32, f32) {
  %three = arith.constant 3.0 : f32
  %half = arith.constant 0.5 : f32
  %odd = arith.constant 1.7 : f32
  %a = math.powf %x, %three : f32
  %b = math.powf %x, %half : f32
  %c = math.powf %x, %y : f32
  %d = math.powf %x, %odd : f32
  return %a, %b, %c, %d : f32, f32, f32, f32
}
