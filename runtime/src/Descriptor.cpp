//===- Descriptor.cpp - Parsing cleave_model_desc -------------------------===//

#include "Runtime.h"

#include "cleave/Runtime/Abi.h"

#include <cstdlib>
#include <sstream>

using namespace cleave::rt;

int64_t BufferDesc::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string BufferDesc::shapeString() const {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

std::string cleave::rt::percentDecode(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out.push_back(static_cast<char>(
          std::strtol(text.substr(i + 1, 2).c_str(), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

ModelDesc cleave::rt::parseModelDesc(const char *text) {
  std::istringstream in(text);
  std::string line;
  ModelDesc desc;
  bool sawHeader = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind.empty())
      continue;
    if (kind == CLEAVE_DESC_HEADER) {
      int version = 0;
      fields >> version;
      if (version != CLEAVE_ABI_VERSION)
        throw RuntimeError("the compiled model uses ABI version " +
                           std::to_string(version) + ", this runtime " +
                           std::to_string(CLEAVE_ABI_VERSION));
      sawHeader = true;
      continue;
    }
    if (kind == CLEAVE_DESC_WEIGHTS) {
      size_t ranks = 0;
      fields >> ranks;
      for (size_t r = 0; r < ranks; ++r) {
        uint64_t bytes = 0;
        std::string checksum;
        fields >> bytes >> checksum;
        desc.weightBytes.push_back(bytes);
        desc.weightChecksums.push_back(
            std::strtoull(checksum.c_str(), nullptr, 16));
      }
      if (!fields)
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      continue;
    }
    if (kind == CLEAVE_DESC_WRITER) {
      fields >> desc.writer;
      if (!fields)
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      continue;
    }
    if (kind == CLEAVE_DESC_PIPELINE) {
      fields >> desc.stageAxis >> desc.stages >> desc.microbatches;
      if (!fields)
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      double seconds;
      while (fields >> seconds)
        desc.stageSeconds.push_back(seconds);
      continue;
    }
    if (kind == CLEAVE_DESC_MESH) {
      size_t axes = 0;
      fields >> desc.ranks >> axes;
      desc.meshSizes.resize(axes);
      for (int64_t &size : desc.meshSizes)
        fields >> size;
      if (!fields)
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      continue;
    }
    if (kind == CLEAVE_DESC_BOUNDS) {
      IndexBound bound;
      std::string input, node;
      fields >> input >> bound.low >> bound.high >> node;
      if (!fields)
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      bound.input = percentDecode(input);
      bound.node = percentDecode(node);
      desc.indexBounds.push_back(std::move(bound));
      continue;
    }
    if (kind == CLEAVE_DESC_GROUP) {
      size_t axes = 0;
      fields >> axes;
      std::vector<int> group(axes);
      for (int &axis : group)
        fields >> axis;
      if (!fields)
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      desc.groups.push_back(std::move(group));
      continue;
    }
    BufferDesc b;
    if (kind == CLEAVE_DESC_INPUT)
      b.kind = BufferKind::Input;
    else if (kind == CLEAVE_DESC_PARAM)
      b.kind = BufferKind::Param;
    else if (kind == CLEAVE_DESC_OUTPUT)
      b.kind = BufferKind::Output;
    else
      throw RuntimeError("malformed model descriptor line '" + line + "'");
    std::string name;
    size_t rank = 0;
    fields >> name >> b.dtype >> rank;
    b.name = percentDecode(name);
    b.shape.resize(rank);
    for (int64_t &d : b.shape)
      fields >> d;
    if (b.kind == BufferKind::Param) {
      fields >> b.bytes;
      int64_t offset;
      while (fields >> offset)
        b.offsets.push_back(offset);
      if (b.offsets.empty())
        throw RuntimeError("malformed model descriptor line '" + line + "'");
      fields.clear();
    } else
      b.bytes = b.numElements() * dtypeBytes(b.dtype);
    if (!fields || dtypeBytes(b.dtype) == 0)
      throw RuntimeError("malformed model descriptor line '" + line + "'");
    desc.buffers.push_back(std::move(b));
  }
  if (!sawHeader)
    throw RuntimeError("the model descriptor has no header");
  return desc;
}

GenerationDesc cleave::rt::parseGenerationDesc(const char *text) {
  std::istringstream in(text);
  std::string line;
  GenerationDesc desc;
  auto malformed = [&] {
    return RuntimeError("malformed generation descriptor line '" + line + "'");
  };
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind.empty())
      continue;
    if (kind == CLEAVE_GEN_GENERATE) {
      if (!(fields >> desc.maxSeq >> desc.maxBatch >> desc.promptLength >>
            desc.vocabulary >> desc.cacheWrite) ||
          (desc.cacheWrite != "end" && desc.cacheWrite != "count" &&
           desc.cacheWrite != "position"))
        throw malformed();
    } else if (kind == CLEAVE_GEN_ROLE) {
      std::string role, name;
      if (!(fields >> role >> name))
        throw malformed();
      name = percentDecode(name);
      if (role == "ids")
        desc.ids = name;
      else if (role == "mask")
        desc.mask = name;
      else if (role == "positions")
        desc.positions = name;
      else if (role == "cache_position")
        desc.cachePosition = name;
      else if (role == "logits")
        desc.logits = name;
      else
        throw malformed();
    } else if (kind == CLEAVE_GEN_CACHE) {
      GenerationDesc::Cache cache;
      if (!(fields >> cache.past >> cache.present >> cache.batchDim >>
            cache.seqDim))
        throw malformed();
      for (int64_t stage; fields >> stage;)
        cache.stages.push_back(stage);
      cache.past = percentDecode(cache.past);
      cache.present = percentDecode(cache.present);
      desc.caches.push_back(cache);
    } else {
      throw malformed();
    }
  }
  if (desc.maxSeq < 2 || desc.maxBatch < 1 || desc.promptLength < 1 ||
      desc.vocabulary < 1 || desc.ids.empty() || desc.mask.empty() ||
      (desc.positions.empty() && desc.cacheWrite == "end") ||
      (desc.cachePosition.empty() && desc.cacheWrite == "position") ||
      desc.logits.empty() || desc.caches.empty())
    throw RuntimeError("the generation descriptor is incomplete");
  return desc;
}
