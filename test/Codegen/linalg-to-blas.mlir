// RUN: cleave-opt %s --cleave-linalg-to-blas --canonicalize --cse | FileCheck %s

// The call's arguments (Abi.h): outer, batch, m, n, k; A's base, offset,
// outer, batch, row and column strides; B's the same; C's base, offset,
// outer and batch strides and row stride; the bias's base and offset (0, 0
// for none); beta.

// Tests that a float32 GEMM after a zero fill becomes one runtime call with
// beta = 0 (the fill is dropped), A and B row-major.
// CHECK: func.func private @cleave_rt_sgemm(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, f32)
// CHECK-LABEL: func.func @gemm
// CHECK-NOT: linalg.fill
// CHECK: memref.extract_strided_metadata %arg0
// CHECK-NEXT: %[[A:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: memref.extract_strided_metadata %arg1
// CHECK-NEXT: %[[B:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: memref.extract_strided_metadata %arg2
// CHECK-NEXT: %[[C:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: call @cleave_rt_sgemm(%c1, %c1, %c4, %c16, %c8, %[[A]], %c0, %c0, %c0, %c8, %c1, %[[B]], %c0, %c0, %c0, %c16, %c1, %[[C]], %c0, %c0, %c0, %c16, %c0, %c0, %cst)
// CHECK-NOT: linalg.matmul
func.func @gemm(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// Tests that a zero fill further up the block folds too when nothing
// between touches the buffer, and stays when something reads it (through a
// view) in between.
// CHECK-LABEL: func.func @fill_earlier
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT: linalg.fill ins(%{{.*}} outs(%arg2
// CHECK: call @cleave_rt_sgemm({{.*}}, %[[ZERO]])
func.func @fill_earlier(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  %other = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%other : memref<4x8xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  memref.dealloc %other : memref<4x8xf32>
  return
}

// CHECK-LABEL: func.func @fill_read_between
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.fill
// CHECK: memref.copy
// CHECK: call @cleave_rt_sgemm({{.*}}, %[[ONE]])
func.func @fill_read_between(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %d: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  %flat = memref.collapse_shape %c [[0, 1]] : memref<4x16xf32> into memref<64xf32>
  memref.copy %flat, %d : memref<64xf32> to memref<64xf32>
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// Tests that a batch_matmul is one strided batch (outer 1, batch 2), beta 1
// without a fill.
// CHECK-LABEL: func.func @batched
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @cleave_rt_sgemm(%c1, %c2, %c4, %c16, %c8, %{{.*}}, %c0, %c0, %c32, %c8, %c1, %{{.*}}, %c0, %c0, %c128, %c16, %c1, %{{.*}}, %c0, %c0, %c64, %c16, %c0, %c0, %[[ONE]])
func.func @batched(%a: memref<2x4x8xf32>, %b: memref<2x8x16xf32>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf32>, memref<2x8x16xf32>) outs(%c : memref<2x4x16xf32>)
  return
}

// Tests attention's first GEMM reading Q and K in place from the
// projections' (batch, tokens, heads, head size) buffers: a GEMM generic
// over (b, h, m, n, k). b and h do not merge (a token's heads are 64 apart,
// a batch's 12288), so b is the outer loop (2) and h the strided batch
// (12); A is row-major (rows 768 apart), B = K^T is read transposed (row
// stride 1, columns 768 apart); C is packed.
// CHECK-LABEL: func.func @scores_in_place
// CHECK: call @cleave_rt_sgemm(%c2, %c12, %c16, %c16, %c64, %{{.*}}, %c0, %c12288, %c64, %c768, %c1, %{{.*}}, %c0, %c12288, %c64, %c1, %c768, %{{.*}}, %c0, %c3072, %c256, %c16, %c0, %c0, %{{.*}})
// CHECK-NOT: linalg.generic
func.func @scores_in_place(%q: memref<2x16x12x64xf32>, %k: memref<2x16x12x64xf32>, %s: memref<2x12x16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, m, h, k)>,
                                   affine_map<(b, h, m, n, k) -> (b, n, h, k)>,
                                   affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x16x12x64xf32>, memref<2x16x12x64xf32>) outs(%s : memref<2x12x16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// Tests grouped-query attention's second GEMM, with the K/V head
// repetition folded in: P is (seq, kv head, repeat, m, k) and V, read in
// place as (seq, token, kv head, head size), has no repeat dimension. The
// repeat loop is a second M loop, so a batch loop where B's stride is 0;
// sequences, KV heads and repeats do not merge, so the call takes KV heads
// (outer, V stride 16) and repeats (batch, V stride 0), and an scf.for
// around it the sequences, moving each operand's offset by its stride (P's
// and the result's are the same, 1024, so CSE leaves one).
// CHECK-LABEL: func.func @grouped_query
// CHECK: scf.for %[[S:.*]] = %c0 to %c3 step %c1
// CHECK-NEXT: %[[OA:.*]] = arith.muli %[[S]], %c1024
// CHECK-NEXT: %[[OB:.*]] = arith.muli %[[S]], %c512
// CHECK-NEXT: call @cleave_rt_sgemm(%c2, %c2, %c16, %c16, %c16, %{{.*}}, %[[OA]], %c512, %c256, %c16, %c1, %{{.*}}, %[[OB]], %c16, %c0, %c32, %c1, %{{.*}}, %[[OA]], %c512, %c256, %c16, %c0, %c0,
// CHECK-NOT: linalg.generic
func.func @grouped_query(%p: memref<3x2x2x16x16xf32>, %v: memref<3x16x2x16xf32>, %o: memref<3x2x2x16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(s, g, r, m, n, k) -> (s, g, r, m, k)>,
                                   affine_map<(s, g, r, m, n, k) -> (s, k, g, n)>,
                                   affine_map<(s, g, r, m, n, k) -> (s, g, r, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<3x2x2x16x16xf32>, memref<3x16x2x16xf32>) outs(%o : memref<3x2x2x16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}

// Tests that a bias broadcast over the result's rows folds into the call
// (its base and offset; beta 0) and the broadcast goes.
// CHECK-LABEL: func.func @bias
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT: linalg.generic
// CHECK: memref.extract_strided_metadata %arg3
// CHECK-NEXT: %[[BIAS:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: call @cleave_rt_sgemm(%c1, %c1, %c4, %c16, %c8, {{.*}}, %c16, %[[BIAS]], %c0, %[[ZERO]])
func.func @bias(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %v: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// Tests that a bias freed between its broadcast and the GEMM (a bias
// computed at run time, a dequantized one) is not read by the call: the
// broadcast stays and the GEMM adds to it (beta 1, no bias). Reading it
// there read freed memory (BERT quantized by quantize_static at tp=2).
// CHECK-LABEL: func.func @freed_bias
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.generic
// CHECK: memref.dealloc
// CHECK: call @cleave_rt_sgemm({{.*}}, %c0, %c0, %[[ONE]])
func.func @freed_bias(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %q: memref<16xf32>) {
  %v = memref.alloc() : memref<16xf32>
  memref.copy %q, %v : memref<16xf32> to memref<16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  memref.dealloc %v : memref<16xf32>
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// Tests that a vector broadcast along the columns (one value per row) is
// no bias: it stays, and the GEMM adds to it (beta 1, no bias).
// CHECK-LABEL: func.func @row_vector
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.generic
// CHECK: call @cleave_rt_sgemm({{.*}}, %c0, %c0, %[[ONE]])
func.func @row_vector(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %v: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<4xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// Tests what stays for the loop lowering: an operand with no unit stride
// (BLAS cannot read it), a generic that multiplies and adds but exponentiates
// first (no GEMM body), and a float16 GEMM.
// CHECK-LABEL: func.func @not_blas
// CHECK-NOT: call
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK: linalg.matmul
func.func @not_blas(%a: memref<4x8xf32, strided<[16, 2]>>, %b: memref<8x16xf32>, %c: memref<4x16xf32>,
                    %x: memref<4x8xf32>, %h: memref<4x8xf16>, %hb: memref<8x16xf16>, %hc: memref<4x16xf16>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32, strided<[16, 2]>>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%u: f32, %y: f32, %acc: f32):
    %e = math.exp %u : f32
    %p = arith.mulf %e, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.matmul ins(%h, %hb : memref<4x8xf16>, memref<8x16xf16>) outs(%hc : memref<4x16xf16>)
  return
}

// 16-bit operands into a float32 result (--precision) call the runtime's
// GEMM for that operand type; on the CUDA target, its cuBLASLt twin.
// RUN: cleave-opt %s --cleave-linalg-to-blas=target=cuda | FileCheck %s --check-prefix=CUDA
// CHECK-LABEL: func.func @bf16_operands
// CHECK: call @cleave_rt_gemm_bf16(
// CHECK-NOT: linalg.matmul
// CUDA-LABEL: func.func @bf16_operands
// CUDA: call @cleave_rt_cuda_gemm_bf16(
func.func @bf16_operands(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  return
}

// CHECK-LABEL: func.func @f16_operands_batched
// CHECK: call @cleave_rt_gemm_f16(%c1, %c2,
// CUDA-LABEL: func.func @f16_operands_batched
// CUDA: call @cleave_rt_cuda_gemm_f16(
func.func @f16_operands_batched(%a: memref<2x4x8xf16>, %b: memref<2x8x16xf16>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf16>, memref<2x8x16xf16>) outs(%c : memref<2x4x16xf32>)
  return
}

// Operands of two different 16-bit types have no runtime GEMM.
// CHECK-LABEL: func.func @mixed_operands
// CHECK: linalg.matmul
func.func @mixed_operands(%a: memref<4x8xbf16>, %b: memref<8x16xf16>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xf16>) outs(%c : memref<4x16xf32>)
  return
}

// Tests that a 16-bit GEMM whose float32 result only a rounding to bf16
// reads (the head merge under --precision bf16) calls the _rounded entry
// writing the rounded buffer directly: C is the bf16 buffer, seen in the
// GEMM's shape through the rounding's reshape (ldc 16), beta is 0 and there
// is no bias; the rounding, the float32 buffer and its zero fill go.
// (Canonicalization puts the constants first; no float32 4 x 16 buffer may
// be anywhere after them. It would also drop a dead buffer by itself, so
// the pass alone is checked too: RUN line below.)
// RUN: cleave-opt %s --cleave-linalg-to-blas | FileCheck %s --check-prefix=ROUNDED-ALONE
// ROUNDED-ALONE-LABEL: func.func @rounded
// ROUNDED-ALONE-NOT: memref<4x16xf32>
// ROUNDED-ALONE: return
// CHECK-LABEL: func.func @rounded
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT: memref<4x16xf32>
// CHECK: %[[DEST:.*]] = memref.alloc() : memref<1x4x16xbf16>
// CHECK-NEXT: %[[VIEW:.*]] = memref.collapse_shape %[[DEST]] {{\[}}[0, 1], [2]] : memref<1x4x16xbf16> into memref<4x16xbf16>
// CHECK-NOT: memref<4x16xf32>
// CHECK: memref.extract_strided_metadata %[[VIEW]]
// CHECK-NEXT: %[[C:.*]] = memref.extract_aligned_pointer_as_index
// CHECK-NOT: memref<4x16xf32>
// CHECK: call @cleave_rt_gemm_bf16_rounded(%c1, %c1, %c4, %c16, %c8, {{.*}}, %[[C]], %c0, %c0, %c0, %c16, %c0, %c0, %[[ZERO]])
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref<4x16xf32>
// CHECK: return %[[DEST]]
// CUDA-LABEL: func.func @rounded
// CUDA: call @cleave_rt_cuda_gemm_bf16_rounded(
func.func @rounded(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>) -> memref<1x4x16xbf16> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  %e = memref.expand_shape %c [[0, 1], [2]] output_shape [1, 4, 16] : memref<4x16xf32> into memref<1x4x16xf32>
  %dest = memref.alloc() : memref<1x4x16xbf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e : memref<1x4x16xf32>) outs(%dest : memref<1x4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %c : memref<4x16xf32>
  return %dest : memref<1x4x16xbf16>
}

// Tests what keeps the float32 result and the rounding: a bias (cuBLASLt
// would round it to 16 bits before adding it), a result something else
// reads too, and a GEMM that adds to its result (beta 1: a 16-bit C cannot
// hold what it adds to).
// CHECK-LABEL: func.func @not_rounded
// CHECK-NOT: _rounded
// CHECK: call @cleave_rt_gemm_bf16(
// CHECK: arith.truncf
// CHECK: call @cleave_rt_gemm_bf16(
// CHECK: arith.truncf
// CHECK: call @cleave_rt_gemm_bf16(
// CHECK: arith.truncf
// CHECK-NOT: _rounded
func.func @not_rounded(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %v: memref<16xf32> {cleave.param = "bias"}, %acc: memref<4x16xf32>,
                       %d1: memref<4x16xbf16>, %d2: memref<4x16xbf16>, %d3: memref<4x16xbf16>, %copy: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x16xf32>) outs(%d1 : memref<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  }
  %c2 = memref.alloc() : memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c2 : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c2 : memref<4x16xf32>) outs(%d2 : memref<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.copy %c2, %copy : memref<4x16xf32> to memref<4x16xf32>
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%acc : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<4x16xf32>) outs(%d3 : memref<4x16xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %c : memref<4x16xf32>
  memref.dealloc %c2 : memref<4x16xf32>
  return
}
