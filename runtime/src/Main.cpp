//===- Main.cpp - The entry point of every compiled Cleave program --------===//
//
// Loads the bundle's weights, reads and validates the inputs against the
// model's descriptor, runs the model (repeatedly with --bench) and writes one
// .npy per output. Outputs are written to temporary names and renamed only
// once all of them are complete, so a failure leaves nothing half-written.
//
//===----------------------------------------------------------------------===//

#include "AmxGemm.h"
#include "IntegerGemm.h"
#include "Device.h"
#include "PackedGemm.h"
#include "Profile.h"
#include "Runtime.h"
#include "Program.h"
#include "comm/Comm.h"

#include "cleave/Runtime/Abi.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <malloc.h>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace cleave::rt;

// From the OpenMP runtime (libomp) the program links for its parallel loops.
extern "C" void omp_set_num_threads(int threads);
extern "C" void kmp_set_blocktime(int milliseconds);

namespace {

/// How long (ms) OpenMP's threads wait for more work before they sleep when
/// the GEMMs run on the packed kernel (see prepare).
constexpr int kPackedBlocktimeMs = 5;

struct Options {
  std::string bundle;
  std::map<std::string, std::string> inputs;
  std::string outputDir;
  int bench = 0;
  int threads = 0;
  bool profile = false;
};

const char *kUsage =
    "usage: program --bundle DIR --input NAME=FILE.npy ... --output-dir DIR\n"
    "               [--bench N] [--threads N] [--profile]\n"
    "Normally started by cleave-run, which passes --bundle.\n";

} // namespace

int cleave::rt::parseCount(const std::string &option, const std::string &text) {
  char *end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value <= 0 || value > 1000000)
    throw RuntimeError(option + " expects a positive number, got '" + text +
                       "'");
  return static_cast<int>(value);
}

namespace {

Options parseArgs(int argc, char **argv) {
  Options o;
  for (OptionReader options(argc, argv); options.next();) {
    const std::string &arg = options.arg();
    auto value = [&] { return options.value(); };
    std::string name = options.name();
    if (name == "--bundle") {
      o.bundle = value();
    } else if (name == "--input") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        throw RuntimeError("--input expects NAME=FILE.npy, got '" + v + "'");
      if (!o.inputs.emplace(v.substr(0, eq), v.substr(eq + 1)).second)
        throw RuntimeError("input '" + v.substr(0, eq) + "' is given twice");
    } else if (name == "--output-dir") {
      o.outputDir = value();
    } else if (name == "--bench") {
      o.bench = parseCount("--bench", value());
    } else if (name == "--profile") {
      o.profile = true;
    } else if (name == "--threads") {
      o.threads = parseCount("--threads", value());
    } else if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw RuntimeError("unknown option '" + arg + "'\n" + kUsage);
    }
  }
  if (o.bundle.empty())
    throw RuntimeError("--bundle is required");
  return o;
}

} // namespace

/// A file name for output `name`: characters outside [A-Za-z0-9._-] become '_'.
static std::string fileNameFor(const std::string &name) {
  std::string out = name;
  for (char &c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != '-')
      c = '_';
  return out + ".npy";
}

void cleave::rt::makeDirs(const std::string &path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!partial.empty() && mkdir(partial.c_str(), 0777) != 0 &&
          errno != EEXIST)
        throw RuntimeError("cannot create output folder '" + partial +
                           "': " + std::strerror(errno));
    }
    if (i < path.size())
      partial.push_back(path[i]);
  }
}

double cleave::rt::percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

namespace {

/// Everything the run needs once set up: inputs read, weights mapped.
struct Prepared {
  std::unique_ptr<WeightFile> weights;
  std::vector<std::unique_ptr<AlignedBuffer>> owned;
  std::vector<void *> pointers;
  std::vector<const BufferDesc *> outputs;
  std::vector<void *> outputData;
  int threads = 1;
};

void prepare(const Options &options, const ModelDesc &desc, Prepared &p);

/// One run of the model, finished: a GPU program's work is queued on the
/// device, so wait for it. With --profile, a `reported` run's calls are
/// timed (Profile.h).
void runModel(std::vector<void *> &pointers, bool reported = true) {
  auto start = std::chrono::steady_clock::now();
  if (reported)
    profile::runStarted();
  cleave_model_run(pointers.data());
  if (onDevice())
    cleave_rt_device_wait();
  comm::runCompleted();
  if (reported)
    profile::runFinished(std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - start)
                             .count());
}

} // namespace

