//===- PackedGemmTest.cpp - The packed GEMM against a float64 reference ---===//
//
// Puts B matrices in a file mapped read-only, as a program's weights are, and
// checks packedSgemm on shapes that take every path of the kernel: panels
// narrower than the kernel's width, row tiles shorter than its height, several
// blocks of rows, sums longer and shorter than one pass, A and B stored
// transposed, rows of C wider than the GEMM (their other columns must stay
// untouched), a bias, beta, one and two threads (columns or rows split), a
// weight's first GEMM (refused: OpenBLAS does it), its second (packs it) and
// third (on the cached panels), and a B outside the weights (refused); then
// batches of GEMMs whose B is not a weight (packedSgemmBatch, attention's
// GEMMs) on the same paths, and what that refuses.
// Every element is held to the float32 rounding bound of its sum, computed in
// float64. Prints the kernel and one line per case; exits non-zero on a
// mismatch.
//
//===----------------------------------------------------------------------===//

#include "GemmReference.h"
#include "MappedFloats.h"
#include "../src/PackedGemm.h"

#include <cstdio>
#include <cstdlib>
#include <omp.h>
#include <random>
#include <utility>
#include <vector>

using namespace cleave::rt;

namespace {

using Case = test::GemmCase;

std::mt19937 rng(7);

std::vector<float> randoms(size_t count) {
  return test::uniformRandoms(rng, count);
}

/// Checks `out` (C after the GEMM of case `c`, `before` it) against the
/// float64 reference; false on any mismatch, printed.
bool agrees(const Case &c, const float *a, const float *b, const float *out,
            const float *before, const std::vector<float> &bias) {
  return test::agreesWithReference(
      c, [&](int64_t i) { return double(a[i]); },
      [&](int64_t i) { return double(b[i]); }, out, before, bias);
}

/// Runs `c` with B at `b` (in the weights) and checks it; false on any
/// mismatch, printed.
bool check(const Case &c, const float *b, const std::vector<float> &a,
           std::vector<float> &out, const std::vector<float> &bias) {
  std::vector<float> before = out;
  omp_set_num_threads(c.threads);
  if (!packedSgemm(c.m, c.n, c.k, a.data(), c.layoutA(), b, c.layoutB(),
                   out.data(), c.ldc(), c.beta,
                   c.bias ? bias.data() : nullptr)) {
    std::printf("%s: refused a B in the weights\n", c.name);
    return false;
  }
  return agrees(c, a.data(), b, out.data(), before.data(), bias);
}

/// Runs `count` GEMMs of case `c` through packedSgemmBatch, their B
/// operands outside the weights, each GEMM's operands in buffers of their
/// own (or, `sharedB`, one B for all, as a batch stride of 0 gives), and
/// checks every one.
bool checkBatch(const Case &c, int64_t count, bool sharedB) {
  std::vector<std::vector<float>> as, bs, outs, befores;
  for (int64_t i = 0; i < count; ++i) {
    as.push_back(randoms(c.linesA() * c.lda()));
    bs.push_back(randoms(c.linesB() * c.ldb()));
    outs.push_back(randoms(c.m * c.ldc()));
    befores.push_back(outs.back());
  }
  std::vector<float> bias = randoms(c.n);
  omp_set_num_threads(c.threads);
  if (!packedSgemmBatch(count, c.m, c.n, c.k, c.layoutA(), c.layoutB(), c.ldc(),
                        c.beta, c.bias ? bias.data() : nullptr, [&](int64_t i) {
                          return GemmOperands{as[i].data(),
                                              bs[sharedB ? 0 : i].data(),
                                              outs[i].data()};
                        })) {
    std::printf("%s: refused\n", c.name);
    return false;
  }
  for (int64_t i = 0; i < count; ++i)
    if (!agrees(c, as[i].data(), bs[sharedB ? 0 : i].data(), outs[i].data(),
                befores[i].data(), bias))
      return false;
  return true;
}

} // namespace

