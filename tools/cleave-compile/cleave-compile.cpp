//===- cleave-compile.cpp - The Cleave compiler driver --------------------===//
//
// Parses the command line into CompilationOptions, runs the Compilation
// (lib/Compiler) and prints: per-phase progress, diagnostics, the summary, and
// with --compile-to=PHASE that phase's IR to -o. Everything else lives in the
// libraries.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/Compilation.h"
#include "cleave/Compiler/Generation.h"
#include "cleave/Compiler/PlanSearch.h"
#include "cleave/CostModel/CostModel.h"
#include "cleave/Import/OnnxImporter.h"
#include "cleave/Pipelines/Phases.h"
#include "cleave/Pipelines/Registration.h"
#include "cleave/Pipelines/Summary.h"
#include "cleave/Sharding/Hints.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace cleave;

namespace {

cl::OptionCategory category("cleave-compile options");

cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                               cl::cat(category));
cl::opt<std::string> outputPath(
    "o",
    cl::desc("Output: an .mlir file with --compile-to, else a bundle folder"),
    cl::value_desc("OUT"), cl::cat(category));
cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc(
        "Static shape of a graph input, e.g. input_ids=1x128 (repeatable)"),
    cl::value_desc("NAME=DxD"), cl::cat(category));
cl::list<std::string> namedDims(
    "dim",
    cl::desc("Size of a named dimension of the graph inputs, wherever it "
             "appears, e.g. batch_size=1 (repeatable); dimensions named by "
             "expressions such as 'past_sequence_length + 1' follow, and a "
             "name an --input-shape sets (a dimension named by it alone) is "
             "sized for the other inputs too; --input-shape wins for the "
             "input it names"),
    cl::value_desc("NAME=N"), cl::cat(category));
cl::list<std::string> boundInputs(
    "bind-input",
    cl::desc(
        "Make a graph input a compile-time constant, read from a .npy file "
        "or a serialized TensorProto (repeatable)"),
    cl::value_desc("NAME=FILE"), cl::cat(category));
cl::opt<std::string> meshOption(
    "mesh",
    cl::desc("Device mesh: named axes whose sizes multiply to the rank count, "
             "e.g. tp=4, dp=2,tp=2 or pp=2,tp=2; a 'pp' axis cuts the model "
             "into that many pipeline stages, balanced by the cost model "
             "(default: the model's cleave.mesh metadata, else one rank); "
             "'auto' (with --devices) searches every layout of the devices "
             "with the cost model, compiles the best and writes the ranked "
             "table into plan.txt"),
    cl::value_desc("AXIS=N[,AXIS=N]|auto"), cl::cat(category));
