// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-inline-alloca-scopes))' | FileCheck %s

// Tests that a scope without alloca is inlined and one with an alloca stays.
// CHECK-LABEL: func.func @scopes
// CHECK: memref.store
// CHECK: memref.alloca_scope
// CHECK-NEXT: memref.alloca
// CHECK-NOT: memref.alloca_scope
func.func @scopes(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %v = arith.constant 1.0 : f32
  memref.alloca_scope {
    memref.store %v, %m[%c0] : memref<4xf32>
  }
  memref.alloca_scope {
    %a = memref.alloca() : memref<4xf32>
    memref.store %v, %a[%c0] : memref<4xf32>
  }
  return
}
