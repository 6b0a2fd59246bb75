//===- OnnxSharding.cpp - ONNX sharding fields to and from mesh hints -----===//

#include "cleave/Sharding/OnnxSharding.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace cleave;

static llvm::Error specError(const OnnxShardingSpec &spec,
                             const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "sharding spec of '" + spec.tensorName +
                                     "' in ONNX node '" + spec.nodeName +
                                     "': " + why);
}

/// Every ordered list of distinct axes whose sizes multiply to `shards`.
static void axisLists(const MeshSpec &mesh, int64_t shards,
                      llvm::SmallVector<int16_t> &prefix,
                      std::vector<llvm::SmallVector<int16_t>> &out) {
  if (mesh.groupSize(prefix) == shards && !prefix.empty())
    out.push_back(prefix);
  for (int16_t a = 0; a < static_cast<int16_t>(mesh.axisSizes.size()); ++a) {
    if (llvm::is_contained(prefix, a) ||
        mesh.groupSize(prefix) * mesh.axisSizes[a] > shards)
      continue;
    prefix.push_back(a);
    axisLists(mesh, shards, prefix, out);
    prefix.pop_back();
  }
}

llvm::Expected<ShardHint> cleave::hintFromOnnxSpec(const OnnxShardingSpec &spec,
                                                   int64_t rank,
                                                   const MeshSpec &mesh) {
  int64_t total = 1;
  for (auto [axis, shards] : spec.shardedDims) {
    if (axis < -rank || axis >= rank)
      return specError(spec, "axis " + llvm::Twine(axis) +
                                 " is out of range for rank " +
                                 llvm::Twine(rank));
    if (shards <= 0)
      return specError(spec, "num_shards must be positive");
    total *= shards;
  }
  if (static_cast<int64_t>(spec.devices.size()) != total)
    return specError(spec, "lists " + llvm::Twine(spec.devices.size()) +
                               " devices for " + llvm::Twine(total) +
                               " shards");
  // The devices holding each shard.
  std::vector<llvm::SmallVector<int64_t>> holders;
  llvm::SmallSet<int64_t, 16> covered;
  for (int64_t d : spec.devices) {
    llvm::SmallVector<int64_t> group;
    auto it = spec.deviceGroups.find(d);
    if (it != spec.deviceGroups.end())
      group.assign(it->second.begin(), it->second.end());
    else
      group.push_back(d);
    for (int64_t r : group) {
      if (r < 0 || r >= mesh.rankCount())
        return specError(spec, "device " + llvm::Twine(r) +
                                   " is not a rank of the mesh (" + mesh.str() +
                                   ")");
      covered.insert(r);
    }
    holders.push_back(std::move(group));
  }
  if (static_cast<int64_t>(covered.size()) != mesh.rankCount())
    return specError(spec, "places the tensor on " +
                               llvm::Twine(covered.size()) +
                               " devices, the mesh (" + mesh.str() + ") has " +
                               llvm::Twine(mesh.rankCount()) + " ranks");

  ShardHint hint;
  hint.pattern = spec.tensorName;
  hint.origin = "ONNX node '" + spec.nodeName + "'";
  hint.dims.resize(rank);
  llvm::SmallVector<int16_t> used;
  for (auto [k, dim] : llvm::enumerate(spec.shardedDims)) {
    auto [axis, shards] = dim;
    if (shards == 1)
      continue;
    // The coordinate of shard s on sharded dimension k (row-major order).
    int64_t stride = 1;
    for (size_t j = k + 1; j < spec.shardedDims.size(); ++j)
      stride *= spec.shardedDims[j].second;
    std::vector<llvm::SmallVector<int16_t>> candidates;
    llvm::SmallVector<int16_t> prefix;
    axisLists(mesh, shards, prefix, candidates);
    const llvm::SmallVector<int16_t> *match = nullptr;
    for (const auto &axes : candidates) {
      if (llvm::any_of(axes,
                       [&](int16_t a) { return llvm::is_contained(used, a); }))
        continue;
      bool fits = true;
      for (size_t s = 0; fits && s < holders.size(); ++s)
        for (int64_t r : holders[s])
          fits &= mesh.indexInGroup(r, axes) == (int64_t(s) / stride) % shards;
      if (fits) {
        match = &axes;
        break;
      }
    }
    if (!match)
      return specError(spec, "no mesh axes of " + mesh.str() +
                                 " place its shards of dimension " +
                                 llvm::Twine(axis) + " on the listed devices");
    used.append(match->begin(), match->end());
    for (int16_t a : *match)
      hint.dims[axis < 0 ? axis + rank : axis].push_back(mesh.axisNames[a]);
  }
  return hint;
}

llvm::Expected<OnnxShardingSpec>
cleave::onnxSpecFromHint(const ShardHint &hint, const MeshSpec &mesh) {
  OnnxShardingSpec spec;
  spec.tensorName = hint.pattern;
  std::vector<llvm::SmallVector<int16_t>> dimAxes;
  for (auto [d, axes] : llvm::enumerate(hint.dims)) {
    if (axes.empty())
      continue;
    llvm::SmallVector<int16_t> indices;
    for (const std::string &name : axes) {
      std::optional<unsigned> index = mesh.axisIndex(name);
      if (!index)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "hint '" + hint.pattern + "' (" + hint.origin + "): axis '" + name +
                "' is not in the mesh (" + mesh.str() + ")");
      indices.push_back(*index);
    }
    spec.shardedDims.push_back({int64_t(d), mesh.groupSize(indices)});
    dimAxes.push_back(std::move(indices));
  }
  int64_t total = 1;
  for (auto [axis, shards] : spec.shardedDims)
    total *= shards;
  for (int64_t s = 0; s < total; ++s) {
    llvm::SmallVector<int64_t> group;
    for (int64_t r = 0; r < mesh.rankCount(); ++r) {
      int64_t index = 0;
      for (auto [k, axes] : llvm::enumerate(dimAxes))
        index = index * spec.shardedDims[k].second + mesh.indexInGroup(r, axes);
      if (index == s)
        group.push_back(r);
    }
    if (group.size() == 1) {
      spec.devices.push_back(group.front());
    } else {
      int64_t id = mesh.rankCount() + s;
      spec.devices.push_back(id);
      spec.deviceGroups[id].assign(group.begin(), group.end());
    }
  }
  return spec;
}
