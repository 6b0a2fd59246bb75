// Tests that cleave-emulate-gpu-kernels checks its one assumption about a
// loop around barriers, shuffles or MMAs: that every thread of the block has
// its bounds (the emulation runs it once for all, as thread 0 has them).
// Here thread t runs t + 1 rounds, which on a GPU would hang at the barrier;
// the emulated program stops instead. (cf.assert's message goes to standard
// output through puts, which the abort does not flush, so it is checked in
// the IR.)
// RUN: cleave-opt %s --cleave-emulate-gpu-kernels > %t.emulated.mlir
// RUN: FileCheck %s < %t.emulated.mlir
// RUN: mlir-opt %t.emulated.mlir --pass-pipeline='builtin.module(convert-scf-to-cf, expand-strided-metadata, finalize-memref-to-llvm, convert-math-to-llvm, convert-arith-to-llvm, convert-index-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, reconcile-unrealized-casts)' | mlir-translate --mlir-to-llvmir > %t.ll
// RUN: not --crash lli %t.ll
// CHECK: cf.assert %{{.*}}, "cleave-emulate-gpu-kernels: the threads of a block disagree on the bounds of a loop around barriers, shuffles or MMAs"

func.func @divergent(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f1 = arith.constant 1.0 : f32
  %f0 = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%t, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %rounds = arith.addi %t, %c1 : index
    %sum = scf.for %i = %c0 to %rounds step %c1 iter_args(%acc = %f0) -> (f32) {
      gpu.barrier
      %new = arith.addf %acc, %f1 : f32
      scf.yield %new : f32
    }
    memref.store %sum, %out[%t] : memref<4xf32>
    gpu.terminator
  }
  return
}

func.func @main() -> i32 {
  %out = memref.alloc() : memref<4xf32>
  func.call @divergent(%out) : (memref<4xf32>) -> ()
  %c0 = arith.constant 0 : i32
  return %c0 : i32
}
