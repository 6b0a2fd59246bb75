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

// A pipelined program's shape: an allocation in a loop body is freed in that
// body; one yielded out of a switch is freed after the last use of the
// switch's result (not before the copy that reads it); one yielded out of
// its own block is left alone.
// CHECK-LABEL: func.func @nested
// CHECK: %[[R:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[S:.*]] = scf.index_switch
// CHECK: scf.for
// CHECK: %[[T:.*]] = memref.alloc() : memref<4xf32>
// CHECK: memref.copy %[[T]], %[[R]]
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK: %[[Y:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NOT: memref.dealloc %[[Y]]
// CHECK: scf.yield %[[Y]]
// CHECK: memref.copy %[[S]], %arg1
// CHECK-NEXT: memref.dealloc %[[R]]
// CHECK-NEXT: return
func.func @nested(%i: index, %out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %r = memref.alloc() : memref<4xf32>
  %s = scf.index_switch %i -> memref<4xf32>
  case 0 {
    scf.for %j = %c0 to %c2 step %c1 {
      %t = memref.alloc() : memref<4xf32>
      linalg.fill ins(%zero : f32) outs(%t : memref<4xf32>)
      memref.copy %t, %r : memref<4xf32> to memref<4xf32>
    }
    scf.yield %r : memref<4xf32>
  }
  default {
    %y = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%y : memref<4xf32>)
    scf.yield %y : memref<4xf32>
  }
  memref.copy %s, %out : memref<4xf32> to memref<4xf32>
  return
}
