//===- Cuda.h - The runtime's CUDA backend: errors and GEMMs ---*- C++ -*-===//
//
// The first pieces of the CUDA target (issue 6): every CUDA and cuBLASLt call
// is checked, and a failure is reported with the call, the rank and the
// device, never swallowed; GEMMs run through cuBLASLt. Built only where the
// CUDA toolkit is installed (runtime/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_CUDA_H
#define CLEAVE_RUNTIME_CUDA_CUDA_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace cleave::rt::cuda {

/// "rank R, device D" for messages. The rank is MPICH's PMI_RANK (set for
/// every process mpiexec starts), so the GEMMs need no MPI.
std::string where();

/// Throws RuntimeError "CALL failed on rank R, device D: MESSAGE" unless
/// `status` is success.
void check(cudaError_t status, const char *call);
void check(cublasStatus_t status, const char *call);

/// For functions emitted code calls, where no exception may pass: reports
/// "cleave-run: error: MESSAGE" and ends the process.
[[noreturn]] void fatal(const std::string &message);
/// Runs `f`; an error it throws ends the process through fatal.
template <typename F> void orExit(F &&f) {
  try {
    f();
  } catch (const std::exception &e) {
    fatal(e.what());
  }
}

/// The process's stream and GEMM engine, made on first use on the current
/// device (what emitted code's GEMM calls use).
cudaStream_t processStream();
class Gemm;
Gemm &processGemm();

/// Frees a buffer of the program's: managed memory, or device memory from
/// the stream-ordered pool (in stream order).
void freeBuffer(void *pointer);

/// Creates the NCCL communicators of the descriptor's groups (after
/// comm::start; Collectives.cpp), and destroys them (before comm::finish).
void startCollectives();
void finishCollectives();

/// Element types of GEMM operands; accumulation is always float32.
enum class GemmType { F32, F16, BF16 };
inline size_t elementBytes(GemmType type) {
  return type == GemmType::F32 ? 4 : 2;
}

/// Row-major GEMMs through cuBLASLt on one stream: C[m x n] = op(A)[m x k] *
/// op(B)[k x n] + bias + beta * C, A and B of one element type (op: read
/// as stored, or transposed), float32 accumulation and scaling, optionally
/// strided and batched. Each shape's layouts and algorithm are chosen once
/// (cuBLASLt's heuristic, told how aligned the operands are) and reused;
/// the workspace is allocated once.
class Gemm {
public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;

  /// A stored row-major (rows `lda` apart) or, transposed, column-major
  /// (columns `lda` apart); B the same; C row-major. `batch` GEMMs, operand
  /// X of GEMM i at `i * strideX` elements from the first.
  struct Shape {
    int64_t m, n, k;
    bool transA = false, transB = false;
    int64_t lda = 0, ldb = 0, ldc = 0;
    int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
    /// Whether a float32 bias vector of n elements is added to every row
    /// (C float32: cuBLASLt's bias has C's type).
    bool bias = false;
  };

  /// Packed operands.
  void run(GemmType type, int64_t m, int64_t n, int64_t k, const void *a,
           const void *b, void *c, float beta = 0.0f) {
    Shape shape{m, n, k};
    shape.lda = k;
    shape.ldb = n;
    shape.ldc = n;
    run(type, type, shape, a, b, c, beta);
  }
  /// A and B of `inType`, C of `outType` (16-bit operands, float32 or
  /// 16-bit result); `bias` when shape.bias.
  void run(GemmType inType, GemmType outType, const Shape &shape, const void *a,
           const void *b, void *c, float beta, const void *bias = nullptr);

private:
  struct Plan;
  /// How aligned (bytes) A's, B's and C's matrices are.
  struct Alignments {
    uint32_t a, b, c;
  };
  /// The types, the shape, the alignments and the bias's alignment.
  using Key = std::array<int64_t, 18>;
  Plan &planFor(const Key &key, GemmType inType, GemmType outType,
                const Shape &shape, const Alignments &aligned,
                const void *bias);

  cudaStream_t stream;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 32u << 20;
  std::map<Key, Plan *> plans;
};

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_CUDA_CUDA_H
