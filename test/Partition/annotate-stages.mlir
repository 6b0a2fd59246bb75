// Tests the stage partition on a uniform stack of four layers (matmul by a
// 64x64 weight, then ReLU): two stages cut it in the middle and four give a
// layer each; a user-fixed cut is kept even when it unbalances the stages;
// a parameter two stages read is held by both; a memory limit below two
// layers' weights leaves no plan for two stages, and the message says what a
// plan needs.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-annotate-stages{stages=2 machine=peak=1G,mem-bw=1G}))' -split-input-file | FileCheck %s --check-prefix=TWO
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-annotate-stages{stages=4 machine=peak=1G,mem-bw=1G}))' -split-input-file | FileCheck %s --check-prefix=FOUR
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-annotate-stages{stages=2 machine=peak=1G,mem-bw=1G device-memory=20000}))' -split-input-file 2>&1 | FileCheck %s --check-prefix=MEMORY

// Two stages: two layers each, one 16x64 activation crossing the cut. Each
// stage's time is its two matmuls and ReLUs (2.8672e-4 s, less the two zero
// fills at 4.096e-6 s each: fills are free to recompute, so each stage makes
// its own and they count in none) plus moving the 4096 bytes across the cut
// at the default link: 5e-6 s latency + 4096 B / 1e10 B/s.
// TWO-LABEL: func.func @stack
// TWO-SAME: cleave.cut_bytes = [4.096000e+03], cleave.stage_memory = [3.276800e+04, 3.276800e+04], cleave.stage_seconds = [2.8393760000000004E-4, 2.8393760000000004E-4]
// TWO: linalg.matmul {cleave.stage = 0 : i64}
// TWO: linalg.matmul {cleave.stage = 0 : i64}
// TWO: linalg.matmul {cleave.stage = 1 : i64}
// TWO: linalg.matmul {cleave.stage = 1 : i64}
// A cut fixed before the second matmul: one matmul, then three.
// TWO-LABEL: func.func @fixed
// TWO-SAME: cleave.stage_memory = [1.638400e+04, 4.915200e+04]
// TWO: linalg.matmul {cleave.stage = 0 : i64}
// TWO: linalg.matmul {cleave.stage = 1 : i64, cleave.stage_start}
// One weight read by both stages: each holds it.
// TWO-LABEL: func.func @shared
// TWO-SAME: cleave.stage_memory = [1.638400e+04, 1.638400e+04]

// FOUR-LABEL: func.func @stack
// FOUR-SAME: cleave.stage_memory = [1.638400e+04, 1.638400e+04, 1.638400e+04, 1.638400e+04]
// FOUR: linalg.matmul {cleave.stage = 0 : i64}
// FOUR: linalg.matmul {cleave.stage = 1 : i64}
// FOUR: linalg.matmul {cleave.stage = 2 : i64}
// FOUR: linalg.matmul {cleave.stage = 3 : i64}

// MEMORY: error: no cut into 2 stages keeps every stage within 20000 bytes of device memory: the model's parameters take 65536 bytes, at least 32768 per stage

#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @stack(%x: tensor<16x64xf32>, %w0: tensor<64x64xf32> {cleave.param = "w0"}, %w1: tensor<64x64xf32> {cleave.param = "w1"}, %w2: tensor<64x64xf32> {cleave.param = "w2"}, %w3: tensor<64x64xf32> {cleave.param = "w3"}) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<16x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%m0 : tensor<16x64xf32>) outs(%e0 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %zero : f32
    linalg.yield %v : f32
  } -> tensor<16x64xf32>
  %e1 = tensor.empty() : tensor<16x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m1 = linalg.matmul ins(%r0, %w1 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%m1 : tensor<16x64xf32>) outs(%e1 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %zero : f32
    linalg.yield %v : f32
  } -> tensor<16x64xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m2 = linalg.matmul ins(%r1, %w2 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%m2 : tensor<16x64xf32>) outs(%e2 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %zero : f32
    linalg.yield %v : f32
  } -> tensor<16x64xf32>
  %e3 = tensor.empty() : tensor<16x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m3 = linalg.matmul ins(%r2, %w3 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%m3 : tensor<16x64xf32>) outs(%e3 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %zero : f32
    linalg.yield %v : f32
  } -> tensor<16x64xf32>
  return %r3 : tensor<16x64xf32>
}

// -----

func.func @fixed(%x: tensor<16x64xf32>, %w0: tensor<64x64xf32> {cleave.param = "w0"}, %w1: tensor<64x64xf32> {cleave.param = "w1"}, %w2: tensor<64x64xf32> {cleave.param = "w2"}, %w3: tensor<64x64xf32> {cleave.param = "w3"}) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m0 = linalg.matmul ins(%x, %w0 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m1 = linalg.matmul {cleave.stage_start} ins(%m0, %w1 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m2 = linalg.matmul ins(%m1, %w2 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m3 = linalg.matmul ins(%m2, %w3 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %m3 : tensor<16x64xf32>
}

// -----

func.func @shared(%x: tensor<16x64xf32>, %w: tensor<64x64xf32> {cleave.param = "w"}) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m0 = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m1 = linalg.matmul ins(%m0, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m2 = linalg.matmul {cleave.stage_start} ins(%m1, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %m3 = linalg.matmul ins(%m2, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %m3 : tensor<16x64xf32>
}
