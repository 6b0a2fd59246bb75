//===- Generate.cpp - The program's token generation loop -----------------===//
//
// A generation bundle holds two programs over one set of weights: the
// prefill (the prompt, padded to its length) and the decode step (one token
// against a cache of max-seq - 1 positions) (cleave-compile --generate,
// Abi.h, docs/generation.md). The loop keeps the cache resident: the
// decode program's past inputs are the cache itself. Sequence r's prompt
// (its L_r unpadded tokens) fills slots [0, L_r) and its t-th new token's
// keys and values slot L_r + t. Where the graph appends a step's keys after
// the whole past ("end"), the programs return only the new ones, the mask
// shows the filled slots and the new token (the mask's last position) and
// positions count the sequence's tokens, as transformers' generate() counts
// them under left padding. Where it places them after the mask's count
// ("count": GroupQueryAttention), the prompt begins its row, the mask holds
// L_r + t + 1 ones, and the loop takes row L_r + t of the whole present.
// The writer rank (the last stage's first) chooses each token, greedily or
// by a seeded draw, and broadcasts it, so every rank count gives the same
// tokens. Each rank copies its own new keys and values into its cache (its
// slice where tp splits the cache by heads); with pipeline stages the last
// stage broadcasts them, and only the ranks of the stage that reads a cache
// keep it.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Program.h"

#include "cleave/Runtime/Abi.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <malloc.h>
#include <random>

using namespace cleave::rt;

// Defined only in generation bundles.
extern "C" {
__attribute__((weak)) extern const char cleave_prefill_desc[];
__attribute__((weak)) extern const char cleave_generate_desc[];
__attribute__((weak)) void cleave_prefill_run(void **buffers);
}

namespace {

const char *kUsage =
    "usage: program --bundle DIR --generate --prompt IDS.npy\n"
    "               [--attention-mask MASK.npy] --max-new-tokens N\n"
    "               [--greedy | --temperature T [--top-k K] [--top-p P]\n"
    "                [--seed S]] [--eos ID]... --output-dir DIR\n"
    "               [--threads N]\n"
    "Normally started by cleave-run, which passes --bundle.\n";

struct Options {
  std::string bundle, prompt, mask, outputDir;
  int maxNewTokens = 0;
  bool sample = false;
  double temperature = 1.0, topP = 1.0;
  int topK = 0;
  uint64_t seed = 0;
  std::vector<int64_t> eos;
  int threads = 0;
};

double parseNumber(const std::string &option, const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value))
    throw RuntimeError(option + " expects a number, got '" + text + "'");
  return value;
}

int64_t parseInteger(const std::string &option, const std::string &text) {
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    throw RuntimeError(option + " expects an integer, got '" + text + "'");
  return value;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  bool greedy = false, samplingGiven = false;
  for (OptionReader options(argc, argv); options.next();) {
    const std::string &arg = options.arg();
    auto value = [&] { return options.value(); };
    std::string name = options.name();
    if (name == "--generate") {
    } else if (name == "--bundle") {
      o.bundle = value();
    } else if (name == "--prompt") {
      o.prompt = value();
    } else if (name == "--attention-mask") {
      o.mask = value();
    } else if (name == "--max-new-tokens") {
      o.maxNewTokens = parseCount(name, value());
    } else if (name == "--greedy") {
      greedy = true;
    } else if (name == "--temperature") {
      o.temperature = parseNumber(name, value());
      if (o.temperature <= 0)
        throw RuntimeError("--temperature must be above 0 (--greedy takes "
                           "the likeliest token)");
      samplingGiven = true;
    } else if (name == "--top-k") {
      o.topK = parseCount(name, value());
      samplingGiven = true;
    } else if (name == "--top-p") {
      o.topP = parseNumber(name, value());
      if (o.topP <= 0 || o.topP > 1)
        throw RuntimeError("--top-p must lie in (0, 1]");
      samplingGiven = true;
    } else if (name == "--seed") {
      o.seed = uint64_t(parseInteger(name, value()));
      samplingGiven = true;
    } else if (name == "--eos") {
      o.eos.push_back(parseInteger(name, value()));
    } else if (name == "--output-dir") {
      o.outputDir = value();
    } else if (name == "--threads") {
      o.threads = parseCount(name, value());
    } else if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw RuntimeError("unknown option '" + arg + "' with --generate\n" +
                         kUsage);
    }
  }
  if (greedy && samplingGiven)
    throw RuntimeError("--greedy takes the likeliest token; it does not go "
                       "with --temperature, --top-k, --top-p or --seed");
  o.sample = samplingGiven;
  if (o.bundle.empty())
    throw RuntimeError("--bundle is required");
  if (o.prompt.empty())
    throw RuntimeError("--generate needs --prompt IDS.npy");
  if (o.maxNewTokens == 0)
    throw RuntimeError("--generate needs --max-new-tokens N");
  if (o.outputDir.empty())
    throw RuntimeError("--output-dir is required");
  return o;
}

