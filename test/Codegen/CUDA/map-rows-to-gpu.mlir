// RUN: cleave-opt %s --split-input-file --cleave-map-rows-to-gpu | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-map-rows-to-gpu=shared-memory=0 | FileCheck %s --check-prefix=GLOBAL
// RUN: cleave-opt %s --split-input-file --cleave-map-rows-to-gpu --canonicalize | FileCheck %s --check-prefix=ROWT

// Tests that a row reduction and the row-wise ops around it (its fill
// before, the centring after, which reads the sums through a view that
// keeps the rows) become one launch of a block per row (4 x 16 = 64), with
// threads for the 32-point rows, a gpu.all_reduce, a gpu.barrier between
// members, and the deallocation that lay between members after the launch.
// The rows the chain writes live in shared memory: the sum (never read
// after the chain, so never stored) and the output row (an argument, so
// stored at the end, after a barrier); the input is read from global
// memory.
// CHECK-LABEL: func.func @centre_rows
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c64{{.*}}) threads(%[[T:[a-z0-9]+]], {{.*}}) in ({{.*}} = %c32{{.*}}) workgroup(%[[SUM:.*]] : memref<1xf32, #gpu.address_space<workgroup>>, %[[ROW:.*]] : memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK: memref.store %{{.*}}, %[[SUM]]
// CHECK: gpu.barrier
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[T]] to %{{.*}} step %{{.*}} iter_args
// CHECK: memref.load %arg0
// CHECK: %[[ALL:.*]] = gpu.all_reduce add %[[PART]] uniform
// CHECK: arith.cmpi eq, %[[T]]
// CHECK: memref.store %{{.*}}, %[[SUM]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[T]] to
// CHECK: memref.load %[[SUM]]
// CHECK: arith.subf
// CHECK: memref.store %{{.*}}, %[[ROW]]
// CHECK: gpu.barrier
// CHECK: scf.for %[[I:.*]] = %[[T]] to
// CHECK: %[[V:.*]] = memref.load %[[ROW]][%[[I]]]
// CHECK: memref.store %[[V]], %arg1[%{{.*}}, %{{.*}}, %[[I]]]
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: memref.dealloc %{{.*}} : memref<4x16x32xf32>
// CHECK-NOT: linalg.generic
// With no shared memory to spare, the members meet in global memory.
// GLOBAL-LABEL: func.func @centre_rows
// GLOBAL: %[[SUM:.*]] = memref.alloc() : memref<4x16xf32>
// GLOBAL: gpu.launch blocks({{.*}}) in ({{.*}} = %c64{{.*}}) threads(%[[T:[a-z0-9]+]], {{.*}}) in ({{.*}} = %c32{{.*}}) {
// GLOBAL: memref.store %{{.*}}, %[[SUM]]
// GLOBAL: gpu.barrier
// GLOBAL: gpu.all_reduce add
// GLOBAL: memref.store %{{.*}}, %[[SUM]]
// GLOBAL: gpu.barrier
// GLOBAL: arith.subf
// GLOBAL: memref.store %{{.*}}, %arg1
// GLOBAL-NEXT: }
// GLOBAL-NEXT: gpu.terminator
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#rows3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#row1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @centre_rows(%x: memref<4x16x32xf32>, %out: memref<4x16x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %scratch = memref.alloc() : memref<4x16x32xf32>
  %sum = memref.alloc() : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%zero : f32) outs(%sum : memref<4x16xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#id3, #rows3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<4x16x32xf32>) outs(%sum : memref<4x16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  memref.dealloc %scratch : memref<4x16x32xf32>
  %sums = memref.expand_shape %sum [[0], [1, 2]] output_shape [4, 16, 1] : memref<4x16xf32> into memref<4x16x1xf32>
  linalg.generic {indexing_maps = [#id3, #row1, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %sums : memref<4x16x32xf32>, memref<4x16x1xf32>) outs(%out : memref<4x16x32xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %s : f32
    linalg.yield %d : f32
  }
  memref.dealloc %sum : memref<4x16xf32>
  return
}

// -----

// Tests that an op reading what the chain wrote from another row (the sums
// in reverse) does not join it: the fill and the sum are one launch, the
// reversed read stays a generic for cleave-map-to-gpu.
// CHECK-LABEL: func.func @other_row
// CHECK: gpu.launch
// CHECK: gpu.all_reduce add
// CHECK: gpu.terminator
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : memref<8x32xf32>, memref<8xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#reversed = affine_map<(d0, d1) -> (7 - d0)>
func.func @other_row(%x: memref<8x32xf32>, %out: memref<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%zero : f32) outs(%sum : memref<8xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x32xf32>) outs(%sum : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #reversed, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<8x32xf32>, memref<8xf32>) outs(%out : memref<8x32xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %s : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// Tests that a reduction over the leading loop (a column sum) seeds no
// chain, and that ops with a GEMM call between them stay apart: nothing is
// launched here.
// CHECK-LABEL: func.func @no_rows
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
// CHECK: call @gemm
// CHECK: linalg.generic
#t = affine_map<(d0, d1) -> (d1, d0)>
#col = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func private @gemm(memref<8xf32>)
func.func @no_rows(%x: memref<8x32xf32>, %cols: memref<32xf32>, %rows: memref<8xf32>) {
  linalg.generic {indexing_maps = [#t, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x32xf32>) outs(%cols : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  call @gemm(%rows) : (memref<8xf32>) -> ()
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x32xf32>) outs(%rows : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Tests that an output row the chain writes only in part (the row sums into
// column 0 of a 8 x 4 argument) is loaded into shared memory before the
// members and stored back whole after them, so the other columns keep what
// they held.
// CHECK-LABEL: func.func @partial_row
// CHECK: gpu.launch {{.*}} workgroup(%[[SUM:.*]] : memref<1xf32, #gpu.address_space<workgroup>>, %[[ROW:.*]] : memref<4xf32, #gpu.address_space<workgroup>>)
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[OLD:.*]] = memref.load %arg1[%{{.*}}, %{{.*}}] : memref<8x4xf32>
// CHECK: memref.store %[[OLD]], %[[ROW]][%[[I]]]
// CHECK: gpu.barrier
// CHECK: gpu.all_reduce add
// CHECK: memref.store %{{.*}}, %[[ROW]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[ROW]]
// CHECK: memref.store %{{.*}}, %arg1
// CHECK: gpu.terminator
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#first = affine_map<(d0) -> (d0, 0)>
func.func @partial_row(%x: memref<8x32xf32>, %out: memref<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%zero : f32) outs(%sum : memref<8xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x32xf32>) outs(%sum : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, #first], iterator_types = ["parallel"]}
      ins(%sum : memref<8xf32>) outs(%out : memref<8x4xf32>) {
  ^bb0(%s: f32, %o: f32):
    linalg.yield %s : f32
  }
  memref.dealloc %sum : memref<8xf32>
  return
}

// -----

// Tests a norm per head fused with the head transpose: the statistics are
// per (b, s, h) row, the normalized row is written at (b, h, s), by a generic
// whose loops follow its output. Its loops are interchanged to put the rows
// first, and it joins the chain; its output is written straight to global
// memory at the permuted row (here the rows, 2 x 4 x 4, are also the leading
// dimensions of the output, yet it must not be kept in shared memory as a
// row in place). Only the sums live in shared memory.
// ROWT-LABEL: func.func @transposed_rows
// ROWT: gpu.launch blocks(%[[BLOCK:[a-z0-9]+]], {{.*}}) in ({{.*}} = %c32{{.*}}) threads({{.*}}) workgroup(%[[SUMS:.*]] : memref<1xf32, #gpu.address_space<workgroup>>) {
// ROWT: %[[H:.*]] = arith.remui %[[BLOCK]], %c4
// ROWT: %[[REST:.*]] = arith.divui %[[BLOCK]], %c4
// ROWT: %[[S:.*]] = arith.remui %[[REST]], %c4
// ROWT: %[[B:.*]] = arith.divui %[[REST]], %c4
// ROWT: gpu.all_reduce add
// ROWT: gpu.barrier
// ROWT: %[[X:.*]] = memref.load %arg0[%[[B]], %[[S]], %[[H]], %[[I:.*]]]
// ROWT: %[[SUM:.*]] = memref.load %[[SUMS]]
// ROWT: %[[Y:.*]] = arith.divf %[[X]], %[[SUM]]
// ROWT: memref.store %[[Y]], %arg1[%[[B]], %[[H]], %[[S]], %[[I]]]
// ROWT-NEXT: }
// ROWT-NEXT: gpu.terminator
// ROWT-NOT: linalg.generic
#x4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#r4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#xt = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#rt = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1)>
func.func @transposed_rows(%x: memref<2x4x4x16xf32>, %out: memref<2x4x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<2x4x4xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<2x4x4xf32>)
  linalg.generic {indexing_maps = [#x4, #r4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x : memref<2x4x4x16xf32>) outs(%sum : memref<2x4x4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#xt, #rt, #x4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %sum : memref<2x4x4x16xf32>, memref<2x4x4xf32>) outs(%out : memref<2x4x4x16xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.divf %a, %s : f32
    linalg.yield %d : f32
  }
  memref.dealloc %sum : memref<2x4x4xf32>
  return
}

// -----

// Tests that a generic whose body reads a buffer the chain writes, at an
// index it computes (a Gather of a ReduceMean's result, Swin's pooler),
// is not made a member of the chain's kernel: a block per row would read
// other blocks' rows, unwritten or held in their shared memory. The mean's
// chain becomes one launch writing the mean to global memory; the gather
// stays a generic after it.
// CHECK-LABEL: func.func @gather_of_chain_result
// GLOBAL-LABEL: func.func @gather_of_chain_result
// ROWT-LABEL: func.func @gather_of_chain_result
// CHECK: %[[MEAN:.*]] = memref.alloc() : memref<2x64xf32>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[MEAN]]
// CHECK: gpu.terminator
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %[[MEAN]]
// CHECK: linalg.generic
// CHECK: memref.load %[[FLAT]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#in3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @gather_of_chain_result(%x: memref<2x64x49xf32>, %idx: memref<2x64xi64>,
                                  %out: memref<2x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %sum = memref.alloc() : memref<2x64xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<2x64xf32>)
  linalg.generic {indexing_maps = [#in3, #red], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x64x49xf32>) outs(%sum : memref<2x64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  %mean = memref.alloc() : memref<2x64xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%sum : memref<2x64xf32>) outs(%mean : memref<2x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = arith.constant 4.900000e+01 : f32
    %d = arith.divf %in, %n : f32
    linalg.yield %d : f32
  }
  memref.dealloc %sum : memref<2x64xf32>
  %flat = memref.collapse_shape %mean [[0, 1]] : memref<2x64xf32> into memref<128xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%idx : memref<2x64xi64>) outs(%out : memref<2x64xf32>) {
  ^bb0(%i: i64, %o: f32):
    %j = arith.index_cast %i : i64 to index
    %v = memref.load %flat[%j] : memref<128xf32>
    linalg.yield %v : f32
  }
  memref.dealloc %mean : memref<2x64xf32>
  return
}
