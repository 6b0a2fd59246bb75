//===- StagePartition.h - Pipeline stages by dynamic programming ----------===//
//
// Cuts a sequence of ops (in program order) into contiguous stages that
// minimise the largest stage's predicted time, exactly (a dynamic program
// over cut positions, not a greedy split). A stage's time includes moving
// what crosses its cuts: it receives before it computes and sends after.
// Ties go to the plan with fewer activation bytes crossing cuts. A stage must
// hold at most a memory limit of parameters; cuts the user fixed are kept.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COSTMODEL_STAGEPARTITION_H
#define CLEAVE_COSTMODEL_STAGEPARTITION_H

#include "llvm/Support/Error.h"

#include <cstddef>
#include <vector>

namespace cleave {

struct StageProblem {
  /// Per op, in program order: predicted seconds.
  std::vector<double> seconds;
  /// Per op, the parameters it reads (indices into paramBytes). A stage
  /// holds every parameter its ops read, once, however many stages read it.
  std::vector<std::vector<size_t>> params;
  std::vector<double> paramBytes;
  /// cutBytes[i]: activation bytes crossing a cut just before op i (index 0
  /// unused).
  std::vector<double> cutBytes;
  /// cutSeconds[i]: predicted seconds to move what crosses that cut; both
  /// stages beside it spend them (empty: free).
  std::vector<double> cutSeconds;
  /// Positions i where a cut just before op i is required.
  std::vector<size_t> fixedCuts;
  /// Most parameter bytes one stage may hold.
  double memoryLimit = 0;
};

struct StagePlan {
  /// Stage s holds ops [begin[s], begin[s + 1]) (begin has stages + 1 entries).
  std::vector<size_t> begin;
  /// Per stage: computing plus moving what crosses its cuts.
  std::vector<double> seconds;
  std::vector<double> memory;
  /// Bytes crossing each cut (stages - 1 entries).
  std::vector<double> cutBytes;

  double largestSeconds() const;
};

/// The best plan of `stages` stages, or an error saying why none exists
/// (fewer ops than stages, a fixed cut too many, no plan within the memory
/// limit: the message gives the smallest largest-stage memory possible).
llvm::Expected<StagePlan> partitionStages(const StageProblem &problem,
                                          size_t stages);

} // namespace cleave

#endif // CLEAVE_COSTMODEL_STAGEPARTITION_H
