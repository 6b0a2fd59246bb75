// RUN: cleave-opt %s --split-input-file --cleave-fuse-rows --canonicalize | FileCheck %s

// Tests that a softmax's chain (the maximum's fill, the row maximum, the
// exponentials, the sum's fill, the row sum, the division) becomes one
// parallel loop over the 4 x 16 rows, the members in order inside it: each
// reduction an scf.for carrying its value from the output's (the fill's)
// and storing it once, each elementwise member an scf.for over the row.
// What only the chain reads (the maximum, the exponentials, the sum) lives
// in buffers of one row on the stack, allocated at the top of the loop's
// body; their whole buffers, views and deallocations are gone. No generic
// is left.
// CHECK-LABEL: func.func @softmax
// CHECK-NOT: memref.alloc()
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0, %c0) to (%c4, %c16) step (%c1, %c1) {
// CHECK-NEXT: %[[MAX:.*]] = memref.alloca() {cleave.row_buffer} : memref<1xf32>
// CHECK-NEXT: %[[EXP:.*]] = memref.alloca() {cleave.row_buffer} : memref<32xf32>
// CHECK-NEXT: %[[SUM:.*]] = memref.alloca() {cleave.row_buffer} : memref<1xf32>
// CHECK-NEXT: memref.store %[[NEGINF:.*]], %[[MAX]][%c0]
// CHECK-NEXT: %[[M0:.*]] = memref.load %[[MAX]][%c0]
// CHECK-NEXT: %[[M:.*]] = scf.for %[[K:.*]] = %c0 to %c32 step %c1 iter_args(%[[ACC:.*]] = %[[M0]]) -> (f32) {
// CHECK-NEXT: %[[X:.*]] = memref.load %arg0[%[[I]], %[[J]], %[[K]]]
// CHECK-NEXT: %[[NEXT:.*]] = arith.maximumf %[[ACC]], %[[X]] : f32
// CHECK-NEXT: scf.yield %[[NEXT]]
// CHECK: memref.store %[[M]], %[[MAX]][%c0]
// CHECK: scf.for %[[K2:.*]] = %c0 to %c32
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[EXP]][%[[K2]]]
// CHECK: scf.for {{.*}} iter_args
// CHECK: memref.load %[[EXP]]
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: memref.store %{{.*}}, %[[SUM]][%c0]
// CHECK: scf.for
// CHECK: arith.divf
// CHECK: memref.store %{{.*}}, %arg1[%[[I]], %[[J]], %{{.*}}]
// CHECK: scf.reduce
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: linalg.generic
#x = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#r = affine_map<(d0, d1, d2) -> (d0, d1)>
#fill = affine_map<(d0, d1) -> (d0, d1)>
func.func @softmax(%x: memref<4x16x32xf32>, %out: memref<4x16x32xf32>) {
  %neginf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %max = memref.alloc() : memref<4x16xf32>
  %exp = memref.alloc() : memref<4x16x32xf32>
  %sum = memref.alloc() : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, #fill], iterator_types = ["parallel", "parallel"]}
      ins(%neginf : f32) outs(%max : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#x, #r], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<4x16x32xf32>) outs(%max : memref<4x16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#x, #r, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max : memref<4x16x32xf32>, memref<4x16xf32>) outs(%exp : memref<4x16x32xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  memref.dealloc %max : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, #fill], iterator_types = ["parallel", "parallel"]}
      ins(%zero : f32) outs(%sum : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#x, #r], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : memref<4x16x32xf32>) outs(%sum : memref<4x16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc fastmath<reassoc> : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#x, #r, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum : memref<4x16x32xf32>, memref<4x16xf32>) outs(%out : memref<4x16x32xf32>) {
  ^bb0(%e: f32, %s: f32, %o: f32):
    %p = arith.divf %e, %s : f32
    linalg.yield %p : f32
  }
  memref.dealloc %exp : memref<4x16x32xf32>
  memref.dealloc %sum : memref<4x16xf32>
  return
}

// -----

// Tests that an op reading what the chain wrote from another row (the sums
// in reverse) does not join it: the fill and the sum become the loop over
// rows, the reversed read stays a generic. The sums, read after the chain,
// stay a whole buffer.
// CHECK-LABEL: func.func @other_row
// CHECK: %[[SUMS:.*]] = memref.alloc() : memref<8xf32>
// CHECK: scf.parallel (%[[R:.*]]) = (%c0) to (%c8) step (%c1) {
// CHECK-NOT: memref.alloca
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[SUMS]][%[[R]]]
// CHECK: scf.reduce
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

