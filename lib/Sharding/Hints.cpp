//===- Hints.cpp - Sharding hints from a YAML file -------------------------===//

#include "cleave/Sharding/Hints.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Casting.h"
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
        return error(root, "expected a mapping with a 'shardings' key");
      for (yaml::KeyValueNode &entry : *map) {
        std::optional<std::string> key = scalar(entry.getKey());
        if (!key)
          return error(entry.getKey(), "expected a key");
        if (*key != "shardings")
          return error(entry.getKey(), "unknown key '" + *key +
                                           "' (known keys: shardings)");
        if (llvm::Error err = parseShardings(entry.getValue(), file))
          return std::move(err);
      }
    }
    if (stream.failed())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     bufferName + ": not valid YAML");
    return file;
  }

private:
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
