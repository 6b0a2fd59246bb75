//===- Annotate.cpp - Writing sharding hints into an ONNX model -----------===//

#include "cleave/Sharding/Annotate.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Import/ModelFile.h"
#include "cleave/Sharding/OnnxSharding.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fstream>
#include <map>

using namespace cleave;

static llvm::Error annotateError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {

/// A tensor of the graph that hints can name.
struct NamedTensor {
  int64_t rank = -1;          // -1: unknown (intermediate, no value_info)
  std::vector<int64_t> shape; // empty dims unknown
  int producer = -1;          // node index, -1 for inputs/initializers
  std::vector<int> consumers; // node indices
};

void recordType(NamedTensor &t, const onnx::TypeProto &type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape())
    return;
  const auto &shape = type.tensor_type().shape();
  t.rank = shape.dim_size();
  t.shape.clear();
  for (const auto &dim : shape.dim())
    t.shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
}

} // namespace

llvm::Expected<AnnotateResult>
cleave::annotateOnnxModel(llvm::StringRef inPath, llvm::StringRef outPath,
                          const MeshSpec &mesh, const HintFile &hints) {
  auto model = loadOnnxModelFile(inPath);
  if (!model)
    return model.takeError();
  onnx::GraphProto &graph = *model->mutable_graph();

  // Every tensor a hint can name, with what is known of its shape.
  std::map<std::string, NamedTensor> tensors;
  for (const auto &init : graph.initializer()) {
    NamedTensor &t = tensors[init.name()];
    t.rank = init.dims_size();
    t.shape.assign(init.dims().begin(), init.dims().end());
  }
  for (const auto &input : graph.input())
    recordType(tensors[input.name()], input.type());
  for (const auto &output : graph.output())
    recordType(tensors[output.name()], output.type());
  for (const auto &info : graph.value_info())
    recordType(tensors[info.name()], info.type());
  for (int n = 0; n < graph.node_size(); ++n) {
    for (const std::string &in : graph.node(n).input())
      if (!in.empty())
        tensors[in].consumers.push_back(n);
    for (const std::string &out : graph.node(n).output())
      if (!out.empty())
        tensors[out].producer = n;
  }

  // Match hints; each tensor gets one spec.
  std::vector<HintTarget> targets;
  for (auto &[name, tensor] : tensors) {
    HintTarget target{name, std::nullopt};
    if (tensor.rank >= 0)
      target.shape =
          llvm::SmallVector<int64_t>(tensor.shape.begin(), tensor.shape.end());
    targets.push_back(std::move(target));
  }
  AnnotateResult result;
  std::vector<HintMatch> matches;
  std::vector<const ShardHint *> unmatched;
  std::string firstProblem;
  if (!matchHints(hints.shardings, mesh, targets, matches, unmatched,
                  [&](const std::string &message) {
                    if (firstProblem.empty())
                      firstProblem = message;
                  }))
    return annotateError(firstProblem);
  for (const ShardHint *hint : unmatched)
    result.unmatched.push_back("'" + hint->pattern + "' (" + hint->origin +
                               ")");

  // Replace earlier annotations of ours, then write the new ones.
  for (auto &node : *graph.mutable_node()) {
    auto *configs = node.mutable_device_configurations();
    for (int i = configs->size() - 1; i >= 0; --i)
      if (configs->Get(i).configuration_id() == kOnnxMeshConfiguration)
        configs->DeleteSubrange(i, 1);
  }
  auto specFor =
      [&](onnx::NodeProto &node) -> onnx::NodeDeviceConfigurationProto & {
    for (auto &config : *node.mutable_device_configurations())
      if (config.configuration_id() == kOnnxMeshConfiguration)
        return config;
    auto *config = node.add_device_configurations();
    config->set_configuration_id(kOnnxMeshConfiguration.str());
    return *config;
  };
  for (const HintMatch &match : matches) {
    const std::string &name = match.name;
    ShardHint named = *match.hint;
    named.pattern = name;
    auto spec = onnxSpecFromHint(named, mesh);
    if (!spec)
      return spec.takeError();
    const NamedTensor &tensor = tensors[name];
    std::vector<int> nodes = tensor.producer >= 0
                                 ? std::vector<int>{tensor.producer}
                                 : tensor.consumers;
    for (int n : nodes) {
      onnx::ShardingSpecProto *out =
          specFor(*graph.mutable_node(n)).add_sharding_spec();
      out->set_tensor_name(name);
      for (int64_t device : spec->devices)
        out->add_device(device);
      for (auto &[id, group] : spec->deviceGroups) {
        auto *entry = out->add_index_to_device_group_map();
        entry->set_key(id);
        for (int64_t r : group)
          entry->add_value(r);
      }
      for (auto [axis, shards] : spec->shardedDims) {
        auto *dim = out->add_sharded_dim();
        dim->set_axis(axis);
        auto *simple = dim->add_simple_sharding();
        if (axis < static_cast<int64_t>(tensor.shape.size()) &&
            tensor.shape[axis] > 0)
          simple->set_dim_value(tensor.shape[axis]);
        simple->set_num_shards(shards);
      }
    }
    ++result.annotated;
  }

  // The mesh: a device configuration for its ranks, and its axis names.
  auto *configs = model->mutable_configuration();
  for (int i = configs->size() - 1; i >= 0; --i)
    if (configs->Get(i).name() == kOnnxMeshConfiguration)
      configs->DeleteSubrange(i, 1);
  auto *config = model->add_configuration();
  config->set_name(kOnnxMeshConfiguration.str());
  config->set_num_devices(mesh.rankCount());
  for (int64_t r = 0; r < mesh.rankCount(); ++r)
    config->add_device("rank" + std::to_string(r));
  bool found = false;
  for (auto &prop : *model->mutable_metadata_props())
    if (prop.key() == kMeshMetadataKey) {
      prop.set_value(mesh.str());
      found = true;
    }
  if (!found) {
    auto *prop = model->add_metadata_props();
    prop->set_key(kMeshMetadataKey.str());
    prop->set_value(mesh.str());
  }
  if (model->ir_version() < 11)
    model->set_ir_version(11);

  // External data is referenced relative to the model: keep it reachable.
  bool external = false;
  for (const auto &init : graph.initializer())
    external |= init.data_location() == onnx::TensorProto::EXTERNAL;
  llvm::SmallString<256> inDir(inPath), outDir(outPath);
  llvm::sys::path::remove_filename(inDir);
  llvm::sys::path::remove_filename(outDir);
  llvm::sys::fs::make_absolute(inDir);
  llvm::sys::fs::make_absolute(outDir);
  if (external && inDir != outDir)
    return annotateError("'" + inPath +
                         "' keeps weights in external files, which are found "
                         "relative to the model: write the annotated model to "
                         "the same folder");

  std::string partial = (outPath + ".partial").str();
  {
    std::ofstream out(partial, std::ios::binary);
    if (!out || !model->SerializeToOstream(&out))
      return annotateError("cannot write '" + partial + "'");
  }
  if (std::error_code ec = llvm::sys::fs::rename(partial, outPath))
    return annotateError("cannot write '" + outPath + "': " + ec.message());
  return result;
}
