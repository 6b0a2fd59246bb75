//===- Generation.cpp - A decoder compiled for token generation -----------===//
//
// The decode program takes one new token a sequence against a cache of
// max-seq - 1 positions: the runtime's loop writes the prompt's and each new
// token's keys and values into them and masks the positions not yet filled
// (and the prompt's padding), so one static shape serves every step.
//
// Two ways of writing the cache are known. A decoder with past appends a
// step's keys and values after the whole past ("end"): as the past length
// is fixed, the graph must take the new tokens' positions as an input (a
// graph that derived them from the past's length would place every token
// at the cache's end); the prefill takes the prompt, left-padded to
// --prompt-length, after one masked past position; both return only their
// new tokens' keys and values. GroupQueryAttention (ONNX Runtime GenAI)
// places them after the mask's count of tokens and counts positions from it
// ("count"): the prefill has no past (a first prompt) and both return the
// whole present, the loop taking the rows the count says.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/Generation.h"
#include "cleave/Import/ModelFile.h"
#include "cleave/Sharding/Mesh.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <chrono>

using namespace mlir;
using namespace cleave;

namespace {

llvm::Error refuse(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// A dimension of a declared shape: its size, or its name.
struct Dim {
  int64_t size = 0;
  std::string name;
  bool named() const { return !name.empty(); }
};

std::vector<Dim> dimsOf(const onnx::ValueInfoProto &value) {
  std::vector<Dim> dims;
  if (!value.type().has_tensor_type() ||
      !value.type().tensor_type().has_shape())
    return dims;
  for (const auto &d : value.type().tensor_type().shape().dim())
    dims.push_back({d.has_dim_value() ? d.dim_value() : 0, d.dim_param()});
  return dims;
}

} // namespace

llvm::Expected<DecoderGraph>
cleave::describeDecoder(const onnx::GraphProto &graph,
                        const std::map<std::string, int64_t> &namedDims) {
  // GroupQueryAttention (ONNX Runtime GenAI's graphs) writes the new keys
  // and values after the mask's count of tokens and counts positions from
  // it, where a decoder with past appends them after the whole past.
  bool counted = llvm::any_of(graph.node(), [](const onnx::NodeProto &node) {
    return node.op_type() == "GroupQueryAttention";
  });
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());

  DecoderGraph decoder;
  GenerationSignature &g = decoder.signature;
  if (counted)
    g.cacheWrite = "count";
  std::vector<const onnx::ValueInfoProto *> pasts;
  std::vector<std::string> others;
  const onnx::ValueInfoProto *ids = nullptr;
  for (const auto &input : graph.input()) {
    const std::string &name = input.name();
    if (initializers.contains(name))
      continue;
    if (name == "input_ids")
      ids = &input, g.ids = name;
    else if (name == "attention_mask")
      g.mask = name;
    else if (name == "position_ids")
      g.positions = name;
    else if (name == "cache_position")
      g.cachePosition = name;
    else if (llvm::StringRef(name).contains("past"))
      pasts.push_back(&input);
    else
      others.push_back("'" + name + "'");
  }
  if (!ids)
    return refuse("--generate needs the token ids as a graph input named "
                  "'input_ids'");
  if (g.mask.empty())
    return refuse("--generate needs a graph input 'attention_mask' over the "
                  "past and new tokens: the decode program masks the cache "
                  "positions not yet filled");
  // A static cache (transformers' StaticCache exported): the cache has a
  // fixed length and a step's keys and values are written at
  // cache_position, which is also the tokens' positions.
  bool atPosition = !g.cachePosition.empty();
  if (atPosition) {
    if (counted || !g.positions.empty())
      return refuse("the graph takes 'cache_position' and also counts or "
                    "takes positions otherwise; --generate does not know "
                    "which to follow");
    g.cacheWrite = "position";
  }
  if (counted && !g.positions.empty())
    return refuse("the graph's GroupQueryAttention counts positions from "
                  "the mask, yet the graph also takes 'position_ids'; "
                  "--generate does not know which to follow");
  if (g.positions.empty() && !counted && !atPosition)
    return refuse(
        "--generate needs the new tokens' positions as a graph input "
        "'position_ids': the decode program's past has a fixed length, so a "
        "graph that counts positions from it would place every token at the "
        "cache's end (export the decoder with position_ids, as Optimum's "
        "text-generation-with-past does)");
  if (!others.empty())
    return refuse("--generate drives input_ids, attention_mask, "
                  "position_ids and the past keys and values; the graph "
                  "also takes " +
                  llvm::join(others, ", "));
  if (pasts.empty())
    return refuse("--generate needs the key/value cache as graph inputs "
                  "(names containing 'past') and outputs (names beginning "
                  "'present'); this graph has no past inputs");

