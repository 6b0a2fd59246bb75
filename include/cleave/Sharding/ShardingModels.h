//===- ShardingModels.h - Sharding rules for ops upstream leaves out ------===//
//
// External models of the `shard` dialect's ShardingInterface for the tensor
// ops Cleave's importer emits and upstream MLIR 22 has no rule for:
// tensor.expand_shape and tensor.collapse_shape (a split dimension stays
// split on the outermost non-unit dimension of its reassociation group, so
// attention heads stay local through the reshapes), tensor.extract_slice (a
// dimension taken whole keeps its split), tensor.concat (every dimension but
// the concatenated one) and tensor.pad (every dimension that is not padded);
// linalg.softmax (every dimension but the softmax one); and arith.constant,
// whose upstream model cannot partition non-splat values. The importer never
// emits size-1 broadcast maps (it collapses the unit dimension), so they need
// no model.
// Upstream's sharding propagation aborts on any op without a rule.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_SHARDINGMODELS_H
#define CLEAVE_SHARDING_SHARDINGMODELS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace cleave {

/// Registers Cleave's ShardingInterface models for tensor dialect ops.
void registerTensorShardingModels(mlir::DialectRegistry &registry);

/// Registers Cleave's model for linalg.softmax (not a structured op, so
/// upstream's linalg models skip it).
void registerLinalgShardingModels(mlir::DialectRegistry &registry);

/// Registers Cleave's model for arith.constant, which replicates constants
/// that are not splats instead of failing. MLIR keeps the first model
/// attached to an op, so this must be registered before upstream's.
void registerArithShardingModels(mlir::DialectRegistry &registry);

/// Registers Cleave's models for index arithmetic (pipeline.microbatch,
/// arith's integer ops on scalars): alike on every rank, left as they are.
void registerScalarShardingModels(mlir::DialectRegistry &registry);

} // namespace cleave

#endif // CLEAVE_SHARDING_SHARDINGMODELS_H