/// One of the bundle's two programs with its buffers bound.
struct Program {
  ModelDesc desc;
  void (*run)(void **) = nullptr;
  std::vector<void *> pointers;
  std::vector<std::unique_ptr<AlignedBuffer>> owned;
  /// The communicator of each of its group ids (comm::setGroupTable).
  std::vector<int64_t> groupTable;

  const BufferDesc &buffer(const std::string &name, BufferKind kind) const {
    for (const BufferDesc &b : desc.buffers)
      if (b.name == name && b.kind == kind)
        return b;
    throw RuntimeError(
        "the program has no " +
        std::string(kind == BufferKind::Input ? "input" : "output") + " '" +
        name + "'");
  }
  void *data(const std::string &name, BufferKind kind) const {
    const BufferDesc &b = buffer(name, kind);
    return pointers[&b - desc.buffers.data()];
  }

  /// Parameters from the mapped weights, every input and output a zeroed
  /// buffer of its own but the inputs in `unread` (another stage's cache),
  /// which this rank's code never reads.
  void bind(const char *weights, const std::vector<std::string> &unread = {}) {
    int rank = comm::rank();
    for (const BufferDesc &b : desc.buffers) {
      if (b.kind == BufferKind::Param) {
        int64_t offset = b.offsets[rank];
        pointers.push_back(offset < 0 ? nullptr
                                      : const_cast<char *>(weights) + offset);
        continue;
      }
      if (b.kind == BufferKind::Input &&
          std::find(unread.begin(), unread.end(), b.name) != unread.end()) {
        pointers.push_back(nullptr);
        continue;
      }
      owned.push_back(std::make_unique<AlignedBuffer>(b.bytes));
      pointers.push_back(owned.back()->data);
    }
  }
};

/// Writes `value` as element `i` of integer or float buffer `b`.
void store(const BufferDesc &b, void *data, int64_t i, int64_t value) {
  if (b.dtype == "i64")
    static_cast<int64_t *>(data)[i] = value;
  else if (b.dtype == "i32")
    static_cast<int32_t *>(data)[i] = int32_t(value);
  else if (b.dtype == "f32")
    static_cast<float *>(data)[i] = float(value);
  else if (b.dtype == "bool" || b.dtype == "i8" || b.dtype == "u8")
    static_cast<int8_t *>(data)[i] = int8_t(value);
  else
    throw RuntimeError("input '" + b.name + "' is " + b.dtype +
                       "; the generation loop fills int64, int32, float32 "
                       "and bool inputs");
}

