//===- Generation.h - A decoder compiled for token generation ---*- C++ -*-===//
//
// `cleave-compile --generate`: a decoder graph whose key/value cache goes in
// as past inputs and comes out as present outputs (Optimum's and
// TorchScript's decoder with past) compiled twice on static shapes, once
// for the prompt and once for one new token, into one bundle over one set
// of weights, with what the runtime's generation loop needs to drive them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_GENERATION_H
#define CLEAVE_COMPILER_GENERATION_H

#include "cleave/Compiler/Compilation.h"

#include "onnx/onnx.pb.h"

#include "llvm/Support/Error.h"

namespace cleave {

struct GenerationOptions {
  /// Tokens of a sequence, prompt and new (--max-seq; 0: 128, or a static
  /// cache's length).
  int64_t maxSeq = 0;
  /// Sequences generated at once (--max-batch).
  int64_t maxBatch = 1;
  /// Tokens of the prefill program (--prompt-length; 0: half of maxSeq):
  /// a shorter prompt is left-padded to it.
  int64_t promptLength = 0;
};

/// A decoder graph's inputs and outputs as the generation loop uses them,
/// with each past input's declared shape (-1 at its batch and sequence
/// dimensions).
struct DecoderGraph {
  GenerationSignature signature;
  std::vector<llvm::SmallVector<int64_t>> pastShapes;
  /// The batch the graph fixes (0: a named dimension).
  int64_t fixedBatch = 0;
  /// A static cache's length (the graph takes cache_position; 0: none).
  int64_t cacheLength = 0;
};

/// Finds the token ids, attention mask, position ids, logits and the
/// past/present pairs of `graph`, or says why it is not a decoder the loop
/// can drive. `namedDims` sizes the past's named dimensions other than its
/// batch and sequence (GenAI's kv_cache_dim).
llvm::Expected<DecoderGraph>
describeDecoder(const onnx::GraphProto &graph,
                const std::map<std::string, int64_t> &namedDims = {});

/// Compiles `options.modelPath` for generation and writes the bundle to
/// `options.bundle.outDir`; `afterPhase` hears of each program's phases,
/// labelled "decode" or "prefill". Errors go to the context's diagnostics.
mlir::LogicalResult compileForGeneration(
    mlir::MLIRContext &context, const CompilationOptions &options,
    const GenerationOptions &generation,
    llvm::function_ref<void(llvm::StringRef, const PhaseInfo &, double)>
        afterPhase = nullptr);

} // namespace cleave

#endif // CLEAVE_COMPILER_GENERATION_H
