// Tests cleave-align-workgroup-buffers: after outlining, each kernel's
// shared-memory buffer is aligned to 16 bytes (one asking for more keeps
// its own), so that ldmatrix's rows start on 16 bytes; without it NVVM
// aligns a bf16 buffer to 2. Then, lowered through NVVM, the .shared
// variable's alignment in the assembly and the ldmatrix that reads it (the
// second buffer, read before any write, is folded away there).
// RUN: cleave-opt %s --cleave-align-workgroup-buffers | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-align-workgroup-buffers, convert-nvgpu-to-nvvm, nvvm-attach-target{chip=sm_90 features=+ptx80}, gpu.module(convert-gpu-to-nvvm, reconcile-unrealized-casts), gpu-module-to-binary{format=isa})' | FileCheck %s --check-prefix=PTX
// RUN: cleave-opt %s --pass-pipeline='builtin.module(convert-nvgpu-to-nvvm, nvvm-attach-target{chip=sm_90 features=+ptx80}, gpu.module(convert-gpu-to-nvvm, reconcile-unrealized-casts), gpu-module-to-binary{format=isa})' | FileCheck %s --check-prefix=UNALIGNED

// CHECK: gpu.func @tile(%{{.*}}: memref<32xi32>) workgroup(%{{.*}} : memref<16x72xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
// PTX: .shared .align 16 .b8 __wg_tile_0[2304]
// PTX: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// UNALIGNED: .shared .align 2 .b8 __wg_tile_0[2304]
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @tile(%out: memref<32xi32>)
        workgroup(%t : memref<16x72xbf16, #gpu.address_space<workgroup>>,
                  %w : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
        kernel {
      %c8 = arith.constant 8 : index
      %lane = gpu.thread_id x
      %row = arith.remui %lane, %c8 : index
      %m = arith.divui %lane, %c8 : index
      %col = arith.muli %m, %c8 : index
      %v = nvgpu.ldmatrix %t[%row, %col] {numTiles = 4 : i32, transpose = true} : memref<16x72xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
      %r = vector.extract %v[0] : vector<2xbf16> from vector<4x2xbf16>
      %x = vector.bitcast %r : vector<2xbf16> to vector<1xi32>
      %i = vector.extract %x[0] : i32 from vector<1xi32>
      %f = memref.load %w[%row] : memref<8xf32, #gpu.address_space<workgroup>>
      %fi = arith.bitcast %f : f32 to i32
      %s = arith.addi %i, %fi : i32
      memref.store %s, %out[%lane] : memref<32xi32>
      gpu.return
    }
  }
}