/// The values of an integer .npy array, widened.
std::vector<int64_t> integers(const NpyArray &array, const std::string &file) {
  size_t n = 1;
  for (int64_t d : array.shape)
    n *= d;
  std::vector<int64_t> values(n);
  auto widen = [&](auto zero) {
    const auto *p = reinterpret_cast<const decltype(zero) *>(array.data.data());
    std::copy(p, p + n, values.begin());
  };
  if (array.dtype == "i64")
    widen(int64_t());
  else if (array.dtype == "i32")
    widen(int32_t());
  else if (array.dtype == "bool" || array.dtype == "i8")
    widen(int8_t());
  else if (array.dtype == "u8")
    widen(uint8_t());
  else
    throw RuntimeError("'" + file + "' holds " + array.dtype +
                       "; expected integers");
  return values;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Copies `count` positions of batch row `row` from `from` (starting at
/// position `fromPos`) to `to` (at `toPos`): two float32 tensors of one
/// shape but along the sequence dimension `seqDim`.
void copyPositions(const BufferDesc &from, const float *src,
                   const BufferDesc &to, float *dst, int batchDim, int seqDim,
                   int64_t row, int64_t fromPos, int64_t toPos, int64_t count) {
  std::vector<int64_t> fromStrides = rowMajorStrides(from.shape);
  std::vector<int64_t> toStrides = rowMajorStrides(to.shape);
  int rank = int(from.shape.size());
  // The last dimension is copied as one run where it is neither.
  int last = rank - 1;
  int64_t run = 1;
  if (last != batchDim && last != seqDim)
    run = from.shape[last];
  else
    last = rank;
  std::vector<int64_t> index(rank, 0);
  while (true) {
    int64_t s = row * fromStrides[batchDim], d = row * toStrides[batchDim];
    for (int k = 0; k < last; ++k)
      if (k != batchDim && k != seqDim) {
        s += index[k] * fromStrides[k];
        d += index[k] * toStrides[k];
      }
    for (int64_t p = 0; p < count; ++p)
      std::memcpy(dst + d + (toPos + p) * toStrides[seqDim],
                  src + s + (fromPos + p) * fromStrides[seqDim],
                  run * sizeof(float));
    int k = last - 1;
    for (; k >= 0; --k) {
      if (k == batchDim || k == seqDim)
        continue;
      if (++index[k] < from.shape[k])
        break;
      index[k] = 0;
    }
    if (k < 0)
      return;
  }
}

/// Chooses the next token from one row of logits.
class Sampler {
public:
  explicit Sampler(const Options &options)
      : options(options), rng(options.seed) {}

  int64_t next(const float *logits, int64_t vocabulary) {
    for (int64_t v = 0; v < vocabulary; ++v)
      if (std::isnan(logits[v]))
        throw RuntimeError("the logits hold NaN at token " + std::to_string(v) +
                           "; no token chosen");
    if (!options.sample)
      return std::max_element(logits, logits + vocabulary) - logits;
    // transformers' order: temperature, top-k, then top-p.
    std::vector<std::pair<double, int64_t>> ranked(vocabulary);
    for (int64_t v = 0; v < vocabulary; ++v)
      ranked[v] = {double(logits[v]) / options.temperature, v};
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](auto &a, auto &b) { return a.first > b.first; });
    if (options.topK > 0 && options.topK < vocabulary)
      ranked.resize(options.topK);
    double top = ranked.front().first, sum = 0;
    for (auto &[weight, token] : ranked)
      sum += (weight = std::exp(weight - top));
    size_t kept = 0;
    double cumulative = 0;
    while (kept < ranked.size()) {
      cumulative += ranked[kept++].first / sum;
      if (cumulative >= options.topP)
        break;
    }
    ranked.resize(kept);
    double total = 0;
    for (auto &entry : ranked)
      total += entry.first;
    // A uniform draw in [0, total) from 53 bits of the generator.
    double u = double(rng() >> 11) * 0x1p-53 * total;
    for (auto &[weight, token] : ranked) {
      if (u < weight)
        return token;
      u -= weight;
    }
    return ranked.back().second;
  }

private:
  const Options &options;
  std::mt19937_64 rng;
};

/// The prompt as the loop uses it: each sequence's unpadded tokens.
struct Prompt {
  int64_t batch = 0, width = 0;
  std::vector<std::vector<int64_t>> tokens;
};

