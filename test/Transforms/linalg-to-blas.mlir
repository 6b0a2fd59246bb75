// RUN: cleave-opt %s --cleave-linalg-to-blas | FileCheck %s

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

// Tests that a zero fill further up the block folds too when nothing
// between touches the buffer, and stays when something reads it (through a
// view) in between.
// CHECK-LABEL: func.func @fill_earlier
// CHECK-NOT: linalg.fill
// CHECK: memref.alloc
// CHECK: %[[BETA0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: call @cleave_rt_sgemm({{.*}}, %[[BETA0]])
func.func @fill_earlier(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  %other = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%other : memref<4x8xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  memref.dealloc %other : memref<4x8xf32>
  return
}

// CHECK-LABEL: func.func @fill_read_between
// CHECK: linalg.fill
// CHECK: memref.copy
// CHECK: %[[BETA1:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: call @cleave_rt_sgemm({{.*}}, %[[BETA1]])
func.func @fill_read_between(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %d: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  %flat = memref.collapse_shape %c [[0, 1]] : memref<4x16xf32> into memref<64xf32>
  memref.copy %flat, %d : memref<64xf32> to memref<64xf32>
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

// 16-bit operands into a float32 result (--precision) call the runtime's
// GEMM for that operand type; on the CUDA target, its cuBLASLt twin.
// RUN: cleave-opt %s --cleave-linalg-to-blas=target=cuda | FileCheck %s --check-prefix=CUDA
// CHECK-LABEL: func.func @bf16_operands
// CHECK: call @cleave_rt_gemm_bf16(
// CHECK-NOT: linalg.matmul
// CUDA-LABEL: func.func @bf16_operands
// CUDA: call @cleave_rt_cuda_gemm_bf16(
func.func @bf16_operands(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  return
}

// CHECK-LABEL: func.func @f16_operands_batched
// CHECK: call @cleave_rt_gemm_f16_batched(
// CUDA-LABEL: func.func @f16_operands_batched
// CUDA: call @cleave_rt_cuda_gemm_f16_batched(
func.func @f16_operands_batched(%a: memref<2x4x8xf16>, %b: memref<2x8x16xf16>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf16>, memref<2x8x16xf16>) outs(%c : memref<2x4x16xf32>)
  return
}

// Operands of two different 16-bit types have no runtime GEMM.
// CHECK-LABEL: func.func @mixed_operands
// CHECK: linalg.matmul
func.func @mixed_operands(%a: memref<4x8xbf16>, %b: memref<8x16xf16>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xf16>) outs(%c : memref<4x16xf32>)
  return
}
