//===- Blas.cpp - GEMM entry points on the CPU ----------------------------===//
//
// Implements the cleave_rt_sgemm and cleave_rt_gemm_<bf16|f16> calls that
// emitted code makes for GEMMs (see Abi.h): float32 GEMMs on the packed
// kernel (PackedGemm.h) where the CPU has one, by a weight from its second
// use, GEMMs of two activations (attention's, batched over heads) on every
// call; every other on OpenBLAS's cblas_sgemm. The 16-bit operand GEMMs of
// --precision widen the operands to float32 first: a CPU program with 16-bit
// GEMMs exists to check the numerics of the narrowing, not for speed. On
// OpenBLAS, a bias is written into C before the product is added to it. The
// _rounded entries compute into a float32 scratch matrix and round it into
// their 16-bit C, as cuBLASLt does with a 16-bit result.
//
//===----------------------------------------------------------------------===//

#include "AmxGemm.h"
#include "GemmCall.h"
#include "PackedGemm.h"
#include "Profile.h"
#include "comm/Comm.h"

#include "cleave/Runtime/BlasCore.h"
#include "cleave/Runtime/Float16.h"

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <unistd.h>
#include <vector>

using namespace cleave::rt;

namespace {

/// C = bias (broadcast over rows) + beta * C, so that the GEMM then adds its
/// product with beta = 1.
void addBias(float *c, int64_t m, int64_t n, int64_t ldc, const float *bias,
             float beta) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j)
      c[r * ldc + j] = bias[j] + (beta == 0.0f ? 0.0f : beta * c[r * ldc + j]);
}

/// A `rows` x `cols` 16-bit matrix widened into `out`, in its own layout
/// with lines `cols` (or, transposed, `rows`) apart: line by line, which
/// the compiler vectorizes (a decoding step's attention makes hundreds of
/// such GEMMs of one row a step).
template <float (*Widen)(uint16_t)>
MatrixLayout widen(const uint16_t *p, int64_t rows, int64_t cols,
                   const MatrixLayout &layout, std::vector<float> &out) {
  out.resize(rows * cols);
  int64_t lines = layout.transposed ? cols : rows;
  int64_t length = layout.transposed ? rows : cols;
  for (int64_t line = 0; line < lines; ++line) {
    const uint16_t *from = p + line * layout.ld;
    float *to = out.data() + line * length;
    for (int64_t i = 0; i < length; ++i)
      to[i] = Widen(from[i]);
  }
  return MatrixLayout{layout.transposed, length};
}

/// Whether no two GEMMs of the call write the same C (each GEMM's C moves
/// along every loop with more than one step), so that they may run at once.
bool distinctResults(const GemmCall &g) {
  return (g.outer == 1 || g.c.outerStride != 0) &&
         (g.batch == 1 || g.c.batchStride != 0);
}

CBLAS_TRANSPOSE trans(const MatrixLayout &layout) {
  return layout.transposed ? CblasTrans : CblasNoTrans;
}

/// The call's arguments decoded, or the whole job ended, like the
/// collectives do, with the rank named.
GemmCall decodeOrAbort(CLEAVE_ABI_GEMM_PARAMS, bool rounded) {
  try {
    return decodeGemm(CLEAVE_ABI_GEMM_ARGS, rounded);
  } catch (const RuntimeError &e) {
    std::fprintf(stderr, "cleave-run: error: rank %d: %s\n", comm::rank(),
                 e.what());
    comm::abortJob(70);
  }
}

/// GEMM `index` of the call into the float32 matrix at `ci` (rows `ldc`
/// apart), added to beta times what it holds, after `bias` (when not null)
/// is written there; `Element` is A's and B's storage (float, or uint16_t
/// widened by `Widen`).
template <typename Element, float (*Widen)(uint16_t)>
void gemmAt(const GemmCall &g, intptr_t a, intptr_t b, int64_t index, float *ci,
            int64_t ldc, float beta, const float *bias) {
  GemmOffsets at = g.at(index);
  const Element *ai = reinterpret_cast<const Element *>(a) + at.a;
  const Element *bi = reinterpret_cast<const Element *>(b) + at.b;
  if constexpr (std::is_same_v<Element, float>) {
    if (packedSgemm(g.m, g.n, g.k, ai, g.a.layout, bi, g.b.layout, ci, ldc,
                    beta, bias))
      return;
  } else if constexpr (Widen == bf16ToFloat) {
    if (amxGemmBf16(g.m, g.n, g.k, ai, g.a.layout, bi, g.b.layout, ci, ldc,
                    beta, bias))
      return;
  }
  if (bias) {
    addBias(ci, g.m, g.n, ldc, bias, beta);
    beta = 1.0f;
  }
  if constexpr (std::is_same_v<Element, float>) {
    cblas_sgemm(CblasRowMajor, trans(g.a.layout), trans(g.b.layout), g.m, g.n,
                g.k, 1.0f, ai, g.a.layout.ld, bi, g.b.layout.ld, beta, ci, ldc);
  } else {
    thread_local std::vector<float> wa, wb;
    MatrixLayout la = widen<Widen>(ai, g.m, g.k, g.a.layout, wa);
    MatrixLayout lb = widen<Widen>(bi, g.k, g.n, g.b.layout, wb);
    cblas_sgemm(CblasRowMajor, trans(la), trans(lb), g.m, g.n, g.k, 1.0f,
                wa.data(), la.ld, wb.data(), lb.ld, beta, ci, ldc);
  }
}

