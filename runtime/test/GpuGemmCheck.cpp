//===- GpuGemmCheck.cpp - The runtime's cuBLASLt GEMMs, checked and timed -===//
//
// Without a GPU: says so and exits 0 (--require-gpu: exits 1). With one:
//  1. numerics: float32, float16 and bfloat16 GEMMs of awkward and transformer
//     shapes against a float64 reference computed here from the same
//     (rounded) inputs, on sampled rows;
//     and the ABI's entry on the layouts compiled code passes: rows that are
//     not packed, B stored transposed, an outer loop of strided batches,
//     a bias epilogue; and the rounded entry writing a strided bf16 C;
//  2. errors: a GEMM on a pointer that is not device memory must fail with a
//     message naming the call, the rank and the device;
//  3. speed: the GEMMs of one GPT-2-medium-shaped layer (d_model 1024, MLP
//     4096) over 8 x 1024 tokens in bfloat16, and an 8192^3 GEMM, in TFLOP/s
//     (CUDA events, after warm-up), against the datasheet's dense bf16 peak.
//
// Usage: cleave-gpu-gemm-check [--require-gpu] [--runs N]
//
//===----------------------------------------------------------------------===//

#include "../src/Runtime.h"
#include "../src/cuda/Cuda.h"

#include "cleave/Runtime/Abi.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// The H100/H200 SXM datasheet's dense bf16 rate, for the percentage.
constexpr double kDatasheetBf16Tflops = 989.0;

const char *typeName(GemmType type) {
  return type == GemmType::F32 ? "f32" : type == GemmType::F16 ? "f16" : "bf16";
}

/// Host values, rounded to `type`, and their bytes for the device.
struct HostMatrix {
  std::vector<double> values;
  std::vector<char> bytes;
};

HostMatrix randomMatrix(GemmType type, int64_t count, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostMatrix m;
  m.values.resize(count);
  m.bytes.resize(count * elementBytes(type));
  for (int64_t i = 0; i < count; ++i) {
    float v = normal(rng);
    if (type == GemmType::F32) {
      std::memcpy(&m.bytes[i * 4], &v, 4);
      m.values[i] = v;
    } else if (type == GemmType::F16) {
      __half h = __float2half(v);
      std::memcpy(&m.bytes[i * 2], &h, 2);
      m.values[i] = __half2float(h);
    } else {
      __nv_bfloat16 h = __float2bfloat16(v);
      std::memcpy(&m.bytes[i * 2], &h, 2);
      m.values[i] = __bfloat162float(h);
    }
  }
  return m;
}

