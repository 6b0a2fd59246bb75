//===- PlanSearch.cpp - Choosing the layout for N devices -----------------===//
//
// One trial per tensor-parallel degree t dividing N: the imported model,
// cloned, through the sharding step (mesh tp=t, the megatron preset) and
// the partition phase up to the stage cut, collectives left as `shard`
// ops so that each is priced by kind and group. Any warning or error there
// rejects the degree with its text: the preset warns exactly where it
// leaves a block whole (heads, key/value heads, quantization blocks the
// degree does not divide), and a plan that replicates what it was meant to
// split is not the plan the table would describe.
//
// Each trial's profile then prices every layout with that degree: dp
// replicas each take batch / dp, m microbatches batch / (dp m) (every op's
// batch-dependent cost scaled, parameters not), pp stages cut exactly by
// partitionStages within the memory left after activations, and one run
// takes the pipeline's fill plus one slowest stage per further microbatch:
//
//     T = sum over stages of t_s + (m - 1) max_s t_s  (+ dp's output gather)
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/PlanSearch.h"

#include "cleave/CostModel/CostProfile.h"
#include "cleave/CostModel/StagePartition.h"
#include "cleave/Partition/Passes.h"
#include "cleave/Pipelines/Pipelines.h"
#include "cleave/Sharding/Plan.h"
#include "cleave/Support/Attributes.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/OnnxNode.h"
#include "cleave/Support/Parameters.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <numeric>

using namespace mlir;
using namespace cleave;

std::string PlanCandidate::mesh() const {
  SmallVector<std::string> axes;
  if (dp > 1)
    axes.push_back("dp=" + std::to_string(dp));
  if (pp > 1)
    axes.push_back("pp=" + std::to_string(pp));
  if (tp > 1)
    axes.push_back("tp=" + std::to_string(tp));
  return llvm::join(axes, ",");
}

std::string PlanCandidate::layout() const {
  return llvm::formatv("dp={0} tp={1} pp={2} mb={3}", dp, tp, pp, microbatches)
      .str();
}

namespace {

/// The per-rank program of one tensor-parallel degree, or why there is
/// none.
struct Trial {
  int64_t dp = 1, tp = 1;
  std::string rejected, note;
  OwningOpRef<ModuleOp> module; // dropped once profiled
  CostProfile profile;
  /// The model's FLOPs and the most activation bytes live at once, as
  /// profiled (one replica, the whole batch).
  double flops = 0, peakLiveBytes = 0;
};

std::vector<int64_t> divisors(int64_t n, int64_t limit) {
  std::vector<int64_t> list;
  for (int64_t d = 1; d <= n && d <= limit; ++d)
    if (n % d == 0)
      list.push_back(d);
  return list;
}

std::string bytesText(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024)
    return llvm::formatv("{0:f1} GiB", bytes / (1024.0 * 1024 * 1024)).str();
  if (bytes >= 1024.0 * 1024)
    return llvm::formatv("{0:f1} MiB", bytes / (1024.0 * 1024)).str();
  if (bytes >= 1024.0)
    return llvm::formatv("{0:f1} KiB", bytes / 1024.0).str();
  return llvm::formatv("{0} B", int64_t(bytes)).str();
}

std::string secondsText(double seconds) {
  if (seconds >= 1)
    return llvm::formatv("{0:f2} s", seconds).str();
  if (seconds >= 1e-3)
    return llvm::formatv("{0:f2} ms", seconds * 1e3).str();
  return llvm::formatv("{0:f1} us", seconds * 1e6).str();
}

/// Whether the sharding step annotated parameter `arg` as split.
bool annotatedSplit(BlockArgument arg) {
  return llvm::any_of(arg.getUsers(), [](Operation *user) {
    auto annotation = dyn_cast<shard::ShardOp>(user);
    return annotation &&
           llvm::any_of(
               shard::Sharding(annotation.getSharding()).getSplitAxes(),
               [](auto axes) { return !axes.empty(); });
  });
}

