// Tests that every collective shard-partition emits becomes a runtime call
// (or, for all_slice, a local slice, which needs no communicator), that
// communicator groups are numbered per set of grid axes and listed on the
// module with every collective for the plan, and that the grid is gone.
// RUN: cleave-opt %s --cleave-lower-collectives | FileCheck %s
// RUN: cleave-opt %s --cleave-lower-collectives --mlir-print-op-generic | FileCheck %s --check-prefix=NOSHARD
// A CUDA program calls the device collectives instead, with the same
// arguments; an unknown target is refused.
// RUN: cleave-opt %s --cleave-lower-collectives=target=cuda | FileCheck %s --check-prefix=CUDA
// RUN: not cleave-opt %s --cleave-lower-collectives=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET

// CUDA-NOT: @cleave_rt_all_reduce_f32
// CUDA-DAG: func.func private @cleave_rt_cuda_all_reduce_f32(memref<*xf32>, memref<*xf32>, i64, i64)
// CUDA-DAG: func.func private @cleave_rt_cuda_all_gather_f16(memref<*xf16>, memref<*xf16>, i64, i64)
// CUDA-DAG: func.func private @cleave_rt_cuda_reduce_scatter_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64)
// CUDA-DAG: func.func private @cleave_rt_cuda_all_to_all_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64)
// CUDA-DAG: func.func private @cleave_rt_grid_index(i64) -> i64
// CUDA-DAG: func.func private @cleave_rt_cuda_send_f32(memref<*xf32>, i64, i64)
// CUDA-DAG: func.func private @cleave_rt_cuda_recv_f32(memref<*xf32>, i64, i64)
// TARGET: error: cleave-lower-collectives: unknown target 'tpu' (cpu or cuda)

// CHECK: module attributes {cleave.collectives = [{axes = array<i16: 1>, bytes = 128 : i64, kind = "all_reduce", node = "/mlp/proj/MatMul"}
// CHECK-SAME: cleave.comm_groups = [array<i16: 1>, array<i16: 0>, array<i16: 0, 1>]
// CHECK-NOT: shard.grid
// CHECK-DAG: func.func private @cleave_rt_all_reduce_f32(memref<*xf32>, memref<*xf32>, i64, i64)
// CHECK-DAG: func.func private @cleave_rt_all_gather_f16(memref<*xf16>, memref<*xf16>, i64, i64)
// CHECK-DAG: func.func private @cleave_rt_reduce_scatter_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64)
// CHECK-DAG: func.func private @cleave_rt_all_to_all_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64)
// CHECK-DAG: func.func private @cleave_rt_grid_index(i64) -> i64
// CHECK-DAG: func.func private @cleave_rt_send_f32(memref<*xf32>, i64, i64)
// CHECK-DAG: func.func private @cleave_rt_recv_f32(memref<*xf32>, i64, i64)

// CHECK-LABEL: func.func @collectives
// CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only : tensor<4x8xf32> to memref<4x8xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK: %[[INU:.*]] = memref.cast %[[IN]] : memref<4x8xf32> to memref<*xf32>
// CHECK: %[[OUTU:.*]] = memref.cast %[[OUT]] : memref<4x8xf32> to memref<*xf32>
// CHECK: call @cleave_rt_all_reduce_f32(%[[INU]], %[[OUTU]], %{{.*}}, %{{.*}}) {cleave.collective = "all_reduce"}
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: call @cleave_rt_all_gather_f16
// CHECK: call @cleave_rt_reduce_scatter_f32
// CHECK: call @cleave_rt_all_to_all_f32
// all_slice: the rank's position over axes [0, 1] times the part size.
// CHECK: call @cleave_rt_grid_index(
// CHECK: call @cleave_rt_grid_index(
// CHECK: tensor.extract_slice %arg0[0, %{{.*}}] [4, 2] [1, 1] : tensor<4x8xf32> to tensor<4x2xf32>
// NOSHARD-NOT: "shard.

// Point to point: the peer is its position in the group, first axis major:
// (1, 0) on a 2 x 2 grid is member 2.
// CHECK-LABEL: func.func @point_to_point
// CHECK: %[[SENT:.*]] = bufferization.to_buffer %arg0 read_only
// CHECK: %[[SU:.*]] = memref.cast %[[SENT]]
// CHECK: call @cleave_rt_send_f32(%[[SU]], %{{.*}}, %{{.*}}) : (memref<*xf32>, i64, i64) -> ()
// CHECK: %[[BUF:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK: call @cleave_rt_recv_f32(
// CHECK: %[[GOT:.*]] = bufferization.to_tensor %[[BUF]] restrict writable
// CHECK: return %arg0, %[[GOT]]
// A receive in a loop (a microbatch loop) writes one buffer made before the
// loop, not a new one per iteration.
// CHECK-LABEL: func.func @receive_in_loop
// CHECK: %[[LOOPBUF:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT: scf.for
// CHECK-NOT: memref.alloc
// CHECK: call @cleave_rt_recv_f32(
// CHECK: bufferization.to_tensor %[[LOOPBUF]] restrict writable
module {
  shard.grid @mesh(shape = 2x2)
  func.func @collectives(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf16>) -> (tensor<4x8xf32>, tensor<4x16xf16>, tensor<2x8xf32>, tensor<8x4xf32>, tensor<4x2xf32>) {
    %0 = shard.all_reduce %arg0 on @mesh grid_axes = [1] reduction = sum : tensor<4x8xf32> -> tensor<4x8xf32> loc("/mlp/proj/MatMul")
    %1 = shard.all_gather %arg1 on @mesh grid_axes = [1] gather_axis = 1 : tensor<4x8xf16> -> tensor<4x16xf16>
    %2 = shard.reduce_scatter %arg0 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
    %3 = shard.all_to_all %arg0 on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
    %4 = shard.all_slice %arg0 on @mesh grid_axes = [0, 1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
    return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x16xf16>, tensor<2x8xf32>, tensor<8x4xf32>, tensor<4x2xf32>
  }
  func.func @point_to_point(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %0 = shard.send %arg0 on @mesh grid_axes = [0, 1] destination = [1, 0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = shard.recv %arg0 on @mesh grid_axes = [0, 1] source = [1, 0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  func.func @receive_in_loop(%arg0: tensor<4x8xf32>) -> tensor<8x8xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %init = tensor.empty() : tensor<8x8xf32>
    %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %init) -> (tensor<8x8xf32>) {
      %got = shard.recv %arg0 on @mesh grid_axes = [0] source = [0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %at = arith.muli %i, %c4 : index
      %next = tensor.insert_slice %got into %acc[%at, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
      scf.yield %next : tensor<8x8xf32>
    }
    return %r : tensor<8x8xf32>
  }
}
