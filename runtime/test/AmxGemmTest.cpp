//===- AmxGemmTest.cpp - The AMX bfloat16 GEMM against a float64 reference ===//
//
// Checks amxGemmBf16 on shapes that take every path: blocks and panels cut
// short (rows, columns and sums not multiples of 32), sums short enough to
// go row block by row block, A and B stored transposed with padded lines,
// rows of C wider than the GEMM (their other columns must stay untouched),
// a bias, beta, one and two threads, a B in the weights (copied once: a
// second call with another A reads the kept copy) and one outside them,
// padding that stays zeros after a GEMM of NaNs, and batches of GEMMs
// shared by threads (one with a B all its GEMMs read). The operands are
// bfloat16 values, so their products are exact in float64; every element is
// held to the float32 rounding bound of its sum. Prints the kernel and one
// line per case; exits non-zero on a mismatch. With --probe, prints only
// the kernel.
//
//===----------------------------------------------------------------------===//

#include "GemmReference.h"
#include "MappedFloats.h"
#include "../src/AmxGemm.h"
#include "../src/PackedGemm.h"

#include "cleave/Runtime/Float16.h"

#include <cstdio>
#include <cstring>
#include <omp.h>
#include <random>
#include <vector>

using namespace cleave::rt;

namespace {

/// A case, and whether its B lies in the weights.
struct Case : test::GemmCase {
  bool weightB;
  /// Whether a GEMM of NaNs runs first: the buffers it leaves behind must
  /// not reach this case's padding (zeros times NaN would be NaN).
  bool afterNaNs = false;

  size_t sizeA() const { return linesA() * lda(); }
  size_t sizeB() const { return linesB() * ldb(); }
};

std::mt19937 rng(11);

std::vector<float> randoms(size_t count) {
  return test::uniformRandoms(rng, count);
}

/// Random bfloat16 values (bit patterns) in [-1, 1].
std::vector<uint16_t> randomBf16(size_t count) {
  std::vector<uint16_t> v;
  for (float x : randoms(count))
    v.push_back(floatToBf16(x));
  return v;
}

/// Runs case `c` (B at `b`) with A `a` into `out` and checks it; false on
/// any mismatch, printed.
bool check(const Case &c, const uint16_t *a, const uint16_t *b,
           std::vector<float> &out, const std::vector<float> &bias) {
  std::vector<float> before = out;
  omp_set_num_threads(c.threads);
  if (!amxGemmBf16(c.m, c.n, c.k, a, c.layoutA(), b, c.layoutB(), out.data(),
                   c.ldc(), c.beta, c.bias ? bias.data() : nullptr)) {
    std::printf("%s: refused\n", c.name);
    return false;
  }
  return test::agreesWithReference(
      c, [&](int64_t i) { return double(bf16ToFloat(a[i])); },
      [&](int64_t i) { return double(bf16ToFloat(b[i])); }, out.data(),
      before.data(), bias);
}

} // namespace