  std::vector<Dim> idDims = dimsOf(*ids);
  if (idDims.size() != 2)
    return refuse("input 'input_ids' must be declared [batch, sequence]");
  if (!idDims[1].named())
    return refuse("input 'input_ids' fixes its sequence length at " +
                  llvm::Twine(idDims[1].size) +
                  "; --generate needs it named (one program for the "
                  "prompt, one for a token)");
  if (!idDims[0].named())
    decoder.fixedBatch = idDims[0].size;

  // A static cache's length: the mask's, which covers the whole cache.
  int64_t staticLength = 0;
  if (atPosition) {
    for (const auto &input : graph.input())
      if (input.name() == g.mask) {
        std::vector<Dim> maskDims = dimsOf(input);
        if (maskDims.size() == 2 && !maskDims[1].named())
          staticLength = maskDims[1].size;
      }
    if (staticLength <= 0)
      return refuse("with 'cache_position', --generate needs the mask to "
                    "cover the cache: attention_mask [batch, cache length] "
                    "with the length fixed");
    decoder.cacheLength = staticLength;
  }
  // Each past's dimensions: its batch (named as input_ids' first, or of the
  // batch the graph fixes), its sequence (a static cache's: the one of the
  // cache's length; else the other named one) and the rest, fixed or sized
  // by --dim.
  for (const onnx::ValueInfoProto *past : pasts) {
    if (past->type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      return refuse("past input '" + past->name() +
                    "' is not float32; --generate caches float32 keys and "
                    "values");
    GenerationSignature::Cache cache;
    cache.past = past->name();
    cache.batchDim = cache.seqDim = -1;
    llvm::SmallVector<int64_t> shape;
    for (auto [d, dim] : llvm::enumerate(dimsOf(*past))) {
      bool isBatch = idDims[0].named() && dim.name == idDims[0].name;
      bool sized = dim.named() && namedDims.count(dim.name);
      int64_t size = sized ? namedDims.at(dim.name) : dim.size;
      bool isSeq = staticLength ? !dim.named() && size == staticLength
                                : dim.named() && !sized;
      if (isBatch && cache.batchDim < 0) {
        cache.batchDim = d;
      } else if (isSeq && cache.seqDim < 0) {
        cache.seqDim = d;
      } else if (isSeq && staticLength) {
        return refuse("past input '" + past->name() +
                      "' has two dimensions of the cache's length " +
                      llvm::Twine(staticLength) +
                      "; --generate cannot tell its sequence");
      } else if (size <= 0) {
        return refuse("past input '" + past->name() + "' names dimension " +
                      llvm::Twine(d) + " '" + dim.name +
                      "' besides its batch and sequence; size it with --dim " +
                      dim.name + "=N (the heads and head size must be fixed)");
      }
      shape.push_back(size);
    }
    if (!idDims[0].named())
      // A fixed batch: the first dimension of that size, not the sequence.
      for (auto [d, size] : llvm::enumerate(shape))
        if (size == decoder.fixedBatch && cache.batchDim < 0 &&
            int64_t(d) != cache.seqDim) {
          cache.batchDim = d;
          break;
        }
    if (cache.batchDim < 0 || cache.seqDim < 0)
      return refuse("past input '" + past->name() +
                    "' does not have a batch dimension (input_ids' first) "
                    "and a sequence dimension (" +
                    (staticLength ? "of the cache's length" : "named") + ")");
    shape[cache.batchDim] = shape[cache.seqDim] = -1;
    g.caches.push_back(cache);
    decoder.pastShapes.push_back(shape);
  }

  std::vector<std::string> presents, unknown;
  for (const auto &output : graph.output()) {
    llvm::StringRef name = output.name();
    if (name.starts_with("present"))
      presents.push_back(name.str());
    else if (g.logits.empty() && (name == "logits" || !name.contains("past")))
      g.logits = name.str();
    else
      unknown.push_back("'" + name.str() + "'");
  }
  if (g.logits.empty())
    return refuse("--generate needs the logits as a graph output");
  if (!unknown.empty())
    return refuse("--generate reads the logits and the present keys and "
                  "values; the graph also returns " +
                  llvm::join(unknown, ", "));
  if (presents.size() != pasts.size())
    return refuse("the graph takes " + llvm::Twine(pasts.size()) +
                  " past inputs but returns " + llvm::Twine(presents.size()) +
                  " present outputs; --generate pairs them in order");
  for (auto [cache, present] : llvm::zip(g.caches, presents))
    cache.present = present;
  return decoder;
}

/// The vocabulary: the logits' last dimension, the logits [batch, tokens,
/// vocabulary].
static FailureOr<int64_t> vocabularyOf(const ModelSignature &signature,
                                       const GenerationSignature &g,
                                       int64_t batch, int64_t tokens,
                                       Location loc) {
  for (const BufferSignature &b : signature.buffers)
    if (b.kind == BufferSignature::Kind::Output && b.name == g.logits) {
      if (b.dtype != "f32" || b.shape.size() != 3 || b.shape[0] != batch ||
          b.shape[1] != tokens)
        return emitError(loc) << "--generate: output '" << g.logits
                              << "' is not float32 logits [batch, tokens, "
                                 "vocabulary]";
      return b.shape[2];
    }
  return emitError(loc) << "--generate: no output '" << g.logits << "'";
}

/// Whether each present output of `program` and the past input of
/// `decode` it is copied into have one shape on a rank but along the
/// sequence; with `report`, an error names the pair that does not.
static LogicalResult checkCacheLayout(const ModelSignature &decode,
                                      const ModelSignature &program,
                                      const GenerationSignature &g, bool report,
                                      Location loc) {
  auto find = [&](const ModelSignature &signature, StringRef name,
                  BufferSignature::Kind kind) -> const BufferSignature * {
    for (const BufferSignature &b : signature.buffers)
      if (b.kind == kind && b.name == name)
        return &b;
    return nullptr;
  };
  for (const GenerationSignature::Cache &c : g.caches) {
    const BufferSignature *past =
        find(decode, c.past, BufferSignature::Kind::Input);
    const BufferSignature *present =
        find(program, c.present, BufferSignature::Kind::Output);
    bool alike = past && present && past->dtype == present->dtype &&
                 past->shape.size() == present->shape.size();
    for (size_t d = 0; alike && d < past->shape.size(); ++d)
      alike = int64_t(d) == c.seqDim || past->shape[d] == present->shape[d];
    if (!alike) {
      if (report)
        return emitError(loc)
               << "--generate: past input '" << c.past
               << "' and present output '" << c.present
               << "' are not held alike on a rank; the loop cannot copy one "
                  "into the other";
      return failure();
    }
  }
  return success();
}

LogicalResult cleave::compileForGeneration(
    MLIRContext &context, const CompilationOptions &options,
    const GenerationOptions &generation,
    llvm::function_ref<void(llvm::StringRef, const PhaseInfo &, double)>
        afterPhase) {
  Location loc = UnknownLoc::get(&context);
  auto model = loadOnnxModelFile(options.modelPath);
  if (!model)
    return emitError(loc) << llvm::toString(model.takeError());
  auto decoder = describeDecoder(model->graph(), options.import.namedDims);
  if (!decoder)
    return emitError(loc) << options.modelPath << ": "
                          << llvm::toString(decoder.takeError());
  GenerationSignature g = decoder->signature;
  g.maxSeq = generation.maxSeq > 0 ? generation.maxSeq : 128;
  if (int64_t length = decoder->cacheLength) {
    // A static cache holds every position a sequence reaches.
    if (generation.maxSeq > 0 && generation.maxSeq != length)
      return emitError(loc)
             << "the graph's static cache holds " << length
             << " positions; --max-seq must be " << length << " (or left out)";
    g.maxSeq = length;
  }
  g.maxBatch = generation.maxBatch;
  g.promptLength =
      generation.promptLength > 0 ? generation.promptLength : g.maxSeq / 2;
  if (g.maxSeq < 2)
    return emitError(loc) << "--max-seq must be at least 2 (a prompt token "
                             "and a new one), not "
                          << g.maxSeq;
  if (g.maxBatch < 1)
    return emitError(loc) << "--max-batch must be at least 1";
  if (g.promptLength < 1 || g.promptLength >= g.maxSeq)
    return emitError(loc) << "--prompt-length must lie in [1, --max-seq), "
                             "not "
                          << g.promptLength;
  if (options.pipeline.microbatches > 1) {
    // Microbatches cut dimension 0 of every input and output.
    for (const GenerationSignature::Cache &c : g.caches)
      if (c.batchDim != 0)
        return emitError(loc)
               << "--generate --microbatches: past input '" << c.past
               << "' holds its batch in dimension " << c.batchDim
               << ", and microbatches cut dimension 0";
    if (g.maxBatch % options.pipeline.microbatches != 0)
      return emitError(loc)
             << "--microbatches " << options.pipeline.microbatches
             << " must divide --max-batch " << g.maxBatch;
  }
  if (decoder->fixedBatch && decoder->fixedBatch != g.maxBatch)
    return emitError(loc) << "the graph fixes the batch at "
                          << decoder->fixedBatch << "; pass --max-batch "
                          << decoder->fixedBatch;

  // Under tensor parallelism alone, the cache may stay split as
  // propagation splits it (by key/value heads, where tp divides them): each
  // rank keeps its own slice, and its present outputs are not gathered.
  // With pipeline stages the present outputs reach only the last stage,
  // which sends them back whole; with dp the batch would be split.
  bool splitCache = false;
  if (!options.sharding.mesh.empty()) {
    auto mesh = parseMesh(options.sharding.mesh);
    if (!mesh) {
      llvm::consumeError(mesh.takeError());
    } else {
      splitCache = mesh->axisNames.size() == 1 && mesh->axisNames[0] == "tp";
    }
  }

  // The two programs: the same options, the inputs sized for each.
  auto compile = [&](StringRef label, int64_t tokens,
                     int64_t past) -> std::unique_ptr<Compilation> {
    CompilationOptions each = options;
    each.last = Phase::Lower;
    ImportOptions &import = each.import;
    int64_t batch = g.maxBatch;
    import.inputShapes[g.ids] = {batch, tokens};
    if (!g.positions.empty())
      import.inputShapes[g.positions] = {batch, tokens};
    import.inputShapes[g.mask] = {batch, past + tokens};
    if (!g.cachePosition.empty()) {
      // A static cache: the whole cache in and out, the mask over it.
      import.inputShapes[g.cachePosition] = {tokens};
      import.inputShapes[g.mask] = {batch, g.maxSeq};
      past = g.maxSeq;
    }
    for (auto [cache, declared] : llvm::zip(g.caches, decoder->pastShapes)) {
      llvm::SmallVector<int64_t> shape = declared;
      shape[cache.batchDim] = batch;
      shape[cache.seqDim] = past;
      import.inputShapes[cache.past] = shape;
      // Appended after the past: only the new positions are returned.
      // Placed by the mask's count: the whole present, new rows inside.
      if (g.cacheWrite == "end")
        import.lastPositions[cache.present] = {cache.seqDim, tokens};
      if (splitCache)
        import.splitIO.insert({cache.past, cache.present});
    }
    if (!each.dumpDir.empty())
      each.dumpDir += "/" + label.str();
    auto compilation = std::make_unique<Compilation>(context, std::move(each));
    if (!compilation->getOptions().dumpDir.empty())
      if (std::error_code ec = llvm::sys::fs::create_directories(
              compilation->getOptions().dumpDir)) {
        emitError(loc) << "cannot create '" << compilation->getOptions().dumpDir
                       << "': " << ec.message();
        return nullptr;
      }
    auto progress = [&](const PhaseInfo &info, double seconds) {
      if (afterPhase)
        afterPhase(label, info, seconds);
    };
    if (failed(compilation->run(progress))) {
      emitRemark(loc) << "while compiling the " << label << " program ("
                      << tokens << " token" << (tokens == 1 ? "" : "s")
                      << " after " << past << " cached)";
      return nullptr;
    }
    return compilation;
  };
  // The loop copies each program's new keys and values into the decode
  // program's past: both must be held alike on a rank, but along the
  // sequence. Propagation may split a present by heads and leave its past
  // whole (GroupQueryAttention reads its past whole): then both programs
  // are compiled again with the cache whole.
  std::unique_ptr<Compilation> decode, prefill;
  bool pastReadWhole = false;
  while (true) {
    decode = compile("decode", 1, g.maxSeq - 1);
    if (!decode)
      return failure();
    bool alike = succeeded(checkCacheLayout(decode->getSignature(),
                                            decode->getSignature(), g,
                                            /*report=*/!splitCache, loc));
    if (alike) {
      // The prefill's past: one masked position where the new keys follow
      // the whole past; none where the mask's count places them (a first
      // prompt).
      prefill =
          compile("prefill", g.promptLength, g.cacheWrite == "end" ? 1 : 0);
      if (!prefill)
        return failure();
      alike = succeeded(checkCacheLayout(decode->getSignature(),
                                         prefill->getSignature(), g,
                                         /*report=*/!splitCache, loc));
    }
    if (alike)
      break;
    if (!splitCache)
      return failure();
    splitCache = false;
    pastReadWhole = true;
  }

  const ModelSignature &decodeSig = decode->getSignature();
  const ModelSignature &prefillSig = prefill->getSignature();
  auto vocabulary = vocabularyOf(decodeSig, g, g.maxBatch, 1, loc);
  if (failed(vocabulary))
    return failure();
  g.vocabulary = *vocabulary;

  // The cache: every past input of the decode program, as each rank holds
  // it (whole, or its slice), against its whole size.
  for (const BufferSignature &b : decodeSig.buffers)
    for (auto [cache, declared] : llvm::zip(g.caches, decoder->pastShapes))
      if (b.kind == BufferSignature::Kind::Input && b.name == cache.past) {
        int64_t elements = 1;
        for (int64_t size : b.shape)
          elements *= size;
        uint64_t whole = b.bytes / elements;
        for (auto [d, size] : llvm::enumerate(declared))
          whole *= int64_t(d) == cache.batchDim ? g.maxBatch
                   : int64_t(d) == cache.seqDim
                       ? (decoder->cacheLength ? g.maxSeq : g.maxSeq - 1)
                       : size;
        cache.stages = b.stages;
        g.cacheBytes += whole;
      }
  // What each rank keeps: its stage's caches.
  for (int64_t rank = 0; rank < decodeSig.mesh.rankCount(); ++rank) {
    uint64_t held = 0;
    for (const BufferSignature &b : decodeSig.buffers)
      for (const GenerationSignature::Cache &cache : g.caches)
        if (b.kind == BufferSignature::Kind::Input && b.name == cache.past &&
            (b.stages.empty() ||
             llvm::is_contained(b.stages, decodeSig.stageOf(rank))))
          held += b.bytes;
    g.cacheBytesByRank.push_back(held);
    g.cacheBytesPerRank = std::max(g.cacheBytesPerRank, held);
  }
  bool byStages = llvm::any_of(g.caches, [&](auto &c) {
    return !c.stages.empty() &&
           int64_t(c.stages.size()) < decodeSig.pipeline.stages;
  });
  if (decodeSig.mesh.rankCount() == 1)
    g.cacheLayout = "one rank";
  else if (byStages)
    g.cacheLayout = "each stage's ranks keep the layers it reads (the last "
                    "stage's new keys and values sent to them each step)";
  else if (g.cacheBytesPerRank < g.cacheBytes)
    g.cacheLayout = "split as its heads are, each rank keeping its own "
                    "slice (the present outputs not gathered)";
  else if (splitCache)
    g.cacheLayout = "whole on every rank: tp exceeds the key/value heads, "
                    "which every rank computes whole";
  else if (pastReadWhole)
    g.cacheLayout = "whole on every rank: the attention reads its past "
                    "whole (split, the present outputs would not match the "
                    "past inputs), each rank's new keys and values gathered";
  else
    g.cacheLayout = "whole on every rank: with dp the cache is kept whole";
  if (double limit = options.pipeline.deviceMemory; limit > 0)
    for (int64_t rank = 0; rank < decodeSig.mesh.rankCount(); ++rank) {
      uint64_t weights = 0;
      for (const BufferSignature &b : decodeSig.buffers)
        if (b.kind == BufferSignature::Kind::Param &&
            (b.stages.empty() ||
             llvm::is_contained(b.stages, decodeSig.stageOf(rank))))
          weights += b.bytes;
      if (weights + g.cacheBytesByRank[rank] > limit)
        return emitError(loc)
               << "--generate: rank " << rank << " would hold " << weights
               << " bytes of weights and " << g.cacheBytesByRank[rank]
               << " of key/value cache (--max-seq " << g.maxSeq
               << ", --max-batch " << g.maxBatch << "), over --device-memory "
               << uint64_t(limit) << " bytes";
    }

  BundleProgram decodeProgram{decode->module(), decodeSig};
  BundleProgram prefillProgram{prefill->module(), prefillSig};
  auto start = std::chrono::steady_clock::now();
  if (failed(writeGenerationBundle(decodeProgram, prefillProgram, g,
                                   options.bundle)))
    return failure();
  if (afterPhase)
    for (const PhaseInfo &info : allPhases())
      if (info.phase == Phase::Bundle)
        afterPhase("both", info,
                   std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count());
  return success();
}
