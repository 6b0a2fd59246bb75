//===- Report.cpp - The plan report of a bundle ----------------------------===//
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
  return names.size() == 1 ? names.front() : "[" + llvm::join(names, ", ") + "]";
}

/// `[null, tp]`, or `whole` when nothing is split.
std::string shardingString(const ModelSignature &sig, const BufferSignature &b) {
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
  os << ", target: cpu (" << llvm::sys::getHostCPUName() << ")\n\n";

  uint64_t perRank = 0, inModel = 0, io = 0, splitPerRank = 0, splitInModel = 0;
  size_t params = 0, split = 0;
  for (const BufferSignature &b : sig.buffers) {
    if (b.kind != BufferSignature::Kind::Param) {
      io += b.bytes;
      continue;
    }
    ++params;
    perRank += b.bytes;
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
  os << "Parameters: " << params << " (" << split << " split), "
     << bytesString(inModel) << " bytes in the model, " << bytesString(perRank)
     << " bytes per rank\n";
  if (split > 0)
    os << llvm::format("Split parameters: %llu bytes in the model, %llu bytes "
                       "per rank (1/%.2f)\n",
                       (unsigned long long)splitInModel,
                       (unsigned long long)splitPerRank,
                       double(splitInModel) / double(splitPerRank));
  for (const BufferSignature &b : sig.buffers) {
    if (b.kind != BufferSignature::Kind::Param)
      continue;
    os << llvm::format("  %-40s %-5s %-12s %-14s %12llu bytes/rank",
                       b.name.c_str(), b.dtype.c_str(),
                       shapeString(b.globalShape).c_str(),
                       shardingString(sig, b).c_str(),
                       (unsigned long long)b.bytes);
    if (!b.origin.empty())
      os << "  <- " << b.origin;
    else if (shardingString(sig, b) != "whole")
      os << "  <- propagated";
    if (b.columnGroups > 0)
      os << " (stored reordered: " << b.columnGroups
         << " fused parts, each split by rank)";
    os << "\n";
  }

  uint64_t sent = 0;
  std::map<std::string, int> byKind;
  for (const CollectiveSignature &c : sig.collectives) {
    sent += c.bytes;
    ++byKind[c.kind];
  }
  os << "\nCollectives per run: " << sig.collectives.size();
  for (auto &[kind, count] : byKind)
    os << ", " << count << " " << kind;
  os << "; " << bytesString(sent) << " bytes per rank\n";
  for (const CollectiveSignature &c : sig.collectives) {
    // Collectives are named by the ONNX node they serve, or the output.
    std::string where = llvm::StringRef(c.node).starts_with("graph output")
                            ? c.node
                            : "ONNX node '" + c.node + "'";
    os << llvm::format("  %-15s over %-8s %10llu bytes  at %s\n", c.kind.c_str(),
                       axesString(sig, c.axes).c_str(),
                       (unsigned long long)c.bytes, where.c_str());
  }

  os << "\nMemory per rank:\n"
     << "  weights              " << bytesString(perRank) << "\n"
     << "  inputs and outputs   " << bytesString(io) << "\n"
     << "  intermediates (peak) " << bytesString(sig.activationPeakBytes) << "\n"
     << "  total                "
     << bytesString(perRank + io + sig.activationPeakBytes) << "\n";
  return text;
}