int64_t cleave::rt::stageOf(const ModelDesc &desc, int rank) {
  if (desc.stageAxis < 0)
    return 0;
  int64_t stride = 1;
  for (size_t a = desc.stageAxis + 1; a < desc.meshSizes.size(); ++a)
    stride *= desc.meshSizes[a];
  return rank / stride % desc.meshSizes[desc.stageAxis];
}

namespace {
void runAndWrite(const Options &options, const ModelDesc &desc, Prepared &p);

int run(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--generate") == 0)
      return runGeneration(argc, argv);
  // --bundle DIR --preflight CHECKSUM, as cleave-run starts it.
  if (argc == 5 && std::strcmp(argv[1], "--bundle") == 0 &&
      std::strcmp(argv[3], "--preflight") == 0)
    return runPreflight(argv[2], argv[4]);
  Options options = parseArgs(argc, argv);
  // The model allocates and frees the same intermediates on every run: keep
  // them in the heap instead of fresh zeroed pages from mmap each time.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ModelDesc desc = parseModelDesc(cleave_model_desc);
  if (desc.ranks > 1)
    comm::start(desc, &argc, &argv);
  if (onDevice())
    together([&] { cleave_rt_device_start(); });
  Prepared prepared;
  together([&] { prepare(options, desc, prepared); });
  together([&] { runAndWrite(options, desc, prepared); });
  if (onDevice())
    cleave_rt_device_finish();
  comm::finish();
  return 0;
}

/// Refuses an input holding an index outside what a node of the model reads
/// with it (a token id at or past the vocabulary): the program would read
/// the nearest row instead (the compiler clamps), a wrong answer.
void checkIndexBounds(const ModelDesc &desc, const BufferDesc &b,
                      const NpyArray &array, const std::string &file) {
  std::vector<const IndexBound *> bounds;
  for (const IndexBound &bound : desc.indexBounds)
    if (bound.input == b.name)
      bounds.push_back(&bound);
  if (bounds.empty())
    return;
  // The values widened once, whatever the integer type.
  std::vector<int64_t> values(b.numElements());
  auto widen = [&](auto zero) {
    const auto *data =
        reinterpret_cast<const decltype(zero) *>(array.data.data());
    std::copy(data, data + values.size(), values.begin());
  };
  if (b.dtype == "i64")
    widen(int64_t());
  else if (b.dtype == "i32")
    widen(int32_t());
  else if (b.dtype == "i16")
    widen(int16_t());
  else if (b.dtype == "i8")
    widen(int8_t());
  else
    return;
  for (const IndexBound *bound : bounds)
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t v = values[i];
      if (v >= bound->low && v < bound->high)
        continue;
      std::string where;
      for (size_t d = b.shape.size(), rest = i; d-- > 0;) {
        where = std::to_string(rest % b.shape[d]) +
                (where.empty() ? "" : ", " + where);
        rest /= b.shape[d];
      }
      throw RuntimeError("input '" + b.name + "' ('" + file + "') holds " +
                         std::to_string(v) + " at [" + where + "], outside [" +
                         std::to_string(bound->low) + ", " +
                         std::to_string(bound->high) + "): node " +
                         bound->node + " indexes a dimension of " +
                         std::to_string(bound->high) + " with it");
    }
}

