//===- Bundle.h - Writing the program bundle ------------------------------===//
//
// The last phase: turns the LLVM-dialect module into a bundle folder holding
// `program` (host object code linked with the runtime), the weights (every
// parameter, aligned, mapped by the runtime: `weights.bin` for one rank,
// `weights/rank<r>.bin` with each rank's slices for several), `manifest.json`
// (inputs, outputs, mesh, ranks, bytes per rank, compiler version, model
// checksum) and `plan.txt`. The bundle is assembled in a temporary folder and
// renamed into place only when complete.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_BUNDLE_H
#define CLEAVE_TARGET_BUNDLE_H

#include "cleave/Sharding/Mesh.h"
#include "cleave/Support/Options.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

#include <optional>

#include <string>
#include <vector>

namespace cleave {

/// One buffer of the compiled @main, in argument order.
struct BufferSignature {
  enum class Kind { Input, Param, Output };
  Kind kind;
  std::string name;
  std::string dtype; // f32 f16 bf16 f64 i64 i32 i16 i8 bool
  llvm::SmallVector<int64_t> shape;
  /// Params: byte offset in each rank's weight file (-1: not held there).
  std::vector<int64_t> offsets;
  uint64_t bytes = 0; // on each rank that holds it
  /// Params of a pipelined program: the stages that read it (empty: all).
  llvm::SmallVector<int64_t> stages;
  // Params under a mesh: the grid axes each dimension is split over, the
  // shape in the model, the reorder of fused projections and who chose it.
  llvm::SmallVector<llvm::SmallVector<int16_t>> split;
  llvm::SmallVector<int64_t> globalShape;
  /// The part sizes of a fused projection stored reordered (empty: none).
  llvm::SmallVector<int64_t> columnGroups;
  /// A block of the model's tensor: along `blockDim` (-1: the whole
  /// tensor), from `blockOffset`, `globalShape[blockDim]` wide.
  int64_t blockDim = -1;
  int64_t blockOffset = 0;
  std::string origin;
  /// A parameter cleave-join-projections made of several of the model's:
  /// those, in order, side by side along `joinAxis` (each with its own
  /// shape on this rank, split and origin). Empty for any other buffer.
  std::vector<BufferSignature> parts;
  /// The dimension the parts are side by side along.
  int64_t joinAxis = 0;

  /// The model's parameters this buffer holds: its parts, or itself.
  llvm::SmallVector<const BufferSignature *> modelParams() const {
    llvm::SmallVector<const BufferSignature *> list;
    if (kind != Kind::Param)
      return list;
    if (parts.empty())
      list.push_back(this);
    for (const BufferSignature &part : parts)
      list.push_back(&part);
    return list;
  }
};

/// A collective of the program, for the plan report.
struct CollectiveSignature {
  std::string kind;
  llvm::SmallVector<int16_t> axes;
  uint64_t bytes = 0;
  std::string node;
};

/// A value one pipeline stage sends another, per microbatch.
struct TransferSignature {
  int64_t from = 0, to = 0;
  uint64_t bytes = 0;
  std::string node;
};

/// The pipeline stages and microbatches of a program (one stage, one
/// microbatch when it has none).
struct PipelineSignature {
  int axis = -1; ///< the mesh axis of the stages
  int64_t stages = 1;
  int64_t microbatches = 1;
  /// Predicted per stage for one microbatch (cleave-annotate-stages).
  std::vector<double> seconds, memory;
  std::vector<TransferSignature> transfers;
};

/// Values an integer input must hold: it indexes a tensor at run time.
struct IndexBoundSignature {
  std::string input, node, op;
  int64_t low = 0, high = 0;
};

struct ModelSignature {
  std::vector<BufferSignature> buffers;
  std::vector<IndexBoundSignature> indexBounds;
  /// The mesh; no axes (and one rank) for an unsharded model.
  MeshSpec mesh;
  /// Communicators the program uses, each a list of grid axes.
  std::vector<llvm::SmallVector<int16_t>> commGroups;
  std::vector<CollectiveSignature> collectives;
  PipelineSignature pipeline;
  /// The rank that writes the outputs: the last stage's first rank.
  int64_t writerRank = 0;
  /// The most bytes @main's intermediate buffers hold at once.
  uint64_t activationPeakBytes = 0;
  /// One per rank.
  std::vector<uint64_t> weightFileBytes;
  std::vector<uint64_t> weightChecksums;

