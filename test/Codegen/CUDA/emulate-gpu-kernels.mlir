// RUN: cleave-opt %s --split-input-file --cleave-emulate-gpu-kernels --verify-diagnostics | FileCheck %s

// Tests that a launch of 4 blocks of 8 threads whose threads each compute a
// partial value, all-reduce it and store the total becomes: slots of 8 (the
// partial values, the total) allocated before a loop over the blocks; in it,
// a loop over the threads that fills the partial slots, a fold of the slots
// in thread order whose total goes to every thread's slot, and a second
// loop over the threads that reads it. No gpu op is left.
// CHECK-LABEL: func.func @row_sums
// CHECK-DAG: %[[PART:.*]] = memref.alloca() : memref<8xf32>
// CHECK-DAG: %[[TOTAL:.*]] = memref.alloca() : memref<8xf32>
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step
// CHECK: memref.load %arg0[%[[B]], %[[T]]]
// CHECK: memref.store %{{.*}}, %[[PART]][%[[T]]]
// CHECK: %[[FIRST:.*]] = memref.load %[[PART]]
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]]) -> (f32)
// CHECK: arith.addf %[[ACC]]
// CHECK: memref.store %[[SUM]], %[[TOTAL]]
// CHECK: scf.for %[[T2:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[V:.*]] = memref.load %[[TOTAL]][%[[T2]]]
// CHECK: memref.store %[[V]], %arg1[%[[B]]]
// CHECK-NOT: gpu.
func.func @row_sums(%x: memref<4x8xf32>, %out: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c0 = arith.constant 0 : index
  gpu.launch blocks(%b, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%b, %t] : memref<4x8xf32>
    %total = gpu.all_reduce add %v uniform {} : (f32) -> f32
    %first = arith.cmpi eq, %t, %c0 : index
    scf.if %first {
      memref.store %total, %out[%b] : memref<4xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that shared memory becomes one CPU buffer of its shape, allocated
// before the loop over blocks and filled with NaN as each block starts (a
// read before a write then shows in the outputs): each thread writes its
// slot, and after the barrier each reads its neighbour's.
// CHECK-LABEL: func.func @shared_row
// CHECK: %[[ROW:.*]] = memref.alloca() : memref<8xf32>
// CHECK: scf.for
// CHECK: %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// CHECK: scf.for %[[I:.*]] = %{{.*}} to
// CHECK-NEXT: memref.store %[[NAN]], %[[ROW]][%[[I]]] : memref<8xf32>
// CHECK: scf.for %[[T:.*]] = %{{.*}} to
// CHECK: memref.store %{{.*}}, %[[ROW]][%[[T]]] : memref<8xf32>
// CHECK: scf.for %[[T2:.*]] = %{{.*}} to
// CHECK: memref.load %[[ROW]][%{{.*}}] : memref<8xf32>
// CHECK-NOT: gpu.
func.func @shared_row(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  gpu.launch blocks(%b, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1)
             workgroup(%row : memref<8xf32, #gpu.address_space<workgroup>>) {
    %v = memref.load %x[%b, %t] : memref<4x8xf32>
    memref.store %v, %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %n = arith.subi %c7, %t : index
    %w = memref.load %row[%n] : memref<8xf32, #gpu.address_space<workgroup>>
    memref.store %w, %out[%b, %t] : memref<4x8xf32>
    gpu.terminator
  }
  return
}

// -----

// Tests that a barrier inside a branch is refused: threads that skip it
// would not wait at it (a loop's barriers are emulated:
// emulate-warp-ops.mlir).
func.func @nested_barrier(%x: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %true = arith.constant true
  gpu.launch blocks(%b, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{'scf.if' op cannot be emulated: a barrier, all-reduce, shuffle or MMA inside control flow other than a loop}}
    scf.if %true {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that an integer all-reduce folds its slots with its own operation.
// CHECK-LABEL: func.func @row_min
// CHECK: %[[PART:.*]] = memref.alloca() : memref<8xi32>
// CHECK: %[[FIRST:.*]] = memref.load %[[PART]][%{{.*}}] : memref<8xi32>
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]]) -> (i32)
// CHECK: arith.minui %[[ACC]]
// CHECK-NOT: gpu.
func.func @row_min(%x: memref<4x8xi32>, %out: memref<4xi32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c0 = arith.constant 0 : index
  gpu.launch blocks(%b, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%b, %t] : memref<4x8xi32>
    %low = gpu.all_reduce minui %v uniform {} : (i32) -> i32
    %first = arith.cmpi eq, %t, %c0 : index
    scf.if %first {
      memref.store %low, %out[%b] : memref<4xi32>
    }
    gpu.terminator
  }
  return
}