/// The parameter a GEMM operand is read from, through transposes,
/// reshapes, annotations and a dequantization's elementwise steps.
BlockArgument weightOf(func::FuncOp main, Value v) {
  while (v) {
    if (BlockArgument arg = parameterArgument(main, v))
      return arg;
    Operation *def = v.getDefiningOp();
    if (auto t = dyn_cast_or_null<linalg::TransposeOp>(def))
      v = t.getInput();
    else if (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
                             shard::ShardOp>(def))
      v = def->getOperand(0);
    else if (auto g = dyn_cast_or_null<linalg::GenericOp>(def))
      v = elementwiseSource(g);
    else
      return nullptr;
  }
  return nullptr;
}

/// What the megatron preset left whole on every one of `tp` ranks in the
/// annotated `module`: GEMMs by a weight (attention or MLP blocks whose
/// heads, key/value heads or quantization blocks `tp` does not divide) in
/// `blocks`, and the vocabulary (its `lookups`, found before the
/// annotation, or an LM head of as many columns) in `vocabulary`.
void wholeWeights(ModuleOp module, int64_t tp,
                  ArrayRef<std::pair<BlockArgument, Operation *>> lookups,
                  std::string &blocks, std::string &vocabulary) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  int64_t rows = lookups.empty()
                     ? -1
                     : cast<RankedTensorType>(lookups.front().first.getType())
                           .getDimSize(0);
  auto describe = [&](BlockArgument arg, Operation *user) {
    auto type = cast<RankedTensorType>(arg.getType());
    std::string shape =
        llvm::join(llvm::map_range(type.getShape(),
                                   [](int64_t d) { return std::to_string(d); }),
                   "x");
    auto name =
        main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName);
    return ("'" + (name ? name.getValue() : "?") + "' " + shape +
            " at ONNX node '" + onnxNodeName(user->getLoc()) + "'")
        .str();
  };
  bool vocabularyWhole = llvm::any_of(
      lookups, [](auto &lookup) { return !annotatedSplit(lookup.first); });
  SmallVector<std::string> whole;
  size_t more = 0;
  llvm::DenseSet<BlockArgument> seen;
  main.walk([&](linalg::MatmulOp matmul) {
    BlockArgument weight = weightOf(main, matmul->getOperand(1));
    if (!weight || annotatedSplit(weight) || !seen.insert(weight).second)
      return;
    // The LM head: as many columns as the vocabulary has rows.
    if (llvm::is_contained(cast<RankedTensorType>(weight.getType()).getShape(),
                           rows)) {
      vocabularyWhole = true;
      return;
    }
    if (whole.size() == 2)
      ++more;
    else
      whole.push_back(describe(weight, matmul));
  });
  if (!whole.empty())
    blocks = llvm::formatv("tp={0} leaves whole on every rank the weight "
                           "{1}{2}: the megatron preset splits attention "
                           "only into whole heads and key/value heads, and "
                           "quantized weights only into whole blocks, which "
                           "{0} ranks do not give",
                           tp, llvm::join(whole, ", the weight "),
                           more ? llvm::formatv(" and {0} more", more).str()
                                : std::string())
                 .str();
  if (vocabularyWhole)
    vocabulary =
        llvm::formatv("the vocabulary of {0} rows (at ONNX node "
                      "'{1}') stays whole on every rank: {2} ranks "
                      "do not divide it (Megatron-LM pads it to a "
                      "multiple)",
                      rows, onnxNodeName(lookups.front().second->getLoc()), tp)
            .str();
}

