// RUN: cleave-opt %s --cleave-allocs-to-gpu | FileCheck %s

// Tests cleave-allocs-to-gpu: a buffer only kernels and the runtime's CUDA
// calls touch (here through a view) becomes stream-ordered device memory; a
// buffer host code reads stays managed, and the host waits for the stream
// before reading it; deallocations free through the runtime.

// CHECK-LABEL: func.func @buffers
// CHECK: %[[T:.*]] = gpu.wait async
// CHECK: %[[DEV:.*]], %{{.*}} = gpu.alloc async [%[[T]]] () : memref<64xf32>
// CHECK: %[[HOST:.*]] = gpu.alloc  host_shared () : memref<4xf32>
// CHECK: gpu.launch
// CHECK: call @cleave_rt_cuda_gemm_stub
// CHECK: call @cleave_rt_cuda_synchronize()
// CHECK-NEXT: memref.load %[[HOST]]
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[DEV]]
// CHECK: call @cleave_rt_cuda_free(%[[P]])
// CHECK: call @cleave_rt_cuda_free(
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
func.func private @cleave_rt_cuda_gemm_stub(index)
func.func @buffers(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %dev = memref.alloc() : memref<64xf32>
  %host = memref.alloc() : memref<4xf32>
  %view = memref.expand_shape %dev [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  gpu.launch blocks(%b0, %b1, %b2) in (%g0 = %c1, %g1 = %c1, %g2 = %c1)
             threads(%t0, %t1, %t2) in (%s0 = %c1, %s1 = %c1, %s2 = %c1) {
    %v = memref.load %view[%c0, %c0] : memref<8x8xf32>
    memref.store %v, %host[%c0] : memref<4xf32>
    gpu.terminator
  }
  %p = memref.extract_aligned_pointer_as_index %view : memref<8x8xf32> -> index
  func.call @cleave_rt_cuda_gemm_stub(%p) : (index) -> ()
  %r = memref.load %host[%c0] : memref<4xf32>
  memref.dealloc %dev : memref<64xf32>
  memref.dealloc %host : memref<4xf32>
  return %r : f32
}

// Tests that a transpose is a view like the others (it is not a
// ViewLikeOpInterface op in MLIR 22): the head merge's destination, which a
// GEMM writes through memref.transpose, is device memory too.
// CHECK-LABEL: func.func @through_transpose
// CHECK: gpu.alloc async
// CHECK-NOT: host_shared
// CHECK: return
func.func @through_transpose() {
  %dest = memref.alloc() : memref<16x12x64xf32>
  %t = memref.transpose %dest (d0, d1, d2) -> (d1, d0, d2) : memref<16x12x64xf32> to memref<12x16x64xf32, strided<[64, 768, 1]>>
  %p = memref.extract_aligned_pointer_as_index %t : memref<12x16x64xf32, strided<[64, 768, 1]>> -> index
  func.call @cleave_rt_cuda_gemm_stub(%p) : (index) -> ()
  memref.dealloc %dest : memref<16x12x64xf32>
  return
}
