//===- PlanSearch.h - Choosing the layout for N devices ---------*- C++ -*-===//
//
// `cleave-compile --mesh auto --devices N`: every layout of N devices as
// dp x tp x pp with a microbatch count, each judged feasible or not (with
// the reason) and, if feasible, priced by the cost model on the machine.
//
// The pricing compiles, not guesses: for each tensor-parallel degree the
// model goes through the sharding step (the megatron preset) and the
// partition phase's propagation, and the cost profile of that per-rank
// program (its GEMMs, its collectives, the values live across each
// position) is what every layout with that degree is priced from. Data
// parallelism and microbatches scale each op's batch; pipeline stages are
// cut by the same exact partition the compilation then uses. A degree the
// preset cannot split cleanly (heads, key/value heads, vocabulary or
// quantization blocks it does not divide) is rejected with the preset's
// own reason.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_PLANSEARCH_H
#define CLEAVE_COMPILER_PLANSEARCH_H

#include "cleave/Compiler/Compilation.h"
#include "cleave/CostModel/CostModel.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace cleave {

enum class Objective { Latency, Throughput };

struct SearchOptions {
  /// Devices (ranks) the plan runs on.
  int64_t devices = 1;
  /// Bytes one device holds (0: the machine's).
  double deviceMemory = 0;
  Objective objective = Objective::Latency;
  MachineModel machine;
  /// The most microbatches tried.
  int64_t maxMicrobatches = 16;
  /// Progress lines (null: quiet).
  llvm::function_ref<void(llvm::StringRef)> progress = nullptr;
};

/// One layout of the devices, and what it is predicted to cost.
struct PlanCandidate {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  /// Empty if feasible; else why not.
  std::string rejected;
  /// What a feasible layout keeps whole that it might have split (a
  /// vocabulary the degree does not divide).
  std::string note;
  /// Predicted seconds of one run at the model's batch, and samples a
  /// second.
  double seconds = 0, samplesPerSecond = 0;
  /// Bytes on the fullest device: its stage's parameters, and the most
  /// activation bytes live at once.
  double paramBytes = 0, activationBytes = 0;
  /// Bytes one device sends in a run by kind (all_reduce, all_gather,
  /// send_recv, ...), averaged over the devices.
  std::map<std::string, double> bytesByKind;
  /// Idle share of a pipeline: (pp - 1) / (microbatches + pp - 1).
  double bubble = 0;
  /// The model's FLOPs a second over the devices' peak.
  double mfu = 0;
  /// Per stage, one microbatch's predicted seconds.
  std::vector<double> stageSeconds;

  /// `dp=2,pp=2,tp=2` (axes of size one left out; empty for one device).
  std::string mesh() const;
  /// `dp=2 pp=2 tp=2 mb=4`, for tables.
  std::string layout() const;
  double memoryBytes() const { return paramBytes + activationBytes; }
};

struct PlanSearchResult {
  int64_t devices = 0;
  Objective objective = Objective::Latency;
  std::string machineName;
  /// The model's batch and the graph inputs that carry it (split by dp),
  /// with their ranks.
  int64_t batch = 1;
  std::vector<std::pair<std::string, int64_t>> batchInputs;
  /// Feasible layouts, best first; then those rejected.
  std::vector<PlanCandidate> ranked, rejected;
  double searchSeconds = 0;

  /// The table plan.txt shows: the best `top` layouts, then every rejected
  /// one with its reason (layouts rejected alike are listed once).
  std::string table(size_t top = 10) const;
  llvm::json::Value json() const;
};

/// Searches the layouts of `search.devices` devices for the model `base`
/// describes (its import options and precision; its mesh is ignored).
/// Fails, with diagnostics, only where the model does not import; a
/// device count no layout fits gives an empty `ranked`.
mlir::FailureOr<PlanSearchResult> searchPlans(mlir::MLIRContext &context,
                                              const CompilationOptions &base,
                                              const SearchOptions &search);

/// What to split for `plan`: its mesh, the megatron preset where it has
/// tp, hints splitting the batch inputs over dp.
ShardingRequest planSharding(const PlanCandidate &plan,
                             const PlanSearchResult &search);

/// `base` set up to compile `plan`: its mesh, the megatron preset, hints
/// splitting the batch over `dp`, the microbatches.
CompilationOptions planCompilation(const CompilationOptions &base,
                                   const PlanCandidate &plan,
                                   const PlanSearchResult &search);

} // namespace cleave

#endif // CLEAVE_COMPILER_PLANSEARCH_H
