// Tests cleave-map-to-gpu: an elementwise generic becomes one launch of a
// thread per point (flattened, 256 a block, the last block guarded); a row
// maximum becomes one block per row whose threads stride over the row and
// combine with gpu.all_reduce, thread 0 folding in the output's old value; a
// reduction with two outputs (sum and sum of squares) falls back to a thread
// per row, with a remark; an integer maximum (a scatter's slot map) shares
// its block like a float one, from the least i64.
// RUN: cleave-opt %s --cleave-map-to-gpu 2>&1 | FileCheck %s

// CHECK: remark: reduction without a recognised combiner: one GPU thread per output element (ONNX node '?')
// CHECK-NOT: see current operation
// CHECK-LABEL: func.func @f
// Elementwise: 64 x 128 = 8192 points, 32 blocks of 256.
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %[[C32]], {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %[[C256]],
// CHECK: %[[LIN:.*]] = arith.addi %{{.*}}, %[[TX]] : index
// CHECK: arith.cmpi ult, %[[LIN]], %{{.*}} : index
// CHECK: scf.if
// CHECK: memref.load %arg0
// CHECK: memref.load %arg1
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %arg1
// CHECK: gpu.terminator
// Row maximum: 64 blocks of 128 threads.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c64{{.*}}) threads(%[[T:[a-z0-9]+]], {{.*}}) in ({{.*}} = %c128
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[T]] to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[NEGINF]]) -> (f32)
// CHECK-NOT: memref.load %arg2
// CHECK: arith.maximumf %[[ACC]]
// CHECK: %[[ALL:.*]] = gpu.all_reduce maximumf %[[PART]] uniform
// CHECK: arith.cmpi eq, %[[T]]
// CHECK: %[[OLD:.*]] = memref.load %arg2
// CHECK: %[[NEW:.*]] = arith.maximumf %[[OLD]], %[[ALL]] : f32
// CHECK: memref.store %[[NEW]], %arg2
// Two outputs: a thread per row, a sequential loop over the row.
// CHECK: gpu.launch
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK-NOT: gpu.all_reduce
// CHECK: memref.store %{{.*}}, %arg2
// CHECK: memref.store %{{.*}}, %arg3
// CHECK-NOT: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%a: memref<64x128xf32>, %b: memref<64x128xf32>, %m: memref<64xf32>, %s: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<64x128xf32>, memref<64x128xf32>) outs(%b : memref<64x128xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %t = arith.addf %x, %y : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<64x128xf32>) outs(%m : memref<64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.maximumf %o, %x : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<64x128xf32>) outs(%m, %s : memref<64xf32>, memref<64xf32>) {
  ^bb0(%x: f32, %o: f32, %p: f32):
    %t = arith.addf %o, %x : f32
    %u = arith.mulf %x, %x : f32
    %v = arith.addf %p, %u : f32
    linalg.yield %t, %v : f32, f32
  }
  return
}

// CHECK-LABEL: func.func @int_max
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c32{{.*}}) threads(%[[T:[a-z0-9]+]], {{.*}}) in ({{.*}} = %c16
// CHECK: %[[LEAST:.*]] = arith.constant -9223372036854775808 : i64
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[T]] to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[LEAST]]) -> (i64)
// CHECK: arith.maxsi %[[ACC]]
// CHECK: %[[ALL:.*]] = gpu.all_reduce maxsi %[[PART]] uniform
// CHECK: %[[OLD:.*]] = memref.load %arg1
// CHECK: arith.maxsi %[[OLD]], %[[ALL]] : i64
func.func @int_max(%a: memref<32x16xi64>, %m: memref<32xi64>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<32x16xi64>) outs(%m : memref<32xi64>) {
  ^bb0(%x: i64, %o: i64):
    %t = arith.maxsi %o, %x : i64
    linalg.yield %t : i64
  }
  return
}