cl::opt<int64_t>
    devicesOption("devices",
                  cl::desc("With --mesh auto: the devices (ranks) to plan for"),
                  cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::opt<unsigned> planIndex(
    "plan-index",
    cl::desc("With --mesh auto: compile the layout ranked K in the search's "
             "table (default 1, the best; a best layout that does not "
             "compile gives way to the next two)"),
    cl::value_desc("K"), cl::init(1), cl::cat(category));
cl::list<int64_t> fallbackDevices(
    "fallback-devices",
    cl::desc("With --mesh auto: also compile the best plan for each of these "
             "device counts into the bundle's plans/K (its own weight "
             "files), run by cleave-run BUNDLE --ranks K; plan.txt gives "
             "each plan's predicted throughput"),
    cl::value_desc("K,..."), cl::CommaSeparated, cl::cat(category));
cl::opt<bool> searchOnly(
    "search-only",
    cl::desc("With --mesh auto: print the ranked table (and write --report) "
             "without compiling a bundle; no -o needed"),
    cl::cat(category));
cl::opt<std::string> objectiveOption(
    "objective",
    cl::desc("With --mesh auto: 'latency' (default: the least time for one "
             "run at the model's batch) or 'throughput' (the most samples a "
             "second; runs go one after another, so for one program both "
             "choose alike and differ in what the table reports first)"),
    cl::value_desc("latency|throughput"), cl::init("latency"),
    cl::cat(category));
cl::opt<std::string> shardHints(
    "shard-hints",
    cl::desc("YAML file mapping tensor names or globs to one mesh axis (or "
             "null) per dimension, under 'shardings:', and listing the ONNX "
             "nodes (names or globs) where pipeline stages 1, 2, ... start, "
             "under 'stages:'"),
    cl::value_desc("FILE.yaml"), cl::cat(category));
cl::opt<std::string> shardPreset(
    "shard-preset",
    cl::desc("Shard recognised transformer patterns without hints: 'megatron' "
             "(QKV/up/gate by column, attention output/down by row, embeddings "
             "and LM head by vocabulary where tp divides it; key/value heads "
             "tp does not divide stay whole, also where a projection fuses "
             "them with Q) on the 'tp' axis; "
             "hints and the model's sharding fields take precedence"),
    cl::value_desc("megatron"), cl::cat(category));
cl::opt<unsigned> microbatches(
    "microbatches",
    cl::desc("Split the batch (dimension 0 of the inputs that have it, and "
             "of every output) into M microbatches that flow through the "
             "pipeline stages one after another (default 1); the graph is "
             "imported at its whole batch and cut inside the compiler, so "
             "exports that fix the batch work too"),
    cl::value_desc("M"), cl::init(1), cl::cat(category));
cl::opt<std::string> machineOption(
    "machine",
    cl::desc("The machine the cost model predicts for, which balances the "
             "pipeline stages and prices --mesh auto's layouts: "
             "peak=..,mem-bw=..,link-bw=..,latency=..,memory=.. (FLOP/s, B/s, "
             "B/s, s, B; any subset), a file of key: value lines, a JSON file "
             "(cleave-calibrate -o machine.json), or a shipped spec by name "
             "(a100-nvlink-ib, h100-nvlink-ib)"),
    cl::value_desc("SPEC|FILE|NAME"), cl::cat(category));
cl::opt<double> deviceMemory(
    "device-memory",
    cl::desc("Bytes of parameters one pipeline stage may hold on a rank "
             "(default: the machine's memory); no partition that fits is an "
             "error. With --mesh auto: a device's memory, for its stage's "
             "parameters and its live activations"),
    cl::value_desc("BYTES"), cl::init(0), cl::cat(category));
cl::list<std::string> tapNodes(
    "tap",
    cl::desc("Also write the results of these ONNX nodes (names; an unnamed "
             "node is OP#INDEX) as outputs named tap:VALUE, gathered whole "
             "on the writing rank (repeatable or comma-separated; for "
             "cleave-verify)"),
    cl::value_desc("NODE"), cl::CommaSeparated, cl::cat(category));
cl::opt<bool>
    tapAll("tap-all",
           cl::desc("Tap every node of the main graph whose result is not a "
                    "compile-time constant"),
           cl::cat(category));
cl::opt<std::string> plantFault(
    "plant-fault",
    cl::desc("Testing only: compute the first result x of this node as "
             "x + (1 + x^2)/4, a planted miscompile for cleave-verify's tests"),
    cl::value_desc("NODE"), cl::Hidden, cl::cat(category));
cl::opt<double> maxConstantBytes(
    "max-constant-bytes",
    cl::desc("The most bytes one tensor the compiler computes itself (a "
             "Range's values) may take; a model asking for more is refused "
             "before it is built (default 4 GiB)"),
    cl::value_desc("BYTES"), cl::init(double(int64_t(4) << 30)),
    cl::cat(category));
cl::opt<std::string> reportPath(
    "report",
    cl::desc("Also write the plan report (shardings, collectives, memory per "
             "rank) to FILE"),
    cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> compileTo(
    "compile-to",
    cl::desc("Stop after this phase and write its IR to -o (default: bundle)"),
    cl::value_desc("PHASE"), cl::init("bundle"), cl::cat(category));
cl::opt<Target> target("target",
                       cl::desc("Code generation target (default cpu)"),
                       targetValues(), cl::init(Target::CPU),
                       cl::cat(category));
cl::opt<std::string>
    gpuArch("gpu-arch", cl::desc("The GPU for --target cuda (default sm_90)"),
            cl::value_desc("sm_80|sm_90"), cl::init("sm_90"),
            cl::cat(category));
cl::opt<Precision> precision(
    "precision",
    cl::desc("GEMM operands (default f32); with 16 bits, GEMMs read 16-bit "
             "operands (weights stored in 16 bits) and accumulate in float32; "
             "everything else, normalisation statistics included, stays "
             "float32"),
    precisionValues(), cl::init(Precision::F32), cl::cat(category));
cl::opt<std::string> dumpDir("dump-dir",
                             cl::desc("Write the IR after each phase into DIR"),
                             cl::value_desc("DIR"), cl::cat(category));
cl::opt<GemmBackend>
    cpuGemm("cpu-gemm", cl::desc("float32 GEMMs on the CPU (default blas)"),
            gemmBackendValues(), cl::init(GemmBackend::Library),
            cl::cat(category));
cl::opt<std::string> gpuAttention(
    "gpu-attention",
    cl::desc("With --target cuda (or --gpu-kernels-on-cpu) and --precision "
             "bf16 or f16, attention: 'fused' (default: one tensor-core kernel "
             "each, "
             "the scores kept on chip) or 'gemms' (two cuBLASLt GEMMs around "
             "a softmax kernel; for comparison)"),
    cl::value_desc("fused|gemms"), cl::init("fused"), cl::cat(category));
cl::opt<bool> gpuKernelsOnCpu(
    "gpu-kernels-on-cpu",
    cl::desc("With --target cpu: build the CUDA target's kernels but run each "
             "one on the CPU, a thread at a time (slow; checks their numerics "
             "where there is no GPU)"),
    cl::cat(category));
cl::opt<unsigned> jobs(
    "jobs",
    cl::desc("Threads for LLVM's optimization and code generation of the "
             "program, which is split into as many parts (default 0: one per "
             "core, at most 16; a small program stays one part). The program "
             "computes the same with any count"),
    cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::OptionCategory generateCategory("cleave-compile options for generation");
cl::opt<bool> generate(
    "generate",
    cl::desc("Compile a decoder for token generation (cleave-run --generate): "
             "a prefill program for the prompt and a decode program for one "
             "token a step, over one set of weights; the graph takes "
             "input_ids, attention_mask and its key/value cache as past "
             "inputs and returns logits and present outputs, with "
             "position_ids (Optimum's text-generation-with-past, TorchScript "
             "exports), GroupQueryAttention (ONNX Runtime GenAI; --dim "
             "kv_cache_dim=N) or cache_position (a static cache); "
             "docs/generation.md"),
    cl::cat(generateCategory));
cl::opt<int64_t> maxSeq(
    "max-seq",
    cl::desc("With --generate: the most tokens of a sequence, prompt and new "
             "(default 128; a static cache's own length); sizes the "
             "key/value cache"),
    cl::value_desc("N"), cl::init(128), cl::cat(generateCategory));
cl::opt<int64_t> maxBatch(
    "max-batch",
    cl::desc("With --generate: the most sequences generated at once (default "
             "1)"),
    cl::value_desc("B"), cl::init(1), cl::cat(generateCategory));
cl::opt<int64_t> promptLength(
    "prompt-length",
    cl::desc("With --generate: the prefill program's tokens (default half of "
             "--max-seq); shorter prompts are padded to it, longer ones "
             "refused"),
    cl::value_desc("N"), cl::init(0), cl::cat(generateCategory));
cl::opt<bool> quiet("quiet", cl::desc("Do not print per-phase progress"),
                    cl::cat(category));
cl::opt<bool>
    summary("summary",
            cl::desc("Print a summary of the IR after the last phase"),
            cl::cat(category));
cl::opt<bool> listOps("list-ops",
                      cl::desc("List the supported ONNX ops and exit"),
                      cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "cleave-compile") << message << "\n";
  return 1;
}

/// Parses "NAME=VALUE" options.
bool splitAssignment(StringRef option, StringRef text, StringRef &name,
                     StringRef &value) {
  std::tie(name, value) = text.split('=');
  if (name.empty() || value.empty()) {
    fail("--" + option + " expects NAME=VALUE, got '" + text + "'");
    return false;
  }
  return true;
}

/// Where the shipped machine specs are: share/cleave/machines beside bin/.
std::string shippedMachines(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, (void *)&shippedMachines);
  SmallString<256> path(sys::path::parent_path(sys::path::parent_path(exe)));
  sys::path::append(path, "share", "cleave", "machines");
  return std::string(path);
}

/// A shipped machine spec: NAME.json in shippedMachines.
std::string shippedMachine(const char *argv0, StringRef name) {
  SmallString<256> path(shippedMachines(argv0));
  sys::path::append(path, name + ".json");
  return std::string(path);
}

/// The names of the shipped machine specs.
std::vector<std::string> shippedMachineNames(const char *argv0) {
  std::vector<std::string> names;
  std::error_code ec;
  for (sys::fs::directory_iterator it(shippedMachines(argv0), ec), end;
       !ec && it != end; it.increment(ec))
    if (sys::path::extension(it->path()) == ".json")
      names.push_back(sys::path::stem(it->path()).str());
  llvm::sort(names);
  return names;
}

/// The runtime library that bundles link: lib/libcleave_rt.a beside bin/.
std::string runtimeLibrary(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, (void *)&runtimeLibrary);
  SmallString<256> path(sys::path::parent_path(sys::path::parent_path(exe)));
  sys::path::append(path, "lib", "libcleave_rt.a");
  return std::string(path);
}

