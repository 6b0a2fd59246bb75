// RUN: cleave-opt %s --split-input-file --cleave-outline-segments='max-loops=2' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-outline-segments='max-loops=2' --convert-scf-to-cf --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM
// RUN: not cleave-opt %s --split-input-file --cleave-outline-segments='max-loops=0' 2>&1 | FileCheck %s --check-prefix=LIMIT

// Three loops with a limit of two: the first two go into one function, the
// third into another. The buffer the first segment allocates and the third
// loop reads is its result; the weight both read is an argument of each;
// the constants are copied into each function that uses them; the
// deallocation of the first segment's buffer moves with the third loop.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[W:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>)
// CHECK: %[[T:.*]] = call @chain_part0(%[[W]]) : (memref<8xf32>) -> memref<8xf32>
// CHECK-NEXT: call @chain_part1(%[[T]], %[[W]], %[[OUT]]) : (memref<8xf32>, memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: return
// CHECK: func.func private @chain_part1(%[[T1:.*]]: memref<8xf32>, %[[W1:.*]]: memref<8xf32>, %[[OUT1:.*]]: memref<8xf32>)
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]
// CHECK-DAG: arith.constant 0 : index
// CHECK-DAG: arith.constant 8 : index
// CHECK: scf.for
// CHECK: memref.load %[[T1]]
// CHECK: memref.load %[[W1]]
// CHECK: memref.store %{{.*}}, %[[OUT1]]
// CHECK: memref.dealloc %[[T1]]
// CHECK-NEXT: return
// CHECK: func.func private @chain_part0(%[[W0:.*]]: memref<8xf32>) -> memref<8xf32>
// CHECK: %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK: scf.for
// CHECK: scf.for
// CHECK: return %[[A]] : memref<8xf32>

// After the LLVM lowering the functions are internal and never inlined.
// LLVM-LABEL: llvm.func @chain(
// LLVM: llvm.call @chain_part0
// LLVM: llvm.call @chain_part1
// LLVM: llvm.func internal @chain_part1({{.*}}passthrough = ["noinline"]
// LLVM: llvm.func internal @chain_part0({{.*}}passthrough = ["noinline"]

// LIMIT: max-loops must be at least 1
func.func @chain(%w: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %t = memref.alloc() : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %w[%i] : memref<8xf32>
    memref.store %x, %t[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %t[%i] : memref<8xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %t[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %t[%i] : memref<8xf32>
    %y = memref.load %w[%i] : memref<8xf32>
    %z = arith.mulf %x, %y : f32
    memref.store %z, %out[%i] : memref<8xf32>
  }
  memref.dealloc %t : memref<8xf32>
  return
}

// -----

// Within the limit: nothing changes.
// CHECK-LABEL: func.func @short(
// CHECK-NOT: call
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NOT: func.func private
func.func @short(%w: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %w[%i] : memref<8xf32>
    memref.store %x, %w[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %w[%i] : memref<8xf32>
    memref.store %x, %w[%i] : memref<8xf32>
  }
  return
}

// -----

// A loop body (a pipeline's loop over microbatches) is cut where it is: its
// induction variable is an argument of each function. Stack memory the
// first two loops share with the third cannot be returned, so the first
// segment takes the third loop as well, and the fourth is the second.
// CHECK-LABEL: func.func @nested(
// CHECK: scf.for %[[MB:.*]] = {{.*}} {
// CHECK-NEXT: call @nested_part0(%{{.*}}, %[[MB]]) : (memref<4x8xf32>, index) -> ()
// CHECK-NEXT: call @nested_part1(%{{.*}}, %[[MB]]) : (memref<4x8xf32>, index) -> ()
// CHECK-NEXT: }
// CHECK: func.func private @nested_part1(
// CHECK-COUNT-1: scf.for
// CHECK-NOT: scf.for
// CHECK: func.func private @nested_part0(
// CHECK: memref.alloca
// CHECK-COUNT-3: scf.for
// CHECK-NOT: scf.for
// CHECK: return
func.func @nested(%x: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %mb = %c0 to %c4 step %c1 {
    %s = memref.alloca() : memref<8xf32>
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %x[%mb, %i] : memref<4x8xf32>
      memref.store %v, %s[%i] : memref<8xf32>
    }
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %s[%i] : memref<8xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %s[%i] : memref<8xf32>
    }
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %s[%i] : memref<8xf32>
      memref.store %v, %x[%mb, %i] : memref<4x8xf32>
    }
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %x[%mb, %i] : memref<4x8xf32>
      %w = arith.mulf %v, %v : f32
      memref.store %w, %x[%mb, %i] : memref<4x8xf32>
    }
  }
  return
}

// -----

// Row buffers of cleave-fuse-rows (marked so) at the function's entry, each
// read by one loop nest: like constants, they stay, and each segment that
// uses one gets a copy of its own; no segment grows for them.
// CHECK-LABEL: func.func @row_buffers(
// CHECK: call @row_buffers_part0(%arg0) : (memref<8xf32>) -> ()
// CHECK-NEXT: call @row_buffers_part1(%arg1) : (memref<16xf32>) -> ()
// CHECK: func.func private @row_buffers_part1(
// CHECK: memref.alloca() {cleave.row_buffer} : memref<16xf32>
// CHECK-COUNT-1: scf.for
// CHECK-NOT: scf.for
// CHECK: func.func private @row_buffers_part0(
// CHECK: memref.alloca() {cleave.row_buffer} : memref<8xf32>
// CHECK-COUNT-2: scf.for
// CHECK-NOT: scf.for
func.func @row_buffers(%x: memref<8xf32>, %y: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %a = memref.alloca() {cleave.row_buffer} : memref<8xf32>
  %b = memref.alloca() {cleave.row_buffer} : memref<16xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %x[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c16 step %c1 {
    %v = memref.load %y[%i] : memref<16xf32>
    memref.store %v, %b[%i] : memref<16xf32>
    %w = memref.load %b[%i] : memref<16xf32>
    memref.store %w, %y[%i] : memref<16xf32>
  }
  return
}
