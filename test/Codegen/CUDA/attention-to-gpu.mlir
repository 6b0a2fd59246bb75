// Tests cleave-attention-to-gpu on its own, on the IR the lower phase gives
// it: attention on bf16 operands (Q, K, V rounded; the scores GEMM over 6
// (batch, head) entries of 40 queries and 40 keys, depth 32; scale and mask;
// softmax as a maximum, an exponential, a sum and a division with PyTorch's
// NaN zeroing, rounded to bf16; the GEMM by V, width 24) becomes one
// tensor-core kernel: a block per 64 queries of an entry (6 blocks of 128
// threads), MMAs, shuffles for the rows' maxima and sums, K and V read from
// shared memory with ldmatrix; the GEMMs, the softmax's generics and the
// scores' buffers go, the roundings of Q, K and V stay. With 8 queries, fewer
// than a warp's 16 rows, the match is declined and the IR is left as it is.
// The input is what cleave-compile --precision bf16 --compile-to bufferize
// makes of test/lit-tools/make_model.py's attention-core, after
// cleave-copies-to-linalg and cleave-write-transposed.
// RUN: cleave-opt %s --split-input-file --cleave-attention-to-gpu | FileCheck %s

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
module {
  func.func @main(%arg0: memref<2x3x40x32xf32> {cleave.input = "q"}, %arg1: memref<2x3x40x32xf32> {cleave.input = "k"}, %arg2: memref<2x3x40x24xf32> {cleave.input = "v"}, %arg3: memref<1x1x40x40xf32> {cleave.param = "mask"}, %arg4: memref<2x3x40x24xf32> {cleave.output = "o"}) {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 0.176776692 : f32
    %collapse_shape = memref.collapse_shape %arg4 [[0, 1], [2], [3]] : memref<2x3x40x24xf32> into memref<6x40x24xf32>
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x3x40x24xbf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg2 : memref<2x3x40x24xf32>) outs(%alloc : memref<2x3x40x24xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40x32xbf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg1 : memref<2x3x40x32xf32>) outs(%alloc_2 : memref<2x3x40x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    }
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40x32xbf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : memref<2x3x40x32xf32>) outs(%alloc_3 : memref<2x3x40x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    }
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<6x40x40xf32>
    %expand_shape = memref.expand_shape %alloc_4 [[0, 1], [2], [3]] output_shape [2, 3, 40, 40] : memref<6x40x40xf32> into memref<2x3x40x40xf32>
    linalg.fill ins(%cst : f32) outs(%expand_shape : memref<2x3x40x40xf32>)
    %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40x40xf32>
    %collapse_shape_6 = memref.collapse_shape %arg3 [[0, 1, 2], [3]] : memref<1x1x40x40xf32> into memref<40x40xf32>
    linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%alloc_3, %alloc_2 : memref<2x3x40x32xbf16>, memref<2x3x40x32xbf16>) outs(%expand_shape : memref<2x3x40x40xf32>) {
    ^bb0(%in: bf16, %in_13: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.extf %in_13 : bf16 to f32
      %2 = arith.mulf %0, %1 : f32
      %3 = arith.addf %out, %2 : f32
      linalg.yield %3 : f32
    }
    memref.dealloc %alloc_3 : memref<2x3x40x32xbf16>
    memref.dealloc %alloc_2 : memref<2x3x40x32xbf16>
    linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expand_shape, %collapse_shape_6 : memref<2x3x40x40xf32>, memref<40x40xf32>) outs(%alloc_5 : memref<2x3x40x40xf32>) {
    ^bb0(%in: f32, %in_13: f32, %out: f32):
      %0 = arith.mulf %in, %cst_1 : f32
      %1 = arith.addf %0, %in_13 : f32
      linalg.yield %1 : f32
    }
    memref.dealloc %alloc_4 : memref<6x40x40xf32>
    %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40xf32>
    linalg.fill ins(%cst_0 : f32) outs(%alloc_7 : memref<2x3x40xf32>)
    linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%alloc_5 : memref<2x3x40x40xf32>) outs(%alloc_7 : memref<2x3x40xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.maximumf %in, %out : f32
      linalg.yield %0 : f32
    }
    %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40x40xf32>
    linalg.generic {indexing_maps = [#map, #map5, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%alloc_5, %alloc_7 : memref<2x3x40x40xf32>, memref<2x3x40xf32>) outs(%alloc_8 : memref<2x3x40x40xf32>) {
    ^bb0(%in: f32, %in_13: f32, %out: f32):
      %0 = arith.subf %in, %in_13 : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    memref.dealloc %alloc_7 : memref<2x3x40xf32>
    memref.dealloc %alloc_5 : memref<2x3x40x40xf32>
    %alloc_9 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40x40xbf16>
    %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<2x3x40xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_10 : memref<2x3x40xf32>)
    linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%alloc_8 : memref<2x3x40x40xf32>) outs(%alloc_10 : memref<2x3x40xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.addf %in, %out : f32
      linalg.yield %0 : f32
    }
    linalg.generic {indexing_maps = [#map, #map5, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%alloc_8, %alloc_10 : memref<2x3x40x40xf32>, memref<2x3x40xf32>) outs(%alloc_9 : memref<2x3x40x40xbf16>) {
    ^bb0(%in: f32, %in_13: f32, %out: bf16):
      %0 = arith.divf %in, %in_13 : f32
      %1 = arith.cmpf uno, %0, %0 : f32
      %2 = arith.select %1, %cst, %0 : f32
      %3 = arith.truncf %2 : f32 to bf16
      linalg.yield %3 : bf16
    }
    memref.dealloc %alloc_10 : memref<2x3x40xf32>
    memref.dealloc %alloc_8 : memref<2x3x40x40xf32>
    %collapse_shape_11 = memref.collapse_shape %alloc_9 [[0, 1], [2], [3]] : memref<2x3x40x40xbf16> into memref<6x40x40xbf16>
    %collapse_shape_12 = memref.collapse_shape %alloc [[0, 1], [2], [3]] : memref<2x3x40x24xbf16> into memref<6x40x24xbf16>
    linalg.fill ins(%cst : f32) outs(%collapse_shape : memref<6x40x24xf32>)
    linalg.batch_matmul ins(%collapse_shape_11, %collapse_shape_12 : memref<6x40x40xbf16>, memref<6x40x24xbf16>) outs(%collapse_shape : memref<6x40x24xf32>)
    memref.dealloc %alloc_9 : memref<2x3x40x40xbf16>
    memref.dealloc %alloc : memref<2x3x40x24xbf16>
    return
  }
}