/// Prints a phase's time, as cleave-compile's progress.
void printPhase(const PhaseInfo &info, double seconds) {
  errs() << format("cleave-compile: %-10s %8.3f s\n", info.name.str().c_str(),
                   seconds);
}

/// Compiles the layout ranked `first` (from 0) of `result`, and where it
/// does not compile the next ones, `tries` in all; plan.txt gets the
/// search's table and `appendix`, a JSON report `appendixJson`. Returns
/// the layout compiled.
std::optional<PlanCandidate>
compileRanked(mlir::MLIRContext &context, const CompilationOptions &compilation,
              const PlanSearchResult &result, size_t first, size_t tries,
              bool quiet, const std::string &appendix,
              llvm::json::Object appendixJson) {
  std::string table = result.table();
  if (!quiet)
    errs() << table;
  if (result.ranked.empty()) {
    fail("no layout of " + Twine(result.devices) +
         " devices fits this model on this machine (reasons above)");
    return std::nullopt;
  }
  if (first >= result.ranked.size()) {
    fail("--plan-index " + Twine(first + 1) + ": the search ranked " +
         Twine(result.ranked.size()) + " feasible layouts");
    return std::nullopt;
  }
  std::string tried;
  for (size_t i = first; i < result.ranked.size() && i < first + tries; ++i) {
    const PlanCandidate &plan = result.ranked[i];
    if (!quiet)
      errs() << "cleave-compile: compiling layout " << i + 1 << ": "
             << plan.layout() << "\n";
    CompilationOptions options = planCompilation(compilation, plan, result);
    options.bundle.planSearch =
        table + tried + "compiled: layout " + std::to_string(i + 1) + ", " +
        plan.layout() + " (--mesh " +
        (plan.mesh().empty() ? std::string("none") : plan.mesh()) +
        (plan.microbatches > 1
             ? " --microbatches " + std::to_string(plan.microbatches)
             : std::string()) +
        ")\n" + appendix;
    llvm::json::Value json = result.json();
    llvm::json::Object *object = json.getAsObject();
    object->try_emplace("compiled", int64_t(i + 1));
    for (auto &[key, value] : appendixJson)
      object->try_emplace(key, value);
    options.bundle.planSearchJson = std::move(json);
    Compilation run(context, std::move(options));
    if (succeeded(run.run(quiet ? Compilation::PhaseCallback()
                                : Compilation::PhaseCallback(printPhase))))
      return plan;
    WithColor::warning(errs(), "cleave-compile")
        << "layout " << i + 1 << " (" << plan.layout()
        << ") did not compile (above); trying the next\n";
    tried += "layout " + std::to_string(i + 1) + " (" + plan.layout() +
             ") did not compile\n";
  }
  fail(tries == 1 ? "the layout asked for did not compile (above)"
                  : "none of the best layouts compiled (above)");
  return std::nullopt;
}

