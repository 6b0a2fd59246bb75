// RUN: cleave-opt %s --cleave-expand-arith | FileCheck %s
// RUN: cleave-opt %s --cleave-expand-arith --convert-arith-to-llvm | FileCheck %s --check-prefix=LLVM

// Tests that float maxima and minima stay ops (which convert-arith-to-llvm
// makes LLVM's intrinsics, a reduction LLVM vectorizes), while what LLVM
// lacks is expanded: a bf16 extension becomes a shift of the integer bits,
// a ceiling division plain divisions.
// CHECK-LABEL: func.func @kept_and_expanded
// CHECK: arith.maximumf
// CHECK: arith.minimumf
// CHECK: arith.maxnumf
// CHECK-NOT: arith.extf
// CHECK: arith.shli
// CHECK-NOT: arith.ceildivsi
// CHECK: arith.divsi
// LLVM-LABEL: func.func @kept_and_expanded
// LLVM: llvm.intr.maximum
// LLVM: llvm.intr.minimum
// LLVM: llvm.intr.maxnum
func.func @kept_and_expanded(%a: f32, %b: f32, %h: bf16, %i: i64, %j: i64) -> (f32, f32, f32, f32, i64) {
  %max = arith.maximumf %a, %b : f32
  %min = arith.minimumf %a, %b : f32
  %maxnum = arith.maxnumf %a, %b : f32
  %wide = arith.extf %h : bf16 to f32
  %q = arith.ceildivsi %i, %j : i64
  return %max, %min, %maxnum, %wide, %q : f32, f32, f32, f32, i64
}
