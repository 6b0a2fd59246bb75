//===- Runtime.h - Internal pieces of the Cleave runtime ------------------===//
//
// The model descriptor and the mapped weight file, as used by the program's
// main (.npy files: cleave/Runtime/Npy.h). Errors are reported by throwing
// RuntimeError with a message that names the culprit (input, file, output).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_RUNTIME_H
#define CLEAVE_RUNTIME_RUNTIME_H

#include "cleave/Runtime/Npy.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cleave::rt {

struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class BufferKind { Input, Param, Output };

/// One buffer the model takes, as listed by cleave_model_desc.
struct BufferDesc {
  BufferKind kind;
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  /// Params: byte offset in each rank's weight file, -1 where not held.
  std::vector<int64_t> offsets;
  uint64_t bytes = 0;

  int64_t numElements() const;
  std::string shapeString() const;
};

/// An integer input's values must lie in [low, high): `node` indexes a
/// tensor with them.
struct IndexBound {
  std::string input, node;
  int64_t low = 0, high = 0;
};

struct ModelDesc {
  /// One per rank.
  std::vector<uint64_t> weightBytes;
  std::vector<uint64_t> weightChecksums;
  /// The rank that writes the outputs.
  int writer = 0;
  /// Pipeline stages (-1: none) and microbatches; predicted seconds per run
  /// of each stage.
  int stageAxis = -1;
  int64_t stages = 1;
  int64_t microbatches = 1;
  std::vector<double> stageSeconds;
  std::vector<BufferDesc> buffers;
  std::vector<IndexBound> indexBounds;
  /// The mesh; empty for single-rank programs.
  int64_t ranks = 1;
  std::vector<int64_t> meshSizes;
  /// Communicator groups, each a list of mesh axes.
  std::vector<std::vector<int>> groups;
};

/// Parses the descriptor text the compiler embeds (see Abi.h).
ModelDesc parseModelDesc(const char *text);

/// A generation bundle's cleave_generate_desc (see Abi.h).
struct GenerationDesc {
  int64_t maxSeq = 0, maxBatch = 0, promptLength = 0, vocabulary = 0;
  /// "end", "count" or "position" (Abi.h).
  std::string cacheWrite = "end";
  /// The loop's inputs and output; `positions` empty where the graph
  /// counts them from the mask.
  std::string ids, mask, positions, logits;
  /// A static cache's write position ("position"; else empty).
  std::string cachePosition;
  struct Cache {
    std::string past, present;
    int batchDim = 0, seqDim = 0;
    /// The decode program's stages that read the past (empty: all).
    std::vector<int64_t> stages;
  };
  std::vector<Cache> caches;
};
GenerationDesc parseGenerationDesc(const char *text);

/// A descriptor name with its percent escapes decoded.
std::string percentDecode(const std::string &text);

/// A zeroed, 64-byte aligned heap buffer; in a GPU program, device memory
/// the host can also read and write, unless `deviceOnly`.
struct AlignedBuffer {
  void *data = nullptr;
  size_t size = 0;
  explicit AlignedBuffer(size_t size, bool deviceOnly = false);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
};

/// weights.bin mapped read-only, header and checksum verified.
class WeightFile {
public:
  WeightFile(const std::string &path, uint64_t expectedSize,
             uint64_t expectedChecksum);
  ~WeightFile();
  const char *data() const { return base; }

private:
  const char *base = nullptr;
  size_t size = 0;
};

/// The kernels OpenBLAS chose for this CPU when it loaded (its core name,
/// e.g. SkylakeX; Prescott is its generic fallback), for --bench to report.
const char *blasKernels();

/// Where OpenBLAS fell back to its generic Prescott kernels on a CPU with
/// better ones (an OpenBLAS older than the CPU: Debian's 0.3.21 does not
/// know Emerald Rapids) and OPENBLAS_CORETYPE is unset, sets it (SkylakeX
/// with AVX-512, Haswell with AVX2) and starts this program again in this
/// process, since OpenBLAS reads it only when it loads. Otherwise returns.
/// Before MPI starts: a rank restarted under mpiexec keeps its place.
void useBetterBlasKernels(char **argv);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_RUNTIME_H