/// Reads and checks the prompt and its mask against the bundle.
Prompt readPrompt(const Options &options, const GenerationDesc &gen,
                  int64_t idLimit) {
  NpyArray ids = readNpy(options.prompt);
  if (ids.shape.size() == 1)
    ids.shape.insert(ids.shape.begin(), 1);
  if (ids.shape.size() != 2 || ids.shape[0] < 1 || ids.shape[1] < 1)
    throw RuntimeError("--prompt '" + options.prompt +
                       "' must hold token ids [batch, tokens] or [tokens]");
  Prompt prompt;
  prompt.batch = ids.shape[0];
  prompt.width = ids.shape[1];
  std::vector<int64_t> values = integers(ids, options.prompt);
  std::vector<int64_t> mask(values.size(), 1);
  if (!options.mask.empty()) {
    NpyArray m = readNpy(options.mask);
    if (m.shape.size() == 1)
      m.shape.insert(m.shape.begin(), 1);
    if (m.shape != ids.shape) {
      auto text = [](const std::vector<int64_t> &shape) {
        std::string s;
        for (int64_t d : shape)
          s += (s.empty() ? "" : "x") + std::to_string(d);
        return s;
      };
      throw RuntimeError("--attention-mask '" + options.mask + "' has shape " +
                         text(m.shape) + ", the prompt " + text(ids.shape));
    }
    mask = integers(m, options.mask);
  }
  if (prompt.batch > gen.maxBatch)
    throw RuntimeError("the prompt holds " + std::to_string(prompt.batch) +
                       " sequences; the bundle was compiled for at most " +
                       std::to_string(gen.maxBatch) + " (--max-batch)");
  if (prompt.width > gen.promptLength)
    throw RuntimeError("the prompt has " + std::to_string(prompt.width) +
                       " tokens; the bundle's prefill takes at most " +
                       std::to_string(gen.promptLength) +
                       " (cleave-compile --prompt-length)");
  for (int64_t r = 0; r < prompt.batch; ++r) {
    std::vector<int64_t> row;
    for (int64_t c = 0; c < prompt.width; ++c) {
      int64_t i = r * prompt.width + c, v = values[i];
      if (v < 0 || v >= idLimit)
        throw RuntimeError(
            "the prompt holds token id " + std::to_string(v) + " at [" +
            std::to_string(r) + ", " + std::to_string(c) +
            "], outside the vocabulary [0, " + std::to_string(idLimit) + ")");
      if (mask[i] != 0 && mask[i] != 1)
        throw RuntimeError("--attention-mask holds " + std::to_string(mask[i]) +
                           " at [" + std::to_string(r) + ", " +
                           std::to_string(c) + "]; it holds 0 or 1");
      if (mask[i] == 1)
        row.push_back(v);
      else if (!row.empty())
        throw RuntimeError(
            "--attention-mask row " + std::to_string(r) +
            " has a 0 after a 1: prompts of different lengths are padded on "
            "the left (zeros first)");
    }
    if (row.empty())
      throw RuntimeError("--attention-mask row " + std::to_string(r) +
                         " masks every token");
    if (int64_t(row.size()) + options.maxNewTokens > gen.maxSeq)
      throw RuntimeError("sequence " + std::to_string(r) + ": its " +
                         std::to_string(row.size()) + " prompt tokens plus " +
                         std::to_string(options.maxNewTokens) +
                         " new ones exceed the bundle's --max-seq of " +
                         std::to_string(gen.maxSeq));
    prompt.tokens.push_back(std::move(row));
  }
  if (gen.cacheWrite == "position")
    for (const std::vector<int64_t> &row : prompt.tokens)
      if (row.size() != prompt.tokens[0].size())
        throw RuntimeError(
            "the bundle's static cache writes the whole batch at one "
            "cache_position, and its positions are those: its prompts must "
            "be of one length (sequence 0 has " +
            std::to_string(prompt.tokens[0].size()) + " tokens, another " +
            std::to_string(row.size()) + ")");
  for (int64_t id : options.eos)
    if (id < 0 || id >= gen.vocabulary)
      throw RuntimeError("--eos " + std::to_string(id) +
                         " is outside the vocabulary [0, " +
                         std::to_string(gen.vocabulary) + ")");
  return prompt;
}

