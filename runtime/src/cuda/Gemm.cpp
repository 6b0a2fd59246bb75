//===- Gemm.cpp - Row-major GEMMs through cuBLASLt ------------------------===//
//
// cuBLASLt is column-major. A row-major X[r x c] is the column-major X^T
// with leading dimension c, so C = A * B is computed as C^T = B^T * A^T:
// cuBLASLt's first operand is B, its second A, its result C (n x m, ld ldc).
// B stored row-major is, column-major, B^T (n x k) as needed; stored
// column-major (transposed) it is B (k x n) and cuBLASLt transposes it. A
// likewise. A bias over C's columns is, column-major, a bias over rows:
// cuBLASLt's bias epilogue.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include "../GemmCall.h"
#include "../Profile.h"
#include "../Runtime.h"

#include "cleave/Runtime/Abi.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

cudaDataType_t dataType(GemmType type) {
  switch (type) {
  case GemmType::F32:
    return CUDA_R_32F;
  case GemmType::F16:
    return CUDA_R_16F;
  case GemmType::BF16:
    return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

} // namespace

std::string cuda::where() {
  int device = -1;
  cudaGetDevice(&device);
  const char *rank = std::getenv("PMI_RANK");
  return std::string("rank ") + (rank ? rank : "0") + ", device " +
         std::to_string(device);
}

void cuda::check(cudaError_t status, const char *call) {
  if (status == cudaSuccess)
    return;
  throw RuntimeError(std::string(call) + " failed on " + where() + ": " +
                     cudaGetErrorName(status) + " (" +
                     cudaGetErrorString(status) + ")");
}

void cuda::fatal(const std::string &message) {
  std::fprintf(stderr, "cleave-run: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void cuda::check(cublasStatus_t status, const char *call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  throw RuntimeError(std::string(call) + " failed on " + where() + ": " +
                     cublasLtGetStatusName(status) + " (" +
                     cublasLtGetStatusString(status) + ")");
}

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;

  ~Plan() {
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::Gemm(cudaStream_t stream) : stream(stream) {
  check(cublasLtCreate(&handle), "cublasLtCreate");
  check(cudaMalloc(&workspace, workspaceBytes),
        "cudaMalloc (cuBLASLt workspace)");
}

Gemm::~Gemm() {
  for (auto &[key, plan] : plans)
    delete plan;
  if (workspace)
    cudaFree(workspace);
  if (handle)
    cublasLtDestroy(handle);
}

namespace {

/// The largest power of two, at most 256, that divides `pointer` and each
/// of `strides` bytes: the alignment every matrix of a batch has.
uint32_t alignment(const void *pointer,
                   std::initializer_list<int64_t> strides) {
  uint64_t bits = reinterpret_cast<uintptr_t>(pointer) | 256;
  for (int64_t stride : strides)
    bits |= static_cast<uint64_t>(stride);
  return static_cast<uint32_t>(bits & -bits);
}

template <typename T>
void setAttribute(cublasLtMatmulDesc_t desc,
                  cublasLtMatmulDescAttributes_t attribute, const T &value) {
  check(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
        "cublasLtMatmulDescSetAttribute");
}

} // namespace

Gemm::Plan &Gemm::planFor(const Key &key, GemmType inType, GemmType outType,
                          const Shape &shape, const Alignments &aligned,
                          const void *bias) {
  if (auto it = plans.find(key); it != plans.end())
    return *it->second;
  auto *plan = new Plan();
  plans[key] = plan;
  cudaDataType_t in = dataType(inType), out = dataType(outType);
  check(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  // cuBLASLt's A is our B and its B our A (see the file comment).
  cublasOperation_t transB = shape.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    transA = shape.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  setAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, transB);
  setAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, transA);
  if (shape.bias) {
    setAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                 CUBLASLT_EPILOGUE_BIAS);
    // The heuristic reads the pointer's alignment from it.
    setAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  // Column-major layouts of the operands as stored (see the file comment).
  auto layout = [&](cublasLtMatrixLayout_t &l, cudaDataType_t t, int64_t rows,
                    int64_t cols, int64_t ld, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld),
          "cublasLtMatrixLayoutCreate");
    if (shape.batch == 1)
      return;
    int32_t count = static_cast<int32_t>(shape.batch);
    check(cublasLtMatrixLayoutSetAttribute(
              l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
          "cublasLtMatrixLayoutSetAttribute");
    check(cublasLtMatrixLayoutSetAttribute(
              l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
              sizeof(stride)),
          "cublasLtMatrixLayoutSetAttribute");
  };
  if (shape.transB)
    layout(plan->a, in, shape.k, shape.n, shape.ldb, shape.strideB);
  else
    layout(plan->a, in, shape.n, shape.k, shape.ldb, shape.strideB);
  if (shape.transA)
    layout(plan->b, in, shape.m, shape.k, shape.lda, shape.strideA);
  else
    layout(plan->b, in, shape.k, shape.m, shape.lda, shape.strideA);
  layout(plan->c, out, shape.n, shape.m, shape.ldc, shape.strideC);

  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference),
        "cublasLtMatmulPreferenceCreate");
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute,
                    auto value) {
    check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value,
                                               sizeof(value)),
          "cublasLtMatmulPreferenceSetAttribute");
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspaceBytes);
  // cuBLASLt assumes 256-byte aligned matrices unless told otherwise; a
  // head's slice of a projection, read in place, is less aligned.
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, aligned.b);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, aligned.a);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, aligned.c);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, aligned.c);
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->a, plan->b, plan->c, plan->c, preference, 1,
      &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw RuntimeError(
        "cublasLtMatmulAlgoGetHeuristic found no algorithm for a " +
        std::to_string(shape.m) + "x" + std::to_string(shape.k) + " by " +
        std::to_string(shape.k) + "x" + std::to_string(shape.n) + " GEMM on " +
        where());
  plan->algo = result.algo;
  return *plan;
}

