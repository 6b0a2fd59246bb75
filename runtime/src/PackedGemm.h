//===- PackedGemm.h - GEMMs whose B is a weight, packed once ----*- C++ -*-===//
//
// Most of a transformer's GEMM time on the CPU is its projections and MLP:
// activations times a weight that never changes. OpenBLAS copies B into its
// panel layout on every call (a fifth of the GPT-2 stack's run time on
// AVX-512); here a weight is copied into that layout once, on its second
// GEMM, and every later call runs a register-tiled kernel over the panels,
// adding the bias in the kernel. Operands
// that are not weights (attention's GEMMs) stay on OpenBLAS.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PACKEDGEMM_H
#define CLEAVE_RUNTIME_PACKEDGEMM_H

#include "cleave/Runtime/GemmLayout.h"

#include <cstddef>
#include <cstdint>

namespace cleave::rt {

/// The memory that holds the weights (the mapped weight file): read-only for
/// the program's life, so a B operand inside it is packed once and reused.
void setWeightMemory(const void *begin, size_t bytes);

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
                 const MatrixLayout &layoutB, float *c, int64_t ldc,
                 float beta, const float *bias);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_PACKEDGEMM_H