/// Runs the sharding step and the partition phase (without the stage cut
/// and the collectives' lowering) for `dp` x `tp` on a copy of `imported`.
Trial runTrial(MLIRContext &context, ModuleOp imported,
               const ImportExtras &extras, const CompilationOptions &base,
               const PlanSearchResult &search, int64_t dp, int64_t tp) {
  Trial trial;
  trial.dp = dp;
  trial.tp = tp;
  IRMapping mapping;
  trial.module = cast<ModuleOp>(imported->clone(mapping));
  ImportExtras copied;
  for (auto &[name, value] : extras.values)
    copied.values[name] = mapping.lookupOrDefault(value);
  // The first error, else the first warning, rejects the degree.
  std::string error, warning;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
    std::string text = diag.str();
    if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
      error = text;
    if (diag.getSeverity() == DiagnosticSeverity::Warning && warning.empty())
      warning = text;
    return success();
  });
  PipelineOptions pipeline = base.pipeline;
  pipeline.stages = 1;
  pipeline.microbatches = 1;
  pipeline.lowerCollectives = false;
  PlanCandidate layout;
  layout.dp = dp;
  layout.tp = tp;
  // Found before the annotation, which reads tables through shard ops.
  auto lookups =
      vocabularyLookups(trial.module->lookupSymbol<func::FuncOp>("main"));
  if (dp * tp > 1) {
    ShardingRequest request = planSharding(layout, search);
    FailureOr<ShardingDecision> decision =
        applySharding(*trial.module, copied, request);
    if (succeeded(decision)) {
      pipeline.sharded = decision->sharded;
      pipeline.propagateForward = decision->splitsInputs;
    }
    if (succeeded(decision) && tp > 1 && error.empty()) {
      // A block left whole defeats the split (Megatron-LM refuses such a
      // degree); a whole vocabulary is only noted.
      std::string blocks;
      wholeWeights(*trial.module, tp, lookups, blocks, trial.note);
      if (!blocks.empty()) {
        trial.rejected = blocks;
        return trial;
      }
    }
  }
  if (error.empty() && warning.empty()) {
    SmallVector<Type> before = outputTypes(*trial.module);
    PassManager pm(&context);
    buildPartitionPipeline(pm, pipeline);
    if (succeeded(pm.run(*trial.module)))
      (void)checkOutputsWhole(*trial.module, before);
  }
  if (!error.empty() || !warning.empty()) {
    trial.rejected = !error.empty() ? error : warning;
    return trial;
  }
  auto main = trial.module->lookupSymbol<func::FuncOp>("main");
  FailureOr<CostProfile> profile = profileFunction(main);
  if (failed(profile)) {
    trial.rejected = error.empty() ? "the cost profile failed" : error;
    return trial;
  }
  trial.profile = std::move(*profile);
  for (const OpCost &cost : trial.profile.costs)
    trial.flops += cost.flops;
  trial.peakLiveBytes = trial.profile.peakLiveBytes();
  // Priced from the profile alone: the IR goes (a large model's trials
  // would otherwise all stay in memory).
  trial.profile.ops.clear();
  trial.module = nullptr;
  return trial;
}

