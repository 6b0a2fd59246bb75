// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-parallelize-outer-loops))' | FileCheck %s

// Tests that a [1, 16, 4096] loop keeps the first two dims parallel (16
// iterations) and the innermost one sequential.
// CHECK-LABEL: func.func @split
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0, %c0) to (%c1, %c16) step (%c1, %c1)
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c4096 step %c1
// CHECK-NEXT: memref.store %{{.*}}, %arg0[%[[I]], %[[J]], %[[K]]]
func.func @split(%m: memref<1x16x4096xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c4096 = arith.constant 4096 : index
  %v = arith.constant 1.0 : f32
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c1, %c16, %c4096) step (%c1, %c1, %c1) {
    memref.store %v, %m[%i, %j, %k] : memref<1x16x4096xf32>
  }
  return
}

// A loop of 1024 iterations in all is not worth waking threads for.
// CHECK-LABEL: func.func @small
// CHECK-NOT: scf.parallel
// CHECK: scf.for
// CHECK-NEXT: scf.for
func.func @small(%m: memref<16x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %v = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
    memref.store %v, %m[%i, %j] : memref<16x64xf32>
  }
  return
}

// A row reduction: 128 rows in parallel, each a sequential loop over 768
// points (as convert-linalg-to-parallel-loops lowers layer norm's mean).
// Its work is 128 x 768, not 128: the rows stay parallel.
// CHECK-LABEL: func.func @row_reduction
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c1, %c128)
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c768
func.func @row_reduction(%x: memref<1x128x768xf32>, %sum: memref<1x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c768 = arith.constant 768 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c1, %c128) step (%c1, %c1) {
    scf.for %k = %c0 to %c768 step %c1 {
      %a = memref.load %x[%i, %j, %k] : memref<1x128x768xf32>
      %s = memref.load %sum[%i, %j] : memref<1x128xf32>
      %t = arith.addf %a, %s : f32
      memref.store %t, %sum[%i, %j] : memref<1x128xf32>
    }
  }
  return
}

// The same rows over 16 points each: 2048 in all, sequential.
// CHECK-LABEL: func.func @short_rows
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @short_rows(%x: memref<1x128x16xf32>, %sum: memref<1x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c1, %c128) step (%c1, %c1) {
    scf.for %k = %c0 to %c16 step %c1 {
      %a = memref.load %x[%i, %j, %k] : memref<1x128x16xf32>
      %s = memref.load %sum[%i, %j] : memref<1x128xf32>
      %t = arith.addf %a, %s : f32
      memref.store %t, %sum[%i, %j] : memref<1x128xf32>
    }
  }
  return
}

// A row buffer at the top of the body (cleave-fuse-rows) goes before the
// sequential loops, in the parallel one: one per iteration of the parallel
// dims, not one per row, which would grow the stack row after row.
// CHECK-LABEL: func.func @row_buffer
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c16) step (%c1)
// CHECK-NEXT: %[[ROW:.*]] = memref.alloca() : memref<4096xf32>
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c64 step %c1
// CHECK-NOT: memref.alloca
// CHECK: memref.store %{{.*}}, %[[ROW]]
// A sequential nest gets its buffer at the function's entry, out of the
// loop around it.
// CHECK-LABEL: func.func @row_buffer_small
// CHECK-NEXT: memref.alloca() : memref<64xf32>
// CHECK: scf.for
// CHECK-NEXT: scf.for
// CHECK-NEXT: scf.for
// CHECK-NOT: memref.alloca
func.func @row_buffer(%m: memref<16x64x4096xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c4096 = arith.constant 4096 : index
  %v = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
    %row = memref.alloca() : memref<4096xf32>
    scf.for %k = %c0 to %c4096 step %c1 {
      memref.store %v, %row[%k] : memref<4096xf32>
    }
    scf.for %k = %c0 to %c4096 step %c1 {
      %x = memref.load %row[%k] : memref<4096xf32>
      memref.store %x, %m[%i, %j, %k] : memref<16x64x4096xf32>
    }
  }
  return
}
func.func @row_buffer_small(%m: memref<16x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %v = arith.constant 1.0 : f32
  scf.for %mb = %c0 to %c16 step %c1 {
    scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c64) step (%c1, %c1) {
      %row = memref.alloca() : memref<64xf32>
      memref.store %v, %row[%j] : memref<64xf32>
      %x = memref.load %row[%j] : memref<64xf32>
      memref.store %x, %m[%i, %j] : memref<16x64xf32>
    }
  }
  return
}
