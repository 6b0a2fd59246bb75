//===- Hints.cpp - Sharding hints from a YAML file ------------------------===//

#include "cleave/Sharding/Hints.h"

#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"
#include "llvm/Support/raw_ostream.h"

using namespace cleave;
namespace yaml = llvm::yaml;
using llvm::dyn_cast;
using llvm::dyn_cast_or_null;
using llvm::isa;

std::string ShardHint::specString() const {
  std::string s = "[";
  for (auto [i, axes] : llvm::enumerate(dims)) {
    s += i ? ", " : "";
    if (axes.empty())
      s += "null";
    else if (axes.size() == 1)
      s += axes.front();
    else
      s += "[" + llvm::join(axes, ", ") + "]";
  }
  return s + "]";
}

std::string ShardHint::describe() const {
  return "hint '" + pattern + "' (" + origin + ")";
}

/// `[null, tp]` for grid axis indices.
static std::string axesString(const MeshSpec &mesh,
                              llvm::ArrayRef<llvm::SmallVector<int16_t>> axes) {
  std::string s = "[";
  for (auto [i, dim] : llvm::enumerate(axes)) {
    s += i ? ", " : "";
    if (dim.empty()) {
      s += "null";
      continue;
    }
    llvm::SmallVector<std::string> names;
    for (int16_t a : dim)
      names.push_back(mesh.axisNames[a]);
    s += dim.size() == 1 ? names.front() : "[" + llvm::join(names, ", ") + "]";
  }
  return s + "]";
}

bool cleave::matchHints(llvm::ArrayRef<ShardHint> hints, const MeshSpec &mesh,
                        llvm::ArrayRef<HintTarget> targets,
                        std::vector<HintMatch> &matches,
                        std::vector<const ShardHint *> &unmatched,
                        llvm::function_ref<void(const std::string &)> report) {
  bool ok = true;
  auto problem = [&](const ShardHint &hint, const llvm::Twine &what) {
    report(hint.describe() + what.str());
    ok = false;
  };
  llvm::StringMap<size_t> chosen; // tensor name -> index in matches
  for (const ShardHint &hint : hints) {
    // Axis names resolve against the mesh first: a bad axis is one problem,
    // not one per matched tensor.
    llvm::SmallVector<llvm::SmallVector<int16_t>> axes;
    bool hintOk = true;
    llvm::SmallSet<int16_t, 4> used;
    for (const DimAxes &dim : hint.dims) {
      llvm::SmallVector<int16_t> indices;
      for (const std::string &name : dim) {
        std::optional<unsigned> index = mesh.axisIndex(name);
        if (!index) {
          problem(hint, ": axis '" + name + "' is not in the mesh (" +
                            mesh.str() + ")");
          hintOk = false;
          continue;
        }
        if (!used.insert(*index).second) {
          problem(hint, ": axis '" + name + "' splits more than one dimension");
          hintOk = false;
        }
        indices.push_back(*index);
      }
      axes.push_back(std::move(indices));
    }
    if (!hintOk)
      continue;
    bool isGlob = hint.pattern.find_first_of("*?[") != std::string::npos;
    auto pattern = llvm::GlobPattern::create(hint.pattern);
    if (!pattern) {
      problem(hint,
              ": not a valid glob: " + llvm::toString(pattern.takeError()));
      continue;
    }
    bool matched = false;
    for (const HintTarget &target : targets) {
      const std::string &name = target.name;
      if (isGlob ? !pattern->match(name) : name != hint.pattern)
        continue;
      matched = true;
      if (target.shape && target.shape->size() != axes.size()) {
        problem(hint, " gives " + llvm::Twine(axes.size()) +
                          " dimensions, but tensor '" + name + "' has rank " +
                          llvm::Twine(target.shape->size()));
        continue;
      }
      for (auto [d, dim] : llvm::enumerate(axes)) {
        int64_t size = target.shape ? (*target.shape)[d] : -1;
        int64_t shards = mesh.groupSize(dim);
        if (size > 0 && size % shards != 0)
          problem(hint, ": dimension " + llvm::Twine(d) + " of '" + name +
                            "' (size " + llvm::Twine(size) +
                            ") is not divisible by " + llvm::Twine(shards) +
                            " (" + axesString(mesh, {dim}) + ")");
      }
      auto [it, inserted] = chosen.try_emplace(name, matches.size());
      if (!inserted) {
        const HintMatch &earlier = matches[it->second];
        if (earlier.axes != axes)
          problem(hint, " asks for " + axesString(mesh, axes) + " on '" + name +
                            "', which conflicts with " +
                            axesString(mesh, earlier.axes) + " from " +
                            earlier.hint->describe());
        continue;
      }
      matches.push_back({name, axes, &hint});
    }
    if (!matched)
      unmatched.push_back(&hint);
  }
  return ok;
}

namespace {

/// Walks the YAML document; the first error stops the walk.
class HintParser {
public:
  HintParser(llvm::StringRef text, llvm::StringRef name)
      : bufferName(name.str()),
        stream(llvm::MemoryBufferRef(text, name), sourceMgr,
               /*ShowColors=*/false) {
    sourceMgr.setDiagHandler([](const llvm::SMDiagnostic &, void *) {});
  }

