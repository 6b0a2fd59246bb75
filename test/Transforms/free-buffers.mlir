// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-free-buffers))' | FileCheck %s

// Tests that each allocation is freed right after the last use of it or of a
// view of it, and not before.
// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: linalg.fill {{.*}} outs(%[[A]]
// CHECK: %[[V:.*]] = memref.collapse_shape %[[A]]
// CHECK: %[[B:.*]] = memref.alloc() : memref<16xf32>
// CHECK: memref.copy %[[V]], %[[B]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: memref.copy %[[B]], %arg0
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return
func.func @chain(%out: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<4x4xf32>)
  %v = memref.collapse_shape %a [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %v, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %out : memref<16xf32> to memref<16xf32>
  return
}