/// Every GEMM of the call, one cblas_sgemm each, into its float32 C.
template <typename Element, float (*Widen)(uint16_t)>
void run(const char *type, CLEAVE_ABI_GEMM_PARAMS) {
  profile::Span span([&] {
    return profile::describeGemm(type, /*rounded=*/false, outer * batch, m, n,
                                 k);
  });
  GemmCall g = decodeOrAbort(CLEAVE_ABI_GEMM_ARGS, /*rounded=*/false);
  float *pc = reinterpret_cast<float *>(c);
  const float *pbias =
      g.bias ? reinterpret_cast<const float *>(bias) + g.offsetBias : nullptr;
  // GEMM `index`'s operands, A and B as `Element`.
  auto operands = [&](int64_t index) {
    GemmOffsets at = g.at(index);
    return std::make_tuple(reinterpret_cast<const Element *>(a) + at.a,
                           reinterpret_cast<const Element *>(b) + at.b,
                           pc + at.c);
  };
  if constexpr (std::is_same_v<Element, float>)
    if (distinctResults(g) &&
        packedSgemmBatch(g.count(), g.m, g.n, g.k, g.a.layout, g.b.layout,
                         g.c.layout.ld, g.beta, pbias, [&](int64_t index) {
                           auto [ai, bi, ci] = operands(index);
                           return GemmOperands{ai, bi, ci};
                         }))
      return;
  if constexpr (Widen == bf16ToFloat)
    if (g.count() > 1 && distinctResults(g) &&
        amxGemmBf16Batch(
            g.count(), g.m, g.n, g.k, g.a.layout, g.b.layout, g.c.layout.ld,
            g.beta, pbias,
            [&](int64_t index) {
              auto [ai, bi, ci] = operands(index);
              return Bf16GemmOperands{ai, bi, ci};
            },
            nullptr))
      return;
  for (int64_t index = 0; index < g.count(); ++index)
    gemmAt<Element, Widen>(g, a, b, index, pc + g.at(index).c, g.c.layout.ld,
                           g.beta, pbias);
}

/// The _rounded entries: each GEMM into a packed float32 scratch matrix,
/// then rounded by `Narrow` into the 16-bit C.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void runRounded(const char *type, CLEAVE_ABI_GEMM_PARAMS) {
  profile::Span span([&] {
    return profile::describeGemm(type, /*rounded=*/true, outer * batch, m, n,
                                 k);
  });
  GemmCall g = decodeOrAbort(CLEAVE_ABI_GEMM_ARGS, /*rounded=*/true);
  uint16_t *pc = reinterpret_cast<uint16_t *>(c);
  // GEMM `index` rounded from `scratch` (m x n) into its C.
  auto round = [&](int64_t index, const float *scratch) {
    uint16_t *ci = pc + g.at(index).c;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j)
        ci[r * g.c.layout.ld + j] = Narrow(scratch[r * n + j]);
  };
  if constexpr (Widen == bf16ToFloat) {
    // On AMX, threads take GEMMs, each into a scratch matrix of its own.
    auto scratchOfThread = [&]() {
      thread_local std::vector<float> scratch;
      scratch.resize(m * n);
      return scratch.data();
    };
    if (g.count() > 1 && distinctResults(g) &&
        amxGemmBf16Batch(
            g.count(), g.m, g.n, g.k, g.a.layout, g.b.layout, n, 0.0f, nullptr,
            [&](int64_t index) {
              GemmOffsets at = g.at(index);
              return Bf16GemmOperands{
                  reinterpret_cast<const uint16_t *>(a) + at.a,
                  reinterpret_cast<const uint16_t *>(b) + at.b,
                  scratchOfThread()};
            },
            [&](int64_t index) { round(index, scratchOfThread()); }))
      return;
  }
  std::vector<float> scratch(m * n);
  for (int64_t index = 0; index < g.count(); ++index) {
    gemmAt<uint16_t, Widen>(g, a, b, index, scratch.data(), n, 0.0f, nullptr);
    round(index, scratch.data());
  }
}

} // namespace

const char *cleave::rt::blasKernels() { return openblas_get_corename(); }

void cleave::rt::useBetterBlasKernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  const char *better = betterBlasCore(openblas_get_corename());
  if (!better)
    return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);
  // Not restarted (no /proc): keep the generic kernels, which still work.
  unsetenv("OPENBLAS_CORETYPE");
}

extern "C" {
void cleave_rt_sgemm(CLEAVE_ABI_GEMM_PARAMS) {
  run<float, nullptr>("f32", CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_gemm_bf16(CLEAVE_ABI_GEMM_PARAMS) {
  run<uint16_t, bf16ToFloat>("bf16", CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_gemm_f16(CLEAVE_ABI_GEMM_PARAMS) {
  run<uint16_t, halfToFloat>("f16", CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_gemm_bf16_rounded(CLEAVE_ABI_GEMM_PARAMS) {
  runRounded<bf16ToFloat, floatToBf16>("bf16", CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_gemm_f16_rounded(CLEAVE_ABI_GEMM_PARAMS) {
  runRounded<halfToFloat, floatToHalf>("f16", CLEAVE_ABI_GEMM_ARGS);
}
}