/// Everything set up before the first token: programs bound, cache
/// allocated, prompt read and checked.
struct Session {
  Options options;
  GenerationDesc gen;
  Program prefill, decode;
  std::unique_ptr<WeightFile> weights;
  Prompt prompt;
  int threads = 1;
  /// The warm-up's time (warmUp), reported apart from the first token's.
  double warmUpMs = 0;
};

void setUp(Session &s) {
  s.threads = setUpThreads(s.options.threads);
  s.weights = mapWeights(s.options.bundle, {&s.decode.desc, &s.prefill.desc});
  const char *base = s.weights ? s.weights->data() : nullptr;
  s.prefill.bind(base);
  // The caches another pipeline stage reads are not kept here.
  std::vector<std::string> unread;
  int64_t stage = stageOf(s.decode.desc, comm::rank());
  for (const GenerationDesc::Cache &c : s.gen.caches)
    if (!c.stages.empty() &&
        std::find(c.stages.begin(), c.stages.end(), stage) == c.stages.end())
      unread.push_back(c.past);
  s.decode.bind(base, unread);
  // Each program's new keys and values are copied into the decode
  // program's past: held alike on this rank, but along the sequence.
  for (const GenerationDesc::Cache &c : s.gen.caches) {
    const BufferDesc &past = s.decode.buffer(c.past, BufferKind::Input);
    for (const Program *p : {&s.prefill, &s.decode}) {
      const BufferDesc &present = p->buffer(c.present, BufferKind::Output);
      bool alike = past.dtype == "f32" && present.dtype == "f32" &&
                   past.shape.size() == present.shape.size();
      for (size_t d = 0; alike && d < past.shape.size(); ++d)
        alike = int(d) == c.seqDim || past.shape[d] == present.shape[d];
      if (!alike)
        throw RuntimeError("cache '" + c.past + "' and '" + c.present +
                           "' are not float32 tensors of one shape but "
                           "along the sequence");
    }
  }
  int64_t idLimit = s.gen.vocabulary;
  for (const IndexBound &bound : s.decode.desc.indexBounds)
    if (bound.input == s.gen.ids)
      idLimit = std::min(idLimit, bound.high);
  s.prompt = readPrompt(s.options, s.gen, idLimit);
}

/// Runs one program, finished.
void runProgram(const Program &p) {
  comm::setGroupTable(p.groupTable);
  p.run(const_cast<void **>(p.pointers.data()));
  comm::runCompleted();
}

/// Runs the decode program twice and the prefill once, on one token a row,
/// before the clock starts: the weights' pages are read in, each weight is
/// packed for the GEMM kernels (on its second use; PackedGemm.cpp) and the
/// programs' buffers are allocated, as a serving engine does when it loads
/// a model, so that the first token's time is the prompt's. The cache is
/// only read; the outputs are overwritten by the first step.
void warmUp(Session &s) {
  Program &p = s.decode;
  const GenerationDesc &gen = s.gen;
  const BufferDesc &mask = p.buffer(gen.mask, BufferKind::Input);
  void *maskData = p.data(gen.mask, BufferKind::Input);
  bool appended = gen.cacheWrite == "end";
  for (int64_t r = 0; r < gen.maxBatch; ++r)
    store(mask, maskData, r * gen.maxSeq + (appended ? gen.maxSeq - 1 : 0), 1);
  for (int i = 0; i < 2; ++i)
    runProgram(p);
  // And the prefill once (every position masked but the last of each row):
  // its buffers are allocated and touched, as a loaded server's are.
  Program &q = s.prefill;
  const BufferDesc &prefillMask = q.buffer(gen.mask, BufferKind::Input);
  void *prefillMaskData = q.data(gen.mask, BufferKind::Input);
  int64_t width = prefillMask.shape[1];
  for (int64_t r = 0; r < gen.maxBatch; ++r)
    store(prefillMask, prefillMaskData, r * width + (appended ? width - 1 : 0),
          1);
  runProgram(q);
}