void prepare(const Options &options, const ModelDesc &desc, Prepared &p) {
  p.threads = setUpThreads(options.threads);

  // Inputs: every one given, none unknown, dtype and shape as compiled.
  std::vector<std::string> known;
  for (const BufferDesc &b : desc.buffers)
    if (b.kind == BufferKind::Input)
      known.push_back(b.name);
  for (const auto &[name, file] : options.inputs)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string &k : known)
        list += (list.empty() ? "'" : ", '") + k + "'";
      throw RuntimeError("'" + name +
                         "' is not an input of the model (its inputs: " + list +
                         ")");
    }
  std::vector<std::string> missing;
  for (const std::string &k : known)
    if (!options.inputs.count(k))
      missing.push_back(k);
  if (!missing.empty()) {
    std::string list;
    for (const std::string &m : missing)
      list += (list.empty() ? "'" : ", '") + m + "'";
    throw RuntimeError("missing input " + list +
                       ": pass --input NAME=FILE.npy");
  }
  if (!desc.buffers.empty() && options.outputDir.empty())
    throw RuntimeError("--output-dir is required");

  p.weights = mapWeights(options.bundle, {&desc});
  std::unique_ptr<WeightFile> &weights = p.weights;
  int rank = comm::rank();

  std::vector<std::unique_ptr<AlignedBuffer>> &owned = p.owned;
  std::vector<void *> &pointers = p.pointers;
  std::vector<const BufferDesc *> &outputs = p.outputs;
  std::vector<void *> &outputData = p.outputData;
  // A GPU program's kernels read weights from device memory: upload the
  // mapped file there once.
  const char *weightBase = weights ? weights->data() : nullptr;
  if (weights && onDevice()) {
    owned.push_back(std::make_unique<AlignedBuffer>(desc.weightBytes[rank],
                                                    /*deviceOnly=*/true));
    cleave_rt_device_upload(owned.back()->data, weightBase,
                            desc.weightBytes[rank]);
    weightBase = static_cast<const char *>(owned.back()->data);
  }
  for (const BufferDesc &b : desc.buffers) {
    if (b.kind == BufferKind::Param) {
      // Another stage's parameter: this rank's code never reads it.
      int64_t offset = b.offsets[rank];
      pointers.push_back(offset < 0 ? nullptr
                                    : const_cast<char *>(weightBase) + offset);
      continue;
    }
    // On a GPU, inputs and outputs are device memory too: uploaded once
    // here, downloaded after the run.
    owned.push_back(std::make_unique<AlignedBuffer>(b.bytes, onDevice()));
    pointers.push_back(owned.back()->data);
    if (b.kind == BufferKind::Output) {
      outputs.push_back(&b);
      outputData.push_back(owned.back()->data);
      continue;
    }
    const std::string &file = options.inputs.at(b.name);
    NpyArray array = readNpy(file);
    if (array.dtype != b.dtype)
      throw RuntimeError("input '" + b.name + "': '" + file + "' holds " +
                         array.dtype + ", the model takes " + b.dtype);
    if (array.shape != b.shape) {
      BufferDesc got = b;
      got.shape = array.shape;
      throw RuntimeError("input '" + b.name + "': '" + file + "' has shape " +
                         got.shapeString() + ", the model was compiled for " +
                         b.shapeString());
    }
    checkIndexBounds(desc, b, array, file);
    if (onDevice())
      cleave_rt_device_upload(owned.back()->data, array.data.data(), b.bytes);
    else
      std::memcpy(owned.back()->data, array.data.data(), b.bytes);
  }
}

