//===- CostModel.h - What an op costs, and how long it takes --------------===//
//
// The cost model pipeline partitioning balances stages with. Each op of the
// imported (or partitioned) @main gets an OpCost: the arithmetic it does, the
// bytes it reads and writes, and the parameter and activation memory it
// holds. A MachineModel (peak FLOP/s, memory bandwidth, link bandwidth and
// latency, device memory) turns costs into predicted times with a roofline:
// an op takes as long as the slower of its arithmetic and its memory traffic.
// docs/cost-model.md gives the formulas.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_COSTMODEL_H
#define CLEAVE_COSTMODEL_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// A GEMM's shape: `batch` products of M x K by K x N, operands of `bits`.
struct GemmShape {
  double batch = 1, m = 0, n = 0, k = 0;
  unsigned bits = 32;
  /// A batched GEMM (attention's, of two activations) rather than one by a
  /// weight: CPU runtimes use other kernels for those.
  bool batched = false;
};

/// A collective of the `shard` dialect: its kind (`all_reduce`,
/// `all_gather`, ...), the ranks of its group, and the bytes it moves per
/// rank (an all-gather's result, any other's operand).
struct CollectiveCost {
  std::string kind;
  int64_t ranks = 0;
  double bytes = 0;
};

/// What one op costs, independent of the machine.
struct OpCost {
  /// Floating-point (or integer) operations: a multiply-add counts 2.
  double flops = 0;
  /// Bytes of tensor operands read and of results written, each once.
  double bytesRead = 0;
  double bytesWritten = 0;
  /// Bytes of the op's operands that are parameters of @main (weights).
  double paramBytes = 0;
  /// Bytes of the op's results (activations it creates).
  double activationBytes = 0;

  /// Set for a named GEMM (matmul, batch_matmul) and for a collective: the
  /// machine may time those by measured rates rather than the roofline.
  std::optional<GemmShape> gemm;
  std::optional<CollectiveCost> collective;

  /// Sums the quantities (not the GEMM or collective: an op's own).
  OpCost &operator+=(const OpCost &other);
  /// The cost at `factor` times the batch: everything but the parameters
  /// read scales (a transformer's ops are independent per sequence).
  OpCost scaledBatch(double factor) const;
};

/// A GEMM rate measured on the machine (cleave-calibrate): FLOP/s for one
/// shape and operand width, with `ranks` ranks running at once (0: any).
struct GemmRate {
  unsigned bits = 32;
  bool batched = false;
  double m = 0, n = 0, k = 0;
  double flopsPerSecond = 0;
  int64_t ranks = 0;
};

/// A collective (or `send_recv`) among `ranks` ranks, measured: seconds =
/// latency + bytes / bandwidth, bytes as in CollectiveCost.
struct LinkFit {
  std::string kind;
  int64_t ranks = 0;
  /// The ranks of the job it was measured in (0: any): on a CPU host the
  /// other ranks' work slows a group's collectives.
  int64_t job = 0;
  double latency = 0, bandwidth = 0;
};

/// Peak FLOP/s and memory bandwidth of one rank while `ranks` run at once
/// (CPU ranks share cores and memory; a GPU's do not depend on it).
struct SharedFigures {
  int64_t ranks = 0;
  double peakFlops = 0, memoryBandwidth = 0;
  /// A whole program's measured time over its prediction from the figures
  /// (cleave-calibrate fits it on a small stack): computing ops' times are
  /// scaled by it.
  double timeScale = 1;
};

/// The machine the predictions are for.
struct MachineModel {
  /// What the figures describe (a calibrated host, a shipped spec).
  std::string name;
  double peakFlops = 1e12;       ///< FLOP/s of one device
  double memoryBandwidth = 1e11; ///< bytes/s between a device and its memory
  double linkBandwidth = 1e10;   ///< bytes/s between two devices
  double linkLatency = 5e-6;     ///< seconds per transfer
  double deviceMemory = 16e9;    ///< bytes a device holds
  /// Devices a node holds (0: any number): a group within a node talks
  /// over the link, a larger one over the network.
  int64_t nodeDevices = 0;
  /// Whether `deviceMemory` is one memory the ranks share (a CPU host's):
  /// forRanks gives each rank its share.
  bool memoryShared = false;
  double netBandwidth = 0; ///< bytes/s between nodes, per device (0: link's)
  double netLatency = 0;   ///< seconds per transfer between nodes (0: link's)
  /// Measured tables (cleave-calibrate); empty: the figures above alone.
  std::vector<GemmRate> gemmRates;
  std::vector<LinkFit> links;
  std::vector<SharedFigures> shared;
  /// Scales every computing op's predicted time (not collectives or
  /// transfers, which have their own fits); set by forRanks.
  double computeScale = 1;

  /// Predicted seconds for `cost`: a GEMM at its measured rate (else the
  /// peak), a collective by its fit (else a ring over the link), anything
  /// else max(flops / peak, bytes / bandwidth).
  double seconds(const OpCost &cost) const;
  /// The FLOP/s of a GEMM of `shape`: the measured rate of the nearest
  /// measured shape of its width (log distance of M, N, K), else the peak.
  double gemmFlops(const GemmShape &shape) const;
  /// Predicted seconds of a collective of `kind` among `ranks` ranks
  /// moving `bytes` per rank.
  double collectiveSeconds(llvm::StringRef kind, int64_t ranks,
                           double bytes) const;
  /// Predicted seconds to send `bytes` from one device to another
  /// (`acrossNodes`: between nodes).
  double transferSeconds(double bytes, bool acrossNodes = false) const;
  /// This machine as `ranks` ranks running at once see it: the shared
  /// figures and GEMM rates measured with the nearest count at or below.
  MachineModel forRanks(int64_t ranks) const;

  /// `peak=2e12,mem-bw=2e11,link-bw=2.5e10,latency=5e-6,memory=80e9`: any
  /// subset, the rest keep their defaults. Numbers take SI suffixes (k, M,
  /// G, T) and a `Gi`-style binary one for memory.
  static llvm::Expected<MachineModel> parse(llvm::StringRef spec);
  /// The same keys from a file, one `key: value` or `key=value` per line.
  /// A JSON file (cleave-calibrate's, or a shipped spec) is read as JSON.
  static llvm::Expected<MachineModel> load(llvm::StringRef path);
  /// `--machine`'s text: a file if one exists at that path, else the
  /// `parse` form (empty: the defaults).
  static llvm::Expected<MachineModel> fromOption(llvm::StringRef text);
  /// The `parse` form of this machine's scalar figures.
  std::string spec() const;
};

/// The cost of `op`: exact for linalg structured ops (loop trip counts times
/// the arithmetic of the body), memory traffic only for data movement
/// (reshapes, slices, concatenation, copies), zero for constants and ops
/// that only describe values.
OpCost estimateCost(mlir::Operation *op);

/// Whether every pipeline stage that needs `op`'s results should make them
/// itself rather than receive them: constants, empty tensors, fills of
/// those, the rank's grid coordinates, side-effect-free scalar arithmetic
/// on those, and small tensors (64 elements at most) a linalg.generic
/// computes from them.
bool isFreeToRecompute(mlir::Operation *op);

} // namespace cleave

#endif // CLEAVE_COSTMODEL_COSTMODEL_H
