// cleave-name-kernels: each gpu.launch's kernel is named after the ONNX nodes
// whose operations it holds (their locations), in body order; characters a
// PTX name cannot hold become '_'; past four nodes the rest are counted; a
// name taken before (by a kernel or a symbol of the module) gets a number;
// a kernel without named nodes is 'kernel'; a leading digit gets 'k_'.
// Then upstream's outlining takes the names.
// RUN: cleave-opt %s --cleave-name-kernels | FileCheck %s
// RUN: cleave-opt %s --cleave-name-kernels --gpu-kernel-outlining | FileCheck %s --check-prefix=OUTLINED

// CHECK-LABEL: func.func @main
// CHECK: gpu.launch
// CHECK-SAME: function(@Softmax_17__Add_16)
// CHECK: gpu.launch
// CHECK-SAME: function(@model_layers_0_attn_MatMul)
// CHECK: gpu.launch
// CHECK-SAME: function(@Softmax_17__Add_16_2)
// CHECK: gpu.launch
// CHECK-SAME: function(@a__b__c__d__and_2_more)
// CHECK: gpu.launch
// CHECK-SAME: function(@kernel)
// CHECK: gpu.launch
// CHECK-SAME: function(@k_0_Mul)
// CHECK: gpu.launch
// CHECK-SAME: function(@helper_2)

// OUTLINED-DAG: gpu.module @Softmax_17__Add_16
// OUTLINED-DAG: gpu.func @Softmax_17__Add_16(
// OUTLINED-DAG: gpu.func @Softmax_17__Add_16_2(
// OUTLINED-DAG: gpu.func @kernel(

#m = loc("m.onnx":0:0)
func.func @helper() {
  return
}
func.func @main(%buf: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %x = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %buf[%tx] : memref<4xf32> loc(fused["Softmax_17"(#m), "Add_16"(#m)])
    %w = arith.addf %v, %x : f32 loc("Add_16"(#m))
    memref.store %w, %buf[%tx] : memref<4xf32> loc("Softmax_17"(#m))
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %buf[%tx] : memref<4xf32> loc("/model/layers.0/attn/MatMul"(#m))
    memref.store %v, %buf[%tx] : memref<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %buf[%tx] : memref<4xf32> loc("Softmax_17"(#m))
    %w = arith.addf %v, %x : f32 loc("Add_16"(#m))
    memref.store %w, %buf[%tx] : memref<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %buf[%tx] : memref<4xf32> loc("a"(#m))
    %w = arith.addf %v, %x : f32 loc("b"(#m))
    %y = arith.addf %w, %x : f32 loc("c"(#m))
    %z = arith.addf %y, %x : f32 loc(fused["d"(#m), "e"(#m)])
    %u = arith.addf %z, %x : f32 loc("f"(#m))
    memref.store %u, %buf[%tx] : memref<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %x, %buf[%tx] : memref<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %x, %buf[%tx] : memref<4xf32> loc("0/Mul"(#m))
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %x, %buf[%tx] : memref<4xf32> loc("helper"(#m))
    gpu.terminator
  }
  return
}
