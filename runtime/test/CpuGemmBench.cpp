//===- CpuGemmBench.cpp - The packed GEMM against OpenBLAS, interleaved ---===//
//
// Times the GEMMs of two transformer layers (activations of M rows times
// weights: GPT-2-small's Q, K and V as one, attention output, MLP; or
// LLaMA-style with --llama: Q, K, V and output separately, K and V of 4
// key/value heads, gate, up, down) on the packed kernel and on OpenBLAS's
// cblas_sgemm. Every call alternates between the two, so the noise of a
// shared machine falls on both alike; the weights lie in a mapped file, as
// a program's do, and are packed before timing (as after a program's
// second run). Prints the mean time per pass for each and the ratio packed /
// OpenBLAS (below 1.0: the packed kernel is faster). At one thread the
// comparison is clean; at more, OpenMP's threads and OpenBLAS's own take
// turns and hinder each other, which a program does not suffer (it lets
// both sleep at once): compare programs for that (cleave-run --bench, with
// and without CLEAVE_PACKED_GEMM=0).
//
// With --attention, the GEMMs of GPT-2-small's attention over M tokens
// instead, as a program calls them: the scores Q * K^T and the context P * V
// of 12 heads, Q, K and V read in place from the joined projection's rows
// (2304 floats), the context written into the merged heads' rows (768):
// packedSgemmBatch, whose threads take heads, against one cblas_sgemm a
// head.
//
// With --bf16, GPT-2-small's layer GEMMs on bfloat16 operands on AMX's
// tiles (amxGemmBf16, the weights' copies made before timing) against the
// same GEMMs in float32 on the packed kernel.
//
// Usage: cleave-cpu-gemm-bench [--llama | --attention | --bf16] [--rows M]
//                              [--threads T] [--runs N]
//
//===----------------------------------------------------------------------===//

#include "MappedFloats.h"
#include "../src/AmxGemm.h"
#include "../src/PackedGemm.h"
#include "../src/Runtime.h"

#include "cleave/Runtime/Float16.h"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

using namespace cleave::rt;

