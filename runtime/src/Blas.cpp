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
void sgemm(CLEAVE_ABI_GEMM_PARAMS) {
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
void gemm16(CLEAVE_ABI_GEMM_PARAMS) {
  std::vector<float> wa = widen<Widen>(a, offsetA, m, k, lda);
  std::vector<float> wb = widen<Widen>(b, offsetB, k, n, ldb);
  sgemm(m, n, k, reinterpret_cast<intptr_t>(wa.data()), 0, k,
        reinterpret_cast<intptr_t>(wb.data()), 0, n, c, offsetC, ldc, beta);
}

/// The batched form over one of the above.
template <void (*One)(CLEAVE_ABI_GEMM_PARAMS)>
void batched(CLEAVE_ABI_BATCHED_GEMM_PARAMS) {
  for (int64_t i = 0; i < batch; ++i)
    One(m, n, k, a, offsetA + i * batchStrideA, lda, b,
        offsetB + i * batchStrideB, ldb, c, offsetC + i * batchStrideC, ldc, beta);
}

} // namespace

CLEAVE_ABI_DEFINE_GEMMS(cleave_rt_sgemm, batched<sgemm>)
CLEAVE_ABI_DEFINE_GEMMS(cleave_rt_gemm_bf16, batched<gemm16<bf16ToFloat>>)
CLEAVE_ABI_DEFINE_GEMMS(cleave_rt_gemm_f16, batched<gemm16<halfToFloat>>)