void Gemm::run(GemmType inType, GemmType outType, const Shape &shape,
               const void *a, const void *b, void *c, float beta,
               const void *bias) {
  int64_t in = elementBytes(inType), out = elementBytes(outType);
  Alignments aligned{alignment(a, {shape.strideA * in, shape.lda * in}),
                     alignment(b, {shape.strideB * in, shape.ldb * in}),
                     alignment(c, {shape.strideC * out, shape.ldc * out})};
  Key key = {static_cast<int64_t>(inType),
             static_cast<int64_t>(outType),
             shape.m,
             shape.n,
             shape.k,
             shape.transA,
             shape.transB,
             shape.lda,
             shape.ldb,
             shape.ldc,
             shape.batch,
             shape.strideA,
             shape.strideB,
             shape.strideC,
             aligned.a,
             aligned.b,
             aligned.c,
             shape.bias ? alignment(bias, {}) : 0};
  Plan &plan = planFor(key, inType, outType, shape, aligned, bias);
  if (shape.bias)
    setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  float alpha = 1.0f;
  check(cublasLtMatmul(handle, plan.desc, &alpha, b, plan.a, a, plan.b, &beta,
                       c, plan.c, c, plan.c, &plan.algo, workspace,
                       workspaceBytes, stream),
        "cublasLtMatmul");
}

cudaStream_t cuda::processStream() {
  static cudaStream_t stream = [] {
    cudaStream_t s;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

Gemm &cuda::processGemm() {
  static Gemm gemm(processStream());
  return gemm;
}

//===----------------------------------------------------------------------===//
// The ABI entry points emitted code calls (cleave/Runtime/Abi.h); no
// exception may leave them
//===----------------------------------------------------------------------===//

namespace {

/// The GEMM entry points (Abi.h) for A and B of `InType`: one strided,
/// batched cuBLASLt call for each of the call's `outer` GEMM batches, into
/// a float32 C, or (`Rounded`) a C of `InType`.
template <GemmType InType, bool Rounded = false>
void gemmEntry(CLEAVE_ABI_GEMM_PARAMS) {
  constexpr GemmType OutType = Rounded ? InType : GemmType::F32;
  profile::Span span([&] {
    const char *types[] = {"f32", "f16", "bf16"};
    return profile::describeGemm(types[int(InType)], Rounded, outer * batch, m,
                                 n, k);
  });
  size_t bytes = elementBytes(InType), outBytes = elementBytes(OutType);
  orExit([&] {
    GemmCall g;
    try {
      g = decodeGemm(CLEAVE_ABI_GEMM_ARGS, Rounded);
    } catch (const RuntimeError &e) {
      throw RuntimeError(std::string(e.what()) + ", on " + where());
    }
    Gemm::Shape shape{m, n, k};
    shape.transA = g.a.layout.transposed;
    shape.transB = g.b.layout.transposed;
    shape.lda = g.a.layout.ld;
    shape.ldb = g.b.layout.ld;
    shape.ldc = g.c.layout.ld;
    shape.batch = batch;
    shape.strideA = g.a.batchStride;
    shape.strideB = g.b.batchStride;
    shape.strideC = g.c.batchStride;
    shape.bias = g.bias;
    const void *biasAt =
        g.bias ? reinterpret_cast<const float *>(bias) + g.offsetBias : nullptr;
    for (int64_t o = 0; o < outer; ++o)
      processGemm().run(InType, OutType, shape,
                        reinterpret_cast<const char *>(a) + g.a.at(o) * bytes,
                        reinterpret_cast<const char *>(b) + g.b.at(o) * bytes,
                        reinterpret_cast<char *>(c) + g.c.at(o) * outBytes,
                        beta, biasAt);
  });
}

} // namespace

extern "C" {
void cleave_rt_cuda_sgemm(CLEAVE_ABI_GEMM_PARAMS) {
  gemmEntry<GemmType::F32>(CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_cuda_gemm_bf16(CLEAVE_ABI_GEMM_PARAMS) {
  gemmEntry<GemmType::BF16>(CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_cuda_gemm_f16(CLEAVE_ABI_GEMM_PARAMS) {
  gemmEntry<GemmType::F16>(CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_cuda_gemm_bf16_rounded(CLEAVE_ABI_GEMM_PARAMS) {
  gemmEntry<GemmType::BF16, true>(CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_cuda_gemm_f16_rounded(CLEAVE_ABI_GEMM_PARAMS) {
  gemmEntry<GemmType::F16, true>(CLEAVE_ABI_GEMM_ARGS);
}
}

void cuda::freeBuffer(void *p) {
  cudaPointerAttributes attributes;
  check(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes");
  // Managed memory: cudaFree (it waits for the device). Device memory from
  // the stream-ordered pool: freed once the stream has used it.
  if (attributes.type == cudaMemoryTypeManaged)
    check(cudaFree(p), "cudaFree");
  else
    check(cudaFreeAsync(p, processStream()), "cudaFreeAsync");
}

extern "C" void cleave_rt_cuda_free(intptr_t pointer) {
  orExit([&] { freeBuffer(reinterpret_cast<void *>(pointer)); });
}

extern "C" void cleave_rt_cuda_synchronize() {
  orExit([&] {
    check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
  });
}