/// --search-only: the table on standard output, and in `reportPath` (as
/// JSON when it ends in .json).
bool writeSearch(const PlanSearchResult &result, StringRef reportPath) {
  std::string table = result.table(/*top=*/25);
  outs() << table;
  outs().flush();
  if (reportPath.empty())
    return true;
  std::error_code ec;
  raw_fd_ostream os(reportPath, ec);
  if (ec) {
    fail("cannot write '" + reportPath + "': " + ec.message());
    return false;
  }
  if (reportPath.ends_with(".json"))
    os << formatv("{0:2}", llvm::json::Value(
                               llvm::json::Object{{"search", result.json()}}))
       << "\n";
  else
    os << table;
  return true;
}

/// --mesh auto: the plans for each --fallback-devices count, compiled into
/// a folder beside the bundle, then the plan for --devices, then the
/// fallback plans moved into its plans/ (nothing is left half-written).
bool compileAuto(mlir::MLIRContext &context,
                 const CompilationOptions &compilation,
                 const SearchOptions &search, ArrayRef<int64_t> fallbacks,
                 bool quiet) {
  auto main = searchPlans(context, compilation, search);
  if (failed(main))
    return false;
  if (searchOnly)
    return writeSearch(*main, compilation.bundle.reportPath);
  std::string outDir = compilation.bundle.outDir;
  std::string staging = outDir + ".plans-tmp";
  (void)sys::fs::remove_directories(staging);
  llvm::scope_exit cleanup([&] { (void)sys::fs::remove_directories(staging); });
  double mainSeconds =
      main->ranked.empty()
          ? 0
          : main->ranked[std::min<size_t>(planIndex - 1,
                                          main->ranked.size() - 1)]
                .seconds;
  std::string appendix;
  llvm::json::Array fallbackJson;
  for (int64_t devices : fallbacks) {
    SearchOptions fewer = search;
    fewer.devices = devices;
    if (!quiet)
      errs() << "cleave-compile: the plan for " << devices
             << " devices (--fallback-devices)\n";
    auto result = searchPlans(context, compilation, fewer);
    if (failed(result))
      return false;
    CompilationOptions options = compilation;
    SmallString<256> folder(staging);
    sys::path::append(folder, "plans", std::to_string(devices));
    if (std::error_code ec =
            sys::fs::create_directories(sys::path::parent_path(folder)))
      return fail("cannot create '" + folder + "': " + ec.message()), false;
    options.bundle.outDir = std::string(folder);
    options.bundle.reportPath.clear();
    std::optional<PlanCandidate> plan = compileRanked(
        context, options, *result, /*first=*/0, /*tries=*/3, quiet, "", {});
    if (!plan) {
      fail("no plan for " + Twine(devices) +
           " devices (--fallback-devices); nothing was written");
      return false;
    }
    std::string share =
        mainSeconds > 0
            ? formatv(", {0:f0}% of the {1}-device plan's throughput",
                      100 * mainSeconds / plan->seconds, search.devices)
                  .str()
            : std::string();
    appendix += formatv("  {0} devices: {1}, predicted {2:f2} ms a run, "
                        "{3:f1} samples/s{4} (plans/{0})\n",
                        devices, plan->layout(), plan->seconds * 1e3,
                        plan->samplesPerSecond, share)
                    .str();
    fallbackJson.push_back(
        llvm::json::Object{{"devices", devices},
                           {"mesh", plan->mesh()},
                           {"microbatches", plan->microbatches},
                           {"predicted_seconds", plan->seconds},
                           {"samples_per_second", plan->samplesPerSecond},
                           {"folder", "plans/" + std::to_string(devices)}});
  }
  if (!appendix.empty())
    appendix = "fallback plans (cleave-run BUNDLE --ranks K runs plans/K):\n" +
               appendix;
  llvm::json::Object extra;
  if (!fallbacks.empty())
    extra["fallbacks"] = std::move(fallbackJson);
  // --plan-index chooses the main plan (and alone, no fallback on a
  // failure); the fallback plans are each count's best.
  if (!compileRanked(context, compilation, *main, planIndex - 1,
                     planIndex.getNumOccurrences() ? 1 : 3, quiet, appendix,
                     std::move(extra)))
    return false;
  if (fallbacks.empty())
    return true;
  SmallString<256> from(staging), to(outDir);
  sys::path::append(from, "plans");
  sys::path::append(to, "plans");
  if (std::error_code ec = sys::fs::rename(from, to)) {
    (void)sys::fs::remove_directories(outDir);
    fail("cannot move the fallback plans into '" + outDir +
         "': " + ec.message());
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&category, &generateCategory, &getColorCategory()});
  std::string phases;
  for (const PhaseInfo &info : allPhases())
    phases += ("\n  " + info.name + ": " + info.summary).str();
  cl::SetVersionPrinter([](raw_ostream &os) { os << "cleave-compile 0.1\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "Cleave: compiles an ONNX transformer model into a program bundle.\n\n"
      "Phases (for --compile-to and --dump-dir):" +
          phases +
          "\n\nWith --compile-to before 'bundle', -o names an .mlir file; "
          "otherwise -o names the bundle folder (program, weights.bin or "
          "weights/rank<r>.bin, manifest.json, plan.txt). Run bundles with "
          "cleave-run. With --mesh the program runs on that many ranks; what "
          "is split comes from --shard-hints, the model's ONNX sharding "
          "fields (see cleave-annotate) and --shard-preset.\n");

  if (listOps) {
    for (auto &[op, since] : supportedOnnxOps())
      outs() << op << " " << since << "\n";
    return 0;
  }
  if (modelPath.empty())
    return fail("no model given; usage: cleave-compile MODEL.onnx -o OUT");
  if (outputPath.empty() && !searchOnly)
    return fail("no output given: pass -o OUT");

  if (gpuAttention != "fused" && gpuAttention != "gemms")
    return fail("--gpu-attention must be 'fused' or 'gemms', not '" +
                gpuAttention + "'");
  if (gpuKernelsOnCpu && target != Target::CPU)
    return fail("--gpu-kernels-on-cpu runs the CUDA kernels on the CPU: it "
                "needs --target cpu, not '" +
                targetName(target) + "'");
  if (gpuArch != "sm_80" && gpuArch != "sm_90")
    return fail("--gpu-arch must be sm_80 or sm_90, not '" + gpuArch + "'");
  std::optional<Phase> last = parsePhase(compileTo);
  if (!last) {
    std::vector<std::string> names;
    for (const PhaseInfo &info : allPhases())
      names.push_back(info.name.str());
    return fail("unknown phase '" + compileTo +
                "' (phases: " + join(names, ", ") + ")");
  }

  ImportOptions options;
  for (const std::string &text : inputShapes) {
    StringRef name, dims;
    if (!splitAssignment("input-shape", text, name, dims))
      return 1;
    SmallVector<int64_t> shape;
    SmallVector<StringRef> parts;
    if (dims != "scalar")
      dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t d;
      if (part.getAsInteger(10, d) || d < 0)
        return fail("--input-shape " + text + ": '" + part +
                    "' is not a dimension size");
      shape.push_back(d);
    }
    if (!options.inputShapes.emplace(name.str(), shape).second)
      return fail("--input-shape given twice for '" + name + "'");
  }
  for (const std::string &text : namedDims) {
    StringRef name, size;
    if (!splitAssignment("dim", text, name, size))
      return 1;
    int64_t n;
    if (size.getAsInteger(10, n) || n < 0)
      return fail("--dim " + text + ": '" + size + "' is not a dimension size");
    if (!options.namedDims.emplace(name.str(), n).second)
      return fail("--dim given twice for '" + name + "'");
  }
  for (const std::string &text : boundInputs) {
    StringRef name, file;
    if (!splitAssignment("bind-input", text, name, file))
      return 1;
    if (!options.boundInputs.emplace(name.str(), file.str()).second)
      return fail("--bind-input given twice for '" + name + "'");
  }

  mlir::DialectRegistry registry;
  registerEverything(registry);
  mlir::MLIRContext context(registry);
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &diag) {
    raw_ostream &os = errs();
    switch (diag.getSeverity()) {
    case mlir::DiagnosticSeverity::Error:
      WithColor::error(os, "cleave-compile");
      break;
    case mlir::DiagnosticSeverity::Warning:
      WithColor::warning(os, "cleave-compile");
      break;
    default:
      WithColor::note(os, "cleave-compile");
      break;
    }
    os << diag << "\n";
    for (const mlir::Diagnostic &note : diag.getNotes())
      WithColor::note(os, "cleave-compile") << note << "\n";
  });

  if (!dumpDir.empty())
    if (std::error_code ec = sys::fs::create_directories(dumpDir))
      return fail("cannot create --dump-dir '" + dumpDir +
                  "': " + ec.message());

  if (!shardPreset.empty() && shardPreset != "megatron")
    return fail("unknown --shard-preset '" + shardPreset +
                "' (presets: megatron)");
  bool autoMesh = meshOption == "auto";
  if (autoMesh) {
    if (devicesOption < 1)
      return fail("--mesh auto needs the devices to plan for: pass --devices "
                  "N");
    if (!shardHints.empty() || !shardPreset.empty())
      return fail("--mesh auto chooses the mesh and splits with the megatron "
                  "preset; --shard-hints and --shard-preset go with a mesh "
                  "you give");
    if (microbatches.getNumOccurrences())
      return fail("--mesh auto chooses the microbatches; drop --microbatches");
    if (generate)
      return fail("--mesh auto does not plan generation bundles yet (the "
                  "search prices one program; a decoder's prefill and step "
                  "share weights); give --mesh for --generate");
    if (*last != Phase::Bundle)
      return fail("--mesh auto writes a bundle; it cannot stop at "
                  "--compile-to '" +
                  compileTo + "'");
    if (planIndex < 1)
      return fail("--plan-index counts from 1");
    if (searchOnly && !fallbackDevices.empty())
      return fail("--search-only compiles nothing: drop --fallback-devices");
    for (int64_t k : fallbackDevices)
      if (k < 1 || k == devicesOption)
        return fail("--fallback-devices " + Twine(k) +
                    ": a fallback plan is for another count of 1 or more "
                    "devices than --devices " +
                    Twine(int64_t(devicesOption)));
  } else if (devicesOption.getNumOccurrences() ||
             planIndex.getNumOccurrences() || !fallbackDevices.empty() ||
             searchOnly) {
    return fail("--devices, --plan-index, --fallback-devices and "
                "--search-only go with --mesh auto");
  }
  if (objectiveOption != "latency" && objectiveOption != "throughput")
    return fail("--objective must be 'latency' or 'throughput', not '" +
                objectiveOption + "'");
  if (objectiveOption.getNumOccurrences() && !autoMesh)
    return fail("--objective goes with --mesh auto");
  if (!shardHints.empty() && meshOption.empty())
    return fail("--shard-hints needs a mesh: pass --mesh, e.g. --mesh tp=2 "
                "or --mesh pp=2");
  if (!shardPreset.empty() && meshOption.empty())
    return fail("--shard-preset needs a mesh: pass --mesh, e.g. --mesh tp=2");
  ShardingRequest sharding;
  if (!autoMesh)
    sharding.mesh = meshOption;
  sharding.preset = shardPreset;
  if (!shardHints.empty()) {
    auto parsed = parseHintFile(shardHints);
    if (!parsed)
      return fail(toString(parsed.takeError()));
    sharding.hints = std::move(*parsed);
  }

  if (!(deviceMemory >= 0)) {
    char given[32];
    std::snprintf(given, sizeof given, "%g", deviceMemory.getValue());
    return fail("--device-memory must be a number of bytes, 0 or more (0: "
                "the machine's memory), not " +
                Twine(given));
  }
  if (microbatches == 0)
    return fail("--microbatches must be at least 1");
  if (!(maxConstantBytes >= 1 && maxConstantBytes < 0x1p63))
    return fail("--max-constant-bytes must be a positive number of bytes");
  options.constantByteLimit = static_cast<int64_t>(maxConstantBytes);
  options.tapNodes.insert(tapNodes.begin(), tapNodes.end());
  options.tapAll = tapAll;
  options.faultNode = plantFault;
  PipelineOptions pipelineOptions;
  pipelineOptions.cpuGemm = cpuGemm;
  pipelineOptions.target = target;
  pipelineOptions.gpuArch = gpuArch;
  pipelineOptions.precision = precision;
  pipelineOptions.gpuKernelsOnCpu = gpuKernelsOnCpu;
  pipelineOptions.fuseAttention = gpuAttention == "fused";
  std::string cudaRoot;
  if (target == Target::CUDA) {
    const char *root = std::getenv("CUDA_HOME");
    cudaRoot = root ? root : "/usr/local/cuda";
    SmallString<256> libdevice(cudaRoot);
    sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
    if (!sys::fs::exists(libdevice))
      return fail("--target cuda needs CUDA's libdevice, not found at '" +
                  libdevice + "' (set CUDA_HOME to the CUDA toolkit)");
    pipelineOptions.libdevice = std::string(libdevice);
  }
  pipelineOptions.microbatches = microbatches;
  pipelineOptions.deviceMemory = deviceMemory;
  // A file, a shipped spec's name, or the keys inline (empty: defaults).
  std::string machineText = machineOption;
  if (!machineText.empty() && !sys::fs::exists(machineText) &&
      StringRef(machineText).find('=') == StringRef::npos)
    machineText = shippedMachine(argv[0], machineText);
  if (!machineText.empty() && !sys::fs::exists(machineText) &&
      StringRef(machineText).find('=') == StringRef::npos)
    return fail("--machine '" + machineOption +
                "' is no file, no KEY=VALUE list and no shipped spec (" +
                join(shippedMachineNames(argv[0]), ", ") + ")");
  auto machine = MachineModel::fromOption(machineText);
  if (!machine)
    return fail("--machine: " + toString(machine.takeError()));
  pipelineOptions.machine = machineText;

  CompilationOptions compilation;
  compilation.modelPath = modelPath;
  compilation.import = std::move(options);
  compilation.sharding = std::move(sharding);
  compilation.pipeline = pipelineOptions;
  compilation.last = *last;
  compilation.dumpDir = dumpDir;
  BundleOptions &bundle = compilation.bundle;
  bundle.modelPath = modelPath;
  bundle.outDir = outputPath;
  bundle.dumpDir = dumpDir;
  bundle.jobs = jobs;
  bundle.runtimeLibrary = runtimeLibrary(argv[0]);
  bundle.compilerVersion = "cleave-compile 0.1";
  bundle.reportPath = reportPath;
  bundle.cudaRoot = cudaRoot;
  if (!cudaRoot.empty())
    bundle.gpuArch = gpuArch;
  bundle.precision = precision;

  if (generate) {
    if (*last != Phase::Bundle)
      return fail("--generate writes a bundle; it cannot stop at --compile-to "
                  "'" +
                  compileTo + "'");
    if (!inputShapes.empty())
      return fail("--generate sizes the inputs itself (--max-seq, --max-batch, "
                  "--prompt-length); drop --input-shape (--dim sizes the "
                  "cache's other named dimensions, such as kv_cache_dim)");
    if (target != Target::CPU)
      return fail("--generate builds CPU programs only so far (the loop "
                  "keeps its cache in host memory); --gpu-kernels-on-cpu "
                  "checks the CUDA target's kernels in it");
    if (!tapNodes.empty() || tapAll)
      return fail("--tap and --tap-all are for cleave-verify, not --generate");
    GenerationOptions generation;
    generation.maxSeq = maxSeq.getNumOccurrences() ? int64_t(maxSeq) : 0;
    generation.maxBatch = maxBatch;
    generation.promptLength = promptLength;
    auto progress = [&](StringRef label, const PhaseInfo &info,
                        double seconds) {
      if (!quiet)
        errs() << format("cleave-compile: %-7s %-10s %8.3f s\n",
                         label.str().c_str(), info.name.str().c_str(), seconds);
    };
    return succeeded(
               compileForGeneration(context, compilation, generation, progress))
               ? 0
               : 1;
  }
  if (maxSeq.getNumOccurrences() || maxBatch.getNumOccurrences() ||
      promptLength.getNumOccurrences())
    return fail("--max-seq, --max-batch and --prompt-length go with "
                "--generate");

  if (autoMesh) {
    std::vector<int64_t> fallbacks(fallbackDevices.begin(),
                                   fallbackDevices.end());
    llvm::sort(fallbacks);
    fallbacks.erase(std::unique(fallbacks.begin(), fallbacks.end()),
                    fallbacks.end());
    SearchOptions search;
    search.devices = devicesOption;
    search.deviceMemory = deviceMemory;
    search.objective = objectiveOption == "throughput" ? Objective::Throughput
                                                       : Objective::Latency;
    search.machine = *machine;
    auto say = [&](StringRef line) {
      if (!quiet)
        errs() << "cleave-compile: plan search: " << line << "\n";
    };
    search.progress = say;
    return compileAuto(context, compilation, search, fallbacks, quiet) ? 0 : 1;
  }

  Compilation run(context, std::move(compilation));
  if (failed(run.run(quiet ? Compilation::PhaseCallback()
                           : Compilation::PhaseCallback(printPhase))))
    return 1;
  if (summary) {
    printModuleSummary(run.module(), outs());
    outs().flush();
  }
  if (*last == Phase::Bundle)
    return 0;
  return succeeded(writeModule(run.module(), outputPath)) ? 0 : 1;
}
