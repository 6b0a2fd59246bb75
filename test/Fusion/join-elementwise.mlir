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

// Tests what stays apart: ranges of two tensors, and different bodies.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @apart(%x: tensor<6x16xf32>, %y: tensor<6x16xf32>)
    -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %e = tensor.empty() : tensor<6x4xf32>
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
  return %b0, %b1, %c0, %c1 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// Tests rotary embedding where the projection interleaves Q, K and V per
// head (GPT-NeoX: each head's 48 columns are its Q, K and V, 16 each): Q
// and K are the same box of each head's Q and K chunk. One op with a new
// outer loop over the two, reading both chunks of every head through one
// view; its index ops move one loop in; Q and K are its planes. K's body
// has its index op in another place, which does not keep them apart.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d1, d0, d3)>
// CHECK-DAG: #[[TABLE:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @interleaved
// CHECK: %[[C:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1], [2, 3]] output_shape [16, 2, 3, 16]
// CHECK: %[[B:.*]] = tensor.extract_slice %[[C]][0, 0, 0, 0] [16, 2, 2, 16] [1, 1, 1, 1]
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[TABLE]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[B]], %arg1 : tensor<16x2x2x16xf32>, tensor<16x16xf32>) outs(%{{.*}} : tensor<2x2x16x16xf32>)
// CHECK: linalg.index 3
// CHECK-DAG: %[[Q:.*]] = tensor.extract_slice %[[R]][0, 0, 0, 0] [1, 2, 16, 16] [1, 1, 1, 1] : tensor<2x2x16x16xf32> to tensor<2x16x16xf32>
// CHECK-DAG: %[[K:.*]] = tensor.extract_slice %[[R]][1, 0, 0, 0] [1, 2, 16, 16] [1, 1, 1, 1] : tensor<2x2x16x16xf32> to tensor<2x16x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[Q]], %[[K]]
#in = affine_map<(h, t, c) -> (t, h, c)>
#table = affine_map<(h, t, c) -> (t, c)>
#out = affine_map<(h, t, c) -> (h, t, c)>
func.func @interleaved(%qkv: tensor<16x2x48xf32>, %cos: tensor<16x16xf32>)
    -> (tensor<2x16x16xf32>, tensor<2x16x16xf32>) {
  %c8 = arith.constant 8 : index
  %e = tensor.empty() : tensor<2x16x16xf32>
  %q = tensor.extract_slice %qkv[0, 0, 0] [16, 2, 16] [1, 1, 1] : tensor<16x2x48xf32> to tensor<16x2x16xf32>
  %rq = linalg.generic {indexing_maps = [#in, #table, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %cos : tensor<16x2x16xf32>, tensor<16x16xf32>) outs(%e : tensor<2x16x16xf32>) {
  ^bb0(%x: f32, %c: f32, %o: f32):
    %i = linalg.index 2 : index
    %m = arith.mulf %x, %c : f32
    %low = arith.cmpi ult, %i, %c8 : index
    %r = arith.select %low, %m, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x16x16xf32>
  %k = tensor.extract_slice %qkv[0, 0, 16] [16, 2, 16] [1, 1, 1] : tensor<16x2x48xf32> to tensor<16x2x16xf32>
  %rk = linalg.generic {indexing_maps = [#in, #table, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%k, %cos : tensor<16x2x16xf32>, tensor<16x16xf32>) outs(%e : tensor<2x16x16xf32>) {
  ^bb0(%x: f32, %c: f32, %o: f32):
    // The index op elsewhere than in Q's body, as fusion may leave it: the
    // bodies still compare equal.
    %m = arith.mulf %x, %c : f32
    %i = linalg.index 2 : index
    %low = arith.cmpi ult, %i, %c8 : index
    %r = arith.select %low, %m, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x16x16xf32>
  return %rq, %rk : tensor<2x16x16xf32>, tensor<2x16x16xf32>
}

// -----

// Tests stacking pieces that are slices of slices, expanded after: columns
// 0-3 and 8-11 of a 16-column tensor (a gap, so no range join), each read
// as a slice of a wider slice and expanded to 2 x 2; a per-column scale
// both share stays as it is (the new loop does not index it).
// CHECK-LABEL: func.func @nested
// CHECK: %[[C:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2]] output_shape [6, 2, 8]
// CHECK: %[[B:.*]] = tensor.extract_slice %[[C]][0, 0, 0] [6, 2, 4] [1, 1, 1]
// CHECK: %[[E:.*]] = tensor.expand_shape %[[B]] {{\[\[}}0], [1], [2, 3]] output_shape [6, 2, 2, 2]
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[E]], %arg1 : tensor<6x2x2x2xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<2x6x2x2xf32>)
// CHECK-NOT: linalg.generic
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#cols = affine_map<(d0, d1, d2) -> (d1, d2)>
func.func @nested(%x: tensor<6x16xf32>, %scale: tensor<2x2xf32>)
    -> (tensor<6x2x2xf32>, tensor<6x2x2xf32>) {
  %e = tensor.empty() : tensor<6x2x2xf32>
  %w0 = tensor.extract_slice %x[0, 0] [6, 6] [1, 1] : tensor<6x16xf32> to tensor<6x6xf32>
  %p0 = tensor.extract_slice %w0[0, 0] [6, 4] [1, 1] : tensor<6x6xf32> to tensor<6x4xf32>
  %x0 = tensor.expand_shape %p0 [[0], [1, 2]] output_shape [6, 2, 2] : tensor<6x4xf32> into tensor<6x2x2xf32>
  %a = linalg.generic {indexing_maps = [#id3, #cols, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x0, %scale : tensor<6x2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<6x2x2xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %n = arith.mulf %in, %s : f32
    linalg.yield %n : f32
  } -> tensor<6x2x2xf32>
  %w1 = tensor.extract_slice %x[0, 6] [6, 6] [1, 1] : tensor<6x16xf32> to tensor<6x6xf32>
  %p1 = tensor.extract_slice %w1[0, 2] [6, 4] [1, 1] : tensor<6x6xf32> to tensor<6x4xf32>
  %x1 = tensor.expand_shape %p1 [[0], [1, 2]] output_shape [6, 2, 2] : tensor<6x4xf32> into tensor<6x2x2xf32>
  %b = linalg.generic {indexing_maps = [#id3, #cols, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x1, %scale : tensor<6x2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<6x2x2xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %n = arith.mulf %in, %s : f32
    linalg.yield %n : f32
  } -> tensor<6x2x2xf32>
  return %a, %b : tensor<6x2x2xf32>, tensor<6x2x2xf32>
}

// Tests adjacent ranges with a per-column scale both share: joined as one
// range, each op would read the other's scale, so they stack instead.
// CHECK-LABEL: func.func @scaled
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x6x4xf32>)
// CHECK-NOT: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @scaled(%y: tensor<6x16xf32>, %scale: tensor<4xf32>)
    -> (tensor<6x4xf32>, tensor<6x4xf32>) {
  %e = tensor.empty() : tensor<6x4xf32>
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
  return %e0, %e1 : tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// Tests what does not stack: pieces whose distance does not divide the
// dimension (columns 4-7 and 10-13 of 16), and pieces that cross a chunk of
// that distance (columns 6-9 and 14-17 of 24: chunks of 8).
// CHECK-LABEL: func.func @unstacked
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @unstacked(%x: tensor<6x16xf32>, %y: tensor<6x24xf32>)
    -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %e = tensor.empty() : tensor<6x4xf32>
  %u0 = tensor.extract_slice %x[0, 4] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %u1 = tensor.extract_slice %x[0, 10] [6, 4] [1, 1] : tensor<6x16xf32> to tensor<6x4xf32>
  %a0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%u0 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %a1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%u1 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %v0 = tensor.extract_slice %y[0, 6] [6, 4] [1, 1] : tensor<6x24xf32> to tensor<6x4xf32>
  %v1 = tensor.extract_slice %y[0, 14] [6, 4] [1, 1] : tensor<6x24xf32> to tensor<6x4xf32>
  %b0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v0 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  %b1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v1 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  return %a0, %a1, %b0, %b1 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// Tests per-head RMS norms of Q (4 heads) and K (2 heads), columns 0-63 and
// 64-95 of one projection in heads of 16 (Qwen3): the sums of squares join
// first (reductions into zero-filled tensors), then the normalizations,
// each with its own weight: one op over the 6 heads that reads both weights
// and takes Q's for heads 0-3, K's for heads 4 and 5.
// CHECK-LABEL: func.func @norms
// CHECK: %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [16, 6, 16]
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<16x6xf32>)
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<16x6x16xf32>) outs(%[[Z]] : tensor<16x6xf32>)
// CHECK: %[[N:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[S]], %arg1, %arg2 : tensor<16x6x16xf32>, tensor<16x6xf32>, tensor<16xf32>, tensor<16xf32>) outs(%{{.*}} : tensor<16x6x16xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %[[WQ:.*]]: f32, %[[WK:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[H:.*]] = linalg.index 1
// CHECK: %[[ISQ:.*]] = arith.cmpi ult, %[[H]], %c4
// CHECK: %[[W:.*]] = arith.select %[[ISQ]], %[[WQ]], %[[WK]]
// CHECK: arith.mulf %{{.*}}, %[[W]]
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[Q:.*]] = tensor.extract_slice %[[N]][0, 0, 0] [16, 4, 16] [1, 1, 1]
// CHECK-DAG: %[[K:.*]] = tensor.extract_slice %[[N]][0, 4, 0] [16, 2, 16] [1, 1, 1]
// CHECK: return %[[Q]], %[[K]]
#x = affine_map<(t, h, c) -> (t, h, c)>
#row = affine_map<(t, h, c) -> (t, h)>
#w = affine_map<(t, h, c) -> (c)>
func.func @norms(%qkv: tensor<16x128xf32>, %wq: tensor<16xf32>, %wk: tensor<16xf32>)
    -> (tensor<16x4x16xf32>, tensor<16x2x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %q = tensor.extract_slice %qkv[0, 0] [16, 64] [1, 1] : tensor<16x128xf32> to tensor<16x64xf32>
  %qh = tensor.expand_shape %q [[0], [1, 2]] output_shape [16, 4, 16] : tensor<16x64xf32> into tensor<16x4x16xf32>
  %k = tensor.extract_slice %qkv[0, 64] [16, 32] [1, 1] : tensor<16x128xf32> to tensor<16x32xf32>
  %kh = tensor.expand_shape %k [[0], [1, 2]] output_shape [16, 2, 16] : tensor<16x32xf32> into tensor<16x2x16xf32>
  %eq = tensor.empty() : tensor<16x4xf32>
  %fq = linalg.fill ins(%zero : f32) outs(%eq : tensor<16x4xf32>) -> tensor<16x4xf32>
  %ek = tensor.empty() : tensor<16x2xf32>
  %fk = linalg.fill ins(%zero : f32) outs(%ek : tensor<16x2xf32>) -> tensor<16x2xf32>
  %sq = linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%qh : tensor<16x4x16xf32>) outs(%fq : tensor<16x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %in, %in : f32
    %a = arith.addf %m, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16x4xf32>
  %sk = linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%kh : tensor<16x2x16xf32>) outs(%fk : tensor<16x2xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %in, %in : f32
    %a = arith.addf %m, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16x2xf32>
  %oq = tensor.empty() : tensor<16x4x16xf32>
  %nq = linalg.generic {indexing_maps = [#x, #row, #w, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%qh, %sq, %wq : tensor<16x4x16xf32>, tensor<16x4xf32>, tensor<16xf32>) outs(%oq : tensor<16x4x16xf32>) {
  ^bb0(%in: f32, %s: f32, %g: f32, %out: f32):
    %r = math.rsqrt %s : f32
    %y = arith.mulf %in, %r : f32
    %z = arith.mulf %y, %g : f32
    linalg.yield %z : f32
  } -> tensor<16x4x16xf32>
  %ok = tensor.empty() : tensor<16x2x16xf32>
  %nk = linalg.generic {indexing_maps = [#x, #row, #w, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%kh, %sk, %wk : tensor<16x2x16xf32>, tensor<16x2xf32>, tensor<16xf32>) outs(%ok : tensor<16x2x16xf32>) {
  ^bb0(%in: f32, %s: f32, %g: f32, %out: f32):
    %r = math.rsqrt %s : f32
    %y = arith.mulf %in, %r : f32
    %z = arith.mulf %y, %g : f32
    linalg.yield %z : f32
  } -> tensor<16x2x16xf32>
  return %nq, %nk : tensor<16x4x16xf32>, tensor<16x2x16xf32>
}
