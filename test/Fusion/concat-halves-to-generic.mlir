// RUN: cleave-opt %s --split-input-file --cleave-concat-halves-to-generic | FileCheck %s

// Tests that rotate-half, concat(-x[:, 8:], x[:, :8]), becomes one generic
// over x viewed as 4 x 2 x 8: output half s reads source half 1 - s, negates
// it for s = 0 and selects by s; the slices' negation is gone.
// CHECK: #[[READ:.*]] = affine_map<(d0, d1, d2) -> (d0, -d1 + 1, d2)>
// CHECK-LABEL: func.func @rotate_half
// CHECK: %[[SPLIT:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1, 2]] output_shape [4, 2, 8] : tensor<4x16xf32> into tensor<4x2x8xf32>
// CHECK: %[[G:.*]] = linalg.generic {indexing_maps = [#[[READ]], #{{.*}}]{{.*}} ins(%[[SPLIT]] : tensor<4x2x8xf32>)
// CHECK: %[[NEG:.*]] = arith.negf
// CHECK: %[[S:.*]] = linalg.index 1 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[S]]
// CHECK: arith.select %[[FIRST]], %[[NEG]], %{{.*}} : f32
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[G]] {{\[}}[0], [1, 2]] : tensor<4x2x8xf32> into tensor<4x16xf32>
// CHECK: return %[[R]]
// CHECK-NOT: tensor.concat
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @rotate_half(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %hi = tensor.extract_slice %x[0, 8] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
  %lo = tensor.extract_slice %x[0, 0] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %r = tensor.concat dim(1) %neg, %lo : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Tests that halves of two different tensors (partial rotary embedding's
// rotated part and the part it passes through), or three parts of one size,
// become one generic over the (parts, size) view that reads each operand
// without the part index and selects by it. Parts of different sizes (a
// quarter of each head rotated, GPT-NeoX's partial rotary embedding) are
// first cut into pieces of their greatest common divisor: 4 and 8 as three
// pieces of 4, the 8 sliced in two. Past 8 pieces (1 and 12 would make 13)
// they stay a concatenation: every output element reads every piece.
// CHECK-DAG: #[[P:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[PID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @parts
// CHECK-SAME: %[[PX:[a-z0-9]+]]: tensor<4x16xf32>, %[[PY:[a-z0-9]+]]: tensor<4x16xf32>
// CHECK: %[[A:.*]] = tensor.extract_slice %[[PX]][0, 8] [4, 8] [1, 1]
// CHECK: %[[B:.*]] = tensor.extract_slice %[[PY]][0, 0] [4, 8] [1, 1]
// CHECK: %[[G:.*]] = linalg.generic {indexing_maps = [#[[P]], #[[P]], #[[PID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x2x8xf32>)
// CHECK-NEXT: ^bb0(%[[IA:.*]]: f32, %[[IB:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[PART:.*]] = linalg.index 1
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[PART]], %c0
// CHECK-NEXT: %[[V:.*]] = arith.select %[[FIRST]], %[[IA]], %[[IB]]
// CHECK-NEXT: linalg.yield %[[V]]
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[G]] {{\[}}[0], [1, 2]] : tensor<4x2x8xf32> into tensor<4x16xf32>
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3x4xf32>)
// CHECK: arith.select
// CHECK: arith.select
// CHECK: %[[F0:.*]] = tensor.extract_slice %{{.*}}[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
// CHECK: %[[F1:.*]] = tensor.extract_slice %{{.*}}[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[F0]], %[[F1]] : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) outs(%{{.*}} : tensor<4x3x4xf32>)
// CHECK: %[[TPART:.*]] = linalg.index 1
// CHECK-DAG: arith.cmpi eq, %[[TPART]], %c1
// CHECK-DAG: arith.cmpi eq, %[[TPART]], %c0
// CHECK: %[[TR:.*]] = tensor.collapse_shape %[[T]]
// CHECK: %[[U:.*]] = tensor.concat dim(1) %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<4x12xf32>)
// CHECK: return %[[R]], %{{.*}}, %[[TR]], %[[U]]
func.func @parts(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>, %z: tensor<4x12xf32>) -> (tensor<4x16xf32>, tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x13xf32>) {
  %a = tensor.extract_slice %x[0, 8] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
  %b = tensor.extract_slice %y[0, 0] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
  %r = tensor.concat dim(1) %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %c = tensor.extract_slice %z[0, 4] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
  %d = tensor.extract_slice %z[0, 0] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
  %e = tensor.extract_slice %x[0, 0] [4, 4] [1, 1] : tensor<4x16xf32> to tensor<4x4xf32>
  %s = tensor.concat dim(1) %c, %d, %e : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x12xf32>
  %f = tensor.extract_slice %z[0, 0] [4, 8] [1, 1] : tensor<4x12xf32> to tensor<4x8xf32>
  %t = tensor.concat dim(1) %c, %f : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x12xf32>
  %g = tensor.extract_slice %z[0, 0] [4, 1] [1, 1] : tensor<4x12xf32> to tensor<4x1xf32>
  %u = tensor.concat dim(1) %g, %z : (tensor<4x1xf32>, tensor<4x12xf32>) -> tensor<4x13xf32>
  return %r, %s, %t, %u : tensor<4x16xf32>, tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x13xf32>
}

// -----

// Tests that a concatenation of one tensor with itself (rotary embedding's
// cat(freqs, freqs)) becomes one broadcast generic writing x twice over a
// 16 x 2 x 8 view, reading x without the copies index, collapsed back.
// CHECK-DAG: #[[X:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @copies
// CHECK: %[[G:.*]] = linalg.generic {indexing_maps = [#[[X]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<16x8xf32>) outs(%{{.*}} : tensor<16x2x8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]]
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[G]] {{\[}}[0], [1, 2]] : tensor<16x2x8xf32> into tensor<16x16xf32>
// CHECK: return %[[R]]
// CHECK-NOT: tensor.concat
func.func @copies(%x: tensor<16x8xf32>) -> tensor<16x16xf32> {
  %r = tensor.concat dim(1) %x, %x : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}