namespace {

/// The --attention benchmark (see the top of the file).
int benchAttention(int64_t tokens, int threads, int runs) {
  constexpr int64_t heads = 12, head = 64, width = heads * head;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> qkv(tokens * 3 * width), probs(heads * tokens * tokens),
      context(tokens * width);
  for (float &x : qkv)
    x = dist(rng);
  for (float &x : probs)
    x = dist(rng);
  std::vector<float> scores(heads * tokens * tokens);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  // GEMM 0: scores = Q K^T (K read transposed); GEMM 1: context = P V.
  struct Gemm {
    int64_t m, n, k;
    MatrixLayout a, b;
    int64_t ldc;
    std::function<GemmOperands(int64_t)> operands;
  };
  const Gemm gemms[] = {
      {tokens, tokens, head, MatrixLayout{false, 3 * width},
       MatrixLayout{true, 3 * width}, tokens,
       [&](int64_t h) {
         return GemmOperands{qkv.data() + h * head,
                             qkv.data() + width + h * head,
                             scores.data() + h * tokens * tokens};
       }},
      {tokens, head, tokens, MatrixLayout{false, tokens},
       MatrixLayout{false, 3 * width}, width, [&](int64_t h) {
         return GemmOperands{probs.data() + h * tokens * tokens,
                             qkv.data() + 2 * width + h * head,
                             context.data() + h * head};
       }}};
  // Seconds for [GEMM][packed].
  double seconds[2][2] = {{0, 0}, {0, 0}};
  for (int run = 0; run <= runs; ++run)
    for (int which = 0; which < 2; ++which)
      for (int turn = 0; turn < 2; ++turn) {
        const Gemm &g = gemms[which];
        bool packed = (turn + run) % 2 == 0;
        auto start = std::chrono::steady_clock::now();
        if (packed) {
          if (!packedSgemmBatch(heads, g.m, g.n, g.k, g.a, g.b, g.ldc, 0.0f,
                                nullptr, g.operands)) {
            std::fprintf(stderr, "no packed kernel runs here (without "
                                 "AVX-512, CLEAVE_PACKED_GEMM=avx2 asks for "
                                 "the AVX2 one)\n");
            return 1;
          }
        } else {
          for (int64_t h = 0; h < heads; ++h) {
            GemmOperands ops = g.operands(h);
            cblas_sgemm(CblasRowMajor, CblasNoTrans,
                        g.b.transposed ? CblasTrans : CblasNoTrans, g.m, g.n,
                        g.k, 1.0f, ops.a, g.a.ld, ops.b, g.b.ld, 0.0f, ops.c,
                        g.ldc);
          }
        }
        // Run 0 warms the caches and is not counted.
        if (run > 0)
          seconds[which][packed] +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count();
      }
  double flops = 2.0 * heads * tokens * tokens * head;
  auto ms = [&](int which, int packed) {
    return seconds[which][packed] / runs * 1e3;
  };
  std::printf("GPT-2-small attention (12 heads), %lld tokens, %d thread%s, %s "
              "kernel against OpenBLAS (%s kernels):\n",
              (long long)tokens, threads, threads == 1 ? "" : "s",
              packedGemmKernel(), blasKernels());
  const char *names[] = {"scores Q K^T", "context P V"};
  for (int which = 0; which < 2; ++which)
    std::printf("  %-12s packed %.3f ms (%.0f GFLOP/s), OpenBLAS %.3f ms "
                "(%.0f GFLOP/s), ratio %.2f\n",
                names[which], ms(which, 1), flops / ms(which, 1) / 1e6,
                ms(which, 0), flops / ms(which, 0) / 1e6,
                ms(which, 1) / ms(which, 0));
  double packedMs = ms(0, 1) + ms(1, 1), blasMs = ms(0, 0) + ms(1, 0);
  std::printf("  both         packed %.3f ms, OpenBLAS %.3f ms, ratio %.2f\n",
              packedMs, blasMs, packedMs / blasMs);
  return 0;
}

/// The --bf16 benchmark (see the top of the file).
int benchBf16(int64_t rows, int threads, int runs) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // One mapped file: each weight in float32, then all of them again in
  // bfloat16 (two to a float).
  std::vector<float> values;
  std::vector<uint16_t> halves;
  for (auto [k, n] : shapes)
    for (int64_t i = 0; i < k * n; ++i) {
      halves.push_back(floatToBf16(dist(rng)));
      values.push_back(bf16ToFloat(halves.back()));
    }
  size_t floats = values.size();
  values.resize(floats + (halves.size() + 1) / 2);
  std::memcpy(values.data() + floats, halves.data(),
              halves.size() * sizeof(uint16_t));
  const float *mapped = test::mappedFloats(values);
  setWeightMemory(mapped, values.size() * sizeof(float));
  const uint16_t *mappedHalves =
      reinterpret_cast<const uint16_t *>(mapped + floats);
  omp_set_num_threads(threads);
  std::vector<float> a(rows * 3072), c(rows * 3072);
  std::vector<uint16_t> a16(rows * 3072);
  for (size_t i = 0; i < a.size(); ++i) {
    a16[i] = floatToBf16(dist(rng));
    a[i] = bf16ToFloat(a16[i]);
  }
  auto call = [&](bool amx, int which, const float *w, const uint16_t *w16) {
    auto [k, n] = shapes[which];
    return amx ? amxGemmBf16(rows, n, k, a16.data(), MatrixLayout{false, k},
                             w16, MatrixLayout{false, n}, c.data(), n, 0.0f,
                             nullptr)
               : packedSgemm(rows, n, k, a.data(), MatrixLayout{false, k}, w,
                             MatrixLayout{false, n}, c.data(), n, 0.0f,
                             nullptr);
  };
  // Two calls each before timing: the packed kernel copies a weight on its
  // second GEMM, AMX on its first.
  double seconds[2] = {0, 0};
  for (int run = -2; run <= runs; ++run) {
    const float *w = mapped;
    const uint16_t *w16 = mappedHalves;
    for (int which = 0; which < 4; ++which) {
      for (int turn = 0; turn < 2; ++turn) {
        bool amx = (turn + run) % 2 == 0;
        auto start = std::chrono::steady_clock::now();
        if (!call(amx, which, w, w16) && run >= 0) {
          std::fprintf(stderr, "%s does not run here\n",
                       amx ? "AMX" : "the packed kernel");
          return 1;
        }
        if (run > 0)
          seconds[amx] += std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
      }
      auto [k, n] = shapes[which];
      w += k * n;
      w16 += k * n;
    }
  }
  double flops = 0;
  for (auto [k, n] : shapes)
    flops += 2.0 * rows * k * n;
  double amxMs = seconds[1] / runs * 1e3, f32Ms = seconds[0] / runs * 1e3;
  std::printf("GPT-2-small layer, M=%lld, %d thread%s: bf16 on %s %.3f ms "
              "(%.0f GFLOP/s), float32 on the %s kernel %.3f ms (%.0f "
              "GFLOP/s), ratio %.2f\n",
              (long long)rows, threads, threads == 1 ? "" : "s", amxKernel(),
              amxMs, flops / amxMs / 1e6, packedGemmKernel(), f32Ms,
              flops / f32Ms / 1e6, amxMs / f32Ms);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // OpenBLAS's kernels as a program gets them: where OpenBLAS falls back to
  // its generic ones on a CPU it does not know, the better ones (this
  // restarts the process once).
  useBetterBlasKernels(argv);
  int64_t rows = 128;
  int threads = 1, runs = 20;
  bool llama = false, attention = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--llama"))
      llama = true;
    else if (!std::strcmp(argv[i], "--attention"))
      attention = true;
    else if (!std::strcmp(argv[i], "--bf16"))
      bf16 = true;
    else if (!std::strcmp(argv[i], "--rows"))
      rows = value();
    else if (!std::strcmp(argv[i], "--threads"))
      threads = value();
    else if (!std::strcmp(argv[i], "--runs"))
      runs = value();
    else {
      std::fprintf(stderr,
                   "usage: %s [--llama | --attention | --bf16] "
                   "[--rows M] [--threads T] [--runs N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (rows < 1 || threads < 1 || runs < 1) {
    std::fprintf(stderr, "--rows, --threads and --runs must be positive\n");
    return 2;
  }
  if (attention)
    return benchAttention(rows, threads, runs);
  if (bf16)
    return benchBf16(rows, threads, runs);
  // (K, N) of each weight of a layer.
  std::vector<std::pair<int64_t, int64_t>> layer =
      llama ? std::vector<std::pair<int64_t, int64_t>>{{768, 768},  {768, 256},
                                                       {768, 256},  {768, 768},
                                                       {768, 3072}, {768, 3072},
                                                       {3072, 768}}
            : std::vector<std::pair<int64_t, int64_t>>{
                  {768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  std::vector<std::pair<int64_t, int64_t>> shapes = layer;
  shapes.insert(shapes.end(), layer.begin(), layer.end());

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  size_t total = 0;
  for (auto [k, n] : shapes)
    total += k * n;
  std::vector<float> weights(total);
  for (float &w : weights)
    w = dist(rng);
  const float *mapped = test::mappedFloats(weights);
  setWeightMemory(mapped, total * sizeof(float));
  weights.clear();

  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  std::vector<float> a(rows * 3072), c(rows * 3072);
  for (float &x : a)
    x = dist(rng);
  double seconds[2] = {0, 0};
  // A weight is packed on its second GEMM: two calls each before timing.
  const float *weight = mapped;
  for (auto [k, n] : shapes) {
    bool packed = false;
    for (int call = 0; call < 2; ++call)
      packed = packedSgemm(rows, n, k, a.data(), MatrixLayout{false, k}, weight,
                           MatrixLayout{false, n}, c.data(), n, 0.0f, nullptr);
    if (!packed) {
      std::fprintf(stderr, "no packed kernel runs here (without AVX-512, "
                           "CLEAVE_PACKED_GEMM=avx2 asks for the AVX2 one)\n");
      return 1;
    }
    weight += k * n;
  }
  // Run 0 warms the caches and is not counted.
  for (int run = 0; run <= runs; ++run) {
    const float *b = mapped;
    for (auto [k, n] : shapes) {
      for (int turn = 0; turn < 2; ++turn) {
        bool packed = (turn + run) % 2 == 0;
        auto start = std::chrono::steady_clock::now();
        if (packed) {
          packedSgemm(rows, n, k, a.data(), MatrixLayout{false, k}, b,
                      MatrixLayout{false, n}, c.data(), n, 0.0f, nullptr);
        } else {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, k,
                      1.0f, a.data(), k, b, n, 0.0f, c.data(), n);
        }
        if (run > 0)
          seconds[packed] += std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      }
      b += k * n;
    }
  }
  double flops = 0;
  for (auto [k, n] : shapes)
    flops += 2.0 * rows * k * n;
  double packedMs = seconds[1] / runs * 1e3, blasMs = seconds[0] / runs * 1e3;
  std::printf("%s layers x2, M=%lld, %d thread%s, %s kernel: packed %.2f ms "
              "(%.0f GFLOP/s), OpenBLAS (%s kernels) %.2f ms (%.0f GFLOP/s), "
              "ratio %.2f\n",
              llama ? "LLaMA-style" : "GPT-2-small", (long long)rows, threads,
              threads == 1 ? "" : "s", packedGemmKernel(), packedMs,
              flops / packedMs / 1e6, blasKernels(), blasMs,
              flops / blasMs / 1e6, packedMs / blasMs);
  return 0;
}
