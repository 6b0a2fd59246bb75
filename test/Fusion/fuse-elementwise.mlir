// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-elementwise))' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-elementwise))' | FileCheck %s --check-prefix=ROTARY
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-elementwise))' | FileCheck %s --check-prefix=HEADS
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-elementwise))' | FileCheck %s --check-prefix=NORM
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-elementwise))' | FileCheck %s --check-prefix=SLICE

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// Tests that a bias add and a ReLU fuse into one generic after the GEMM, and
// that the GEMM's producer (a scale) is not fused into the GEMM.
// CHECK-LABEL: func.func @linear_relu
// CHECK: %[[S:.*]] = linalg.generic
// CHECK: arith.mulf
// CHECK: %[[M:.*]] = linalg.matmul ins(%[[S]]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[M]], %arg2
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK-NOT: linalg.generic
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %xe = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%xe : tensor<4x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.mulf %in, %two : f32
      linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%s, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
    ^bb0(%in: f32, %bias: f32, %out: f32):
      %v = arith.addf %in, %bias : f32
      linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.maximumf %in, %zero : f32
      linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Tests that a bias add whose result is split into heads (expand_shape) and
// transposed is expanded through the reshape and fused into the transpose:
// one generic reads the GEMM result and the bias and writes the heads.
// CHECK-LABEL: func.func @bias_then_heads
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
#id3 = affine_map<(d0, d1) -> (d0, d1)>
#bias3 = affine_map<(d0, d1) -> (d1)>
#in4 = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#out4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @bias_then_heads(%x: tensor<16x8xf32>, %w: tensor<8x32xf32>, %b: tensor<32xf32>) -> tensor<4x16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<16x8xf32>, tensor<8x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %a = linalg.generic {indexing_maps = [#id3, #bias3, #id3], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<16x32xf32>, tensor<32xf32>) outs(%e : tensor<16x32xf32>) {
    ^bb0(%in: f32, %bias: f32, %out: f32):
      %v = arith.addf %in, %bias : f32
      linalg.yield %v : f32
  } -> tensor<16x32xf32>
  %h = tensor.expand_shape %a [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf32> into tensor<16x4x8xf32>
  %te = tensor.empty() : tensor<4x16x8xf32>
  %t = linalg.generic {indexing_maps = [#in4, #out4], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h : tensor<16x4x8xf32>) outs(%te : tensor<4x16x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
  } -> tensor<4x16x8xf32>
  return %t : tensor<4x16x8xf32>
}

// Tests that a generic reading a collapse_shape of an elementwise generic
// (rotate-half over a 4 x 2 x 8 view, as cleave-concat-halves-to-generic
// leaves it, read by rotary's combine) is expanded to that view so the two
// fuse: one generic reads x twice, once at the other half.
// ROTARY: #[[OTHER:.*]] = affine_map<(d0, d1, d2) -> (d0, -d1 + 1, d2)>
// CHECK-LABEL: func.func @rotary_combine
// ROTARY-LABEL: func.func @rotary_combine
// ROTARY: linalg.generic {indexing_maps = [#[[OTHER]],
// ROTARY: arith.negf
// ROTARY: arith.select
// ROTARY: arith.mulf
// ROTARY-NOT: linalg.generic
#id3r = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#other = affine_map<(d0, d1, d2) -> (d0, -d1 + 1, d2)>
#id2r = affine_map<(d0, d1) -> (d0, d1)>
func.func @rotary_combine(%x: tensor<4x16xf32>, %sin: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %split = tensor.expand_shape %x [[0], [1, 2]] output_shape [4, 2, 8] : tensor<4x16xf32> into tensor<4x2x8xf32>
  %e3 = tensor.empty() : tensor<4x2x8xf32>
  %rot = linalg.generic {indexing_maps = [#other, #id3r], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%split : tensor<4x2x8xf32>) outs(%e3 : tensor<4x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    %s = linalg.index 1 : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %s, %c0 : index
    %v = arith.select %first, %n, %in : f32
    linalg.yield %v : f32
  } -> tensor<4x2x8xf32>
  %flat = tensor.collapse_shape %rot [[0], [1, 2]] : tensor<4x2x8xf32> into tensor<4x16xf32>
  %e2 = tensor.empty() : tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#id2r, #id2r, #id2r], iterator_types = ["parallel", "parallel"]}
      ins(%flat, %sin : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e2 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// Tests attention's first GEMM as cleave-generalize-for-fusion leaves it (a
// generic over a collapse of Q's head-split transpose): the GEMM is
// expanded through the collapse and the transpose fused in, so one generic
// over (batch, heads, m, n, k) reads the projection in place; and that a
// producer that computes (the scale) is not fused into a GEMM.
// HEADS: #[[Q:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, d4)>
// ROTARY-LABEL: func.func @gemm_reads_heads_in_place
// HEADS-LABEL: func.func @gemm_reads_heads_in_place
// HEADS: linalg.generic {indexing_maps = [#[[Q]],
// CHECK-LABEL: func.func @gemm_reads_heads_in_place
// CHECK: linalg.generic {indexing_maps = [{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %{{.*}} : tensor<2x3x4x8xf32>,
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: linalg.yield
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
#bmm_a = affine_map<(b, m, n, k) -> (b, m, k)>
#bmm_b = affine_map<(b, m, n, k) -> (b, k, n)>
#bmm_c = affine_map<(b, m, n, k) -> (b, m, n)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#heads4 = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id3b = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @gemm_reads_heads_in_place(%q: tensor<2x3x4x8xf32>, %k: tensor<8x8x3xf32>, %x: tensor<8x3x8xf32>)
    -> (tensor<8x3x3xf32>, tensor<8x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %te = tensor.empty() : tensor<2x4x3x8xf32>
  %t = linalg.generic {indexing_maps = [#heads4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<2x3x4x8xf32>) outs(%te : tensor<2x4x3x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
  } -> tensor<2x4x3x8xf32>
  %a = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<2x4x3x8xf32> into tensor<8x3x8xf32>
  %se = tensor.empty() : tensor<8x3x3xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%se : tensor<8x3x3xf32>) -> tensor<8x3x3xf32>
  %s = linalg.generic {indexing_maps = [#bmm_a, #bmm_b, #bmm_c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %k : tensor<8x3x8xf32>, tensor<8x8x3xf32>) outs(%sf : tensor<8x3x3xf32>) {
    ^bb0(%u: f32, %v: f32, %acc: f32):
      %p = arith.mulf %u, %v : f32
      %r = arith.addf %acc, %p : f32
      linalg.yield %r : f32
  } -> tensor<8x3x3xf32>
  %xe = tensor.empty() : tensor<8x3x8xf32>
  %scaled = linalg.generic {indexing_maps = [#id3b, #id3b], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<8x3x8xf32>) outs(%xe : tensor<8x3x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %half : f32
      linalg.yield %m : f32
  } -> tensor<8x3x8xf32>
  %s2 = linalg.generic {indexing_maps = [#bmm_a, #bmm_b, #bmm_c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%scaled, %k : tensor<8x3x8xf32>, tensor<8x8x3xf32>) outs(%sf : tensor<8x3x3xf32>) {
    ^bb0(%u: f32, %v: f32, %acc: f32):
      %p = arith.mulf %u, %v : f32
      %r = arith.addf %acc, %p : f32
      linalg.yield %r : f32
  } -> tensor<8x3x3xf32>
  return %s, %s2 : tensor<8x3x3xf32>, tensor<8x3x3xf32>
}

// Tests grouped-query attention's V: a copy that transposes V into heads
// and repeats each K/V head (a broadcast) folds into the GEMM, which then
// reads V in place with no repeat dimension (a zero stride for BLAS); the
// op that computes V (here a scale, as rotary embedding computes K) is not
// fused into that copy, or the copy could not fold.
// CHECK-LABEL: func.func @gemm_reads_repeated_heads
// CHECK: %[[V:.*]] = linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: linalg.yield
// CHECK: linalg.generic {{.*}}"reduction"]} ins(%{{.*}}, %[[V]] : tensor<1x2x2x16x16xf32>, tensor<1x16x2x16xf32>)
// CHECK-NOT: linalg.generic
#rep_in = affine_map<(b, g, r, s, d) -> (b, s, g, d)>
#rep_out = affine_map<(b, g, r, s, d) -> (b, g, r, s, d)>
func.func @gemm_reads_repeated_heads(%p: tensor<4x16x16xf32>, %v: tensor<1x16x2x16xf32>) -> tensor<4x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %ve = tensor.empty() : tensor<1x16x2x16xf32>
  %scaled = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v : tensor<1x16x2x16xf32>) outs(%ve : tensor<1x16x2x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %two : f32
      linalg.yield %m : f32
  } -> tensor<1x16x2x16xf32>
  %re = tensor.empty() : tensor<1x2x2x16x16xf32>
  %rep = linalg.generic {indexing_maps = [#rep_in, #rep_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%scaled : tensor<1x16x2x16xf32>) outs(%re : tensor<1x2x2x16x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
  } -> tensor<1x2x2x16x16xf32>
  %b = tensor.collapse_shape %rep [[0, 1, 2], [3], [4]] : tensor<1x2x2x16x16xf32> into tensor<4x16x16xf32>
  %oe = tensor.empty() : tensor<4x16x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %o = linalg.generic {indexing_maps = [#bmm_a, #bmm_b, #bmm_c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %b : tensor<4x16x16xf32>, tensor<4x16x16xf32>) outs(%of : tensor<4x16x16xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %m = arith.mulf %x, %y : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
  } -> tensor<4x16x16xf32>
  return %o : tensor<4x16x16xf32>
}

// Tests that a transposed weight two GEMMs read fuses into both (each reads
// the weight in place, through a transposed map) and then goes.
// CHECK-LABEL: func.func @shared_weight_in_place
// CHECK: linalg.generic {{.*}}"reduction"]} ins(%arg0, %arg2 :
// CHECK: linalg.generic {{.*}}"reduction"]} ins(%arg1, %arg2 :
// CHECK-NOT: linalg.generic
#mm_a = affine_map<(m, n, k) -> (m, k)>
#mm_b = affine_map<(m, n, k) -> (k, n)>
#mm_c = affine_map<(m, n, k) -> (m, n)>
#tr2 = affine_map<(d0, d1) -> (d1, d0)>
#id2s = affine_map<(d0, d1) -> (d0, d1)>
func.func @shared_weight_in_place(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %te = tensor.empty() : tensor<8x8xf32>
  %t = linalg.generic {indexing_maps = [#tr2, #id2s], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x8xf32>) outs(%te : tensor<8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
  } -> tensor<8x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %t : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) {
    ^bb0(%u: f32, %v: f32, %acc: f32):
      %m = arith.mulf %u, %v : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%y, %t : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) {
    ^bb0(%u: f32, %v: f32, %acc: f32):
      %m = arith.mulf %u, %v : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// Tests Q and K normalized per head and then rotated (Qwen3): each norm
// writes (s, h, 1, d), a collapse drops the kept unit dimension and rotary
// embedding reads the result twice, once at the other half, which no
// expansion of the rotation through the collapse allows (that map is not a
// permutation). The norm's loops drop the unit dimension instead, and the
// rotation fuses into it: one generic reads the statistics and negates.
// Each reduction then moves down to that generic, so that Q's and K's
// statistics are not both computed before either is used: a reduction next
// to its reader is what cleave-map-rows-to-gpu makes one kernel.
// CHECK-LABEL: func.func @head_norm_rotary
// NORM-LABEL: func.func @head_norm_rotary
// NORM: %[[QS:.*]] = linalg.generic {{.*}}"reduction"]} ins(%arg0 : tensor<2x4x8xf32>)
// NORM: } -> tensor<2x4xf32>
// NORM-NEXT: %[[Q:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[QS]], %{{.*}} : tensor<2x4x2x4xf32>, tensor<2x4xf32>, tensor<2x4x2x4xf32>)
// NORM: arith.negf
// NORM: linalg.fill
// NORM-NEXT: %[[KS:.*]] = linalg.generic {{.*}}"reduction"]} ins(%arg1 : tensor<2x4x8xf32>)
// NORM: } -> tensor<2x4xf32>
// NORM-NEXT: %[[K:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[KS]], %{{.*}} : tensor<2x4x2x4xf32>, tensor<2x4xf32>, tensor<2x4x2x4xf32>)
// NORM: arith.negf
// NORM-NOT: linalg.generic
// NORM: return %[[Q]], %[[K]]
#hr3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#hr2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#n_st = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#id4h = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#other4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, -d2 + 1, d3)>
func.func @head_norm_rotary(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>)
    -> (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty() : tensor<2x4xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4xf32>) -> tensor<2x4xf32>
  %qss = linalg.generic {indexing_maps = [#hr3, #hr2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q : tensor<2x4x8xf32>) outs(%sf : tensor<2x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %in, %in : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x4xf32>
  %kf = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4xf32>) -> tensor<2x4xf32>
  %kss = linalg.generic {indexing_maps = [#hr3, #hr2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%k : tensor<2x4x8xf32>) outs(%kf : tensor<2x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %in, %in : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x4xf32>
  %ne = tensor.empty() : tensor<2x4x1x8xf32>
  %qs = tensor.expand_shape %qss [[0], [1, 2]] output_shape [2, 4, 1] : tensor<2x4xf32> into tensor<2x4x1xf32>
  %ks = tensor.expand_shape %kss [[0], [1, 2]] output_shape [2, 4, 1] : tensor<2x4xf32> into tensor<2x4x1xf32>
  %qx = tensor.expand_shape %q [[0], [1, 2], [3]] output_shape [2, 4, 1, 8] : tensor<2x4x8xf32> into tensor<2x4x1x8xf32>
  %kx = tensor.expand_shape %k [[0], [1, 2], [3]] output_shape [2, 4, 1, 8] : tensor<2x4x8xf32> into tensor<2x4x1x8xf32>
  %qn = linalg.generic {indexing_maps = [#id4h, #n_st, #id4h], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qx, %qs : tensor<2x4x1x8xf32>, tensor<2x4x1xf32>) outs(%ne : tensor<2x4x1x8xf32>) {
  ^bb0(%x: f32, %s: f32, %out: f32):
    %m = arith.mulf %x, %s : f32
    linalg.yield %m : f32
  } -> tensor<2x4x1x8xf32>
  %qc = tensor.collapse_shape %qn [[0], [1, 2], [3]] : tensor<2x4x1x8xf32> into tensor<2x4x8xf32>
  %qv = tensor.expand_shape %qc [[0], [1], [2, 3]] output_shape [2, 4, 2, 4] : tensor<2x4x8xf32> into tensor<2x4x2x4xf32>
  %re = tensor.empty() : tensor<2x4x2x4xf32>
  %qr = linalg.generic {indexing_maps = [#id4h, #other4, #id4h], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qv, %qv : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) outs(%re : tensor<2x4x2x4xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %n = arith.negf %y : f32
    %a = arith.addf %x, %n : f32
    linalg.yield %a : f32
  } -> tensor<2x4x2x4xf32>
  %kn = linalg.generic {indexing_maps = [#id4h, #n_st, #id4h], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%kx, %ks : tensor<2x4x1x8xf32>, tensor<2x4x1xf32>) outs(%ne : tensor<2x4x1x8xf32>) {
  ^bb0(%x: f32, %s: f32, %out: f32):
    %m = arith.mulf %x, %s : f32
    linalg.yield %m : f32
  } -> tensor<2x4x1x8xf32>
  %kc = tensor.collapse_shape %kn [[0], [1, 2], [3]] : tensor<2x4x1x8xf32> into tensor<2x4x8xf32>
  %kv = tensor.expand_shape %kc [[0], [1], [2, 3]] output_shape [2, 4, 2, 4] : tensor<2x4x8xf32> into tensor<2x4x2x4xf32>
  %kr = linalg.generic {indexing_maps = [#id4h, #other4, #id4h], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%kv, %kv : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) outs(%re : tensor<2x4x2x4xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %n = arith.negf %y : f32
    %a = arith.addf %x, %n : f32
    linalg.yield %a : f32
  } -> tensor<2x4x2x4xf32>
  return %qr, %kr : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
}

// Tests a transposing copy read through two slices (GPT-NeoX's head split,
// read as the part rotary embedding rotates and the part it passes
// through): each slice becomes a copy of the matching slice of the input,
// with the copy's maps, which then fuses into its one reader; both readers
// read the input in place through the transposed map, and no copy is left.
// SLICE: #[[SWAP:.*]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-LABEL: func.func @sliced_copy
// SLICE-LABEL: func.func @sliced_copy
// SLICE-DAG: %[[LO:.*]] = tensor.extract_slice %arg0[0, 0, 0] [4, 2, 2] [1, 1, 1] : tensor<4x2x8xf32> to tensor<4x2x2xf32>
// SLICE-DAG: %[[HI:.*]] = tensor.extract_slice %arg0[0, 0, 2] [4, 2, 6] [1, 1, 1] : tensor<4x2x8xf32> to tensor<4x2x6xf32>
// SLICE: linalg.generic {indexing_maps = [#[[SWAP]], #{{.*}}], {{.*}} ins(%[[LO]] : tensor<4x2x2xf32>) outs(%{{.*}} : tensor<2x4x2xf32>)
// SLICE-NEXT: ^bb0
// SLICE-NEXT: arith.negf
// SLICE: linalg.generic {indexing_maps = [#[[SWAP]], #{{.*}}], {{.*}} ins(%[[HI]] : tensor<4x2x6xf32>) outs(%{{.*}} : tensor<2x4x6xf32>)
// SLICE-NEXT: ^bb0
// SLICE-NEXT: arith.mulf
// SLICE-NOT: linalg.generic
#swap01 = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#id3c = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @sliced_copy(%x: tensor<4x2x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x6xf32>) {
  %e = tensor.empty() : tensor<2x4x8xf32>
  %t = linalg.generic {indexing_maps = [#swap01, #id3c], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x2x8xf32>) outs(%e : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x4x8xf32>
  %lo = tensor.extract_slice %t[0, 0, 0] [2, 4, 2] [1, 1, 1] : tensor<2x4x8xf32> to tensor<2x4x2xf32>
  %hi = tensor.extract_slice %t[0, 0, 2] [2, 4, 6] [1, 1, 1] : tensor<2x4x8xf32> to tensor<2x4x6xf32>
  %e1 = tensor.empty() : tensor<2x4x2xf32>
  %n = linalg.generic {indexing_maps = [#id3c, #id3c], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%lo : tensor<2x4x2xf32>) outs(%e1 : tensor<2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.negf %in : f32
    linalg.yield %v : f32
  } -> tensor<2x4x2xf32>
  %e2 = tensor.empty() : tensor<2x4x6xf32>
  %m = linalg.generic {indexing_maps = [#id3c, #id3c], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%hi : tensor<2x4x6xf32>) outs(%e2 : tensor<2x4x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %in : f32
    linalg.yield %v : f32
  } -> tensor<2x4x6xf32>
  return %n, %m : tensor<2x4x2xf32>, tensor<2x4x6xf32>
}