/// Chooses each sequence's next token on the writer rank from `logits`
/// [batch, tokens, vocabulary] at sequence r's token `at(r)`, and gives
/// every rank the choice.
template <typename At>
std::vector<int64_t> chooseTokens(Session &s, Sampler &sampler,
                                  const Program &p, At at) {
  const BufferDesc &b = p.buffer(s.gen.logits, BufferKind::Output);
  const float *logits =
      static_cast<const float *>(p.data(s.gen.logits, BufferKind::Output));
  int64_t tokens = b.shape[1], vocabulary = b.shape[2];
  std::vector<int64_t> chosen(s.prompt.batch, 0);
  if (comm::rank() == p.desc.writer)
    for (int64_t r = 0; r < s.prompt.batch; ++r)
      chosen[r] =
          sampler.next(logits + (r * tokens + at(r)) * vocabulary, vocabulary);
  comm::broadcast(p.desc.writer, chosen.data(), chosen.size() * 8);
  return chosen;
}

/// Gives every rank the new keys and values of `p`'s present outputs and
/// writes each sequence's into the cache: `count(r)` positions from
/// `from(r)` to slot `to(r)`.
template <typename From, typename To, typename Count>
void storeNewKeys(Session &s, const Program &p, From from, To to, Count count) {
  for (const GenerationDesc::Cache &c : s.gen.caches) {
    const BufferDesc &present = p.buffer(c.present, BufferKind::Output);
    void *data = p.data(c.present, BufferKind::Output);
    // With pipeline stages only the last stage holds the outputs; without,
    // every rank returns its own (its slice of a split cache, or the
    // whole, gathered).
    if (p.desc.stages > 1)
      comm::broadcast(p.desc.writer, data, present.bytes);
    const BufferDesc &cache = s.decode.buffer(c.past, BufferKind::Input);
    float *slots =
        static_cast<float *>(s.decode.data(c.past, BufferKind::Input));
    if (!slots) // another stage's cache
      continue;
    for (int64_t r = 0; r < s.prompt.batch; ++r)
      copyPositions(present, static_cast<const float *>(data), cache, slots,
                    c.batchDim, c.seqDim, r, from(r), to(r), count(r));
  }
}

void writeTokens(const Session &s,
                 const std::vector<std::vector<int64_t>> &out) {
  makeDirs(s.options.outputDir);
  int64_t batch = s.prompt.batch, n = s.options.maxNewTokens;
  std::vector<int64_t> flat;
  for (const auto &row : out)
    flat.insert(flat.end(), row.begin(), row.end());
  std::string final = s.options.outputDir + "/tokens.npy";
  std::string temp = s.options.outputDir + "/.tokens.npy.partial";
  writeNpy(temp, "i64", {batch, n}, flat.data(), flat.size() * 8);
  if (std::rename(temp.c_str(), final.c_str()) != 0) {
    std::remove(temp.c_str());
    throw RuntimeError("cannot write '" + final + "': " + std::strerror(errno));
  }
}