  llvm::Expected<HintFile> parse() {
    HintFile file;
    for (yaml::Document &doc : stream) {
      yaml::Node *root = doc.getRoot();
      if (!root || isa<yaml::NullNode>(root))
        continue;
      auto *map = dyn_cast<yaml::MappingNode>(root);
      if (!map)
        return error(root, "expected a mapping with 'shardings' or 'stages'");
      for (yaml::KeyValueNode &entry : *map) {
        std::optional<std::string> key = scalar(entry.getKey());
        if (!key)
          return error(entry.getKey(), "expected a key");
        if (*key == "shardings") {
          if (llvm::Error err = parseShardings(entry.getValue(), file))
            return std::move(err);
        } else if (*key == "stages") {
          if (llvm::Error err = parseStages(entry.getValue(), file))
            return std::move(err);
        } else {
          return error(entry.getKey(), "unknown key '" + *key +
                                           "' (known keys: shardings, stages)");
        }
      }
    }
    if (stream.failed())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     bufferName + ": not valid YAML");
    return file;
  }

private:
  /// `stages:` a list of ONNX node names or globs, one per fixed cut.
  llvm::Error parseStages(yaml::Node *node, HintFile &file) {
    if (isa<yaml::NullNode>(node))
      return llvm::Error::success();
    auto *list = dyn_cast<yaml::SequenceNode>(node);
    if (!list)
      return error(node, "'stages' must list the ONNX nodes (names or globs) "
                         "where stages 1, 2, ... start");
    for (yaml::Node &entry : *list) {
      std::optional<std::string> pattern = scalar(&entry);
      if (!pattern || pattern->empty() || isa<yaml::NullNode>(&entry))
        return error(&entry, "expected an ONNX node name or glob");
      file.stages.push_back({*pattern, where(&entry)});
    }
    return llvm::Error::success();
  }

  llvm::Error parseShardings(yaml::Node *node, HintFile &file) {
    if (isa<yaml::NullNode>(node))
      return llvm::Error::success();
    auto *map = dyn_cast<yaml::MappingNode>(node);
    if (!map)
      return error(node, "'shardings' must map tensor names or globs to "
                         "one entry per dimension");
    for (yaml::KeyValueNode &entry : *map) {
      ShardHint hint;
      std::optional<std::string> pattern = scalar(entry.getKey());
      if (!pattern || pattern->empty())
        return error(entry.getKey(), "expected a tensor name or glob");
      hint.pattern = *pattern;
      hint.origin = where(entry.getKey());
      auto *dims = dyn_cast_or_null<yaml::SequenceNode>(entry.getValue());
      if (!dims)
        return error(entry.getValue() ? entry.getValue() : entry.getKey(),
                     "hint '" + hint.pattern +
                         "' must be a list with one entry per dimension, "
                         "e.g. [null, tp]");
      for (yaml::Node &dim : *dims) {
        DimAxes axes;
        if (auto *list = dyn_cast<yaml::SequenceNode>(&dim)) {
          for (yaml::Node &axis : *list) {
            std::optional<std::string> name = scalar(&axis);
            if (!name || isa<yaml::NullNode>(&axis))
              return error(&axis, "hint '" + hint.pattern +
                                      "': expected a mesh axis name");
            axes.push_back(*name);
          }
        } else if (!isa<yaml::NullNode>(&dim)) {
          std::optional<std::string> name = scalar(&dim);
          if (!name)
            return error(&dim, "hint '" + hint.pattern +
                                   "': expected null or a mesh axis name");
          if (*name != "null" && *name != "~" && !name->empty())
            axes.push_back(*name);
        }
        hint.dims.push_back(std::move(axes));
      }
      file.shardings.push_back(std::move(hint));
    }
    return llvm::Error::success();
  }

  std::optional<std::string> scalar(yaml::Node *node) {
    if (auto *s = dyn_cast_or_null<yaml::ScalarNode>(node)) {
      llvm::SmallString<64> storage;
      return s->getValue(storage).str();
    }
    if (auto *s = dyn_cast_or_null<yaml::BlockScalarNode>(node))
      return s->getValue().str();
    return std::nullopt;
  }

  std::string where(yaml::Node *node) {
    llvm::SMLoc loc = node->getSourceRange().Start;
    auto [line, col] = sourceMgr.getLineAndColumn(loc);
    return bufferName + ":" + std::to_string(line) + ":" + std::to_string(col);
  }

  llvm::Error error(yaml::Node *node, const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   where(node) + ": " + message);
  }

  std::string bufferName;
  llvm::SourceMgr sourceMgr;
  yaml::Stream stream;
};

} // namespace

llvm::Expected<HintFile> cleave::parseHints(llvm::StringRef text,
                                            llvm::StringRef bufferName) {
  return HintParser(text, bufferName).parse();
}

llvm::Expected<HintFile> cleave::parseHintFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot read hints file '" + path +
                                       "': " + buffer.getError().message());
  return parseHints((*buffer)->getBuffer(), path);
}
