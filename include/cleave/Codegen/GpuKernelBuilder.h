//===- GpuKernelBuilder.h - Building GPU kernels from linalg.generic ------===//
//
// The pieces cleave-map-to-gpu and cleave-map-rows-to-gpu share when they
// turn a linalg.generic on memrefs into the body of a gpu.launch: indices of
// a point, loads of the operands through their indexing maps, the generic's
// body cloned at that point, stores of what it yields, and the recognised
// reduction combiners that a block can share through gpu.all_reduce.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_GPUKERNELBUILDER_H
#define CLEAVE_LIB_TRANSFORMS_GPUKERNELBUILDER_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace cleave::gpu_kernel {

/// An index constant.
mlir::Value index(mlir::OpBuilder &b, mlir::Location loc, int64_t v);

/// The indices of `linear` in a row-major space of `sizes`.
llvm::SmallVector<mlir::Value> delinearize(mlir::OpBuilder &b,
                                           mlir::Location loc,
                                           mlir::Value linear,
                                           llvm::ArrayRef<int64_t> sizes);

/// The memref indices an operand with indexing map `map` reads at loop
/// point `point`.
llvm::SmallVector<mlir::Value>
operandIndices(mlir::OpBuilder &b, mlir::Location loc, mlir::AffineMap map,
               llvm::ArrayRef<mlir::Value> point);

/// How a kernel reads and writes its buffer operands: memref.load and
/// memref.store on the operand itself, unless a subclass keeps some of them
/// elsewhere (a row in shared memory).
struct Memory {
  virtual ~Memory() = default;
  virtual mlir::Value load(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value memref, mlir::ValueRange indices) const;
  virtual void store(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                     mlir::Value memref, mlir::ValueRange indices) const;
};

/// Plain memref.load and memref.store.
const Memory &globalMemory();

/// A reduction a block can share: the body yields `combiner(out, x)` and
/// reads the output nowhere else.
struct Combiner {
  mlir::Operation *op = nullptr;
  mlir::Value partial; // x, computed from the inputs
  mlir::gpu::AllReduceOperation kind;
};

/// The combiner of a one-output reduction whose body combines by addf,
/// maximumf, minimumf, maxnumf or minnumf on floats, or by addi, maxsi,
/// minsi, maxui or minui on integers, if it has one.
std::optional<Combiner> findCombiner(mlir::linalg::GenericOp op);

/// The value `kind` leaves unchanged, of (float or integer) type `type`.
mlir::Value identity(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::gpu::AllReduceOperation kind, mlir::Type type);

/// `c`'s combiner applied to `acc` and `x`.
mlir::Value combine(mlir::OpBuilder &b, const Combiner &c, mlir::Value acc,
                    mlir::Value x);

/// Loads the operands `op`'s body reads at `point`, clones the body (all of
/// it, or up to `stopAt`, a combiner, whose `partial` value is returned), and
/// returns what it yields. `outs` replaces the outputs' loaded values when
/// given (a reduction's running values).
llvm::SmallVector<mlir::Value>
emitBody(mlir::OpBuilder &b, mlir::Location loc, mlir::linalg::GenericOp op,
         llvm::ArrayRef<mlir::Value> point, mlir::Operation *stopAt,
         mlir::Value partial, mlir::ValueRange outs = {},
         const Memory &memory = globalMemory());

/// The combination by `c` of `op`'s partial values over `count` reduced
/// points, across the block: each thread folds the points from `thread` on,
/// `threads` apart (`pointAt` gives reduced point r's loop point), then the
/// block combines with gpu.all_reduce. Every thread gets the total.
mlir::Value reduceAcrossBlock(
    mlir::OpBuilder &b, mlir::Location loc, mlir::linalg::GenericOp op,
    const Combiner &c, mlir::Value thread, int64_t threads, int64_t count,
    llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::OpBuilder &,
                                                      mlir::Value r)>
        pointAt,
    const Memory &memory = globalMemory());

/// Thread 0 combines `total` with `op`'s output at `point` and stores it.
void storeCombined(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::linalg::GenericOp op, const Combiner &c,
                   mlir::Value thread, llvm::ArrayRef<mlir::Value> point,
                   mlir::Value total, const Memory &memory = globalMemory());

/// Stores `values` into `op`'s outputs at `point`.
void storeOutputs(mlir::OpBuilder &b, mlir::Location loc,
                  mlir::linalg::GenericOp op, llvm::ArrayRef<mlir::Value> point,
                  mlir::ValueRange values,
                  const Memory &memory = globalMemory());

/// A one-dimensional launch of `blocks` x `threads` at `b`'s insertion
/// point, with a workgroup (shared memory) buffer of each of `workgroup`'s
/// types; `build` fills its body, given the block and thread ids.
mlir::gpu::LaunchOp
launch(mlir::OpBuilder &b, mlir::Location loc, int64_t blocks, int64_t threads,
       llvm::function_ref<void(mlir::OpBuilder &, mlir::Value block,
                               mlir::Value thread)>
           build,
       mlir::TypeRange workgroup = {});

} // namespace cleave::gpu_kernel

#endif // CLEAVE_LIB_TRANSFORMS_GPUKERNELBUILDER_H
