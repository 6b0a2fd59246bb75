// RUN: cleave-opt %s --cleave-allocs-to-gpu --verify-diagnostics

// Tests that host code reading a function argument (a graph input, which the
// runtime keeps in device memory on the CUDA target), here through a view,
// is refused rather than left to fault at run time.
func.func @host_reads_input(%x: memref<4x4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %flat = memref.collapse_shape %x [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  // expected-error @+1 {{host code touches argument #0 of 'host_reads_input', a graph input or output, which lives in device memory on the CUDA target}}
  %v = memref.load %flat[%c0] : memref<16xf32>
  return %v : f32
}
