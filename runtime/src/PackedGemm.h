//===- PackedGemm.h - GEMMs on B copied into panels -------------*- C++ -*-===//
//
// Most of a transformer's GEMM time on the CPU is its projections and MLP:
// activations times a weight that never changes. OpenBLAS copies B into its
// panel layout on every call (a fifth of the GPT-2 stack's run time on
// AVX-512); here a weight is copied into that layout once, on its second
// GEMM, and every later call runs a register-tiled kernel over the panels,
// adding the bias in the kernel. Attention's products of two activations
// come as batches of small GEMMs, one per head; the same kernel does them,
// each thread copying the B of the GEMMs it takes into panels of its own.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PACKEDGEMM_H
#define CLEAVE_RUNTIME_PACKEDGEMM_H

#include "cleave/Runtime/GemmLayout.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace cleave::rt {

/// The memory that holds the weights (the mapped weight file): read-only for
/// the program's life, so a B operand inside it is packed once and reused.
void setWeightMemory(const void *begin, size_t bytes);

/// Whether [begin, end) lies in the weight memory.
bool inWeightMemory(const void *begin, const void *end);

/// Gives back the whole pages of weights in [begin, end) once a copy of
/// them is kept elsewhere: the mapping is of a file, read-only, so a later
/// read of them reads the file again, and the copy does not double the
/// memory weights take.
void releaseWeightPages(const void *begin, const void *end);

/// The packed kernel this program runs ("AVX-512", "AVX2"), or null: every
/// GEMM then goes to OpenBLAS. By default the AVX-512 kernel where the CPU
/// has AVX-512, else none; CLEAVE_PACKED_GEMM=avx2 asks for the AVX2 kernel
/// (on any CPU with AVX2 and FMA), CLEAVE_PACKED_GEMM=0 for none.
const char *packedGemmKernel();

/// One row-major float32 GEMM: C (m x n, rows `ldc` apart) = A * B + bias
/// (over C's columns, when not null) + beta * C (not read when beta is 0),
/// done with B packed when B lies in the weight memory, this CPU has a
/// packed kernel and B was seen before (a weight is packed on its second
/// GEMM). Returns false, having done nothing, otherwise.
bool packedSgemm(int64_t m, int64_t n, int64_t k, const float *a,
                 const MatrixLayout &layoutA, const float *b,
                 const MatrixLayout &layoutB, float *c, int64_t ldc, float beta,
                 const float *bias);

/// Columns of a panel of the packed kernel this program runs, or 0 where it
/// has none.
int64_t packedPanelWidth();

/// B (k x n, `layout`) copied into the packed kernel's panels at `panels`
/// (the layout packedSgemmOnPanels reads), on this thread; nothing where
/// this CPU has no packed kernel.
void packPanels(const float *b, const MatrixLayout &layout, int64_t k,
                int64_t n, float *panels);

/// One GEMM as packedSgemm, of a B the caller has put into panels itself
/// (a quantized weight, dequantized panel by panel): panel p's line for
/// step s of the sum at panels[(p * k + s) * packedPanelWidth()], zeros
/// past B's last column. Returns false, having done nothing, where this CPU
/// has no packed kernel.
bool packedSgemmOnPanels(int64_t m, int64_t n, int64_t k, const float *a,
                         const MatrixLayout &layoutA, const float *panels,
                         float *c, int64_t ldc, float beta, const float *bias);

/// Where one GEMM of a batch reads A and B and writes C.
struct GemmOperands {
  const float *a, *b;
  float *c;
};

/// A batch of `count` row-major float32 GEMMs of one shape whose B operands
/// are not weights (attention's scores and context, a GEMM per head):
/// C_i = A_i * B_i + bias + beta * C_i as packedSgemm, with `operands(i)`
/// giving GEMM i's operands (called from any thread; the Cs must not
/// overlap). Threads take whole GEMMs, or parts of their rows when there are
/// too few GEMMs to share evenly, and copy each B they use into panels.
/// Returns false, having done nothing, when this CPU has no packed kernel, a
/// B lies in the weights (packedSgemm caches those), or the GEMMs have too
/// few rows to repay copying B (a decoding step's single row).
bool packedSgemmBatch(int64_t count, int64_t m, int64_t n, int64_t k,
                      const MatrixLayout &layoutA, const MatrixLayout &layoutB,
                      int64_t ldc, float beta, const float *bias,
                      const std::function<GemmOperands(int64_t)> &operands);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_PACKEDGEMM_H