void generate(Session &s) {
  using Clock = std::chrono::steady_clock;
  const GenerationDesc &gen = s.gen;
  const Prompt &prompt = s.prompt;
  int64_t batch = gen.maxBatch, P = gen.promptLength;
  Sampler sampler(s.options);
  bool printer = comm::rank() == 0;
  auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  auto start = Clock::now();

  // The prompt. Where the new keys follow the whole past, sequence r's
  // tokens end its row, after one masked past position; where the mask's
  // count places them, they begin it (no past). Rows past the prompt's
  // batch hold one token.
  bool appended = gen.cacheWrite == "end";
  auto length = [&](int64_t r) {
    return r < prompt.batch ? int64_t(prompt.tokens[r].size()) : 1;
  };
  {
    Program &p = s.prefill;
    const BufferDesc &ids = p.buffer(gen.ids, BufferKind::Input);
    const BufferDesc &mask = p.buffer(gen.mask, BufferKind::Input);
    void *idData = p.data(gen.ids, BufferKind::Input);
    void *maskData = p.data(gen.mask, BufferKind::Input);
    // The prompt's first mask position: after the past where the new keys
    // follow it; else the mask's first (a static cache's mask covers the
    // whole cache).
    int64_t maskWidth = mask.shape[1], past = appended ? maskWidth - P : 0;
    if (!gen.cachePosition.empty())
      for (int64_t c = 0; c < P; ++c)
        store(p.buffer(gen.cachePosition, BufferKind::Input),
              p.data(gen.cachePosition, BufferKind::Input), c, c);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t j = 0; j < maskWidth; ++j)
        store(mask, maskData, r * maskWidth + j, 0);
      const std::vector<int64_t> *row =
          r < prompt.batch ? &prompt.tokens[r] : nullptr;
      int64_t first = appended ? P - length(r) : 0;
      for (int64_t c = 0; c < P; ++c) {
        int64_t k = c - first; // the token's index in the sequence
        bool real = k >= 0 && k < length(r);
        store(ids, idData, r * P + c, real && row ? (*row)[k] : 0);
        store(mask, maskData, r * maskWidth + past + c, real ? 1 : 0);
        if (!gen.positions.empty())
          store(p.buffer(gen.positions, BufferKind::Input),
                p.data(gen.positions, BufferKind::Input), r * P + c,
                real ? k : 1);
      }
    }
  }
  runProgram(s.prefill);
  std::vector<std::vector<int64_t>> out(prompt.batch);
  std::vector<bool> done(prompt.batch, false);
  auto accept = [&](const std::vector<int64_t> &tokens) {
    for (int64_t r = 0; r < prompt.batch; ++r) {
      int64_t token = done[r] ? out[r].back() : tokens[r];
      out[r].push_back(token);
      if (std::find(s.options.eos.begin(), s.options.eos.end(), token) !=
          s.options.eos.end())
        done[r] = true;
    }
    if (printer) {
      for (int64_t r = 0; r < prompt.batch; ++r)
        std::printf("%s%lld", r ? " " : "", (long long)out[r].back());
      std::printf("\n");
      std::fflush(stdout);
    }
  };
  std::vector<int64_t> tokens =
      chooseTokens(s, sampler, s.prefill,
                   [&](int64_t r) { return appended ? P - 1 : length(r) - 1; });
  storeNewKeys(
      s, s.prefill, [&](int64_t r) { return appended ? P - length(r) : 0; },
      [](int64_t) { return 0; }, length);
  accept(tokens);
  double firstMs = ms(Clock::now() - start);

  // One token a step: sequence r's t-th new token at position L_r + t, its
  // keys and values into slot L_r + t. The mask shows the filled slots and
  // the new token: at the mask's end where the new keys follow the whole
  // past, as the count of slots where the mask's count places them.
  Program &p = s.decode;
  const BufferDesc &ids = p.buffer(gen.ids, BufferKind::Input);
  const BufferDesc &mask = p.buffer(gen.mask, BufferKind::Input);
  void *idData = p.data(gen.ids, BufferKind::Input);
  void *maskData = p.data(gen.mask, BufferKind::Input);
  int64_t M = gen.maxSeq;
  std::vector<double> stepMs;
  auto decodeStart = Clock::now();
  for (int64_t t = 0; t + 1 < s.options.maxNewTokens; ++t) {
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
      break;
    auto stepStart = Clock::now();
    // A static cache: the step's position, one for the batch (its
    // prompts are of one length).
    if (!gen.cachePosition.empty())
      store(p.buffer(gen.cachePosition, BufferKind::Input),
            p.data(gen.cachePosition, BufferKind::Input), 0, length(0) + t);
    for (int64_t r = 0; r < batch; ++r) {
      bool real = r < prompt.batch;
      int64_t filled = real ? length(r) + t : length(0) + t;
      store(ids, idData, r, real ? out[r].back() : 0);
      if (!gen.positions.empty())
        store(p.buffer(gen.positions, BufferKind::Input),
              p.data(gen.positions, BufferKind::Input), r, filled);
      if (t == 0) {
        for (int64_t j = 0; j + 1 < M; ++j)
          store(mask, maskData, r * M + j, j < filled ? 1 : 0);
        store(mask, maskData, r * M + (appended ? M - 1 : filled), 1);
      } else {
        // One more slot filled, the last step's token's: where the new
        // token sits at the mask's end, its slot; else the count's next.
        store(mask, maskData, r * M + (appended ? filled - 1 : filled), 1);
      }
    }
    runProgram(p);
    tokens = chooseTokens(s, sampler, p, [](int64_t) { return 0; });
    storeNewKeys(
        s, p, [&](int64_t r) { return appended ? 0 : length(r) + t; },
        [&](int64_t r) { return length(r) + t; }, [](int64_t) { return 1; });
    accept(tokens);
    stepMs.push_back(ms(Clock::now() - stepStart));
  }
  double decodeMs = ms(Clock::now() - decodeStart);
  // Sequences that ended early: their remaining tokens are the end token.
  for (int64_t r = 0; r < prompt.batch; ++r)
    out[r].resize(s.options.maxNewTokens, out[r].back());

  if (comm::rank() == 0) {
    writeTokens(s, out);
    uint64_t cacheBytes = 0;
    for (const GenerationDesc::Cache &c : gen.caches)
      if (s.decode.data(c.past, BufferKind::Input))
        cacheBytes += s.decode.buffer(c.past, BufferKind::Input).bytes;
    std::printf("set-up: %.3f ms (weights read in and packed by warm-up "
                "runs of both programs; not counted below)\n",
                s.warmUpMs);
    std::printf("time to first token: %.3f ms (prefill of %lld tokens, "
                "%lld sequence%s)\n",
                firstMs, (long long)P, (long long)prompt.batch,
                prompt.batch == 1 ? "" : "s");
    if (!stepMs.empty())
      std::printf("decode: %zu steps, %.1f tokens/s per sequence (%.1f in "
                  "all), per token p50 %.3f ms, p90 %.3f ms\n",
                  stepMs.size(), 1e3 * stepMs.size() / decodeMs,
                  1e3 * stepMs.size() * prompt.batch / decodeMs,
                  percentile(stepMs, 0.5), percentile(stepMs, 0.9));
    std::printf("cache: %.3f MiB on rank 0 of %lld (--max-seq %lld, "
                "--max-batch %lld; plan.txt gives every rank's), %d thread%s "
                "a rank\n",
                cacheBytes / 1048576.0, (long long)s.decode.desc.ranks,
                (long long)gen.maxSeq, (long long)gen.maxBatch, s.threads,
                s.threads == 1 ? "" : "s");
    std::fflush(stdout);
  }
}

} // namespace

