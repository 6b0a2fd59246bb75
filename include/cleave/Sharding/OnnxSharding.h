//===- OnnxSharding.h - ONNX sharding fields to and from mesh hints -------===//
//
// ONNX (IR 11) describes a sharded tensor by devices: how many shards each
// sharded dimension has, and which device or group of devices holds each
// shard. Cleave's hints name mesh axes instead. Reading a model recovers, for
// each sharded dimension, the mesh axes whose rank coordinates agree with
// every shard's devices; writing (cleave-annotate) produces the device lists
// the mesh implies.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_ONNXSHARDING_H
#define CLEAVE_SHARDING_ONNXSHARDING_H

#include "cleave/Import/OnnxImporter.h"
#include "cleave/Sharding/Hints.h"
#include "cleave/Sharding/Mesh.h"

namespace cleave {

/// The hint a sharding spec of a tensor of rank `rank` expresses on `mesh`,
/// or an error saying why no assignment of mesh axes matches its devices.
llvm::Expected<ShardHint> hintFromOnnxSpec(const OnnxShardingSpec &spec,
                                           int64_t rank, const MeshSpec &mesh);

/// The spec for a tensor split as `hint` says on `mesh` (axes checked by the
/// caller); device groups get ids from the rank count upwards.
llvm::Expected<OnnxShardingSpec> onnxSpecFromHint(const ShardHint &hint,
                                                  const MeshSpec &mesh);

} // namespace cleave

#endif // CLEAVE_SHARDING_ONNXSHARDING_H
