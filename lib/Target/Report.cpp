//===- Report.cpp - The plan report of a bundle ---------------------------===//
//
// plan.txt (and --report): what each rank holds and what ranks exchange, tied
// to the model's names, so that a user can check a sharding plan by reading.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Bundle.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <map>

using namespace cleave;

namespace {

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") + std::to_string(d);
  return s;
}

std::string axesString(const ModelSignature &sig,
                       llvm::ArrayRef<int16_t> axes) {
  llvm::SmallVector<std::string> names;
  for (int16_t a : axes)
    names.push_back(sig.mesh.axisNames[a]);
  return names.size() == 1 ? names.front()
                           : "[" + llvm::join(names, ", ") + "]";
}

/// `[null, tp]`, or `whole` when nothing is split.
std::string shardingString(const ModelSignature &sig,
                           const BufferSignature &b) {
  if (llvm::all_of(b.split, [](auto &axes) { return axes.empty(); }))
    return "whole";
  std::string s = "[";
  for (size_t d = 0; d < b.shape.size(); ++d) {
    s += d ? ", " : "";
    s += d < b.split.size() && !b.split[d].empty() ? axesString(sig, b.split[d])
                                                   : "null";
  }
  return s + "]";
}

/// A parameter's name, with the block of the model's tensor it holds if it
/// holds one: `w[:, 64:80]`.
std::string paramName(const BufferSignature &b) {
  if (b.blockDim < 0)
    return b.name;
  llvm::SmallVector<std::string> ranges(b.globalShape.size(), ":");
  ranges[b.blockDim] =
      std::to_string(b.blockOffset) + ":" +
      std::to_string(b.blockOffset + b.globalShape[b.blockDim]);
  return b.name + "[" + llvm::join(ranges, ", ") + "]";
}

std::string bytesString(uint64_t bytes) {
  if (bytes >= (10ull << 20))
    return llvm::formatv("{0} ({1:F1} MiB)", bytes, bytes / 1048576.0).str();
  if (bytes >= (10ull << 10))
    return llvm::formatv("{0} ({1:F1} KiB)", bytes, bytes / 1024.0).str();
  return std::to_string(bytes);
}

} // namespace