/// Prices `candidate` (its dp, tp, pp and microbatches set) from `trial`.
void price(PlanCandidate &c, const Trial &trial, const MachineModel &machine,
           double memory) {
  const CostProfile &profile = trial.profile;
  // The trial holds one replica's share of the batch; a microbatch is a
  // share of that.
  double factor = 1.0 / double(c.microbatches);
  c.activationBytes = trial.peakLiveBytes * factor;
  double limit = memory - c.activationBytes;
  if (limit <= 0) {
    c.rejected = "activations (" + bytesText(c.activationBytes) +
                 ") take more than a device's " + bytesText(memory);
    return;
  }
  // Ranks go dp, pp, tp (the last fastest): a replica's stages sit on
  // tp x pp consecutive ranks, which leave a node when they outnumber it.
  bool crossNodes =
      machine.nodeDevices > 0 && c.tp * c.pp > machine.nodeDevices;
  c.bubble =
      c.pp > 1 ? double(c.pp - 1) / double(c.microbatches + c.pp - 1) : 0;
  // Ranks that share cores are slowed by the time-scale fitted with every
  // rank busy; a stage waiting in the pipeline's fill or drain sleeps and
  // leaves its share to the others, so only the busy share is slowed.
  MachineModel busy = machine;
  busy.computeScale = 1 + (machine.computeScale - 1) * (1 - c.bubble);
  StageProblem problem = profile.problem(busy, factor, limit, crossNodes);
  auto plan = partitionStages(problem, size_t(c.pp));
  if (!plan) {
    c.rejected = llvm::toString(plan.takeError());
    return;
  }
  c.stageSeconds = plan->seconds;
  double sum = std::accumulate(plan->seconds.begin(), plan->seconds.end(), 0.0);
  c.seconds = sum + double(c.microbatches - 1) * plan->largestSeconds();
  c.paramBytes = *std::max_element(plan->memory.begin(), plan->memory.end());
  double runs = double(c.microbatches) / double(c.pp);
  for (const OpCost &cost : profile.costs)
    if (cost.collective)
      c.bytesByKind[cost.collective->kind] +=
          cost.collective->bytes * factor * runs;
  for (double bytes : plan->cutBytes)
    c.bytesByKind["send_recv"] += bytes * runs;
}

} // namespace

FailureOr<PlanSearchResult> cleave::searchPlans(MLIRContext &context,
                                                const CompilationOptions &base,
                                                const SearchOptions &search) {
  auto start = std::chrono::steady_clock::now();
  auto say = [&](const llvm::Twine &line) {
    if (search.progress)
      search.progress(line.str());
  };
  ImportExtras extras;
  OwningOpRef<ModuleOp> imported =
      importOnnxModel(context, base.modelPath, base.import, &extras);
  if (!imported)
    return failure();
  PlanSearchResult result;
  result.devices = search.devices;
  result.objective = search.objective;
  result.machineName =
      search.machine.name.empty() ? search.machine.spec() : search.machine.name;

  auto main = imported->lookupSymbol<func::FuncOp>("main");
  if (BlockArgument input = batchInput(main))
    result.batch = cast<RankedTensorType>(input.getType()).getDimSize(0);
  for (BlockArgument arg : main.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    auto name =
        main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kInputAttrName);
    if (name && type && type.getRank() >= 1 &&
        type.getDimSize(0) == result.batch)
      result.batchInputs.push_back({name.getValue().str(), type.getRank()});
  }

  MachineModel machine = search.machine.forRanks(search.devices);
  double memory =
      search.deviceMemory > 0 ? search.deviceMemory : machine.deviceMemory;
  // One trial per dp x tp the devices and the batch allow.
  std::vector<Trial> trials;
  double modelFlops = 0;
  for (int64_t tp : divisors(search.devices, search.devices))
    for (int64_t dp : divisors(search.devices / tp, search.devices)) {
      int64_t pp = search.devices / (tp * dp);
      PlanCandidate c;
      c.dp = dp, c.tp = tp, c.pp = pp;
      if (result.batch % dp != 0)
        c.rejected = llvm::formatv("the batch of {0} does not split into {1} "
                                   "data-parallel replicas",
                                   result.batch, dp)
                         .str();
      // Tensor parallelism all-reduces twice a layer: across nodes those
      // go over the network (Megatron-LM's rule: tp within a node).
      else if (machine.nodeDevices > 0 && tp > machine.nodeDevices)
        c.rejected = llvm::formatv("tp={0} spans nodes of {1} devices: its "
                                   "all-reduces, two a layer, would cross "
                                   "the network",
                                   tp, machine.nodeDevices)
                         .str();
      if (!c.rejected.empty()) {
        result.rejected.push_back(c);
        continue;
      }
      auto begin = std::chrono::steady_clock::now();
      trials.push_back(
          runTrial(context, *imported, extras, base, result, dp, tp));
      double took = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - begin)
                        .count();
      say(llvm::formatv("dp={0} tp={1}: {2} ({3:f2} s)", dp, tp,
                        trials.back().rejected.empty() ? "priced" : "rejected",
                        took)
              .str());
      if (dp == 1 && tp == 1 && trials.back().rejected.empty())
        modelFlops = trials.back().flops;
    }

  for (const Trial &trial : trials) {
    PlanCandidate c;
    c.tp = trial.tp;
    c.dp = trial.dp;
    c.pp = search.devices / (trial.tp * trial.dp);
    c.note = trial.note;
    if (!trial.rejected.empty()) {
      c.rejected = trial.rejected;
      result.rejected.push_back(c);
      continue;
    }
    std::vector<int64_t> counts =
        c.pp > 1 ? divisors(result.batch / c.dp, search.maxMicrobatches)
                 : std::vector<int64_t>{1};
    for (int64_t m : counts) {
      PlanCandidate priced = c;
      priced.microbatches = m;
      price(priced, trial, machine, memory);
      if (!priced.rejected.empty()) {
        result.rejected.push_back(priced);
        continue;
      }
      priced.samplesPerSecond = double(result.batch) / priced.seconds;
      priced.mfu = modelFlops / (priced.seconds * double(search.devices) *
                                 machine.peakFlops);
      result.ranked.push_back(priced);
    }
  }
  auto order = [](const PlanCandidate &a, const PlanCandidate &b) {
    double tol = 1e-9 * std::max(a.seconds, b.seconds);
    if (std::abs(a.seconds - b.seconds) > tol)
      return a.seconds < b.seconds;
    auto moved = [](const PlanCandidate &c) {
      double sum = 0;
      for (auto &[kind, bytes] : c.bytesByKind)
        sum += bytes;
      return sum;
    };
    if (moved(a) != moved(b))
      return moved(a) < moved(b);
    return std::make_tuple(a.pp, a.microbatches, a.tp) <
           std::make_tuple(b.pp, b.microbatches, b.tp);
  };
  // Samples a second are the batch over a run's time: both objectives
  // order the layouts of one program alike.
  llvm::stable_sort(result.ranked, order);
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

