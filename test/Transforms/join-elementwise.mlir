// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-join-elementwise, canonicalize))' --split-input-file | FileCheck %s

// Tests the rounding of Q, K and V, three column ranges of one projection,
// each expanded to (batch, tokens, columns): one rounding over the three
// ranges together, at the first one's place, and each old result its range
// of the joined one (canonicalize folds the slices of slices that joining
// three pairwise leaves).
// CHECK-LABEL: func.func @rounding
// CHECK: %[[E:.*]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [2, 3, 16]
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<2x3x16xf32>) outs(%{{.*}} : tensor<2x3x16xbf16>)
// CHECK: arith.truncf
// CHECK-NOT: arith.truncf
// CHECK-DAG: %[[Q:.*]] = tensor.extract_slice %[[R]][0, 0, 0] [2, 3, 8] [1, 1, 1]
// CHECK-DAG: %[[K:.*]] = tensor.extract_slice %[[R]][0, 0, 8] [2, 3, 4] [1, 1, 1]
// CHECK-DAG: %[[V:.*]] = tensor.extract_slice %[[R]][0, 0, 12] [2, 3, 4] [1, 1, 1]
// CHECK: return %[[Q]], %[[K]], %[[V]]
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @rounding(%qkv: tensor<6x16xf32>)
    -> (tensor<2x3x8xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) {
  %q = tensor.extract_slice %qkv[0, 0] [6, 8] [1, 1] : tensor<6x16xf32> to tensor<6x8xf32>
  %k = tensor.extract_slice %qkv[0, 8] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %v = tensor.extract_slice %qkv[0, 12] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %qe = tensor.expand_shape %q [[0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
  %o8 = tensor.empty() : tensor<2x3x8xbf16>
  %qr = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%qe : tensor<2x3x8xf32>) outs(%o8 : tensor<2x3x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x3x8xbf16>
  %ke = tensor.expand_shape %k [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf32> into tensor<2x3x4xf32>
  %o4 = tensor.empty() : tensor<2x3x4xbf16>
  %kr = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ke : tensor<2x3x4xf32>) outs(%o4 : tensor<2x3x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x3x4xbf16>
  %ve = tensor.expand_shape %v [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf32> into tensor<2x3x4xf32>
  %vr = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ve : tensor<2x3x4xf32>) outs(%o4 : tensor<2x3x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x3x4xbf16>
  return %qr, %kr, %vr : tensor<2x3x8xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xbf16>
}

// -----

// Tests rotary embedding of Q (4 heads) and K (2 heads), columns 0-63 and
// 64-95 of one projection split into heads of 16, with a table shared by
// both and the heads moved first (the head split's transpose): one op over
// 6 heads, Q its first 4, K its last 2. V (columns 96-127) is not touched.
// CHECK-LABEL: func.func @rotary
// CHECK: %[[S:.*]] = tensor.extract_slice %arg0[0, 0] [16, 96] [1, 1]
// CHECK: %[[E:.*]] = tensor.expand_shape %[[S]] {{\[\[}}0], [1, 2]] output_shape [16, 6, 16]
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[E]], %arg1 : tensor<16x6x16xf32>, tensor<16x16xf32>) outs(%{{.*}} : tensor<6x16x16xf32>)
// CHECK-DAG: %[[Q:.*]] = tensor.extract_slice %[[R]][0, 0, 0] [4, 16, 16] [1, 1, 1]
// CHECK-DAG: %[[K:.*]] = tensor.extract_slice %[[R]][4, 0, 0] [2, 16, 16] [1, 1, 1]
// CHECK-NOT: linalg.generic
// CHECK: return %[[Q]], %[[K]]
#in = affine_map<(h, t, c) -> (t, h, c)>
#table = affine_map<(h, t, c) -> (t, c)>
#out = affine_map<(h, t, c) -> (h, t, c)>
func.func @rotary(%qkv: tensor<16x128xf32>, %cos: tensor<16x16xf32>)
    -> (tensor<4x16x16xf32>, tensor<2x16x16xf32>) {
  %q = tensor.extract_slice %qkv[0, 0] [16, 64] [1, 1] : tensor<16x128xf32> to tensor<16x64xf32>
  %qh = tensor.expand_shape %q [[0], [1, 2]] output_shape [16, 4, 16] : tensor<16x64xf32> into tensor<16x4x16xf32>
  %e4 = tensor.empty() : tensor<4x16x16xf32>
  %rq = linalg.generic {indexing_maps = [#in, #table, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%qh, %cos : tensor<16x4x16xf32>, tensor<16x16xf32>) outs(%e4 : tensor<4x16x16xf32>) {
  ^bb0(%x: f32, %c: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<4x16x16xf32>
  %k = tensor.extract_slice %qkv[0, 64] [16, 32] [1, 1] : tensor<16x128xf32> to tensor<16x32xf32>
  %kh = tensor.expand_shape %k [[0], [1, 2]] output_shape [16, 2, 16] : tensor<16x32xf32> into tensor<16x2x16xf32>
  %e2 = tensor.empty() : tensor<2x16x16xf32>
  %rk = linalg.generic {indexing_maps = [#in, #table, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%kh, %cos : tensor<16x2x16xf32>, tensor<16x16xf32>) outs(%e2 : tensor<2x16x16xf32>) {
  ^bb0(%x: f32, %c: f32, %o: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x16x16xf32>
  return %rq, %rk : tensor<4x16x16xf32>, tensor<2x16x16xf32>
}

// -----

// Tests what stays apart: ranges with a gap between them, ranges of two
// tensors, different bodies, and a shared input the heads loop indexes (a
// per-column scale: joined, each op would read the other's scale).
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-8: linalg.generic
// CHECK-NOT: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @apart(%x: tensor<6x16xf32>, %y: tensor<6x16xf32>, %scale: tensor<4xf32>)
    -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>,
        tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %e = tensor.empty() : tensor<6x4xf32>
  // A gap: columns 0-3 and 8-11.
  %g0 = tensor.extract_slice %x[0, 0] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %g1 = tensor.extract_slice %x[0, 8] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %a0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%g0 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %a1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%g1 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  // Two tensors: columns 4-7 of %x, 8-11 of %y.
  %t0 = tensor.extract_slice %x[0, 4] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %t1 = tensor.extract_slice %y[0, 8] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %b0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t0 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %b1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t1 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  // Different bodies on adjacent columns 0-3 and 4-7 of %y.
  %d0 = tensor.extract_slice %y[0, 0] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %d1 = tensor.extract_slice %y[0, 4] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %c0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%d0 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.sqrt %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %c1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%d1 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.tanh %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  // A per-column scale shared by both, on adjacent columns 8-11 and 12-15
  // of %y.
  %s0 = tensor.extract_slice %y[0, 8] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %s1 = tensor.extract_slice %y[0, 12] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %e0 = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %scale : tensor<6x4xf32>, tensor<4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %n = arith.mulf %in, %s : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %e1 = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %scale : tensor<6x4xf32>, tensor<4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %n = arith.mulf %in, %s : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  return %a0, %a1, %b0, %b1, %c0, %c1, %e0, %e1 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}
