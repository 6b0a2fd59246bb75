//===- Blas.cpp - GEMM entry points on OpenBLAS ---------------------------===//
//
// Implements the cleave_rt_sgemm* calls that emitted code makes for float32
// matmuls (see Abi.h), on OpenBLAS's cblas_sgemm, and the 16-bit operand
// GEMMs of --precision by widening the operands to float32 first: a CPU
// program with 16-bit GEMMs exists to check the numerics of the narrowing,
// not for speed.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Abi.h"
#include "cleave/Runtime/Float16.h"

#include <cblas.h>

#include <vector>

using namespace cleave::rt;

namespace {

/// One row-major GEMM, C = A * B + beta * C, operands at element offsets.
void sgemm(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t offsetA,
           int64_t lda, intptr_t b, int64_t offsetB, int64_t ldb, intptr_t c,
           int64_t offsetC, int64_t ldc, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
              reinterpret_cast<const float *>(a) + offsetA, lda,
              reinterpret_cast<const float *>(b) + offsetB, ldb, beta,
              reinterpret_cast<float *>(c) + offsetC, ldc);
}

/// `rows` x `cols` 16-bit elements, rows `ld` apart, widened and packed.
template <float (*Widen)(uint16_t)>
std::vector<float> widen(intptr_t base, int64_t offset, int64_t rows,
                         int64_t cols, int64_t ld) {
  const uint16_t *p = reinterpret_cast<const uint16_t *>(base) + offset;
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = Widen(p[r * ld + c]);
  return out;
}

/// The same with 16-bit A and B, widened to float32 first.
template <float (*Widen)(uint16_t)>
void gemm16(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t offsetA,
            int64_t lda, intptr_t b, int64_t offsetB, int64_t ldb, intptr_t c,
            int64_t offsetC, int64_t ldc, float beta) {
  std::vector<float> wa = widen<Widen>(a, offsetA, m, k, lda);
  std::vector<float> wb = widen<Widen>(b, offsetB, k, n, ldb);
  sgemm(m, n, k, reinterpret_cast<intptr_t>(wa.data()), 0, k,
        reinterpret_cast<intptr_t>(wb.data()), 0, n, c, offsetC, ldc, beta);
}

} // namespace

/// cleave_rt_<name> and cleave_rt_<name>_batched (Abi.h) on `one`.
#define CLEAVE_RT_DEFINE_GEMMS(name, one)                                       \
  extern "C" void cleave_rt_##name(int64_t m, int64_t n, int64_t k,             \
                                   intptr_t a, int64_t offsetA, int64_t lda,    \
                                   intptr_t b, int64_t offsetB, int64_t ldb,    \
                                   intptr_t c, int64_t offsetC, int64_t ldc,    \
                                   float beta) {                                \
    one(m, n, k, a, offsetA, lda, b, offsetB, ldb, c, offsetC, ldc, beta);      \
  }                                                                             \
  extern "C" void cleave_rt_##name##_batched(                                   \
      int64_t batch, int64_t m, int64_t n, int64_t k, intptr_t a,               \
      int64_t offsetA, int64_t batchStrideA, int64_t lda, intptr_t b,           \
      int64_t offsetB, int64_t batchStrideB, int64_t ldb, intptr_t c,           \
      int64_t offsetC, int64_t batchStrideC, int64_t ldc, float beta) {         \
    for (int64_t i = 0; i < batch; ++i)                                         \
      one(m, n, k, a, offsetA + i * batchStrideA, lda, b,                       \
          offsetB + i * batchStrideB, ldb, c, offsetC + i * batchStrideC, ldc,  \
          beta);                                                                \
  }

CLEAVE_RT_DEFINE_GEMMS(sgemm, sgemm)
CLEAVE_RT_DEFINE_GEMMS(gemm_bf16, gemm16<bf16ToFloat>)
CLEAVE_RT_DEFINE_GEMMS(gemm_f16, gemm16<halfToFloat>)
#undef CLEAVE_RT_DEFINE_GEMMS
