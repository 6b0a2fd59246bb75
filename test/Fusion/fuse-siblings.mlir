// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-siblings))' --split-input-file | FileCheck %s

// Tests rotary embedding's tables: the cosine and the sine of the same
// angles become one generic with both results, reading the angles once.
// CHECK-LABEL: func.func @tables
// CHECK: %[[R:.*]]:2 = linalg.generic {{.*}} ins(%arg0 : tensor<16x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<16x8xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[C:.*]] = math.cos %[[X]]
// CHECK-NEXT: %[[S:.*]] = math.sin %[[X]]
// CHECK-NEXT: linalg.yield %[[C]], %[[S]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @tables(%angles: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %e = tensor.empty() : tensor<16x8xf32>
  %cos = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%angles : tensor<16x8xf32>) outs(%e : tensor<16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = math.cos %in : f32
    linalg.yield %c : f32
  } -> tensor<16x8xf32>
  %e2 = tensor.empty() : tensor<16x8xf32>
  %sin = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%angles : tensor<16x8xf32>) outs(%e2 : tensor<16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = math.sin %in : f32
    linalg.yield %s : f32
  } -> tensor<16x8xf32>
  return %cos, %sin : tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// Tests what stays apart: a reader of the first's result, a reader of a
// value made between them, other loop ranges, the shared value read
// through another map, and a reduction.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-6: linalg.generic
// CHECK-NOT: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @apart(%x: tensor<8x8xf32>, %y: tensor<8x4xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  // Reads %x and %a, the first's result.
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %n = arith.addf %in, %in2 : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  // Reads %x and %b, made after %a: it cannot move up to %a, and %b reads
  // %a.
  %c = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %n = arith.mulf %in, %in2 : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  // Other loop ranges.
  %e4 = tensor.empty() : tensor<8x4xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x4xf32>) outs(%e4 : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<8x4xf32>
  // %x transposed: another map than %a's.
  %f = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = math.sin %in : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  // A reduction.
  %e1 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.addf %in, %out : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  return %a, %b, %c, %d, %f, %r : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>
}

// -----

// Tests siblings with many inputs (GPT-J's rotary embedding of Q and K,
// four inputs each, one shared): the fused generic reads seven values, more
// than a small vector of them holds inline, and the pass walks it again.
// CHECK-LABEL: func.func @wide
// CHECK: %[[R:.*]]:2 = linalg.generic {{.*}} ins(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6 : {{.*}})
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @wide(%t: tensor<8x8xf32>, %a0: tensor<8x8xf32>, %a1: tensor<8x8xf32>,
                %a2: tensor<8x8xf32>, %b0: tensor<8x8xf32>, %b1: tensor<8x8xf32>,
                %b2: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %q = linalg.generic {indexing_maps = [#id2, #id2, #id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t, %a0, %a1, %a2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %w: f32, %out: f32):
    %m = arith.mulf %x, %y : f32
    %n = arith.mulf %z, %w : f32
    %s = arith.addf %m, %n : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  %k = linalg.generic {indexing_maps = [#id2, #id2, #id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t, %b0, %b1, %b2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) outs(%e2 : tensor<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %w: f32, %out: f32):
    %m = arith.mulf %x, %y : f32
    %n = arith.subf %z, %w : f32
    %s = arith.addf %m, %n : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %q, %k : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that siblings stay apart when the later one's body reads a value
// made between them (two scatters sharing one slot map, each extracting
// from its own updates, the second's made after the first): fused at the
// first, that read would come before the value exists.
// CHECK-LABEL: func.func @reads_later_value
// CHECK: linalg.generic
// CHECK: tensor.extract %arg1
// CHECK: %[[V:.*]] = arith.mulf
// CHECK: linalg.generic
// CHECK: tensor.extract %[[V]]
#m1 = affine_map<(d0) -> (d0)>
func.func @reads_later_value(%map: tensor<8xindex>, %u: tensor<8xf32>, %s: f32)
    -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#m1, #m1], iterator_types = ["parallel"]}
      ins(%map : tensor<8xindex>) outs(%e : tensor<8xf32>) {
  ^bb0(%i: index, %out: f32):
    %x = tensor.extract %u[%i] : tensor<8xf32>
    linalg.yield %x : f32
  } -> tensor<8xf32>
  %v = arith.mulf %a, %a : tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %b = linalg.generic {indexing_maps = [#m1, #m1], iterator_types = ["parallel"]}
      ins(%map : tensor<8xindex>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%i: index, %out: f32):
    %x = tensor.extract %v[%i] : tensor<8xf32>
    linalg.yield %x : f32
  } -> tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}
