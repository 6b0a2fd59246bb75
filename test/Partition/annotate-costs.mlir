// Tests the cost model's numbers on small ops: a matmul's 2*M*N*K flops and
// its traffic (the accumulated init is read), an elementwise op's one flop
// per element (its init only written), a reshape's zero traffic, a
// parameter's bytes, and roofline times on a machine of 1 GFLOP/s and 1 GB/s.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-annotate-costs{machine=peak=1G,mem-bw=1G}))' | FileCheck %s
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-annotate-costs{machine=peak=fast}))' 2>&1 | FileCheck %s --check-prefix=BAD

#map = affine_map<(d0, d1) -> (d0, d1)>
// The function carries the totals (printed before its body).
// CHECK-LABEL: func.func @costs
// CHECK-SAME: cleave.cost = {flops = 6.604800e+04 : f64, params = 8.192000e+03 : f64, read = 1.843200e+04 : f64, seconds = 7.37280{{0*}}1E-5 : f64, written = 6.144000e+03 : f64}
// A zero fill: only written.
// CHECK: linalg.fill {cleave.cost = {flops = 0.000000e+00 : f64, params = 0.000000e+00 : f64, read = 0.000000e+00 : f64, seconds = 2.048000e-06 : f64, written = 2.048000e+03 : f64}}
// 16x64x32 matmul: 65536 flops; reads A 4096 + B 8192 + C 2048 bytes; B is
// a parameter; compute-bound at 1 GFLOP/s.
// CHECK: linalg.matmul {cleave.cost = {flops = 6.553600e+04 : f64, params = 8.192000e+03 : f64, read = 1.433600e+04 : f64, seconds = 6.553600e-05 : f64, written = 2.048000e+03 : f64}}
// 16x32 add: 512 flops; reads 2 x 2048 bytes; memory-bound: 6144 B / 1 GB/s.
// CHECK: linalg.generic {{.*}}cleave.cost = {flops = 5.120000e+02 : f64, params = 0.000000e+00 : f64, read = 4.096000e+03 : f64, seconds = 6.144E-6 : f64, written = 2.048000e+03 : f64}
// CHECK: tensor.expand_shape {{.*}} {cleave.cost = {flops = 0.000000e+00 : f64, params = 0.000000e+00 : f64, read = 0.000000e+00 : f64, seconds = 0.000000e+00 : f64, written = 0.000000e+00 : f64}}
// BAD: error: machine 'peak=fast': 'peak' needs a positive number, got 'fast'
func.func @costs(%a: tensor<16x64xf32>, %b: tensor<64x32xf32> {cleave.param = "w"}) -> tensor<2x8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %sum = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%mm, %mm : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %r = tensor.expand_shape %sum [[0, 1], [2]] output_shape [2, 8, 32] : tensor<16x32xf32> into tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}