  /// The parameter bytes rank `rank` holds: its stage's parameters, its
  /// slices of them (once the weights are placed).
  uint64_t paramBytesHeldBy(int64_t rank) const {
    uint64_t held = 0;
    for (const BufferSignature &b : buffers)
      if (b.kind == BufferSignature::Kind::Param && b.offsets[rank] >= 0)
        held += b.bytes;
    return held;
  }

  /// The pipeline stage rank `rank` runs.
  int64_t stageOf(int64_t rank) const {
    return pipeline.axis < 0
               ? 0
               : mesh.indexInGroup(rank, {int16_t(pipeline.axis)});
  }
};

/// Reads the signature off a bufferized module's @main (memref arguments
/// tagged cleave.input / cleave.param / cleave.output) and the module's mesh,
/// communicator groups and collectives.
mlir::FailureOr<ModelSignature> extractSignature(mlir::ModuleOp module);

struct BundleOptions {
  std::string modelPath;
  std::string outDir;
  std::string dumpDir;        // if set, model.ll (optimized IR) goes there
  unsigned jobs = 0;          // LLVM threads (parts); 0: one per core
  std::string reportPath;     // if set, the plan report is also written there
  std::string runtimeLibrary; // libcleave_rt.a
  std::string compilerVersion;
  /// For GPU programs: the CUDA toolkit, whose cuBLASLt, cudart and NCCL
  /// the program links with libcleave_rt_cuda.a (beside runtimeLibrary),
  /// and the GPU it was compiled for. Empty: a CPU program.
  std::string cudaRoot;
  std::string gpuArch;
  /// GEMM operand type (--precision).
  Precision precision = Precision::F32;
  /// With --mesh auto: the plan search's table, appended to plan.txt, and
  /// its JSON, which a --report ending in .json holds beside the plan.
  std::string planSearch;
  std::optional<llvm::json::Value> planSearchJson;
};

/// The human-readable plan: mesh, every parameter's sharding and bytes per
/// rank, every collective with its ONNX node, memory per rank.
std::string planReport(const ModelSignature &signature,
                       const BundleOptions &options);

/// Writes the bundle for `module` (in the LLVM dialect).
mlir::LogicalResult writeBundle(mlir::ModuleOp module, ModelSignature signature,
                                const BundleOptions &options);

/// How a generation bundle's loop drives its two programs (cleave-compile
/// --generate; Abi.h's cleave_generate_desc).
struct GenerationSignature {
  /// Prompt plus new tokens; sequences at once; the prefill program's
  /// tokens; the logits' last dimension.
  int64_t maxSeq = 0, maxBatch = 0, promptLength = 0, vocabulary = 0;
  /// Where a step's new keys and values land in the present outputs:
  /// "end" (after the whole past: the decoder with past's concatenation;
  /// the presents are cut to them) or "count" (after the mask's count of
  /// tokens, zeros after: GroupQueryAttention's; prompts are right-aligned
  /// to their count and the graph takes no positions) or "position" (at
  /// cache_position in a cache of fixed length: a static cache; the whole
  /// batch at one position, so its prompts must be of one length).
  std::string cacheWrite = "end";
  /// The graph inputs and output the loop fills and reads (no positions
  /// where the graph counts them from the mask).
  std::string ids, mask, positions, logits;
  /// A static cache's write position input ("position"; else empty).
  std::string cachePosition;
  /// A past input and the present output that returns its new positions.
  struct Cache {
    std::string past, present;
    int64_t batchDim = 0, seqDim = 0;
    /// The decode program's stages that read the past (empty: all).
    llvm::SmallVector<int64_t> stages;
  };
  std::vector<Cache> caches;
  /// Bytes of cache each rank holds (every past input of the decode
  /// program, whole or its slice), and the whole cache's.
  uint64_t cacheBytesPerRank = 0, cacheBytes = 0;
  /// What each rank keeps (its stage's caches, whole or its slice).
  std::vector<uint64_t> cacheBytesByRank;
  /// How the ranks hold the cache, and why (for the plan).
  std::string cacheLayout;
};

/// One program of a bundle: its module in the LLVM dialect and signature.
struct BundleProgram {
  mlir::ModuleOp module;
  ModelSignature signature;
};

/// Writes a generation bundle: the decoding step's program (`decode`, the
/// bundle's main program) and the prompt's (`prefill`), linked into one
/// executable over one set of weight files (a parameter both read, cut
/// alike, is stored once).
mlir::LogicalResult writeGenerationBundle(BundleProgram decode,
                                          BundleProgram prefill,
                                          const GenerationSignature &generation,
                                          const BundleOptions &options);

} // namespace cleave

#endif // CLEAVE_TARGET_BUNDLE_H
