//===- Blas.cpp - GEMM entry points on OpenBLAS ---------------------------===//
//
// Implements the cleave_rt_sgemm* calls that emitted code makes for float32
// matmuls (see Abi.h), on OpenBLAS's cblas_sgemm.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Abi.h"

#include <cblas.h>

extern "C" void cleave_rt_sgemm(int64_t m, int64_t n, int64_t k, intptr_t a,
                                int64_t offsetA, int64_t lda, intptr_t b,
                                int64_t offsetB, int64_t ldb, intptr_t c,
                                int64_t offsetC, int64_t ldc, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
              reinterpret_cast<const float *>(a) + offsetA, lda,
              reinterpret_cast<const float *>(b) + offsetB, ldb, beta,
              reinterpret_cast<float *>(c) + offsetC, ldc);
}

extern "C" void cleave_rt_sgemm_batched(
    int64_t batch, int64_t m, int64_t n, int64_t k, intptr_t a, int64_t offsetA,
    int64_t batchStrideA, int64_t lda, intptr_t b, int64_t offsetB,
    int64_t batchStrideB, int64_t ldb, intptr_t c, int64_t offsetC,
    int64_t batchStrideC, int64_t ldc, float beta) {
  for (int64_t i = 0; i < batch; ++i)
    cleave_rt_sgemm(m, n, k, a, offsetA + i * batchStrideA, lda, b,
                    offsetB + i * batchStrideB, ldb, c, offsetC + i * batchStrideC,
                    ldc, beta);
}