// CHECK-LABEL: func.func @main
// The roundings of Q, K and V stay, in front of the kernel.
// CHECK-COUNT-3: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT: linalg.{{generic|batch_matmul|fill}}
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c6{{.*}}) threads({{.*}}) in ({{.*}} = %c128
// CHECK-SAME: workgroup(
// CHECK: nvgpu.ldmatrix
// CHECK: nvvm.mma.sync
// CHECK: gpu.shuffle  xor
// CHECK: nvvm.mma.sync
// CHECK: gpu.terminator
// CHECK-NEXT: } {cleave.kernel = "attention"}
// CHECK-NOT: linalg.{{generic|batch_matmul|fill}}
// CHECK-NOT: memref<6x40x40xf32>
// CHECK: return

// -----

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#map2 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map3 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
module {
  func.func @main(%arg0: memref<2x3x8x32xf32> {cleave.input = "q"}, %arg1: memref<2x3x8x32xf32> {cleave.input = "k"}, %arg2: memref<2x3x8x24xf32> {cleave.input = "v"}, %arg3: memref<1x1x8x8xf32> {cleave.param = "mask"}, %arg4: memref<2x3x8x24xf32> {cleave.output = "o"}) {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 0.176776692 : f32
    %collapse_shape = memref.collapse_shape %arg4 [[0, 1], [2], [3]] : memref<2x3x8x24xf32> into memref<6x8x24xf32>
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x3x8x24xbf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg2 : memref<2x3x8x24xf32>) outs(%alloc : memref<2x3x8x24xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8x32xbf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg1 : memref<2x3x8x32xf32>) outs(%alloc_2 : memref<2x3x8x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    }
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8x32xbf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : memref<2x3x8x32xf32>) outs(%alloc_3 : memref<2x3x8x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    }
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<6x8x8xf32>
    %expand_shape = memref.expand_shape %alloc_4 [[0, 1], [2], [3]] output_shape [2, 3, 8, 8] : memref<6x8x8xf32> into memref<2x3x8x8xf32>
    linalg.fill ins(%cst : f32) outs(%expand_shape : memref<2x3x8x8xf32>)
    %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8x8xf32>
    %collapse_shape_6 = memref.collapse_shape %arg3 [[0, 1, 2], [3]] : memref<1x1x8x8xf32> into memref<8x8xf32>
    linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%alloc_3, %alloc_2 : memref<2x3x8x32xbf16>, memref<2x3x8x32xbf16>) outs(%expand_shape : memref<2x3x8x8xf32>) {
    ^bb0(%in: bf16, %in_13: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.extf %in_13 : bf16 to f32
      %2 = arith.mulf %0, %1 : f32
      %3 = arith.addf %out, %2 : f32
      linalg.yield %3 : f32
    }
    memref.dealloc %alloc_3 : memref<2x3x8x32xbf16>
    memref.dealloc %alloc_2 : memref<2x3x8x32xbf16>
    linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expand_shape, %collapse_shape_6 : memref<2x3x8x8xf32>, memref<8x8xf32>) outs(%alloc_5 : memref<2x3x8x8xf32>) {
    ^bb0(%in: f32, %in_13: f32, %out: f32):
      %0 = arith.mulf %in, %cst_1 : f32
      %1 = arith.addf %0, %in_13 : f32
      linalg.yield %1 : f32
    }
    memref.dealloc %alloc_4 : memref<6x8x8xf32>
    %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
    linalg.fill ins(%cst_0 : f32) outs(%alloc_7 : memref<2x3x8xf32>)
    linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%alloc_5 : memref<2x3x8x8xf32>) outs(%alloc_7 : memref<2x3x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.maximumf %in, %out : f32
      linalg.yield %0 : f32
    }
    %alloc_8 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8x8xf32>
    linalg.generic {indexing_maps = [#map, #map5, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%alloc_5, %alloc_7 : memref<2x3x8x8xf32>, memref<2x3x8xf32>) outs(%alloc_8 : memref<2x3x8x8xf32>) {
    ^bb0(%in: f32, %in_13: f32, %out: f32):
      %0 = arith.subf %in, %in_13 : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    memref.dealloc %alloc_7 : memref<2x3x8xf32>
    memref.dealloc %alloc_5 : memref<2x3x8x8xf32>
    %alloc_9 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8x8xbf16>
    %alloc_10 = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_10 : memref<2x3x8xf32>)
    linalg.generic {indexing_maps = [#map, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%alloc_8 : memref<2x3x8x8xf32>) outs(%alloc_10 : memref<2x3x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.addf %in, %out : f32
      linalg.yield %0 : f32
    }
    linalg.generic {indexing_maps = [#map, #map5, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%alloc_8, %alloc_10 : memref<2x3x8x8xf32>, memref<2x3x8xf32>) outs(%alloc_9 : memref<2x3x8x8xbf16>) {
    ^bb0(%in: f32, %in_13: f32, %out: bf16):
      %0 = arith.divf %in, %in_13 : f32
      %1 = arith.cmpf uno, %0, %0 : f32
      %2 = arith.select %1, %cst, %0 : f32
      %3 = arith.truncf %2 : f32 to bf16
      linalg.yield %3 : bf16
    }
    memref.dealloc %alloc_10 : memref<2x3x8xf32>
    memref.dealloc %alloc_8 : memref<2x3x8x8xf32>
    %collapse_shape_11 = memref.collapse_shape %alloc_9 [[0, 1], [2], [3]] : memref<2x3x8x8xbf16> into memref<6x8x8xbf16>
    %collapse_shape_12 = memref.collapse_shape %alloc [[0, 1], [2], [3]] : memref<2x3x8x24xbf16> into memref<6x8x24xbf16>
    linalg.fill ins(%cst : f32) outs(%collapse_shape : memref<6x8x24xf32>)
    linalg.batch_matmul ins(%collapse_shape_11, %collapse_shape_12 : memref<6x8x8xbf16>, memref<6x8x24xbf16>) outs(%collapse_shape : memref<6x8x24xf32>)
    memref.dealloc %alloc_9 : memref<2x3x8x8xbf16>
    memref.dealloc %alloc : memref<2x3x8x24xbf16>
    return
  }
}


// CHECK-LABEL: func.func @main
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : memref<2x3x8x32xbf16>, memref<2x3x8x32xbf16>) outs(%{{.*}} : memref<2x3x8x8xf32>)
// CHECK: arith.divf
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<6x8x8xbf16>, memref<6x8x24xbf16>)
// CHECK-NOT: gpu.launch
