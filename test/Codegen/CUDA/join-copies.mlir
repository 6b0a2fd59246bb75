// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-join-copies))' | FileCheck %s

// cleave-join-copies: independent copies over one iteration space become
// one generic with both inputs and outputs (one kernel once mapped to the
// GPU), where the first can move down to the second, or the second up to
// the first with the views it reads.

#id = affine_map<(d0, d1) -> (d0, d1)>

// The cached keys and values of a decoding step copied into the returned
// caches, a copy of the new keys in between (it writes elsewhere in the
// keys' cache, so the keys' copy cannot move down past it): the values'
// copy moves up, its subview with it.
// CHECK-LABEL: func.func @cache
// CHECK: %[[VS:.*]] = memref.subview %arg3[0, 0] [4, 8] [1, 1]
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : memref<4x8xf32>, memref<4x8xf32>) outs(%{{.*}}, %[[VS]] :
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[A]], %[[B]] : f32, f32
// CHECK: linalg.generic {{.*}} ins(%arg4 : memref<4x1xf32>)
// CHECK-NOT: linalg.generic
func.func @cache(%pastK: memref<4x8xf32>, %pastV: memref<4x8xf32>, %k: memref<4x9xf32>,
                 %v: memref<4x9xf32>, %newK: memref<4x1xf32>) {
  %ks = memref.subview %k[0, 0] [4, 8] [1, 1] : memref<4x9xf32> to memref<4x8xf32, strided<[9, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pastK : memref<4x8xf32>) outs(%ks : memref<4x8xf32, strided<[9, 1]>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  %kn = memref.subview %k[0, 8] [4, 1] [1, 1] : memref<4x9xf32> to memref<4x1xf32, strided<[9, 1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%newK : memref<4x1xf32>) outs(%kn : memref<4x1xf32, strided<[9, 1], offset: 8>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  %vs = memref.subview %v[0, 0] [4, 8] [1, 1] : memref<4x9xf32> to memref<4x8xf32, strided<[9, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pastV : memref<4x8xf32>) outs(%vs : memref<4x8xf32, strided<[9, 1]>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// What stays apart: a copy of the first's result (it reads what the
// first writes); a copy across a call (which may reach any buffer); a
// copy of another shape; an op that is not a copy.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-5: linalg.generic
// CHECK-NOT: linalg.generic
func.func private @opaque()
func.func @apart(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x8xf32>,
                 %d: memref<4x8xf32>, %e: memref<2x8xf32>, %f: memref<2x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  func.call @opaque() : () -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%d : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : memref<2x8xf32>) outs(%f : memref<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  return
}

// A copy joined where the first of its pair is (the third moved up) comes
// before copies it passed; those are not joined with it as if it came
// after them (that walked past the block's end). Here the first and the
// second cannot meet (an op between reads the first's result and the
// second's source), the first and the third can.
// CHECK-LABEL: func.func @passed
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg4 : memref<4x8xf32>, memref<4x8xf32>) outs(%arg1, %arg5 :
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%arg2 : memref<4x8xf32>) outs(%arg3 : memref<4x8xf32>)
// CHECK-NOT: linalg.generic
func.func @passed(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x8xf32>,
                  %d: memref<4x8xf32>, %e: memref<4x8xf32>, %f: memref<4x8xf32>,
                  %x: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %c : memref<4x8xf32>, memref<4x8xf32>) outs(%x : memref<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x8xf32>) outs(%d : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : memref<4x8xf32>) outs(%f : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}
