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
