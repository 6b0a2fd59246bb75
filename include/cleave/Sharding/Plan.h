//===- Plan.h - From sharding hints to shard dialect annotations ----------===//
//
// Turns a mesh and the shardings asked for (hints file, ONNX sharding fields,
// a preset) into a `shard.grid` and `shard.shard` annotations on the imported
// @main, ready for upstream sharding propagation:
//
//   - a hinted parameter is annotated as split, so each rank holds a slice;
//   - a hinted graph input stays whole in the program's signature (every rank
//     reads the whole .npy) and is sliced locally for its users;
//   - a hinted intermediate value is annotated where it is produced;
//   - every output is gathered whole on every rank before it is returned.
//
// Every hint is checked against the model and the mesh, and each problem is
// reported naming the hint and where it was written.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_PLAN_H
#define CLEAVE_SHARDING_PLAN_H

#include "cleave/Sharding/Grid.h"
#include "cleave/Sharding/Hints.h"
#include "cleave/Sharding/Mesh.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace cleave {

/// Split axes per dimension, as grid axis indices.
using SplitAxes = llvm::SmallVector<llvm::SmallVector<int16_t>>;

/// A sharding chosen for one value of @main, and why.
struct ValueSharding {
  mlir::Value value;
  SplitAxes axes;
  /// Where it came from: a hint's file position, an ONNX node, a preset rule.
  std::string origin;
};

/// Matches `hints` against the named values of the model (ONNX names to
/// values of @main) and checks each match: rank, axes of the mesh,
/// divisibility, conflicts between hints. Hints that match nothing are
/// reported as one warning.
mlir::FailureOr<std::vector<ValueSharding>>
resolveHints(mlir::ModuleOp module, const MeshSpec &mesh,
             llvm::ArrayRef<ShardHint> hints,
             const llvm::StringMap<mlir::Value> &names);

/// Adds the grid for `mesh` and annotates @main with `shardings` (later
/// entries for the same value are ignored), every output gathered whole.
mlir::LogicalResult annotateShardings(mlir::ModuleOp module,
                                      const MeshSpec &mesh,
                                      llvm::ArrayRef<ValueSharding> shardings);

/// The mesh recorded on a module by annotateShardings, if any.
std::optional<MeshSpec> meshOf(mlir::ModuleOp module);

/// The Megatron-style shardings of the transformer layers in @main: the
/// projections that open a block of head-local or feature-local work (QKV,
/// MLP up and gate) split by output feature, the projection that closes it
/// (attention output, MLP down) split by input feature, biases alike, and an
/// LM head split by vocabulary when its output leaves the model. Shardings
/// are on `axis`; blocks whose dimensions the axis does not divide are left
/// replicated, with a remark.
///
/// A projection fused of parts that cannot split alike (Q beside a single
/// key/value head) is first given one GEMM a part (unfuseProjection), unless
/// `given` (the shardings of hints and of the model's own fields, which the
/// preset yields to) names its parameters.
/// The vocabulary of @main as the megatron preset sees it: the lookups
/// (a generic reading a 2-D parameter row by row, whole columns) of the
/// table with the most rows, as Megatron-LM splits only the token
/// embedding. A table read only at constant rows (T5's relative position
/// bias) is no vocabulary. Empty when there is none.
llvm::SmallVector<std::pair<mlir::BlockArgument, mlir::Operation *>>
vocabularyLookups(mlir::func::FuncOp main);

std::vector<ValueSharding>
megatronShardings(mlir::ModuleOp module, const MeshSpec &mesh,
                  llvm::StringRef axis, llvm::ArrayRef<ValueSharding> given);

/// Rewrites `matmul`, a GEMM by a parameter whose output is read only in
/// column ranges of more than one size (a fused projection of Q and fewer
/// key/value heads), into one GEMM a range, each by a new
/// parameter holding those columns of the old (`cleave.param_block`); the
/// old parameters go where nothing else reads them. Returns the new GEMMs in
/// column order, or nothing, changing nothing, where the pattern does not
/// hold or a value it would replace (a parameter, a slice's result) is in
/// `fixed`.
llvm::SmallVector<mlir::Operation *>
unfuseProjection(mlir::func::FuncOp main, mlir::Operation *matmul,
                 const llvm::DenseSet<mlir::Value> &fixed);

} // namespace cleave

#endif // CLEAVE_SHARDING_PLAN_H