std::string PlanSearchResult::table(size_t top) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv(
      "plan search: {0} devices, objective {1}, machine {2}; "
      "{3} layouts feasible, {4} rejected; {5:f2} s\n",
      devices, objective == Objective::Latency ? "latency" : "throughput",
      machineName, ranked.size(), rejected.size(), searchSeconds);
  if (!ranked.empty()) {
    os << llvm::formatv("  {0,4}  {1,-22} {2,10} {3,10} {4,11} {5,11} "
                        "{6,11} {7,11} {8,6} {9,6}\n",
                        "rank", "layout", "predicted", "samples/s",
                        "mem/device", "all_reduce", "all_gather", "send_recv",
                        "bubble", "MFU");
    for (size_t i = 0; i < ranked.size() && i < top; ++i) {
      const PlanCandidate &c = ranked[i];
      auto kind = [&](llvm::StringRef k) {
        auto it = c.bytesByKind.find(k.str());
        return it == c.bytesByKind.end() ? std::string("-")
                                         : bytesText(it->second);
      };
      os << llvm::formatv("  {0,4}  {1,-22} {2,10} {3,10:f1} {4,11} {5,11} "
                          "{6,11} {7,11} {8,5:f1}% {9,5:f1}%\n",
                          i + 1, c.layout(), secondsText(c.seconds),
                          c.samplesPerSecond, bytesText(c.memoryBytes()),
                          kind("all_reduce"), kind("all_gather"),
                          kind("send_recv"), 100 * c.bubble, 100 * c.mfu);
    }
    if (ranked.size() > top)
      os << "  ... " << ranked.size() - top << " more feasible layouts\n";
  } else {
    os << "  no layout of " << devices << " devices fits (reasons below)\n";
  }
  // Notes on ranked layouts, each note once.
  SmallVector<std::string> notes;
  for (size_t i = 0; i < ranked.size() && i < top; ++i)
    if (!ranked[i].note.empty() && !llvm::is_contained(notes, ranked[i].note))
      notes.push_back(ranked[i].note);
  for (const std::string &note : notes) {
    SmallVector<std::string> which;
    for (size_t i = 0; i < ranked.size() && i < top; ++i)
      if (ranked[i].note == note)
        which.push_back(std::to_string(i + 1));
    os << "  note (layouts " << llvm::join(which, ", ") << "): " << note
       << "\n";
  }
  // Rejections by reason, each reason once with the layouts it rejects.
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
  for (const PlanCandidate &c : rejected) {
    auto it = llvm::find_if(
        reasons, [&](auto &entry) { return entry.first == c.rejected; });
    if (it == reasons.end()) {
      reasons.push_back({c.rejected, {}});
      it = std::prev(reasons.end());
    }
    it->second.push_back(c.layout());
  }
  if (!reasons.empty())
    os << "  rejected:\n";
  for (auto &[reason, layouts] : reasons)
    os << "    " << llvm::join(layouts, ", ") << ": " << reason << "\n";
  return text;
}

