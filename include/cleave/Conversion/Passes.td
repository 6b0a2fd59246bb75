//===- Passes.td - Cleave's conversions --------------------*- tablegen -*-===//
//
// Conversions from one level to another that Cleave does itself.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CONVERSION_PASSES
#define CLEAVE_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def CleaveLowerCollectives : Pass<"cleave-lower-collectives", "mlir::ModuleOp"> {
  let summary = "Lower shard collectives to calls into the runtime's ABI";
  let description = [{
    Upstream `convert-shard-to-mpi` lowers only `shard.all_reduce`, leaves
    the other collectives in place while exiting successfully, and splits a
    new MPI communicator for every call. This pass lowers every collective
    `shard-partition` emits, on tensors, before bufferization:

    - all_reduce, all_gather, reduce_scatter, all_to_all become calls to
      `cleave_rt_<collective>_<dtype>` (runtime/include/cleave/Runtime/Abi.h)
      on unranked memrefs, reading the operand's buffer and writing a new one;
    - send and recv (with a static or dynamic peer) become
      `cleave_rt_send_<dtype>` / `cleave_rt_recv_<dtype>`;
    - all_slice becomes a local tensor.extract_slice at this rank's offset;
    - process_multi_index / process_linear_index become `cleave_rt_grid_index`,
      grid_shape becomes constants.

    Each distinct set of grid axes gets a communicator group id; the groups
    are listed on the module (`cleave.comm_groups`) for the runtime to create
    once at start-up. The grid and the sharding ops are removed; any shard op
    left is an error naming it.

    With `target=cuda` the calls are the CUDA program's collectives,
    `cleave_rt_cuda_<collective>_<dtype>`, which take device buffers and
    queue their work (NCCL) on the program's stream.

    ```mlir
    %1 = shard.all_reduce %0 on @mesh grid_axes = [1] : tensor<16x64xf32> -> tensor<16x64xf32>
    // becomes
    %in = bufferization.to_buffer %0 read_only : tensor<16x64xf32> to memref<16x64xf32>
    %out = memref.alloc() : memref<16x64xf32>
    func.call @cleave_rt_all_reduce_f32(%in_u, %out_u, %c0, %c0) : ...
    %1 = bufferization.to_tensor %out restrict writable : ...
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu: the MPI collectives on host buffers; cuda: the CUDA "
           "program's collectives on device buffers">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
    "mlir::func::FuncDialect", "mlir::memref::MemRefDialect",
    "mlir::tensor::TensorDialect"
  ];
}

#endif // CLEAVE_CONVERSION_PASSES
