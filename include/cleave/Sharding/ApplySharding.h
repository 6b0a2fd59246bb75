//===- ApplySharding.h - Everything a compilation asks to split -*- C++ -*-===//
//
// The sharding step of a compilation, as one call: the mesh (given, or the
// model's own), the model's ONNX sharding fields, the hints file and the
// preset, resolved against the imported module and annotated on it; then
// the fixed pipeline-stage cuts. cleave-compile calls it after the import;
// so will any tool that compiles a model (verification, plan search).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_APPLYSHARDING_H
#define CLEAVE_SHARDING_APPLYSHARDING_H

#include "cleave/Import/OnnxImporter.h"
#include "cleave/Sharding/Hints.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace cleave {

/// What the user asked to split.
struct ShardingRequest {
  /// The mesh (`tp=2`, `pp=2,tp=2`); empty: the model's `cleave.mesh`
  /// metadata, else one rank.
  std::string mesh;
  /// The hints file's shardings and stage starts (--shard-hints).
  HintFile hints;
  /// A preset ("megatron") for what neither the hints nor the model's
  /// fields say; empty: none.
  std::string preset;
};

/// What the sharding step decided, for the partition phase.
struct ShardingDecision {
  /// Whether the module carries a mesh and shardings to partition.
  bool sharded = false;
  /// Pipeline stages and the mesh axis they run on (-1: one stage).
  unsigned stages = 1;
  int stageAxis = -1;
  /// Whether a graph input is split (data parallelism: its batch): the
  /// split must then be propagated forward first.
  bool splitsInputs = false;
};

/// Annotates `module` (just imported, with `extras`) with the mesh and every
/// sharding `request` asks for: the model's own sharding fields, the hints,
/// then the preset (which yields to both); then fixes the stage cuts from
/// the hints or the model's `pipeline_stage` fields. Leaves the module alone
/// when there is no mesh. Errors are reported on the module's location.
/// The mesh a compilation uses: `request.mesh`, else the model's
/// `cleave.mesh` metadata; empty for one rank.
std::string requestedMesh(const ImportExtras &extras,
                          const ShardingRequest &request);

mlir::FailureOr<ShardingDecision> applySharding(mlir::ModuleOp module,
                                                const ImportExtras &extras,
                                                const ShardingRequest &request);

} // namespace cleave

#endif // CLEAVE_SHARDING_APPLYSHARDING_H