void runAndWrite(const Options &options, const ModelDesc &desc, Prepared &p) {
  std::vector<void *> &pointers = p.pointers;
  int threads = p.threads;
  if (options.profile)
    profile::enable();
  using Clock = std::chrono::steady_clock;
  if (options.bench > 0) {
    int warmup = std::min(3, options.bench);
    for (int i = 0; i < warmup; ++i)
      runModel(pointers, /*reported=*/false);
    // Ranks start each run together; a run takes as long as its slowest rank.
    // A pipeline stage's busy time is its run less the time it waited in
    // transfers; a stage takes as long as its slowest rank.
    int64_t stage = stageOf(desc, comm::rank());
    std::vector<double> ms;
    std::vector<std::vector<double>> busyMs(desc.stages);
    for (int i = 0; i < options.bench; ++i) {
      comm::barrier();
      comm::takeTransferSeconds();
      auto start = Clock::now();
      runModel(pointers);
      double elapsed =
          std::chrono::duration<double, std::milli>(Clock::now() - start)
              .count();
      std::vector<double> times(desc.stages + 1, 0.0);
      times[0] = elapsed;
      times[stage + 1] = elapsed - 1e3 * comm::takeTransferSeconds();
      comm::maxOverRanks(times);
      ms.push_back(times[0]);
      for (int64_t s = 0; s < desc.stages; ++s)
        busyMs[s].push_back(times[s + 1]);
    }
    double mean = 0;
    for (double m : ms)
      mean += m / ms.size();
    if (comm::rank() == 0) {
      std::printf("latency over %d runs (%lld rank%s, %d threads each, %d "
                  "warm-up): p50 %.3f ms, p90 %.3f ms, mean %.3f ms\n",
                  options.bench, (long long)desc.ranks,
                  desc.ranks == 1 ? "" : "s", threads, warmup,
                  percentile(ms, 0.5), percentile(ms, 0.9), mean);
      if (!onDevice()) {
        std::printf("CPU GEMMs: OpenBLAS, %s kernels\n", blasKernels());
        if (const char *packed = packedGemmKernel()) {
          std::printf("CPU GEMMs by a weight: packed once, %s kernel\n",
                      packed);
          std::printf("CPU GEMMs of two activations: %s kernel\n", packed);
        }
        if (const char *amx = amxKernel())
          std::printf("CPU GEMMs of bfloat16 operands: %s tiles\n", amx);
        const char *integer = integerGemmKernel();
        std::printf("CPU integer GEMMs: %s\n",
                    integer ? integer : "plain int32 loops");
      }
      if (desc.stages > 1 || desc.microbatches > 1) {
        std::printf("pipeline: %lld stage%s, %lld microbatch%s; predicted "
                    "bubble (p-1)/(m+p-1) = %.2f\n",
                    (long long)desc.stages, desc.stages == 1 ? "" : "s",
                    (long long)desc.microbatches,
                    desc.microbatches == 1 ? "" : "es",
                    double(desc.stages - 1) /
                        double(desc.microbatches + desc.stages - 1));
        for (int64_t s = 0; s < desc.stages; ++s) {
          double busy = percentile(busyMs[s], 0.5);
          std::printf("  stage %lld: busy p50 %.3f ms per run (waiting in "
                      "transfers excluded)",
                      (long long)s, busy);
          if (s < static_cast<int64_t>(desc.stageSeconds.size()))
            std::printf(", predicted %.3f ms, measured/predicted %.2f",
                        1e3 * desc.stageSeconds[s],
                        busy / (1e3 * desc.stageSeconds[s]));
          std::printf("\n");
        }
      }
      std::fflush(stdout);
    }
  } else {
    runModel(pointers);
  }
  if (comm::rank() == 0)
    profile::report(stdout, desc.ranks == 1 ? "the program" : "rank 0");

  // The writer (the last pipeline stage's first rank) holds the whole
  // outputs and writes them, each under a temporary name, then renames them
  // all.
  if (comm::rank() != desc.writer)
    return;
  const std::vector<const BufferDesc *> &outputs = p.outputs;
  const std::vector<void *> &outputData = p.outputData;
  makeDirs(options.outputDir);
  std::vector<std::pair<std::string, std::string>> written;
  try {
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string final =
          options.outputDir + "/" + fileNameFor(outputs[i]->name);
      std::string temp =
          options.outputDir + "/." + fileNameFor(outputs[i]->name) + ".partial";
      written.emplace_back(temp, final);
      const void *data = outputData[i];
      std::vector<char> host;
      if (onDevice()) {
        host.resize(outputs[i]->bytes);
        cleave_rt_device_download(host.data(), data, host.size());
        data = host.data();
      }
      writeNpy(temp, outputs[i]->dtype, outputs[i]->shape, data,
               outputs[i]->bytes);
    }
  } catch (...) {
    for (auto &[temp, final] : written)
      std::remove(temp.c_str());
    throw;
  }
  for (auto &[temp, final] : written)
    if (std::rename(temp.c_str(), final.c_str()) != 0)
      throw RuntimeError("cannot write output '" + final +
                         "': " + std::strerror(errno));
}

} // namespace

