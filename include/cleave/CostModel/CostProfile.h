//===- CostProfile.h - A function's op sequence as stages see it -*- C++
//-*-===//
//
// What the stage partition needs of a function, gathered once and priced
// per machine and batch: its top-level ops in program order (those free to
// recompute left out), each op's cost and the parameters it reads, the
// values live across each position, and the cuts the user fixed. The
// pipeline pass prices it once; the plan search prices one profile per
// tensor-parallel degree for every batch share, stage count and machine.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_COSTPROFILE_H
#define CLEAVE_COSTMODEL_COSTPROFILE_H

#include "cleave/CostModel/CostModel.h"
#include "cleave/CostModel/StagePartition.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace cleave {

struct CostProfile {
  /// The ops a stage may hold, in program order (pricing reads only the
  /// rest: a caller may drop these with the IR).
  std::vector<mlir::Operation *> ops;
  std::vector<OpCost> costs;
  /// Per op, the parameters it reads (indices into paramBytes).
  std::vector<std::vector<size_t>> params;
  std::vector<double> paramBytes;
  /// A value made by op `from` and last read by op `last`: it crosses the
  /// cuts before ops from + 1 .. last.
  struct Live {
    size_t from, last;
    double bytes;
  };
  std::vector<Live> live;
  /// Positions where a stage must start (a cut just before that op).
  std::vector<size_t> fixedCuts;

  /// The stage problem at `batchFactor` times the profiled batch on
  /// `machine`, stages holding at most `memoryLimit` parameter bytes.
  /// `crossNodes`: transfers between stages go between nodes.
  StageProblem problem(const MachineModel &machine, double batchFactor,
                       double memoryLimit, bool crossNodes = false) const;
  /// The most activation bytes live across any one position, at the
  /// profiled batch.
  double peakLiveBytes() const;
};

/// The profile of `func`'s body. Cuts fixed on ops (`cleave.stage_start`)
/// or by ONNX node (the function's `cleave.stage_starts`) are recorded;
/// a node with no op left is an error.
mlir::FailureOr<CostProfile> profileFunction(mlir::func::FuncOp func);

} // namespace cleave

#endif // CLEAVE_COSTMODEL_COSTPROFILE_H
