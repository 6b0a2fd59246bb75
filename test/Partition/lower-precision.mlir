// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-lower-precision))' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-lower-precision))' | FileCheck %s --check-prefix=NO-F32-TRANSPOSE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-lower-precision))' | FileCheck %s --check-prefix=SCALED
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-lower-precision{type=f16}))' | FileCheck %s --check-prefix=F16
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-lower-precision{type=fp8}))' 2>&1 | FileCheck %s --check-prefix=BAD

// Tests that float32 GEMMs read 16-bit operands into their float32 results:
// a parameter that only GEMMs read (here through a sharding annotation and a
// reshape) is narrowed at the boundary, every other operand is truncated
// once by an elementwise generic, and the accumulator stays float32.

// CHECK-LABEL: func.func @layer
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x16xf32>
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<16x32xbf16> {cleave.param = "w"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<32xf32> {cleave.param = "b"}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<4x8x32xbf16> {cleave.param = "v"}
// CHECK: %[[XE:.*]] = tensor.empty() : tensor<8x16xbf16>
// CHECK: %[[XB:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x16xf32>) outs(%[[XE]] : tensor<8x16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[WS:.*]] = shard.shard %[[W]] to %{{.*}} : tensor<16x32xbf16>
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[XB]], %[[WS]] : tensor<8x16xbf16>, tensor<16x32xbf16>) outs(%{{.*}} : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK: linalg.generic {{.*}} ins(%[[Y]] : tensor<8x32xf32>) outs(%{{.*}} : tensor<8x32xbf16>)
// The second GEMM reads the same activation: it is truncated only once.
// CHECK-NOT: ins(%[[X]]
// CHECK: linalg.matmul ins(%[[XB]], %[[WS]]
// CHECK: %[[VR:.*]] = tensor.collapse_shape %[[V]] {{.*}} into tensor<32x32xbf16>
// CHECK: linalg.matmul ins(%{{.*}}, %[[VR]] : tensor<8x32xbf16>, tensor<32x32xbf16>)

// F16-LABEL: func.func @layer
// F16-SAME: tensor<16x32xf16> {cleave.param = "w"}
// F16: arith.truncf %{{.*}} : f32 to f16
// BAD: cleave-lower-precision: type must be bf16 or f16, not 'fp8'
shard.grid @mesh(shape = 2)
func.func @layer(%x: tensor<8x16xf32>, %w: tensor<16x32xf32> {cleave.param = "w"},
                 %b: tensor<32xf32> {cleave.param = "b"},
                 %v: tensor<4x8x32xf32> {cleave.param = "v"}) -> tensor<8x32xf32> {
  %sharding = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %sharding : tensor<16x32xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = linalg.matmul ins(%x, %ws : tensor<8x16xf32>, tensor<16x32xf32>)
                     outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y2 = linalg.matmul ins(%x, %ws : tensor<8x16xf32>, tensor<16x32xf32>)
                      outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  %vr = tensor.collapse_shape %v [[0, 1], [2]] : tensor<4x8x32xf32> into tensor<32x32xf32>
  %z = linalg.matmul ins(%y, %vr : tensor<8x32xf32>, tensor<32x32xf32>)
                     outs(%y2 : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %z : tensor<8x32xf32>
}

// A parameter read by something other than a GEMM (here an add) keeps its
// type; the GEMM truncates it each run. A GEMM with transposed indexing maps
// is left in float32.
// CHECK-LABEL: func.func @shared
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<8x8xf32> {cleave.param = "w"}
// CHECK: linalg.generic {{.*}} ins(%[[W2]] : tensor<8x8xf32>) outs(%{{.*}} : tensor<8x8xbf16>)
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x8xbf16>, tensor<8x8xbf16>)
// CHECK: linalg.matmul indexing_maps = {{.*}} ins(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>)
func.func @shared(%x: tensor<8x8xf32>, %w: tensor<8x8xf32> {cleave.param = "w"}) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %y = linalg.matmul ins(%x, %w : tensor<8x8xf32>, tensor<8x8xf32>)
                     outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.add ins(%w, %x : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>,
                                      affine_map<(m, n, k) -> (k, n)>,
                                      affine_map<(m, n, k) -> (m, n)>]
                     ins(%x, %x : tensor<8x8xf32>, tensor<8x8xf32>)
                     outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y, %s, %t : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// An operand reshaped from an activation: the source is truncated and the
// reshape repeated, so that fusion can fold the truncation into the source's
// producer.
// CHECK-LABEL: func.func @reshaped
// CHECK-SAME: %[[RX:[a-z0-9]+]]: tensor<2x4x8xf32>
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[RX]] : tensor<2x4x8xf32>) outs(%{{.*}} : tensor<2x4x8xbf16>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0, 1], [2]] : tensor<2x4x8xbf16> into tensor<8x8xbf16>
// CHECK: linalg.matmul ins(%[[C]], %{{.*}} : tensor<8x8xbf16>, tensor<8x8xbf16>)
func.func @reshaped(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32> {cleave.param = "w"}) -> tensor<8x8xf32> {
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %y = linalg.matmul ins(%c, %w : tensor<8x8xf32>, tensor<8x8xf32>)
                     outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// Attention's head split: an operand transposed (and reshaped) from an
// activation. Rounding commutes with moving elements, so the activation is
// truncated and the transposes and reshapes are repeated on 16-bit values:
// the transposes then fold into the GEMM that reads them. The float32
// transposes are gone.
// CHECK-LABEL: func.func @transposed
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<16x64xf32>, %[[K:[a-z0-9]+]]: tensor<16x64xf32>
// CHECK-DAG: %[[QB:.*]] = linalg.generic {{.*}} ins(%[[Q]] : tensor<16x64xf32>) outs(%{{.*}} : tensor<16x64xbf16>)
// CHECK-DAG: %[[KB:.*]] = linalg.generic {{.*}} ins(%[[K]] : tensor<16x64xf32>) outs(%{{.*}} : tensor<16x64xbf16>)
// CHECK-DAG: %[[QE:.*]] = tensor.expand_shape %[[QB]] {{.*}} into tensor<16x4x16xbf16>
// CHECK-DAG: %[[KE:.*]] = tensor.expand_shape %[[KB]] {{.*}} into tensor<16x4x16xbf16>
// CHECK-DAG: %[[QT:.*]] = linalg.transpose ins(%[[QE]] : tensor<16x4x16xbf16>) outs(%{{.*}} : tensor<4x16x16xbf16>) permutation = [1, 0, 2]
// CHECK-DAG: %[[KT:.*]] = linalg.transpose ins(%[[KE]] : tensor<16x4x16xbf16>) outs(%{{.*}} : tensor<4x16x16xbf16>) permutation = [1, 0, 2]
// CHECK-DAG: %[[KTT:.*]] = linalg.transpose ins(%[[KT]] : tensor<4x16x16xbf16>) outs(%{{.*}} : tensor<4x16x16xbf16>) permutation = [0, 2, 1]
// CHECK: linalg.batch_matmul ins(%[[QT]], %[[KTT]] : tensor<4x16x16xbf16>, tensor<4x16x16xbf16>)
// No function here keeps a float32 transpose (only @transposed and @scaled
// have any).
// NO-F32-TRANSPOSE-NOT: linalg.transpose ins({{.*}}xf32>)
func.func @transposed(%q: tensor<16x64xf32>, %k: tensor<16x64xf32>) -> tensor<4x16x16xf32> {
  %qe = tensor.expand_shape %q [[0], [1, 2]] output_shape [16, 4, 16] : tensor<16x64xf32> into tensor<16x4x16xf32>
  %ke = tensor.expand_shape %k [[0], [1, 2]] output_shape [16, 4, 16] : tensor<16x64xf32> into tensor<16x4x16xf32>
  %e = tensor.empty() : tensor<4x16x16xf32>
  %qt = linalg.transpose ins(%qe : tensor<16x4x16xf32>) outs(%e : tensor<4x16x16xf32>) permutation = [1, 0, 2]
  %kt = linalg.transpose ins(%ke : tensor<16x4x16xf32>) outs(%e : tensor<4x16x16xf32>) permutation = [1, 0, 2]
  %ktt = linalg.transpose ins(%kt : tensor<4x16x16xf32>) outs(%e : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %s = linalg.batch_matmul ins(%qt, %ktt : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
                           outs(%e : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  return %s : tensor<4x16x16xf32>
}

// PyTorch's attention scales Q and K after the head split (by the fourth
// root of the head size each, as a scalar input). The scale moves elements
// no more than the transposes do: each activation is scaled and truncated
// in one op at its source (so every element is still round(x * c)), and the
// transposes and reshapes are repeated on 16-bit values. No float32 scale
// or transpose is left.
// CHECK-LABEL: func.func @scaled
// CHECK-SAME: %[[SQ:[a-z0-9]+]]: tensor<16x64xf32>, %[[SK:[a-z0-9]+]]: tensor<16x64xf32>
// CHECK-DAG: %[[SQB:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<16x64xf32>) outs(%{{.*}} : tensor<16x64xbf16>)
// CHECK-DAG: %[[SKB:.*]] = linalg.generic {{.*}} ins(%[[SK]] : tensor<16x64xf32>) outs(%{{.*}} : tensor<16x64xbf16>)
// CHECK-DAG: %[[SQE:.*]] = tensor.expand_shape %[[SQB]] {{.*}} into tensor<16x4x16xbf16>
// CHECK-DAG: %[[SQT:.*]] = linalg.transpose ins(%[[SQE]] : tensor<16x4x16xbf16>)
// CHECK-DAG: %[[SKE:.*]] = tensor.expand_shape %[[SKB]] {{.*}} into tensor<16x4x16xbf16>
// CHECK-DAG: %[[SKT:.*]] = linalg.transpose ins(%[[SKE]] : tensor<16x4x16xbf16>)
// CHECK-DAG: %[[SKTT:.*]] = linalg.transpose ins(%[[SKT]] : tensor<4x16x16xbf16>)
// CHECK: linalg.batch_matmul ins(%[[SQT]], %[[SKTT]] : tensor<4x16x16xbf16>, tensor<4x16x16xbf16>)
// SCALED-LABEL: func.func @scaled
// SCALED: linalg.generic
// SCALED-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: bf16):
// SCALED-NEXT: %[[C:.*]] = arith.constant 0.353553{{[0-9]*}} : f32
// SCALED-NEXT: %[[M:.*]] = arith.mulf %[[X]], %[[C]] : f32
// SCALED-NEXT: arith.truncf %[[M]] : f32 to bf16
// SCALED-NOT: linalg.generic {{.*}} outs({{.*}}x16xf32>)
// SCALED: linalg.batch_matmul
#scalar = affine_map<(h, t, c) -> ()>
#id3 = affine_map<(h, t, c) -> (h, t, c)>
func.func @scaled(%q: tensor<16x64xf32>, %k: tensor<16x64xf32>) -> tensor<4x16x16xf32> {
  %c = arith.constant dense<0.353553385> : tensor<1xf32>
  %cs = tensor.collapse_shape %c [] : tensor<1xf32> into tensor<f32>
  %qe = tensor.expand_shape %q [[0], [1, 2]] output_shape [16, 4, 16] : tensor<16x64xf32> into tensor<16x4x16xf32>
  %ke = tensor.expand_shape %k [[0], [1, 2]] output_shape [16, 4, 16] : tensor<16x64xf32> into tensor<16x4x16xf32>
  %e = tensor.empty() : tensor<4x16x16xf32>
  %qt = linalg.transpose ins(%qe : tensor<16x4x16xf32>) outs(%e : tensor<4x16x16xf32>) permutation = [1, 0, 2]
  %kt = linalg.transpose ins(%ke : tensor<16x4x16xf32>) outs(%e : tensor<4x16x16xf32>) permutation = [1, 0, 2]
  %ktt = linalg.transpose ins(%kt : tensor<4x16x16xf32>) outs(%e : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %qs = linalg.generic {indexing_maps = [#id3, #scalar, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%qt, %cs : tensor<4x16x16xf32>, tensor<f32>) outs(%e : tensor<4x16x16xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %m = arith.mulf %x, %s : f32
    linalg.yield %m : f32
  } -> tensor<4x16x16xf32>
  %ks = linalg.generic {indexing_maps = [#id3, #scalar, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ktt, %cs : tensor<4x16x16xf32>, tensor<f32>) outs(%e : tensor<4x16x16xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %m = arith.mulf %x, %s : f32
    linalg.yield %m : f32
  } -> tensor<4x16x16xf32>
  %s = linalg.batch_matmul ins(%qs, %ks : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
                           outs(%e : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  return %s : tensor<4x16x16xf32>
}

// Grouped-query attention repeats each K head for its query heads (a
// broadcast): the K head is truncated once, before the repetition, which
// is repeated on 16-bit values.
// CHECK-LABEL: func.func @repeated
// CHECK-SAME: %[[RQ:[a-z0-9]+]]: tensor<4x16x16xf32>, %[[RK:[a-z0-9]+]]: tensor<2x16x16xf32>
// CHECK-DAG: %[[RKB:.*]] = linalg.generic {{.*}} ins(%[[RK]] : tensor<2x16x16xf32>) outs(%{{.*}} : tensor<2x16x16xbf16>)
// CHECK-DAG: %[[RKR:.*]] = linalg.broadcast ins(%[[RKB]] : tensor<2x16x16xbf16>) outs(%{{.*}} : tensor<2x2x16x16xbf16>) dimensions = [1]
// CHECK-DAG: %[[RKC:.*]] = tensor.collapse_shape %[[RKR]] {{.*}} into tensor<4x16x16xbf16>
// CHECK: linalg.batch_matmul ins(%{{.*}}, %[[RKC]] : tensor<4x16x16xbf16>, tensor<4x16x16xbf16>)
// CHECK-NOT: linalg.broadcast ins({{.*}}xf32>)
// CHECK: return
func.func @repeated(%q: tensor<4x16x16xf32>, %k: tensor<2x16x16xf32>) -> tensor<4x16x16xf32> {
  %e = tensor.empty() : tensor<4x16x16xf32>
  %r = tensor.empty() : tensor<2x2x16x16xf32>
  %kr = linalg.broadcast ins(%k : tensor<2x16x16xf32>) outs(%r : tensor<2x2x16x16xf32>) dimensions = [1]
  %kc = tensor.collapse_shape %kr [[0, 1], [2], [3]] : tensor<2x2x16x16xf32> into tensor<4x16x16xf32>
  %s = linalg.batch_matmul ins(%q, %kc : tensor<4x16x16xf32>, tensor<4x16x16xf32>)
                           outs(%e : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  return %s : tensor<4x16x16xf32>
}

// A batched GEMM as import writes one with several batch dimensions (a
// generic over (b, h, m, n, k)): its operands are truncated, and its body
// widens them back to float32 before the multiply-add into float32.
// CHECK-LABEL: func.func @stacked
// CHECK-SAME: %[[SQ:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[SK:[a-z0-9]+]]: tensor<2x4x16x8xf32>
// CHECK-DAG: %[[SQB:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<2x4x8x16xf32>) outs(%{{.*}} : tensor<2x4x8x16xbf16>)
// CHECK-DAG: %[[SKB:.*]] = linalg.generic {{.*}} ins(%[[SK]] : tensor<2x4x16x8xf32>) outs(%{{.*}} : tensor<2x4x16x8xbf16>)
// CHECK: linalg.generic {{.*}} ins(%[[SQB]], %[[SKB]] : tensor<2x4x8x16xbf16>, tensor<2x4x16x8xbf16>) outs(%{{.*}} : tensor<2x4x8x8xf32>)
// CHECK-NEXT: ^bb0(%[[IA:.*]]: bf16, %[[IB:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK-DAG: %[[WA:.*]] = arith.extf %[[IA]] : bf16 to f32
// CHECK-DAG: %[[WB:.*]] = arith.extf %[[IB]] : bf16 to f32
// CHECK: %[[P:.*]] = arith.mulf %[[WA]], %[[WB]] : f32
// CHECK: arith.addf %[[ACC]], %[[P]] : f32
func.func @stacked(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x8x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>,
                                        affine_map<(b, h, m, n, k) -> (b, h, k, n)>,
                                        affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%acc : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %c, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}
