//===- Gemm.cpp - Row-major GEMMs through cuBLASLt -------------------------===//
//
// cuBLASLt is column-major. A row-major X[r x c] is the column-major X^T
// with leading dimension c, so C = A * B is computed as C^T = B^T * A^T:
// cuBLASLt's first operand is B (n x k, ld n), its second A (k x m, ld k),
// its result C (n x m, ld n), with no transposes.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

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
  check(cudaMalloc(&workspace, workspaceBytes), "cudaMalloc (cuBLASLt workspace)");
}

Gemm::~Gemm() {
  for (auto &[key, plan] : plans)
    delete plan;
  if (workspace)
    cudaFree(workspace);
  if (handle)
    cublasLtDestroy(handle);
}

Gemm::Plan &Gemm::planFor(GemmType inType, GemmType outType,
                          const Shape &shape) {
  auto key = std::make_tuple(inType, outType, shape.key());
  if (auto it = plans.find(key); it != plans.end())
    return *it->second;
  auto *plan = new Plan();
  plans[key] = plan;
  cudaDataType_t in = dataType(inType), out = dataType(outType);
  check(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  // Column-major views of the row-major operands (see the file comment).
  auto layout = [&](cublasLtMatrixLayout_t &l, cudaDataType_t t, int64_t rows,
                    int64_t cols, int64_t ld, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld),
          "cublasLtMatrixLayoutCreate");
    if (shape.batch == 1)
      return;
    int32_t count = static_cast<int32_t>(shape.batch);
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                           &count, sizeof(count)),
          "cublasLtMatrixLayoutSetAttribute");
    check(cublasLtMatrixLayoutSetAttribute(
              l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
              sizeof(stride)),
          "cublasLtMatrixLayoutSetAttribute");
  };
  layout(plan->a, in, shape.n, shape.k, shape.ldb, shape.strideB);
  layout(plan->b, in, shape.k, shape.m, shape.lda, shape.strideA);
  layout(plan->c, out, shape.n, shape.m, shape.ldc, shape.strideC);
  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  check(cublasLtMatmulPreferenceSetAttribute(
            preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
            sizeof(workspaceBytes)),
        "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->a, plan->b, plan->c, plan->c, preference, 1,
      &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw RuntimeError("cublasLtMatmulAlgoGetHeuristic found no algorithm for a " +
                       std::to_string(shape.m) + "x" + std::to_string(shape.k) +
                       " by " + std::to_string(shape.k) + "x" +
                       std::to_string(shape.n) + " GEMM on " + where());
  plan->algo = result.algo;
  return *plan;
}

void Gemm::run(GemmType inType, GemmType outType, const Shape &shape,
               const void *a, const void *b, void *c, float beta) {
  Plan &plan = planFor(inType, outType, shape);
  float alpha = 1.0f;
  check(cublasLtMatmul(handle, plan.desc, &alpha, b, plan.a, a, plan.b, &beta, c,
                       plan.c, c, plan.c, &plan.algo, workspace, workspaceBytes,
                       stream),
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

/// The GEMM entry points (Abi.h) for A and B of `InType`: one cuBLASLt call,
/// strided and batched.
template <GemmType InType> void gemmEntry(CLEAVE_ABI_BATCHED_GEMM_PARAMS) {
  size_t bytes = elementBytes(InType);
  orExit([&] {
    processGemm().run(InType, GemmType::F32,
                      {m, n, k, lda, ldb, ldc, batch, batchStrideA, batchStrideB,
                       batchStrideC},
                      reinterpret_cast<const char *>(a) + offsetA * bytes,
                      reinterpret_cast<const char *>(b) + offsetB * bytes,
                      reinterpret_cast<float *>(c) + offsetC, beta);
  });
}

} // namespace

CLEAVE_ABI_DEFINE_GEMMS(cleave_rt_cuda_sgemm, gemmEntry<GemmType::F32>)
CLEAVE_ABI_DEFINE_GEMMS(cleave_rt_cuda_gemm_bf16, gemmEntry<GemmType::BF16>)
CLEAVE_ABI_DEFINE_GEMMS(cleave_rt_cuda_gemm_f16, gemmEntry<GemmType::F16>)

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
