// Tests what the CUDA target will build on (issue 6): with the GPU and NVVM
// translations registered in cleave-opt, an elementwise loop nest mapped to
// the GPU is outlined into a kernel and serialized to an sm_90 cubin (an ELF
// image) by CUDA's ptxas, with the host side launching it. Kernel quality
// (tiling to threads, reductions across threads) is not tested: not built.
// REQUIRES: cuda-toolkit
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(convert-linalg-to-parallel-loops, gpu-map-parallel-loops, convert-parallel-loops-to-gpu))' | cleave-opt --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-features=+ptx80 cubin-format=bin" | FileCheck %s

// CHECK-LABEL: llvm.func @add
// CHECK: gpu.launch_func @add_kernel::@add_kernel
// CHECK: gpu.binary @add_kernel [#gpu.object<#nvvm.target<chip = "sm_90", features = "+ptx80">, properties = {{.*}}, bin = "\7FELF
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @add(%a: memref<64x128xf32>, %b: memref<64x128xf32>, %c: memref<64x128xf32>) {
  linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<64x128xf32>, memref<64x128xf32>) outs(%c : memref<64x128xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}
