// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-linalg-to-blas))' | FileCheck %s

// Tests that a float32 GEMM after a zero fill becomes one runtime call with
// beta = 0 (the fill is dropped), and a batched one a batched call.
// CHECK: func.func private @cleave_rt_sgemm(index, index, index, index, index, index, index, index, index, index, index, index, f32)
// CHECK-LABEL: func.func @gemm
// CHECK-NOT: linalg.fill
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK-NOT: linalg.fill
// CHECK: %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: call @cleave_rt_sgemm({{.*}}, %[[BETA]])
// CHECK-NOT: linalg.matmul
func.func @gemm(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// CHECK-LABEL: func.func @batched
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: call @cleave_rt_sgemm_batched({{.*}}, %[[ONE]])
func.func @batched(%a: memref<2x4x8xf32>, %b: memref<2x8x16xf32>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf32>, memref<2x8x16xf32>) outs(%c : memref<2x4x16xf32>)
  return
}

// A float16 GEMM stays for the loop lowering.
// CHECK-LABEL: func.func @half
// CHECK: linalg.matmul
func.func @half(%a: memref<4x8xf16>, %b: memref<8x16xf16>, %c: memref<4x16xf16>) {
  linalg.matmul ins(%a, %b : memref<4x8xf16>, memref<8x16xf16>) outs(%c : memref<4x16xf16>)
  return
}