int main() {
  const char *kernel = packedGemmKernel();
  std::printf("kernel: %s\n", kernel ? kernel : "none");
  if (!kernel)
    return 0;
  const Case cases[] = {
      {"projection 128x768x768, bias, 2 threads", 128, 768, 768, false, false,
       0, 0, 0, true, 0.0f, 2},
      {"tails 13x45x300, bias, beta 0.5", 13, 45, 300, false, false, 0, 0, 5,
       true, 0.5f, 1},
      {"one row 1x1000x64", 1, 1000, 64, false, false, 0, 0, 0, false, 0.0f, 2},
      {"A and B transposed, padded lines, beta 1", 37, 100, 70, true, true, 3,
       7, 2, false, 1.0f, 1},
      {"one panel, rows split over 2 threads", 300, 32, 128, false, false, 0, 0,
       0, true, 0.0f, 2},
      {"B transposed, long sum 29x70x1100", 29, 70, 1100, false, true, 0, 4, 0,
       true, 0.0f, 2},
      {"row blocks 1000x70x300, A transposed, bias, beta 0.5", 1000, 70, 300,
       true, false, 1, 0, 3, true, 0.5f, 1},
  };
  // Every case's B, one after another in one mapped file.
  std::vector<size_t> offsets;
  std::vector<float> all;
  for (const Case &c : cases) {
    offsets.push_back(all.size());
    std::vector<float> b = randoms(c.linesB() * c.ldb());
    all.insert(all.end(), b.begin(), b.end());
  }
  const float *weights = test::mappedFloats(all);
  setWeightMemory(weights, all.size() * sizeof(float));

  bool ok = true;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    const Case &c = cases[i];
    const float *b = weights + offsets[i];
    std::vector<float> out = randoms(c.m * c.ldc());
    std::vector<float> bias = randoms(c.n);
    // A weight's first GEMM is left to OpenBLAS; the second packs it.
    std::vector<float> a = randoms(c.linesA() * c.lda());
    bool passed =
        !packedSgemm(c.m, c.n, c.k, a.data(), c.layoutA(), b, c.layoutB(),
                     out.data(), c.ldc(), c.beta, nullptr);
    if (!passed)
      std::printf("%s: packed on its first GEMM\n", c.name);
    passed = passed && check(c, b, a, out, bias);
    // Again on the panels packed by the second call, with another A.
    passed = passed && check(c, b, randoms(c.linesA() * c.lda()), out, bias);
    std::printf("%s: %s\n", c.name, passed ? "ok" : "FAILED");
    ok &= passed;
  }

  // A B outside the weights is left to OpenBLAS.
  std::vector<float> heapB = randoms(16 * 16), a = randoms(16 * 16), c(16 * 16);
  bool refused =
      !packedSgemm(16, 16, 16, a.data(), MatrixLayout{false, 16}, heapB.data(),
                   MatrixLayout{false, 16}, c.data(), 16, 0.0f, nullptr);
  std::printf("B outside the weights: %s\n", refused ? "refused" : "TAKEN");
  ok &= refused;

  // Batches of GEMMs whose B is not a weight (attention's), copied into
  // panels on every call: A read in place (few panels) or copied (many),
  // sums of one pass (blocks of two tiles) and of several, B transposed
  // (the scores' K^T) with columns in fours and a tail, GEMMs shared
  // evenly among threads or their rows split (3 GEMMs on 2 threads), and
  // one B read by every GEMM.
  struct Batch {
    Case c;
    int64_t count;
    bool sharedB;
  };
  const Batch batches[] = {
      {{"batch: scores 12 x 128x128x64, B transposed, 2 threads", 128, 128, 64,
        false, true, 5, 3, 0, false, 0.0f, 2},
       12,
       false},
      {{"batch: context 3 x 100x64x130, 2 threads", 100, 64, 130, false, false,
        2, 0, 7, false, 0.0f, 2},
       3,
       false},
      {{"batch: 2 x 50x300x70, B transposed (tail), bias, beta 0.5", 50, 300,
        70, false, true, 0, 2, 1, true, 0.5f, 1},
       2,
       false},
      {{"batch: 3 x 40x200x600, A transposed, bias, 2 threads", 40, 200, 600,
        true, false, 0, 0, 0, true, 0.0f, 2},
       3,
       false},
      {{"batch: 6 x 64x96x48, one B for all, 2 threads", 64, 96, 48, false,
        true, 0, 0, 0, false, 0.0f, 2},
       6,
       true},
  };
  for (const auto &[c, count, sharedB] : batches) {
    bool passed = checkBatch(c, count, sharedB);
    std::printf("%s: %s\n", c.name, passed ? "ok" : "FAILED");
    ok &= passed;
  }
  // Refused: too few rows to repay copying B; a B in the weights.
  const float *weightB = weights + offsets[0];
  bool fewRows = !packedSgemmBatch(
      2, 1, 16, 16, MatrixLayout{false, 16}, MatrixLayout{false, 16}, 16, 0.0f,
      nullptr,
      [&](int64_t) { return GemmOperands{a.data(), heapB.data(), c.data()}; });
  const Case &first = cases[0];
  std::vector<float> firstA = randoms(first.m * first.lda()),
                     firstC(first.m * first.ldc());
  bool weightRefused = !packedSgemmBatch(
      1, first.m, first.n, first.k, first.layoutA(), first.layoutB(),
      first.ldc(), 0.0f, nullptr, [&](int64_t) {
        return GemmOperands{firstA.data(), weightB, firstC.data()};
      });
  std::printf("batch of one row: %s\n", fewRows ? "refused" : "TAKEN");
  std::printf("batch with B in the weights: %s\n",
              weightRefused ? "refused" : "TAKEN");
  ok &= fewRows && weightRefused;
  return ok ? 0 : 1;
}