double valueAt(GemmType type, const std::vector<char> &bytes, int64_t i) {
  if (type == GemmType::F32) {
    float v;
    std::memcpy(&v, &bytes[i * 4], 4);
    return v;
  }
  if (type == GemmType::F16) {
    __half h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  std::memcpy(&h, &bytes[i * 2], 2);
  return __bfloat162float(h);
}

/// One GEMM against the float64 reference on up to 64 sampled rows; returns
/// whether the relative Frobenius error is within the type's tolerance.
bool checkGemm(Gemm &gemm, GemmType type, int64_t m, int64_t n, int64_t k) {
  std::mt19937 rng(m * 131 + n * 17 + k);
  HostMatrix a = randomMatrix(type, m * k, rng),
             b = randomMatrix(type, k * n, rng);
  size_t e = elementBytes(type);
  void *da, *db, *dc;
  check(cudaMalloc(&da, m * k * e), "cudaMalloc");
  check(cudaMalloc(&db, k * n * e), "cudaMalloc");
  check(cudaMalloc(&dc, m * n * e), "cudaMalloc");
  check(cudaMemcpy(da, a.bytes.data(), m * k * e, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(db, b.bytes.data(), k * n * e, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  gemm.run(type, m, n, k, da, db, dc);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<char> c(m * n * e);
  check(cudaMemcpy(c.data(), dc, m * n * e, cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);

  double errorSq = 0, refSq = 0;
  int64_t step = std::max<int64_t>(1, m / 64);
  for (int64_t i = 0; i < m; i += step)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < k; ++p)
        ref += a.values[i * k + p] * b.values[p * n + j];
      double got = valueAt(type, c, i * n + j);
      errorSq += (got - ref) * (got - ref);
      refSq += ref * ref;
    }
  double relative = std::sqrt(errorSq / std::max(refSq, 1e-30));
  // The result is rounded to its type: about 2^-8 for bf16, 2^-11 for f16;
  // float32 is accumulated in float32 (TF32 is not enabled).
  double tolerance = type == GemmType::BF16  ? 8e-3
                     : type == GemmType::F16 ? 2e-3
                                             : 1e-5;
  bool ok = relative <= tolerance;
  std::printf("gemm %-4s %5lldx%-5lld x %5lldx%-5lld: relative error %.2e "
              "(tolerance %.0e): %s\n",
              typeName(type), (long long)m, (long long)k, (long long)k,
              (long long)n, relative, tolerance, ok ? "ok" : "WRONG");
  return ok;
}

/// The ABI entry emitted code calls, with every layout it may be given:
/// 2 x 3 GEMMs (an outer loop around a strided batch) of A[64 x 32], rows
/// 40 apart, by B[32 x 48] stored transposed (columns 36 apart, as
/// attention reads K in place) and shared by the 3 GEMMs of a batch (batch
/// stride 0, as grouped-query attention shares a K/V head), plus a bias
/// over C's columns, float32.
bool checkAbi() {
  const int64_t outer = 2, batch = 3, m = 64, n = 48, k = 32, lda = 40,
                ldb = 36;
  const int64_t count = outer * batch;
  std::mt19937 rng(3);
  HostMatrix a = randomMatrix(GemmType::F32, count * m * lda, rng);
  HostMatrix b = randomMatrix(GemmType::F32, outer * n * ldb, rng);
  HostMatrix bias = randomMatrix(GemmType::F32, n, rng);
  void *da, *db, *dc, *dbias;
  check(cudaMalloc(&da, a.bytes.size()), "cudaMalloc");
  check(cudaMalloc(&db, b.bytes.size()), "cudaMalloc");
  check(cudaMalloc(&dc, count * m * n * 4), "cudaMalloc");
  check(cudaMalloc(&dbias, bias.bytes.size()), "cudaMalloc");
  check(cudaMemcpy(da, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(db, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(dbias, bias.bytes.data(), bias.bytes.size(),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  auto at = [](void *p) { return reinterpret_cast<intptr_t>(p); };
  // Element (r, c) of B in GEMM (o, i): o * n * ldb + r + c * ldb.
  cleave_rt_cuda_sgemm(outer, batch, m, n, k, at(da), 0, batch * m * lda,
                       m * lda, lda, 1, at(db), 0, n * ldb, 0, 1, ldb, at(dc),
                       0, batch * m * n, m * n, n, at(dbias), 0, 0.0f);
  check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
  std::vector<char> c(count * m * n * 4);
  check(cudaMemcpy(c.data(), dc, c.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  for (void *p : {da, db, dc, dbias})
    cudaFree(p);
  double worst = 0;
  for (int64_t q = 0; q < count; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = bias.values[j];
        for (int64_t p = 0; p < k; ++p)
          ref += a.values[q * m * lda + i * lda + p] *
                 b.values[(q / batch) * n * ldb + p + j * ldb];
        double got = valueAt(GemmType::F32, c, q * m * n + i * n + j);
        worst = std::max(worst, std::abs(got - ref) / (1 + std::abs(ref)));
      }
  bool ok = worst <= 1e-5;
  std::printf(
      "cleave_rt_cuda_sgemm, 2 x 3 x 64x32 (rows 40 apart) x 32x48 (stored "
      "transposed, batch stride 0) + bias: worst relative error %.2e: %s\n",
      worst, ok ? "ok" : "WRONG");
  return ok;
}

/// The rounded entry attention's head merge calls under --precision bf16:
/// 3 GEMMs of bf16 A[16 x 32] by B[32 x 64] writing bf16 C into one
/// merged buffer (batch stride 64, rows 192 apart), against A * B computed
/// in float64: within one bf16 rounding.
bool checkRounded() {
  const int64_t batch = 3, m = 16, n = 64, k = 32, ldc = batch * n;
  std::mt19937 rng(5);
  HostMatrix a = randomMatrix(GemmType::BF16, batch * m * k, rng);
  HostMatrix b = randomMatrix(GemmType::BF16, batch * k * n, rng);
  void *da, *db, *dc;
  check(cudaMalloc(&da, a.bytes.size()), "cudaMalloc");
  check(cudaMalloc(&db, b.bytes.size()), "cudaMalloc");
  check(cudaMalloc(&dc, m * ldc * 2), "cudaMalloc");
  check(cudaMemcpy(da, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(db, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  auto at = [](void *p) { return reinterpret_cast<intptr_t>(p); };
  cleave_rt_cuda_gemm_bf16_rounded(1, batch, m, n, k, at(da), 0, 0, m * k, k, 1,
                                   at(db), 0, 0, k * n, n, 1, at(dc), 0, 0, n,
                                   ldc, 0, 0, 0.0f);
  check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
  std::vector<char> c(m * ldc * 2);
  check(cudaMemcpy(c.data(), dc, c.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  for (void *p : {da, db, dc})
    cudaFree(p);
  double worst = 0;
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t p = 0; p < k; ++p)
          ref +=
              a.values[q * m * k + i * k + p] * b.values[q * k * n + p * n + j];
        double got = valueAt(GemmType::BF16, c, i * ldc + q * n + j);
        worst = std::max(worst, std::abs(got - ref) / (1e-3 + std::abs(ref)));
      }
  bool ok = worst <= std::ldexp(1.0, -8);
  std::printf(
      "cleave_rt_cuda_gemm_bf16_rounded, 3 x 16x32 x 32x64 into a merged "
      "bf16 C (rows 192 apart): worst relative error %.2e (one bf16 "
      "rounding: %.2e): %s\n",
      worst, std::ldexp(1.0, -8), ok ? "ok" : "WRONG");
  return ok;
}

/// Mean TFLOP/s of `gemms` (m, n, k) run back to back, bf16.
double timeBf16(Gemm &gemm, cudaStream_t stream,
                const std::vector<std::array<int64_t, 3>> &gemms, int runs) {
  size_t most = 0;
  for (auto &[m, n, k] : gemms)
    most = std::max<size_t>(most, std::max({m * k, k * n, m * n}));
  void *da, *db, *dc;
  check(cudaMalloc(&da, most * 2), "cudaMalloc");
  check(cudaMalloc(&db, most * 2), "cudaMalloc");
  check(cudaMalloc(&dc, most * 2), "cudaMalloc");
  // Random bits that are finite bf16 values in [-2, 2): the exponent kept
  // small so products do not overflow and the tensor cores see real data.
  std::vector<uint16_t> host(most);
  std::mt19937 rng(7);
  for (uint16_t &h : host)
    h = static_cast<uint16_t>((rng() & 0x807f) | 0x3f00);
  check(cudaMemcpy(da, host.data(), most * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(db, host.data(), most * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  double flops = 0;
  for (auto &[m, n, k] : gemms)
    flops += 2.0 * m * n * k;
  for (int w = 0; w < 3; ++w)
    for (auto &[m, n, k] : gemms)
      gemm.run(GemmType::BF16, m, n, k, da, db, dc);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int r = 0; r < runs; ++r)
    for (auto &[m, n, k] : gemms)
      gemm.run(GemmType::BF16, m, n, k, da, db, dc);
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return flops * runs / (ms * 1e-3) / 1e12;
}

int run(int argc, char **argv) {
  bool requireGpu = false;
  int runs = 20;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--require-gpu")
      requireGpu = true;
    else if (arg == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr,
                   "usage: cleave-gpu-gemm-check [--require-gpu] [--runs N]\n");
      return 2;
    }
  }
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): GPU checks skipped\n",
                status != cudaSuccess ? cudaGetErrorName(status)
                                      : "none found");
    return requireGpu ? 1 : 0;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device 0: %s, compute capability %d.%d, %d multiprocessors\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  bool ok = true;
  Gemm gemm(stream);
  for (GemmType type : {GemmType::F32, GemmType::F16, GemmType::BF16}) {
    ok &= checkGemm(gemm, type, 100, 70, 50);
    ok &= checkGemm(gemm, type, 257, 1024, 513);
    ok &= checkGemm(gemm, type, 1024, 3072, 1024);
  }
  ok &= checkAbi();
  ok &= checkRounded();

  const int64_t tokens = 8 * 1024, d = 1024, ffn = 4096;
  double layer = timeBf16(
      gemm, stream,
      {{tokens, 3 * d, d}, {tokens, d, d}, {tokens, ffn, d}, {tokens, d, ffn}},
      runs);
  double square = timeBf16(gemm, stream, {{8192, 8192, 8192}}, runs);
  std::printf("bf16 GPT-2-medium layer GEMMs (8x1024 tokens): %.1f TFLOP/s, "
              "%.0f%% of the %.0f TFLOP/s datasheet peak\n",
              layer, 100 * layer / kDatasheetBf16Tflops, kDatasheetBf16Tflops);
  std::printf(
      "bf16 8192x8192x8192: %.1f TFLOP/s, %.0f%% of the datasheet peak\n",
      square, 100 * square / kDatasheetBf16Tflops);

  // Last, since a fault may leave the context unusable: a GEMM on host
  // memory must fail, and say where.
  std::vector<uint16_t> host(64 * 64);
  try {
    gemm.run(GemmType::BF16, 64, 64, 64, host.data(), host.data(), host.data());
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::printf("error on host memory: not reported: WRONG\n");
    ok = false;
  } catch (const RuntimeError &e) {
    std::string message = e.what();
    bool named = message.find("rank 0, device 0") != std::string::npos;
    std::printf("error on host memory: %s: %s\n", message.c_str(),
                named ? "ok" : "WRONG (rank and device not named)");
    ok &= named;
  }
  std::printf("%s\n",
              ok ? "all GPU GEMM checks passed" : "GPU GEMM checks FAILED");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cleave-gpu-gemm-check: error: %s\n", e.what());
    return 1;
  }
}
