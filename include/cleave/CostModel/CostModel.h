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

#include <string>

namespace cleave {

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

  OpCost &operator+=(const OpCost &other);
};

/// The machine the predictions are for.
struct MachineModel {
  double peakFlops = 1e12;       ///< FLOP/s of one device
  double memoryBandwidth = 1e11; ///< bytes/s between a device and its memory
  double linkBandwidth = 1e10;   ///< bytes/s between two devices
  double linkLatency = 5e-6;     ///< seconds per transfer
  double deviceMemory = 16e9;    ///< bytes a device holds

  /// Predicted seconds for `cost`: max(flops / peak, bytes / bandwidth).
  double seconds(const OpCost &cost) const;
  /// Predicted seconds to send `bytes` from one device to another.
  double transferSeconds(double bytes) const;

  /// `peak=2e12,mem-bw=2e11,link-bw=2.5e10,latency=5e-6,memory=80e9`: any
  /// subset, the rest keep their defaults. Numbers take SI suffixes (k, M,
  /// G, T) and a `Gi`-style binary one for memory.
  static llvm::Expected<MachineModel> parse(llvm::StringRef spec);
  /// The same keys from a file, one `key: value` or `key=value` per line.
  static llvm::Expected<MachineModel> load(llvm::StringRef path);
  /// The `parse` form of this machine, every key given.
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