std::string cleave::planReport(const ModelSignature &sig,
                               const BundleOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "Cleave plan for " << options.modelPath << "\n";
  int64_t ranks = sig.mesh.rankCount();
  if (sig.mesh.axisNames.empty())
    os << "mesh: none (1 rank)";
  else
    os << "mesh: " << sig.mesh.str() << " (" << ranks
       << (ranks == 1 ? " rank)" : " ranks)");
  if (options.cudaRoot.empty())
    os << ", target: cpu (" << llvm::sys::getHostCPUName() << ")";
  else
    os << ", target: cuda (" << options.gpuArch << ")";
  if (options.precision != Precision::F32)
    os << ", GEMM operands " << precisionName(options.precision)
       << " (float32 results)";
  os << "\n";
  // Ranks are numbered in mesh order, the last axis fastest, and
  // cleave-run fills each host's slots in rank order.
  if (ranks > 1 && sig.mesh.axisNames.size() > 1) {
    llvm::StringRef inner = sig.mesh.axisNames.back();
    int64_t innerSize = sig.mesh.axisSizes.back();
    os << "placement: ranks in mesh order, " << inner
       << " fastest: each " << inner << " group is " << innerSize
       << " consecutive ranks; across hosts, slots a multiple of "
       << innerSize << " keep each " << inner
       << " group on one host, the other axes ("
       << llvm::join(llvm::ArrayRef(sig.mesh.axisNames).drop_back(), ", ")
       << ") across hosts\n";
  } else if (ranks > 1) {
    os << "placement: ranks in mesh order; across hosts, the "
       << sig.mesh.axisNames.front()
       << " group spans them (its collectives cross the network)\n";
  }
  os << "\n";

  const PipelineSignature &pipe = sig.pipeline;
  bool pipelined = pipe.stages > 1 || pipe.microbatches > 1;
  // Parameter bytes a rank of each stage holds (the most, over its ranks).
  std::vector<uint64_t> stageParams(pipe.stages, 0);
  for (int64_t r = 0; r < ranks; ++r)
    stageParams[sig.stageOf(r)] =
        std::max(stageParams[sig.stageOf(r)], sig.paramBytesHeldBy(r));
  uint64_t inModel = 0, io = 0, splitPerRank = 0, splitInModel = 0;
  size_t params = 0, split = 0;
  for (const BufferSignature &buffer : sig.buffers)
    if (buffer.kind != BufferSignature::Kind::Param)
      io += buffer.bytes;
  for (const BufferSignature &buffer : sig.buffers)
    for (const BufferSignature *param : buffer.modelParams()) {
      const BufferSignature &b = *param;
      ++params;
      uint64_t whole = b.bytes;
      for (size_t d = 0; d < b.shape.size(); ++d)
        whole = whole / b.shape[d] * b.globalShape[d];
      inModel += whole;
      if (shardingString(sig, b) != "whole") {
        ++split;
        splitPerRank += b.bytes;
        splitInModel += whole;
      }
    }
  uint64_t perRank = *std::max_element(stageParams.begin(), stageParams.end());
  os << "Parameters: " << params << " (" << split << " split), "
     << bytesString(inModel) << " bytes in the model, " << bytesString(perRank)
     << " bytes per rank\n";
  if (split > 0)
    os << llvm::format("Split parameters: %llu bytes in the model, %llu bytes "
                       "per rank (1/%.2f)\n",
                       (unsigned long long)splitInModel,
                       (unsigned long long)splitPerRank,
                       double(splitInModel) / double(splitPerRank));
  for (const BufferSignature &buffer : sig.buffers)
    for (const BufferSignature *param : buffer.modelParams()) {
      const BufferSignature &b = *param;
      os << llvm::format(
          "  %-40s %-5s %-12s %-14s %12llu bytes/rank", paramName(b).c_str(),
          b.dtype.c_str(), shapeString(b.globalShape).c_str(),
          shardingString(sig, b).c_str(), (unsigned long long)b.bytes);
      if (pipe.stages > 1) {
        llvm::SmallVector<std::string> list;
        for (int64_t st : b.stages)
          list.push_back(std::to_string(st));
        os << "  stage" << (list.size() == 1 ? " " : "s ")
           << llvm::join(list, ",");
      }
      if (!b.origin.empty())
        os << "  <- " << b.origin;
      else if (shardingString(sig, b) != "whole")
        os << "  <- propagated";
      if (!b.columnGroups.empty())
        os << " (stored reordered: " << b.columnGroups.size()
           << " fused parts, each split by rank)";
      if (!buffer.parts.empty()) {
        llvm::SmallVector<std::string> others;
        for (const BufferSignature &part : buffer.parts)
          if (&part != param)
            others.push_back(paramName(part));
        os << " (joined into one GEMM with " << llvm::join(others, ", ") << ")";
      }
      os << "\n";
    }

  if (pipelined) {
    int64_t p = pipe.stages, m = pipe.microbatches;
    std::string axis = pipe.axis >= 0 ? sig.mesh.axisNames[pipe.axis] : "none";
    os << "\nPipeline: " << p << " stage" << (p == 1 ? "" : "s") << " on axis "
       << axis << ", " << m << " microbatch" << (m == 1 ? "" : "es")
       << llvm::format("; predicted bubble (p-1)/(m+p-1) = %.2f\n",
                       double(p - 1) / double(m + p - 1));
    os << "  stage  ranks              predicted/microbatch  params/rank\n";
    double largest = 0, smallest = 0;
    for (int64_t st = 0; st < p; ++st) {
      llvm::SmallVector<std::string> ranksOf;
      for (int64_t r = 0; r < ranks; ++r)
        if (sig.stageOf(r) == st)
          ranksOf.push_back(std::to_string(r));
      double seconds = st < int64_t(pipe.seconds.size()) ? pipe.seconds[st] : 0;
      largest = st == 0 ? seconds : std::max(largest, seconds);
      smallest = st == 0 ? seconds : std::min(smallest, seconds);
      os << llvm::format("  %-6lld %-18s %14.4f ms      %s\n", (long long)st,
                         llvm::join(ranksOf, ",").c_str(), seconds * 1e3,
                         bytesString(stageParams[st]).c_str());
    }
    if (p > 1 && smallest > 0)
      os << llvm::format(
          "  balance (largest / smallest predicted stage): %.3f\n",
          largest / smallest);
    uint64_t crossing = 0;
    for (const TransferSignature &t : pipe.transfers)
      crossing += t.bytes;
    os << "Transfers per microbatch: " << pipe.transfers.size() << ", "
       << bytesString(crossing) << " bytes\n";
    for (const TransferSignature &t : pipe.transfers)
      os << llvm::format(
          "  stage %lld -> %lld %12llu bytes  from ONNX node '%s'\n",
          (long long)t.from, (long long)t.to, (unsigned long long)t.bytes,
          t.node.c_str());
  }

  uint64_t sent = 0;
  std::map<std::string, int> byKind;
  for (const CollectiveSignature &c : sig.collectives) {
    sent += c.bytes;
    ++byKind[c.kind];
  }
  // Collectives in a microbatch loop run once per microbatch.
  os << "\nCollectives per " << (pipe.microbatches > 1 ? "microbatch" : "run")
     << ": " << sig.collectives.size();
  for (auto &[kind, count] : byKind)
    os << ", " << count << " " << kind;
  os << "; " << bytesString(sent) << " bytes per rank\n";
  for (const CollectiveSignature &c : sig.collectives) {
    // Collectives are named by the ONNX node they serve, or the output.
    std::string where = llvm::StringRef(c.node).starts_with("graph output")
                            ? c.node
                            : "ONNX node '" + c.node + "'";
    os << llvm::format("  %-15s over %-8s %10llu bytes  at %s\n",
                       c.kind.c_str(), axesString(sig, c.axes).c_str(),
                       (unsigned long long)c.bytes, where.c_str());
  }

  os << "\nMemory per rank:\n"
     << "  weights              " << bytesString(perRank) << "\n"
     << "  inputs and outputs   " << bytesString(io) << "\n"
     << "  intermediates (peak) " << bytesString(sig.activationPeakBytes)
     << "\n"
     << "  total                "
     << bytesString(perRank + io + sig.activationPeakBytes) << "\n";
  return text;
}