// Tests a norm per head written with the head transpose: the generic that
// divides has its loops in its output's order; they are interchanged to put
// the (b, s, h) rows first, it joins the chain, and it stores each row at
// (b, h, s).
// CHECK-LABEL: func.func @transposed_rows
// CHECK: scf.parallel (%[[B:.*]], %[[S:.*]], %[[H:.*]]) = (%c0, %c0, %c0) to (%c2, %c4, %c4)
// CHECK: scf.for {{.*}} iter_args
// CHECK: scf.for %[[D:.*]] = %c0 to %c16
// CHECK-NEXT: %[[X:.*]] = memref.load %arg0[%[[B]], %[[S]], %[[H]], %[[D]]]
// CHECK: %[[Y:.*]] = arith.divf %[[X]]
// CHECK-NEXT: memref.store %[[Y]], %arg1[%[[B]], %[[H]], %[[S]], %[[D]]]
// CHECK-NOT: linalg.generic
#x4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#r4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#xt = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#rt = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1)>
func.func @transposed_rows(%x: memref<2x4x4x16xf32>, %out: memref<2x4x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<2x4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> ()>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%zero : f32) outs(%sum : memref<2x4x4xf32>) {
  ^bb0(%z: f32, %o: f32):
    linalg.yield %z : f32
  }
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
// index it computes (a Gather of a reduction's result: Swin's pooler,
// ReduceMean then Reshape to one dimension then Gather by an index tensor),
// does not join the chain: row by row it would read rows not yet computed,
// and the buffer would live a row at a time on the stack, never written.
// The mean's chain is fused; the gather stays a generic after the loop,
// reading the whole mean buffer, which the chain writes.
// CHECK-LABEL: func.func @gather_of_chain_result
// CHECK: %[[MEAN:.*]] = memref.alloc() : memref<2x64xf32>
// CHECK: scf.parallel
// CHECK: memref.store %{{.*}}, %[[MEAN]][%{{.*}}, %{{.*}}]
// CHECK: scf.reduce
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

// -----

// Tests that a body's read of a buffer the chain does not write (a gather
// from a table, an embedding's) still joins it: the table is whole
// throughout. No generic is left.
// CHECK-LABEL: func.func @gather_of_table
// CHECK: scf.parallel
// CHECK: memref.load %arg2[
// CHECK: scf.reduce
// CHECK-NOT: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#in3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @gather_of_table(%x: memref<2x64x49xf32>, %idx: memref<2x64xi64>,
                           %table: memref<128xf32>, %out: memref<2x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %sum = memref.alloc() : memref<2x64xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<2x64xf32>)
  linalg.generic {indexing_maps = [#in3, #red], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<2x64x49xf32>) outs(%sum : memref<2x64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%sum, %idx : memref<2x64xf32>, memref<2x64xi64>) outs(%out : memref<2x64xf32>) {
  ^bb0(%s: f32, %i: i64, %o: f32):
    %j = arith.index_cast %i : i64 to index
    %v = memref.load %table[%j] : memref<128xf32>
    %r = arith.addf %s, %v : f32
    linalg.yield %r : f32
  }
  memref.dealloc %sum : memref<2x64xf32>
  return
}
