// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-copies-to-linalg))' | FileCheck %s

// Tests that a strided memref.copy becomes linalg.copy (no memrefCopy call).
// CHECK-LABEL: func.func @strided
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<2x2xf32, strided<[4, 1], offset: 1>>) outs(%arg1 : memref<2x2xf32>)
func.func @strided(%src: memref<4x4xf32>, %dst: memref<2x2xf32>) {
  %s = memref.subview %src[0, 1] [2, 2] [1, 1] : memref<4x4xf32> to memref<2x2xf32, strided<[4, 1], offset: 1>>
  memref.copy %s, %dst : memref<2x2xf32, strided<[4, 1], offset: 1>> to memref<2x2xf32>
  return
}