int main(int argc, char **argv) {
  const char *kernel = amxKernel();
  std::printf("kernel: %s\n", kernel ? kernel : "none");
  // --probe: only whether AMX runs here (test/lit.cfg.py asks).
  if (!kernel || (argc > 1 && std::strcmp(argv[1], "--probe") == 0))
    return 0;
  const Case cases[] = {
      {{"projection 128x768x768, bias, 2 threads, B a weight", 128, 768, 768,
        false, false, 0, 0, 0, true, 0.0f, 2},
       true},
      {{"tails 13x45x300, bias, beta 0.5, B a weight", 13, 45, 300, false,
        false, 0, 0, 5, true, 0.5f, 1},
       true},
      {{"one row 1x1000x64, B a weight", 1, 1000, 64, false, false, 0, 0, 0,
        false, 0.0f, 2},
       true},
      {{"A and B transposed, padded lines, beta 1, 37x100x70", 37, 100, 70,
        true, true, 3, 7, 2, false, 1.0f, 1},
       false},
      {{"B outside the weights, transposed, 50x64x130, 2 threads", 50, 64, 130,
        false, true, 0, 2, 0, true, 0.0f, 2},
       false},
      {{"short sum 100x300x64 (row blocks outside), bias, 2 threads, B a "
        "weight",
        100, 300, 64, false, false, 0, 0, 3, true, 0.0f, 2},
       true},
      {{"after a GEMM of NaNs, 13x20x45, B a weight", 13, 20, 45, false, false,
        0, 0, 0, false, 0.0f, 1},
       true,
       true},
  };
  // The weights' Bs, one after another in one mapped file (two bfloat16
  // values a float).
  std::vector<uint16_t> weightValues;
  std::vector<size_t> offsets;
  for (const Case &c : cases) {
    offsets.push_back(weightValues.size());
    if (c.weightB) {
      std::vector<uint16_t> b = randomBf16(c.sizeB());
      weightValues.insert(weightValues.end(), b.begin(), b.end());
    }
  }
  std::vector<float> words((weightValues.size() + 1) / 2);
  std::memcpy(words.data(), weightValues.data(),
              weightValues.size() * sizeof(uint16_t));
  const uint16_t *weights =
      reinterpret_cast<const uint16_t *>(test::mappedFloats(words));
  setWeightMemory(weights, words.size() * sizeof(float));

  bool ok = true;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    const Case &c = cases[i];
    std::vector<uint16_t> heapB;
    const uint16_t *b = weights + offsets[i];
    if (!c.weightB) {
      heapB = randomBf16(c.sizeB());
      b = heapB.data();
    }
    if (c.afterNaNs) {
      // 64 rows by a sum of 96, every operand NaN, on this thread.
      std::vector<uint16_t> nans(64 * 96, 0x7fc0);
      std::vector<float> sink(64 * 64);
      omp_set_num_threads(1);
      amxGemmBf16(64, 64, 96, nans.data(), MatrixLayout{false, 96}, nans.data(),
                  MatrixLayout{false, 64}, sink.data(), 64, 0.0f, nullptr);
    }
    std::vector<float> out = randoms(c.m * c.ldc());
    std::vector<float> bias = randoms(c.n);
    bool passed = check(c, randomBf16(c.sizeA()).data(), b, out, bias) &&
                  check(c, randomBf16(c.sizeA()).data(), b, out, bias);
    std::printf("%s: %s\n", c.name, passed ? "ok" : "FAILED");
    ok &= passed;
  }

  // Batches (attention's heads) on two threads, each GEMM checked and
  // `finished` called once for each, on the thread that wrote its C (the
  // rounded entries round there): three GEMMs, each B its own and outside
  // the weights; six that read one B (grouped-query attention's repeated
  // key/value heads), which a thread copies once.
  struct Batch {
    Case c;
    int count;
    bool sharedB;
  };
  const Batch batches[] = {
      {{{"batch: 3 x 40x70x100, B transposed, bias, 2 threads", 40, 70, 100,
         false, true, 0, 1, 2, true, 0.0f, 2},
        false},
       3,
       false},
      {{{"batch: 6 x 40x70x100, one B for all, 2 threads", 40, 70, 100, false,
         true, 0, 1, 2, false, 0.0f, 2},
        false},
       6,
       true},
  };
  for (const auto &[c, count, sharedB] : batches) {
    std::vector<std::vector<uint16_t>> as, bs;
    std::vector<std::vector<float>> outs, befores;
    for (int i = 0; i < count; ++i) {
      as.push_back(randomBf16(c.sizeA()));
      bs.push_back(randomBf16(c.sizeB()));
      outs.push_back(randoms(c.m * c.ldc()));
      befores.push_back(outs.back());
    }
    auto bOf = [&](int64_t i) { return bs[sharedB ? 0 : i].data(); };
    std::vector<float> bias = randoms(c.n);
    std::vector<int> finishedOnce(count, 0);
    omp_set_num_threads(c.threads);
    bool passed = amxGemmBf16Batch(
        count, c.m, c.n, c.k, c.layoutA(), c.layoutB(), c.ldc(), c.beta,
        c.bias ? bias.data() : nullptr,
        [&](int64_t i) {
          return Bf16GemmOperands{as[i].data(), bOf(i), outs[i].data()};
        },
        [&](int64_t i) { ++finishedOnce[i]; });
    for (int i = 0; i < count && passed; ++i)
      passed = finishedOnce[i] == 1 &&
               test::agreesWithReference(
                   c, [&](int64_t e) { return double(bf16ToFloat(as[i][e])); },
                   [&](int64_t e) { return double(bf16ToFloat(bOf(i)[e])); },
                   outs[i].data(), befores[i].data(), bias);
    std::printf("%s: %s\n", c.name, passed ? "ok" : "FAILED");
    ok &= passed;
  }
  return ok ? 0 : 1;
}