llvm::json::Value PlanSearchResult::json() const {
  llvm::json::Array rankedJson, rejectedJson;
  for (const PlanCandidate &c : ranked) {
    llvm::json::Object bytes;
    for (auto &[kind, value] : c.bytesByKind)
      bytes[kind] = value;
    rankedJson.push_back(llvm::json::Object{
        {"mesh", c.mesh()},
        {"dp", c.dp},
        {"tp", c.tp},
        {"pp", c.pp},
        {"microbatches", c.microbatches},
        {"predicted_seconds", c.seconds},
        {"samples_per_second", c.samplesPerSecond},
        {"memory_per_device",
         llvm::json::Object{{"parameters", c.paramBytes},
                            {"activations", c.activationBytes}}},
        {"bytes_per_device_by_kind", std::move(bytes)},
        {"bubble", c.bubble},
        {"mfu", c.mfu},
        {"stage_seconds", llvm::json::Array(c.stageSeconds)},
        {"note", c.note}});
  }
  for (const PlanCandidate &c : rejected)
    rejectedJson.push_back(llvm::json::Object{{"mesh", c.mesh()},
                                              {"dp", c.dp},
                                              {"tp", c.tp},
                                              {"pp", c.pp},
                                              {"microbatches", c.microbatches},
                                              {"reason", c.rejected}});
  return llvm::json::Object{
      {"devices", devices},
      {"objective", objective == Objective::Latency ? "latency" : "throughput"},
      {"machine", machineName},
      {"batch", batch},
      {"search_seconds", searchSeconds},
      {"ranked", std::move(rankedJson)},
      {"rejected", std::move(rejectedJson)}};
}

ShardingRequest cleave::planSharding(const PlanCandidate &plan,
                                     const PlanSearchResult &search) {
  ShardingRequest request;
  request.mesh = plan.mesh();
  if (plan.tp > 1)
    request.preset = "megatron";
  if (plan.dp > 1)
    for (const auto &[input, rank] : search.batchInputs) {
      ShardHint hint;
      hint.pattern = input;
      hint.origin = "--mesh auto: data parallelism";
      hint.dims.assign(size_t(rank), DimAxes());
      hint.dims[0] = {"dp"};
      request.hints.shardings.push_back(std::move(hint));
    }
  return request;
}

CompilationOptions cleave::planCompilation(const CompilationOptions &base,
                                           const PlanCandidate &plan,
                                           const PlanSearchResult &search) {
  CompilationOptions options = base;
  options.sharding = planSharding(plan, search);
  options.pipeline.microbatches = unsigned(plan.microbatches);
  return options;
}
