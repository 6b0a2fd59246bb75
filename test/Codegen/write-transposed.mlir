// RUN: cleave-opt %s --split-input-file --cleave-write-transposed | FileCheck %s

// Tests that attention's head merge, a permuted copy of the second batched
// GEMM's result, becomes the GEMM (and its zero fill, moved down to it)
// writing the merged buffer through a transposed, collapsed view: batch
// stride 64 (the head size), row stride 768 (the width). The copy, the
// result's allocation and its deallocation go; the destination, allocated
// after the GEMM, is allocated before it.
// CHECK-LABEL: func.func @head_merge
// CHECK: %[[DEST:.*]] = memref.alloc() : memref<1x16x12x64xf32>
// CHECK: %[[T:.*]] = memref.transpose %[[DEST]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<1x16x12x64xf32> to memref<1x12x16x64xf32, strided<[12288, 64, 768, 1]>>
// CHECK: %[[W:.*]] = memref.collapse_shape %[[T]] {{\[}}[0, 1], [2], [3]] : memref<1x12x16x64xf32, strided<[12288, 64, 768, 1]>> into memref<12x16x64xf32, strided<[64, 768, 1]>>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[W]] :
// CHECK-NEXT: linalg.batch_matmul ins(%arg0, %arg1 : memref<12x16x16xf32>, memref<12x16x64xf32>) outs(%[[W]] :
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref.dealloc
// CHECK: return %[[DEST]]
#to = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @head_merge(%p: memref<12x16x16xf32>, %v: memref<12x16x64xf32>, %other: memref<4xf32>) -> memref<1x16x12x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<12x16x64xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<12x16x64xf32>)
  linalg.fill ins(%zero : f32) outs(%other : memref<4xf32>)
  linalg.batch_matmul ins(%p, %v : memref<12x16x16xf32>, memref<12x16x64xf32>) outs(%c : memref<12x16x64xf32>)
  %e = memref.expand_shape %c [[0, 1], [2], [3]] output_shape [1, 12, 16, 64] : memref<12x16x64xf32> into memref<1x12x16x64xf32>
  %t = memref.alloc() : memref<1x16x12x64xf32>
  linalg.generic {indexing_maps = [#to, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%e : memref<1x12x16x64xf32>) outs(%t : memref<1x16x12x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %c : memref<12x16x64xf32>
  return %t : memref<1x16x12x64xf32>
}

// -----

// Tests that the fold does not happen when something reads the GEMM's result
// besides the copy, or when the destination is read between the GEMM and the
// copy (the GEMM would overwrite it too early).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: memref.transpose
// CHECK: linalg.generic
// CHECK: linalg.generic
#to2 = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#id2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @kept(%a: memref<4x8x8xf32>, %b: memref<4x8x8xf32>, %t: memref<8x4x8xf32>, %u: memref<8x4x8xf32>, %s: memref<8x4x8xf32>, %s2: memref<4x8x8xf32>) {
  %c = memref.alloc() : memref<4x8x8xf32>
  linalg.batch_matmul ins(%a, %b : memref<4x8x8xf32>, memref<4x8x8xf32>) outs(%c : memref<4x8x8xf32>)
  memref.copy %t, %s : memref<8x4x8xf32> to memref<8x4x8xf32>
  linalg.generic {indexing_maps = [#to2, #id2], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : memref<4x8x8xf32>) outs(%t : memref<8x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  %d = memref.alloc() : memref<4x8x8xf32>
  linalg.batch_matmul ins(%a, %b : memref<4x8x8xf32>, memref<4x8x8xf32>) outs(%d : memref<4x8x8xf32>)
  linalg.generic {indexing_maps = [#to2, #id2], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%d : memref<4x8x8xf32>) outs(%u : memref<8x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.copy %d, %s2 : memref<4x8x8xf32> to memref<4x8x8xf32>
  return
}

// -----

// Tests the head merge after attention's second GEMM, reading V in place,
// has become a generic over (batch, heads, m, n, k) with a 4-D result (two
// sequences, so batch and heads could not be collapsed into one dimension):
// the GEMM writes the merged buffer through the transposed view alone.
// CHECK-LABEL: func.func @head_merge_two_sequences
// CHECK: %[[DEST:.*]] = memref.alloc() : memref<2x16x12x64xf32>
// CHECK: %[[T:.*]] = memref.transpose %[[DEST]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK-NOT: memref.collapse_shape
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[T]] :
// CHECK-NEXT: linalg.generic {{.*}} ins(%arg0, %arg1 : memref<2x12x16x16xf32>, memref<2x16x12x64xf32>) outs(%[[T]] :
// CHECK: return %[[DEST]]
#to2 = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @head_merge_two_sequences(%p: memref<2x12x16x16xf32>, %v: memref<2x16x12x64xf32>) -> memref<2x16x12x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<2x12x16x64xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<2x12x16x64xf32>)
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>,
                                   affine_map<(b, h, m, n, k) -> (b, k, h, n)>,
                                   affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x12x16x16xf32>, memref<2x16x12x64xf32>) outs(%c : memref<2x12x16x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %t = memref.alloc() : memref<2x16x12x64xf32>
  linalg.generic {indexing_maps = [#to2, #id2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c : memref<2x12x16x64xf32>) outs(%t : memref<2x16x12x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %c : memref<2x12x16x64xf32>
  return %t : memref<2x16x12x64xf32>
}

// -----

// Tests the head merge when the GEMM writes its buffer through one reshape
// and the copy reads it through another (grouped-query attention's GEMM has
// (kv heads, repeats) where the copy has heads): what the GEMM writes is an
// expansion of what the copy reads, so the transposed destination is
// expanded straight into the GEMM's view.
// CHECK-LABEL: func.func @head_merge_through_reshapes
// CHECK: %[[DEST:.*]] = memref.alloc() : memref<1x16x4x16xf32>
// CHECK: %[[T:.*]] = memref.transpose %[[DEST]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK: %[[E:.*]] = memref.expand_shape %[[T]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 16, 16]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[E]] :
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[E]] :
// CHECK-NOT: linalg.generic
// CHECK: return %[[DEST]]
func.func @head_merge_through_reshapes(%p: memref<1x2x2x16x16xf32>, %v: memref<1x16x2x16xf32>) -> memref<1x16x4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x16x16xf32>
  %g = memref.expand_shape %c [[0, 1, 2], [3], [4]] output_shape [1, 2, 2, 16, 16] : memref<4x16x16xf32> into memref<1x2x2x16x16xf32>
  linalg.fill ins(%zero : f32) outs(%g : memref<1x2x2x16x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(s, g, r, m, n, k) -> (s, g, r, m, k)>,
                                   affine_map<(s, g, r, m, n, k) -> (s, k, g, n)>,
                                   affine_map<(s, g, r, m, n, k) -> (s, g, r, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<1x2x2x16x16xf32>, memref<1x16x2x16xf32>) outs(%g : memref<1x2x2x16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %r = memref.expand_shape %c [[0, 1], [2], [3]] output_shape [1, 4, 16, 16] : memref<4x16x16xf32> into memref<1x4x16x16xf32>
  %t = memref.alloc() : memref<1x16x4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>,
                                   affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%r : memref<1x4x16x16xf32>) outs(%t : memref<1x16x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %c : memref<4x16x16xf32>
  return %t : memref<1x16x4x16xf32>
}

// -----

// Tests the head merge under --precision bf16: the GEMM's float32 result is
// rounded to bf16 by an elementwise op, and the rounded values are what the
// merge copies. The rounding writes the merged buffer through the transposed
// view (cleave-linalg-to-blas then folds it into the GEMM); the copy and
// the rounded buffer go.
// (The rounded buffer's allocation and deallocation would end their lines
// with its plain type.)
// CHECK-LABEL: func.func @rounded_head_merge
// CHECK-NOT: memref<12x16x64xbf16>{{$}}
// CHECK: %[[DEST:.*]] = memref.alloc() : memref<1x16x12x64xbf16>
// CHECK: %[[T:.*]] = memref.transpose %[[DEST]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK: %[[W:.*]] = memref.collapse_shape %[[T]] {{\[}}[0, 1], [2], [3]] : {{.*}} into memref<12x16x64xbf16, strided<[64, 768, 1]>>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<12x16x64xf32>) outs(%[[W]] :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.truncf
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref<12x16x64xbf16>{{$}}
// CHECK: return %[[DEST]]
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @rounded_head_merge(%p: memref<12x16x16xbf16>, %v: memref<12x16x64xbf16>) -> memref<1x16x12x64xbf16> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<12x16x64xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<12x16x64xf32>)
  linalg.batch_matmul ins(%p, %v : memref<12x16x16xbf16>, memref<12x16x64xbf16>) outs(%c : memref<12x16x64xf32>)
  %r = memref.alloc() : memref<12x16x64xbf16>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : memref<12x16x64xf32>) outs(%r : memref<12x16x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  memref.dealloc %c : memref<12x16x64xf32>
  %e = memref.expand_shape %r [[0, 1], [2], [3]] output_shape [1, 12, 16, 64] : memref<12x16x64xbf16> into memref<1x12x16x64xbf16>
  %t = memref.alloc() : memref<1x16x12x64xbf16>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>,
                                   affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%e : memref<1x12x16x64xbf16>) outs(%t : memref<1x16x12x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  }
  memref.dealloc %r : memref<12x16x64xbf16>
  return %t : memref<1x16x12x64xbf16>
}

// -----

// Tests that an elementwise writer that reads its own output (an
// accumulation) keeps its buffer: the destination does not hold what it
// would read.
// CHECK-LABEL: func.func @accumulating_writer
// CHECK-NOT: memref.transpose
// CHECK: linalg.generic
// CHECK: linalg.generic
#id4 = affine_map<(d0, d1) -> (d0, d1)>
#to4 = affine_map<(d0, d1) -> (d1, d0)>
func.func @accumulating_writer(%a: memref<4x8xf32>, %t: memref<8x4xf32>) {
  %c = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#to4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x8xf32>) outs(%t : memref<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %c : memref<4x8xf32>
  return
}

// -----

// Tests the head merge of grouped-query attention at a batch of 2: the GEMM
// writes its (batch * heads) buffer through a (batch, kv heads, group) view,
// the copy reads it through a (batch, heads) view. The transposed
// destination, strides (1024, 16, 64, 1), cannot collapse back to the
// buffer's batch * heads, but it expands straight into what the GEMM writes
// (heads split into kv heads and group: strides 32 and 16).
// CHECK-LABEL: func.func @grouped_head_merge
// CHECK: %[[DEST:.*]] = memref.alloc() : memref<2x16x4x16xf32>
// CHECK: %[[T:.*]] = memref.transpose %[[DEST]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<2x16x4x16xf32> to memref<2x4x16x16xf32, strided<[1024, 16, 64, 1]>>
// CHECK: %[[W:.*]] = memref.expand_shape %[[T]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 16, 16] : memref<2x4x16x16xf32, strided<[1024, 16, 64, 1]>> into memref<2x2x2x16x16xf32, strided<[1024, 32, 16, 64, 1]>>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[W]] :
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[W]] :
// CHECK-NOT: linalg.generic
// CHECK: return %[[DEST]]
#p5 = affine_map<(b, g, r, m, n, k) -> (b, g, r, m, k)>
#v5 = affine_map<(b, g, r, m, n, k) -> (b, g, k, n)>
#c5 = affine_map<(b, g, r, m, n, k) -> (b, g, r, m, n)>
#to4 = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @grouped_head_merge(%p: memref<2x2x2x16x16xf32>, %v: memref<2x2x16x16xf32>) -> memref<2x16x4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x16x16xf32>
  %w = memref.expand_shape %c [[0, 1, 2], [3], [4]] output_shape [2, 2, 2, 16, 16] : memref<8x16x16xf32> into memref<2x2x2x16x16xf32>
  linalg.fill ins(%zero : f32) outs(%w : memref<2x2x2x16x16xf32>)
  linalg.generic {indexing_maps = [#p5, #v5, #c5],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x2x2x16x16xf32>, memref<2x2x16x16xf32>) outs(%w : memref<2x2x2x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  %r = memref.expand_shape %c [[0, 1], [2], [3]] output_shape [2, 4, 16, 16] : memref<8x16x16xf32> into memref<2x4x16x16xf32>
  %t = memref.alloc() : memref<2x16x4x16xf32>
  linalg.generic {indexing_maps = [#to4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%r : memref<2x4x16x16xf32>) outs(%t : memref<2x16x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %c : memref<8x16x16xf32>
  return %t : memref<2x16x4x16xf32>
}

// -----

// Tests a plain linalg.copy, as a concatenation bufferizes: partial rotary
// embedding's rotated part (an elementwise op over a (2, 2) view of its 4
// columns) copied into the first 4 columns of the concatenation. The op
// writes that part of the result through its own view instead, and the copy
// goes; the copy of the part passed through stays.
// CHECK-LABEL: func.func @concatenated_part
// CHECK: %[[CAT:.*]] = memref.alloc() : memref<8x16xf32>
// CHECK: %[[PART:.*]] = memref.subview %[[CAT]][0, 0] [8, 4] [1, 1]
// CHECK: %[[W:.*]] = memref.expand_shape %[[PART]] {{\[}}[0], [1, 2]] output_shape [8, 2, 2] : memref<8x4xf32, strided<[16, 1]>> into memref<8x2x2xf32, strided<[16, 2, 1]>>
// CHECK: linalg.generic {{.*}} outs(%[[W]] :
// CHECK: arith.negf
// CHECK: %[[REST:.*]] = memref.subview %[[CAT]][0, 4] [8, 12] [1, 1]
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<8x12xf32, strided<[16, 1], offset: 4>>) outs(%[[REST]] :
// CHECK-NOT: linalg.generic
// CHECK: return %[[CAT]]
#e3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @concatenated_part(%rot: memref<8x2x2xf32>, %pass: memref<8x12xf32, strided<[16, 1], offset: 4>>) -> memref<8x16xf32> {
  %r = memref.alloc() : memref<8x2x2xf32>
  linalg.generic {indexing_maps = [#e3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%rot : memref<8x2x2xf32>) outs(%r : memref<8x2x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  %rc = memref.collapse_shape %r [[0], [1, 2]] : memref<8x2x2xf32> into memref<8x4xf32>
  %cat = memref.alloc() : memref<8x16xf32>
  %first = memref.subview %cat[0, 0] [8, 4] [1, 1] : memref<8x16xf32> to memref<8x4xf32, strided<[16, 1]>>
  linalg.copy ins(%rc : memref<8x4xf32>) outs(%first : memref<8x4xf32, strided<[16, 1]>>)
  memref.dealloc %r : memref<8x2x2xf32>
  %rest = memref.subview %cat[0, 4] [8, 12] [1, 1] : memref<8x16xf32> to memref<8x12xf32, strided<[16, 1], offset: 4>>
  linalg.copy ins(%pass : memref<8x12xf32, strided<[16, 1], offset: 4>>) outs(%rest : memref<8x12xf32, strided<[16, 1], offset: 4>>)
  return %cat : memref<8x16xf32>
}

// -----

// Tests that a copy into a part at an offset computed after the writer (a
// microbatch's rows) stays: the part cannot be made before the writer.
// CHECK-LABEL: func.func @offset_after_writer
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : memref<4x8xf32>)
// CHECK: %[[AT:.*]] = arith.muli
// CHECK: %[[ROWS:.*]] = memref.subview %arg2[%[[AT]], 0] [4, 8] [1, 1]
// CHECK: linalg.generic {{.*}} outs(%[[ROWS]] :
#e2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @offset_after_writer(%x: memref<4x8xf32>, %i: index, %out: memref<16x8xf32>) {
  %r = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#e2, #e2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%r : memref<4x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  %c4 = arith.constant 4 : index
  %at = arith.muli %i, %c4 : index
  %rows = memref.subview %out[%at, 0] [4, 8] [1, 1] : memref<16x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  linalg.copy ins(%r : memref<4x8xf32>) outs(%rows : memref<4x8xf32, strided<[8, 1], offset: ?>>)
  memref.dealloc %r : memref<4x8xf32>
  return
}