int cleave::rt::setUpThreads(int requested) {
  int threads = requested;
  if (threads <= 0) {
    const char *env = std::getenv("CLEAVE_NUM_THREADS");
    threads = env ? std::atoi(env) : 0;
  }
  int hardware = std::max(1u, std::thread::hardware_concurrency());
  if (threads <= 0)
    threads = hardware;
  // More threads than the machine runs at once only wait on each other (and
  // thousands exhaust what OpenBLAS and OpenMP set aside).
  if (threads > hardware) {
    if (comm::rank() == 0)
      std::fprintf(stderr,
                   "note: %d threads asked for; this machine runs %d at once, "
                   "so each rank uses %d\n",
                   threads, hardware, hardware);
    threads = hardware;
  }
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  // How long an OpenMP thread waits for the next parallel region before it
  // sleeps (unless KMP_BLOCKTIME says). Loops and GEMMs alternate: where
  // the GEMMs run on OpenBLAS's threads, OpenMP's, still waiting, would take
  // the cores OpenBLAS needs (at 2 threads the 2-layer GPT-2-small stack's
  // p90 went from 25 to 37 ms), so they sleep at once. Where they run on
  // the packed kernel, on OpenMP's threads too, waking a sleeping thread
  // for each of a run's many parallel regions costs more than most of them
  // do (the same stack, 16.1 against 13.1 ms): they wait a little.
  if (!std::getenv("KMP_BLOCKTIME"))
    kmp_set_blocktime(packedGemmKernel() ? kPackedBlocktimeMs : 0);
  return threads;
}

std::unique_ptr<WeightFile>
cleave::rt::openWeightFile(const std::string &bundle, const ModelDesc &desc,
                           int rank) {
  if (rank < 0 || rank >= static_cast<int>(desc.weightChecksums.size()) ||
      rank >= static_cast<int>(desc.weightBytes.size()))
    throw RuntimeError("the model descriptor has no weight file for rank " +
                       std::to_string(rank));
  std::string path = desc.ranks == 1 ? bundle + "/weights.bin"
                                     : bundle + "/weights/rank" +
                                           std::to_string(rank) + ".bin";
  return std::make_unique<WeightFile>(path, desc.weightBytes[rank],
                                      desc.weightChecksums[rank]);
}

std::unique_ptr<WeightFile>
cleave::rt::mapWeights(const std::string &bundle,
                       std::initializer_list<const ModelDesc *> descs) {
  // This rank's weights: only the parameters its pipeline stage reads.
  int rank = comm::rank();
  bool hasParams = false;
  for (const ModelDesc *desc : descs)
    for (const BufferDesc &b : desc->buffers)
      if (b.kind == BufferKind::Param) {
        if (rank >= static_cast<int>(b.offsets.size()))
          throw RuntimeError("the model descriptor places parameter '" +
                             b.name + "' for " +
                             std::to_string(b.offsets.size()) +
                             " ranks, not rank " + std::to_string(rank));
        hasParams |= b.offsets[rank] >= 0;
      }
  if (!hasParams)
    return nullptr;
  const ModelDesc &desc = **descs.begin();
  std::unique_ptr<WeightFile> weights = openWeightFile(bundle, desc, rank);
  if (!onDevice())
    setWeightMemory(weights->data(), desc.weightBytes[rank]);
  return weights;
}

int main(int argc, char **argv) {
  useBetterBlasKernels(argv);
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    if (comm::active()) {
      std::fprintf(stderr, "cleave-run: error: %s: %s\n", comm::label().c_str(),
                   e.what());
      comm::abortJob(1);
    }
    std::fprintf(stderr, "cleave-run: error: %s\n", e.what());
    return 1;
  }
}
