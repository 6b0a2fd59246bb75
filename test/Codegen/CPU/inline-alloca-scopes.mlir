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

// Tests that a row buffer at the top of an OpenMP loop's body (as
// convert-scf-to-openmp leaves cleave-fuse-rows' buffers, in a scope) moves
// to the start of the parallel region, once per thread, and the scope, left
// without alloca, is inlined.
// CHECK-LABEL: func.func @row_buffer
// CHECK: omp.parallel {
// CHECK-NEXT: %[[ROW:.*]] = memref.alloca() : memref<64xf32>
// CHECK-NEXT: omp.wsloop {
// CHECK-NEXT: omp.loop_nest (%[[I:.*]]) : index
// CHECK-NEXT: memref.store %{{.*}}, %[[ROW]]
// CHECK-NOT: memref.alloca_scope
func.func @row_buffer(%m: memref<16x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %v = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c16) step (%c1) {
        memref.alloca_scope {
          %row = memref.alloca() : memref<64xf32>
          memref.store %v, %row[%c0] : memref<64xf32>
          %x = memref.load %row[%c0] : memref<64xf32>
          memref.store %x, %m[%i, %c0] : memref<16x64xf32>
        }
        omp.yield
      }
    }
    omp.terminator
  }
  return
}