int cleave::rt::runGeneration(int argc, char **argv) {
  if (!cleave_prefill_desc || !cleave_generate_desc || !cleave_prefill_run)
    throw RuntimeError("this bundle was not compiled for generation: "
                       "recompile it with cleave-compile --generate");
  if (onDevice())
    throw RuntimeError("--generate runs CPU programs only so far");
  // As Main: the programs allocate and free the same buffers every step.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  Session s;
  s.options = parseArgs(argc, argv);
  s.decode.desc = parseModelDesc(cleave_model_desc);
  s.decode.run = cleave_model_run;
  s.prefill.desc = parseModelDesc(cleave_prefill_desc);
  s.prefill.run = cleave_prefill_run;
  s.gen = parseGenerationDesc(cleave_generate_desc);
  if (s.decode.desc.ranks > 1) {
    // One communicator per group either program uses: the decode
    // program's, then those only the prefill's uses.
    ModelDesc both = s.decode.desc;
    for (const std::vector<int> &group : s.prefill.desc.groups) {
      auto it = std::find(both.groups.begin(), both.groups.end(), group);
      s.prefill.groupTable.push_back(it - both.groups.begin());
      if (it == both.groups.end())
        both.groups.push_back(group);
    }
    comm::start(both, &argc, &argv);
  }
  together([&] { setUp(s); });
  together([&] {
    auto start = std::chrono::steady_clock::now();
    warmUp(s);
    s.warmUpMs = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count();
  });
  together([&] { generate(s); });
  comm::finish();
  return 0;
}
