//===- NBitsGemm.cpp - GEMMs by weights of packed 2/4/8-bit codes ---------===//
//
// Implements cleave_rt_sgemm_nbits (Abi.h): a float32 GEMM whose B is a
// MatMulNBits weight (NBitsWeight) read where it lies in the weights, each
// column dequantized, (float(code) - zero) * scale as import's loops would,
// only when the GEMM reaches it:
//   - a few rows of A (a decoding step's, up to kGemvRows): the weight is
//     read once, in its packed bytes (an eighth of float32's at 4 bits).
//     4-bit blocks of 32 or more (column4): each 32 codes widened once,
//     centred, and multiplied by every row there. At accuracy_level 4,
//     which allows A to be quantized to int8 in blocks, and on VNNI
//     (column4Int8): A quantized as ONNX Runtime does, the codes (unsigned
//     bytes) times A's int8 values summed by vpdpbusd, 128 steps a pass.
//     Other widths: each column dequantized into a buffer that stays in L1,
//     then dotted with every row;
//   - more rows: groups of 4 panels dequantized into the packed float32
//     kernel's layout and multiplied by it while in L2 (PackedGemm.h); or,
//     on a CPU without it, B's transpose for OpenBLAS.
//
//===----------------------------------------------------------------------===//

#include "NBitsGemm.h"

#include "GemmCall.h"
#include "IntegerGemm.h"
#include "PackedGemm.h"
#include "Profile.h"
#include "comm/Comm.h"

#include <cblas.h>
// GCC 12's AVX-512 conversions start from _mm512_undefined vectors, which
// its flow analysis then reports as read uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

using namespace cleave::rt;

namespace {

/// Most rows of A taken as dot products with each dequantized column.
constexpr int64_t kGemvRows = 8;
/// Below this many weight elements a GEMM runs on one thread.
constexpr double kParallelElements = 1 << 16;

bool hasAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw");
  }();
  return has;
}

/// Steps [from, to) of block `b` of column `col` into out[from..to), any
/// width of code.
void dequantizeScalar(const NBitsWeight &w, int64_t col, int64_t b,
                      int64_t from, int64_t to, float *out) {
  const int64_t blob = w.blockSize * w.bits / 8;
  const uint8_t *bytes = w.codes + (col * w.blocks + b) * blob;
  const float zero = w.zeroAt(col * w.blocks + b);
  const float scale = w.scales[col * w.blocks + b];
  const int64_t perByte = 8 / w.bits, mask = (1 << w.bits) - 1;
  for (int64_t t = from; t < to; ++t) {
    int64_t code = (bytes[t / perByte] >> ((t % perByte) * w.bits)) & mask;
    out[t] = (float(code) - zero) * scale;
  }
}

// The helpers below pass AVX-512 vectors between functions of that target,
// which GCC warns would change the default target's ABI; they are inlined.
#pragma GCC diagnostic ignored "-Wpsabi"

/// 16 codes, one a byte, dequantized into out[0..16).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void
dequantize16(__m128i codes, __m512 zero, __m512 scale, float *out) {
  __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes));
  _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_sub_ps(v, zero), scale));
}

/// 16 bytes of 4-bit codes (32 codes, low nibble first) dequantized into
/// out[0..32).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void
unpack32(const uint8_t *bytes, __m512 zero, __m512 scale, float *out) {
  const __m128i packed =
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_and_si128(packed, nibble);
  const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
  // Byte i's low code is step 2i, its high one step 2i + 1.
  const __m128i first = _mm_unpacklo_epi8(low, high);
  const __m128i second = _mm_unpackhi_epi8(low, high);
  dequantize16(first, zero, scale, out);
  dequantize16(second, zero, scale, out + 16);
}

/// Column `col` of B, its first k steps, into out[0..k).
__attribute__((target("avx512f,avx512bw"))) void
dequantizeColumnAvx512(const NBitsWeight &w, int64_t col, int64_t k,
                       float *out) {
  const int64_t blob = w.blockSize / 2;
  for (int64_t b = 0; b < w.blocks && b * w.blockSize < k; ++b) {
    const int64_t start = b * w.blockSize;
    const int64_t steps = std::min(w.blockSize, k - start);
    if (steps < w.blockSize) {
      dequantizeScalar(w, col, b, 0, steps, out + start);
      continue;
    }
    const uint8_t *bytes = w.codes + (col * w.blocks + b) * blob;
    const __m512 zero = _mm512_set1_ps(w.zeroAt(col * w.blocks + b));
    const __m512 scale = _mm512_set1_ps(w.scales[col * w.blocks + b]);
    int64_t t = 0;
    for (; t + 32 <= steps; t += 32)
      unpack32(bytes + t / 2, zero, scale, out + start + t);
    if (t < steps)
      dequantizeScalar(w, col, b, t, steps, out + start);
  }
}

void dequantizeColumn(const NBitsWeight &w, int64_t col, int64_t k,
                      float *out) {
  if (w.bits == 4 && w.blockSize % 16 == 0 && hasAvx512()) {
    dequantizeColumnAvx512(w, col, k, out);
    return;
  }
  for (int64_t b = 0; b < w.blocks && b * w.blockSize < k; ++b)
    dequantizeScalar(w, col, b, 0, std::min(w.blockSize, k - b * w.blockSize),
                     out + b * w.blockSize);
}

/// sum of x[i] * y[i], i < k.
__attribute__((target("avx512f"))) float dotAvx512(const float *x,
                                                   const float *y, int64_t k) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= k; i += 64)
    for (int j = 0; j < 4; ++j)
      acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * j),
                               _mm512_loadu_ps(y + i + 16 * j), acc[j]);
  for (; i + 16 <= k; i += 16)
    acc[0] =
        _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc[0]);
  if (i < k) {
    const __mmask16 mask = __mmask16((1u << (k - i)) - 1);
    acc[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, x + i),
                             _mm512_maskz_loadu_ps(mask, y + i), acc[1]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                            _mm512_add_ps(acc[2], acc[3])));
}

float dot(const float *x, const float *y, int64_t k) {
  if (hasAvx512())
    return dotAvx512(x, y, k);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i)
    sum += x[i] * y[i];
  return sum;
}

/// C's element (r, j) from the GEMM's sum: plus the bias, plus beta * C.
inline float finish(float sum, const float *c, int64_t j, float beta,
                    const float *bias) {
  return sum + (bias ? bias[j] : 0.0f) + (beta != 0.0f ? beta * *c : 0.0f);
}

/// Rows [0, Rows) of A times column `col` of 4-bit B in blocks of a
/// multiple of 32, into sums[r]: each block's codes are widened and
/// centred (code - zero) once, 32 at a time, multiplied by every row's
/// steps there, and the block's sum scaled by its scale. The rows come
/// with each 32 steps reordered evens first, then odds (pairedSteps): a
/// byte's low code is an even step, its high code the next, so the 16
/// bytes widen once, and the low and high codes need no interleaving.
template <int Rows>
__attribute__((target("avx512f,avx512bw"))) void
column4(const NBitsWeight &w, int64_t col, int64_t k, const float *rows,
        float *sums) {
  // Two sums a row, blocks alternating between them, so that one block's
  // scaled sum need not wait for the last's.
  __m512 acc[Rows][2];
  for (int r = 0; r < Rows; ++r)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t blob = w.blockSize / 2;
  const __m512i nibble = _mm512_set1_epi32(0x0f);
  for (int64_t b = 0; b < w.blocks; ++b) {
    const uint8_t *bytes = w.codes + (col * w.blocks + b) * blob;
    const __m512 zero = _mm512_set1_ps(w.zeroAt(col * w.blocks + b));
    const __m512 scale = _mm512_set1_ps(w.scales[col * w.blocks + b]);
    __m512 block[Rows][2];
    for (int r = 0; r < Rows; ++r)
      block[r][0] = block[r][1] = _mm512_setzero_ps();
    for (int64_t t = 0; t < w.blockSize; t += 32) {
      const __m512i packed = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes + t / 2)));
      // Steps t, t+2, ..., t+30 and t+1, ..., t+31, minus the zero point.
      const __m512 first = _mm512_sub_ps(
          _mm512_cvtepi32_ps(_mm512_and_si512(packed, nibble)), zero);
      const __m512 second =
          _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(packed, 4)), zero);
      const int64_t step = b * w.blockSize + t;
      for (int r = 0; r < Rows; ++r) {
        const float *a = rows + r * k + step;
        block[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(a), first, block[r][0]);
        block[r][1] =
            _mm512_fmadd_ps(_mm512_loadu_ps(a + 16), second, block[r][1]);
      }
    }
    for (int r = 0; r < Rows; ++r)
      acc[r][b & 1] = _mm512_fmadd_ps(_mm512_add_ps(block[r][0], block[r][1]),
                                      scale, acc[r][b & 1]);
  }
  for (int r = 0; r < Rows; ++r)
    sums[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

/// Whether column4 takes this weight and K: 4-bit codes in blocks of a
/// multiple of 32, K their whole length, on AVX-512.
bool takesColumn4(const NBitsWeight &w, int64_t k) {
  return w.bits == 4 && w.blockSize % 32 == 0 && k == w.blocks * w.blockSize &&
         hasAvx512();
}

/// Steps of A a group holds in QuantizedRows: its even steps, then its odd
/// ones, matching the low and the high codes of 64 bytes of B.
constexpr int64_t kGroup = 128;

/// A's rows quantized for column4Int8 (accuracy_level 4): each block of
/// blockSize steps of a row to int8 with the scale max|a| / 127 (rounded
/// half to even), each kGroup steps (the last may be 64) reordered evens
/// first; the scale of each (row, block), each block's scale times the sum
/// of its int8 values (for the zero points), and for each group the A scale
/// of each int32 lane of the kernel's sums (a lane sums 8 steps, 4 lanes a
/// 32-step half).
struct QuantizedRows {
  std::vector<int8_t> values;
  std::vector<float> scales, scaledSums, laneScales;
  int64_t groups = 0;
};

/// a[0..count) (count a multiple of 16) times `inverse`, rounded half to
/// even (the default rounding of the conversion), into out[0..count).
__attribute__((target("avx512f"))) void
roundScaled(const float *a, int64_t count, float inverse, int8_t *out) {
  const __m512 factor = _mm512_set1_ps(inverse);
  for (int64_t t = 0; t < count; t += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + t),
                     _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(
                         _mm512_mul_ps(_mm512_loadu_ps(a + t), factor))));
}

/// a[0..length) quantized to int8 as accuracy_level 4 does, into out: the
/// scale max|a| / 127, each value times 127 / max|a| rounded half to even
/// (none past 127, so none saturates). Returns the scale.
float quantizeBlock(const float *a, int64_t length, int8_t *out) {
  float amax = 0.0f;
  for (int64_t t = 0; t < length; ++t)
    amax = std::max(amax, std::fabs(a[t]));
  const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
  if (length % 16 == 0 && hasAvx512())
    roundScaled(a, length, inverse, out);
  else
    for (int64_t t = 0; t < length; ++t)
      out[t] = int8_t(std::nearbyint(a[t] * inverse));
  return amax / 127.0f;
}

/// Where step `step` of a row lies in QuantizedRows' order.
int64_t groupedAt(int64_t step, int64_t k) {
  const int64_t start = step / kGroup * kGroup;
  const int64_t size = std::min(kGroup, k - start);
  return start + (step - start) % 2 * (size / 2) + (step - start) / 2;
}

QuantizedRows quantizeRows(const std::vector<float> &rows, int64_t m, int64_t k,
                           int64_t blockSize) {
  const int64_t blocks = k / blockSize;
  QuantizedRows q;
  q.groups = (k + kGroup - 1) / kGroup;
  q.values.resize(m * k);
  q.scales.resize(m * blocks);
  q.scaledSums.resize(m * blocks);
  q.laneScales.resize(m * q.groups * 16);
  std::vector<int8_t> rounded(blockSize);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = quantizeBlock(rows.data() + r * k + b * blockSize,
                                        blockSize, rounded.data());
      int32_t sum = 0;
      for (int64_t t = 0; t < blockSize; ++t) {
        q.values[r * k + groupedAt(b * blockSize + t, k)] = rounded[t];
        sum += rounded[t];
      }
      q.scales[r * blocks + b] = scale;
      q.scaledSums[r * blocks + b] = scale * float(sum);
    }
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g = 0; g < q.groups; ++g)
      for (int64_t lane = 0; lane < 16; ++lane) {
        const int64_t step = std::min(g * kGroup + lane / 4 * 32, k - 1);
        q.laneScales[(r * q.groups + g) * 16 + lane] =
            q.scales[r * blocks + step / blockSize];
      }
  return q;
}

/// column4 on VNNI with A quantized (quantizeRows): for each 128 steps, the
/// 64 bytes of 4-bit codes split into their low codes (the even steps, as
/// unsigned bytes) and high ones (the odd steps), each multiplied by A's
/// int8 values of those steps and summed by vpdpbusd into 16 lanes of 8
/// steps, each lane scaled by its A and B scales (the last 64 steps, when
/// K is an odd number of 64s, the same at half width); the zero points'
/// part, each block's zero * B scale * (A scale * sum of A's values),
/// subtracted at the end.
template <int Rows>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"))) void
column4Int8(const NBitsWeight &w, int64_t col, int64_t k,
            const QuantizedRows &q, float *sums) {
  // Two sums a row, groups alternating between them, so that one group's
  // sum need not wait for the last's.
  __m512 acc[Rows][2];
  for (int r = 0; r < Rows; ++r)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t blocks = w.blocks, full = k / kGroup;
  const uint8_t *bytes = w.codes + col * blocks * (w.blockSize / 2);
  const float *scales = w.scales + col * blocks;
  // Lane l of a group's sums lies in block (l / 4) * 32 / blockSize of the
  // group's first block.
  const __m512i blockOfLane = _mm512_srli_epi32(
      _mm512_slli_epi32(
          _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                              11, 12, 13, 14, 15),
                            2),
          5),
      int(__builtin_ctzll(w.blockSize)));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  // A group's first block, advanced without dividing: blockSize is a
  // power of two, 32 or more.
  const int64_t blockShift = __builtin_ctzll(w.blockSize);
  // Four groups a pass: their loads and products interleave (0.106 -> 0.091
  // ms for a 2816 x 1024 weight in cache).
#pragma GCC unroll 4
  for (int64_t g = 0; g < full; ++g) {
    const __m512i packed = _mm512_loadu_si512(bytes + g * 64);
    const __m512i low = _mm512_and_si512(packed, nibble);
    const __m512i high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
    const int64_t first = (g * kGroup) >> blockShift;
    // The blocks the group's lanes read, at most 4 (blocks of 32).
    const __mmask16 present = blocks - first >= 4
                                  ? __mmask16(0xf)
                                  : __mmask16((1u << (blocks - first)) - 1);
    const __m512 weightScale = _mm512_permutexvar_ps(
        blockOfLane, _mm512_maskz_loadu_ps(present, scales + first));
    for (int r = 0; r < Rows; ++r) {
      const int8_t *a = q.values.data() + r * k + g * kGroup;
      const __m512i dots =
          _mm512_add_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), low,
                                               _mm512_loadu_si512(a)),
                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), high,
                                               _mm512_loadu_si512(a + 64)));
      const __m512 scale =
          _mm512_mul_ps(weightScale, _mm512_loadu_ps(q.laneScales.data() +
                                                     (r * q.groups + g) * 16));
      acc[r][g & 1] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), scale, acc[r][g & 1]);
    }
  }
  if (full * kGroup < k) {
    // The last 64 steps: 32 bytes, 8 lanes.
    const __m256i packed = _mm256_loadu_si256(
        reinterpret_cast<const __m256i *>(bytes + full * 64));
    const __m256i nibble256 = _mm256_set1_epi8(0x0f);
    const __m256i low = _mm256_and_si256(packed, nibble256);
    const __m256i high =
        _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble256);
    const int64_t first = (full * kGroup) >> blockShift;
    const __m256 weightScale = _mm256_permutexvar_ps(
        _mm512_castsi512_si256(blockOfLane),
        _mm256_maskz_loadu_ps(
            __mmask8((1u << std::min<int64_t>(2, blocks - first)) - 1),
            scales + first));
    for (int r = 0; r < Rows; ++r) {
      const int8_t *a = q.values.data() + r * k + full * kGroup;
      __m256i dots = _mm256_dpbusd_epi32(
          _mm256_setzero_si256(), low,
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a)));
      dots = _mm256_dpbusd_epi32(
          dots, high,
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a + 32)));
      const __m256 scale = _mm256_mul_ps(
          weightScale,
          _mm256_loadu_ps(q.laneScales.data() + (r * q.groups + full) * 16));
      acc[r][0] =
          _mm512_add_ps(acc[r][0], _mm512_zextps256_ps512(_mm256_mul_ps(
                                       _mm256_cvtepi32_ps(dots), scale)));
    }
  }
  // The zero points' part: sum over blocks of zero * B scale * A's scaled
  // sum, 16 blocks at a time.
  const float *zeros = w.zeros ? w.zeros + col * blocks : nullptr;
  for (int r = 0; r < Rows; ++r) {
    const float *aSums = q.scaledSums.data() + r * blocks;
    __m512 part = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b += 16) {
      const __mmask16 mask = blocks - b >= 16
                                 ? __mmask16(0xffff)
                                 : __mmask16((1u << (blocks - b)) - 1);
      __m512 weight = _mm512_maskz_loadu_ps(mask, scales + b);
      weight =
          _mm512_mul_ps(weight, zeros ? _mm512_maskz_loadu_ps(mask, zeros + b)
                                      : _mm512_set1_ps(w.zero));
      part =
          _mm512_fmadd_ps(weight, _mm512_maskz_loadu_ps(mask, aSums + b), part);
    }
    sums[r] = _mm512_reduce_add_ps(
        _mm512_sub_ps(_mm512_add_ps(acc[r][0], acc[r][1]), part));
  }
}

/// Whether column4Int8 takes this GEMM: column4's weights, A allowed to be
/// quantized, K a multiple of 64, and the integer kernels on (IntegerGemm.h:
/// AVX-512 VNNI, not turned off by CLEAVE_VNNI=0) with AVX-512 VL and DQ.
bool takesColumn4Int8(const NBitsWeight &w, int64_t k) {
  static const bool vnni = [] {
    __builtin_cpu_init();
    return integerGemmKernel() && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
  }();
  return w.int8A && vnni && k % 64 == 0;
}

/// `rows` (m rows of k) with each 32 steps reordered as column4 reads them:
/// the even steps, then the odd ones.
std::vector<float> pairedSteps(const std::vector<float> &rows, int64_t m,
                               int64_t k) {
  std::vector<float> paired(rows.size());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t chunk = 0; chunk < k; chunk += 32)
      for (int64_t i = 0; i < 16; ++i) {
        paired[r * k + chunk + i] = rows[r * k + chunk + 2 * i];
        paired[r * k + chunk + 16 + i] = rows[r * k + chunk + 2 * i + 1];
      }
  return paired;
}

/// A few rows: each column dequantized once, dotted with every row.
void gemv(int64_t m, int64_t n, int64_t k, const float *a,
          const MatrixLayout &layoutA, const NBitsWeight &w, float *c,
          int64_t ldc, float beta, const float *bias) {
  // A's rows contiguous, read from L1 by every column.
  std::vector<float> rows(m * k);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i)
      rows[r * k + i] = a[layoutA.at(r, i)];
  const bool parallel = double(n) * k >= kParallelElements;
  if (takesColumn4(w, k) && takesColumn4Int8(w, k)) {
    using Column = void (*)(const NBitsWeight &, int64_t, int64_t,
                            const QuantizedRows &, float *);
    static constexpr Column columns[kGemvRows] = {
        column4Int8<1>, column4Int8<2>, column4Int8<3>, column4Int8<4>,
        column4Int8<5>, column4Int8<6>, column4Int8<7>, column4Int8<8>};
    const Column column = columns[m - 1];
    const QuantizedRows quantized = quantizeRows(rows, m, k, w.blockSize);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < n; ++j) {
      float sums[kGemvRows];
      column(w, j, k, quantized, sums);
      for (int64_t r = 0; r < m; ++r) {
        float *cj = c + r * ldc + j;
        *cj = finish(sums[r], cj, j, beta, bias);
      }
    }
    return;
  }
  if (takesColumn4(w, k)) {
    using Column =
        void (*)(const NBitsWeight &, int64_t, int64_t, const float *, float *);
    static constexpr Column columns[kGemvRows] = {
        column4<1>, column4<2>, column4<3>, column4<4>,
        column4<5>, column4<6>, column4<7>, column4<8>};
    const Column column = columns[m - 1];
    const std::vector<float> paired = pairedSteps(rows, m, k);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < n; ++j) {
      float sums[kGemvRows];
      column(w, j, k, paired.data(), sums);
      for (int64_t r = 0; r < m; ++r) {
        float *cj = c + r * ldc + j;
        *cj = finish(sums[r], cj, j, beta, bias);
      }
    }
    return;
  }
#pragma omp parallel if (parallel)
  {
    std::vector<float> column(k);
#pragma omp for schedule(static)
    for (int64_t j = 0; j < n; ++j) {
      dequantizeColumn(w, j, k, column.data());
      for (int64_t r = 0; r < m; ++r) {
        float *cj = c + r * ldc + j;
        *cj = finish(dot(rows.data() + r * k, column.data(), k), cj, j, beta,
                     bias);
      }
    }
  }
}

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};

/// `columns` (32 columns of k floats, one after another) into one panel of
/// the AVX-512 kernel: line s holds step s of each column, gathered 16 at
/// a time (the 32 columns' lines stay in L1 from one step to the next).
__attribute__((target("avx512f"))) void gatherPanel32(const float *columns,
                                                      int64_t k, float *panel) {
  const __m512i first = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(int32_t(k)));
  const __m512i second =
      _mm512_add_epi32(first, _mm512_set1_epi32(int32_t(16 * k)));
  for (int64_t step = 0; step < k; ++step) {
    _mm512_store_ps(panel + step * 32,
                    _mm512_i32gather_ps(first, columns + step, 4));
    _mm512_store_ps(panel + step * 32 + 16,
                    _mm512_i32gather_ps(second, columns + step, 4));
  }
}

/// Columns of B a thread dequantizes into panels and multiplies at once:
/// 4 panels of 32 at a K of 768 are 384 KiB, which stay in L2 for the GEMM.
constexpr int64_t kGroupPanels = 4;

/// The GEMM on the packed kernel, `width` columns a panel: threads take
/// groups of kGroupPanels panels, each dequantized into panels of the
/// thread's own and multiplied by all of A at once. False when memory for
/// the panels cannot be had.
bool panelGemm(int64_t m, int64_t n, int64_t k, const float *a,
               const MatrixLayout &layoutA, const NBitsWeight &w, float *c,
               int64_t ldc, float beta, const float *bias, int64_t width) {
  const int64_t group = kGroupPanels * width;
  const int64_t groups = (n + group - 1) / group;
  const size_t floats = group * k;
  bool failed = false;
#pragma omp parallel if (double(m) * n * k >= kParallelElements * 64)
  {
    // A thread's buffers stay between calls.
    thread_local std::vector<float> columns;
    thread_local std::unique_ptr<float, FreeDeleter> panels;
    thread_local size_t capacity = 0;
    columns.resize(floats);
    if (capacity < floats) {
      panels.reset(static_cast<float *>(
          std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64)));
      capacity = panels ? floats : 0;
    }
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t col0 = g * group, cols = std::min(group, n - col0);
      if (!panels) {
#pragma omp atomic write
        failed = true;
        continue;
      }
      for (int64_t j = 0; j < cols; ++j)
        dequantizeColumn(w, col0 + j, k, columns.data() + j * k);
      if (width == 32 && hasAvx512() && 32 * k < (int64_t(1) << 31)) {
        // Columns past B's last read as zeros.
        std::fill(columns.begin() + cols * k, columns.end(), 0.0f);
        for (int64_t p = 0; p * width < cols; ++p)
          gatherPanel32(columns.data() + p * width * k, k,
                        panels.get() + p * width * k);
      } else {
        packPanels(columns.data(), MatrixLayout{/*transposed=*/true, k}, k,
                   cols, panels.get());
      }
      packedSgemmOnPanels(m, cols, k, a, layoutA, panels.get(), c + col0, ldc,
                          beta, bias ? bias + col0 : nullptr);
    }
  }
  return !failed;
}

/// Without the packed kernel: B's transpose (n x k) for OpenBLAS.
void blasGemm(int64_t m, int64_t n, int64_t k, const float *a,
              const MatrixLayout &layoutA, const NBitsWeight &w, float *c,
              int64_t ldc, float beta, const float *bias) {
  std::vector<float> transposed(n * k);
#pragma omp parallel for schedule(static) if (double(n) * k >=                 \
                                                  kParallelElements)
  for (int64_t j = 0; j < n; ++j)
    dequantizeColumn(w, j, k, transposed.data() + j * k);
  if (bias) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j)
        c[r * ldc + j] = finish(0.0f, c + r * ldc + j, j, beta, bias);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, layoutA.transposed ? CblasTrans : CblasNoTrans,
              CblasTrans, m, n, k, 1.0f, a, layoutA.ld, transposed.data(), k,
              beta, c, ldc);
}

/// The GEMM by the row count's path: the GEMV, the packed kernel's panels
/// or OpenBLAS.
void byRows(int64_t m, int64_t n, int64_t k, const float *a,
            const MatrixLayout &layoutA, const NBitsWeight &weight, float *c,
            int64_t ldc, float beta, const float *bias) {
  if (m <= kGemvRows) {
    gemv(m, n, k, a, layoutA, weight, c, ldc, beta, bias);
    return;
  }
  if (int64_t width = packedPanelWidth();
      width &&
      panelGemm(m, n, k, a, layoutA, weight, c, ldc, beta, bias, width))
    return;
  blasGemm(m, n, k, a, layoutA, weight, c, ldc, beta, bias);
}

/// A (m x k) quantized as quantizeRows does, then dequantized (int8 value
/// times its block's scale), row-major.
std::vector<float> requantized(const float *a, const MatrixLayout &layoutA,
                               int64_t m, int64_t k, int64_t blockSize) {
  std::vector<float> out(m * k), row(k);
  std::vector<int8_t> rounded(blockSize);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < k; ++i)
      row[i] = a[layoutA.at(r, i)];
    for (int64_t b0 = 0; b0 < k; b0 += blockSize) {
      const int64_t length = std::min(blockSize, k - b0);
      const float scale =
          quantizeBlock(row.data() + b0, length, rounded.data());
      for (int64_t t = 0; t < length; ++t)
        out[r * k + b0 + t] = float(rounded[t]) * scale;
    }
  }
  return out;
}

} // namespace

void cleave::rt::nbitsGemm(int64_t m, int64_t n, int64_t k, const float *a,
                           const MatrixLayout &layoutA,
                           const NBitsWeight &weight, float *c, int64_t ldc,
                           float beta, const float *bias) {
  // accuracy_level 4 allows A to be quantized to int8; Cleave does so for
  // 4-bit codes, as ONNX Runtime does, whatever the row count (and so the
  // rank count): the int8 GEMV where it takes the GEMM, else A's values
  // quantized and dequantized before the float paths, which then sum the
  // same products in another order.
  if (weight.int8A && weight.bits == 4 &&
      !(m <= kGemvRows && takesColumn4(weight, k) &&
        takesColumn4Int8(weight, k))) {
    const std::vector<float> values =
        requantized(a, layoutA, m, k, weight.blockSize);
    NBitsWeight floatA = weight;
    floatA.int8A = false;
    byRows(m, n, k, values.data(), MatrixLayout{false, k}, floatA, c, ldc, beta,
           bias);
    return;
  }
  byRows(m, n, k, a, layoutA, weight, c, ldc, beta, bias);
}

extern "C" {
void cleave_rt_sgemm_nbits(CLEAVE_ABI_NBITS_GEMM_PARAMS) {
  profile::Span span([&] {
    const char *type = bits == 2   ? "f32 x 2-bit"
                       : bits == 4 ? "f32 x 4-bit"
                                   : "f32 x 8-bit";
    return profile::describeGemm(type, /*rounded=*/false, 1, m, n, k);
  });
  const float *pa = reinterpret_cast<const float *>(a) + offsetA;
  std::optional<MatrixLayout> layoutA =
      matrixLayout(m, k, rowStrideA, colStrideA);
  if (!layoutA || !(bits == 2 || bits == 4 || bits == 8) || blockSize <= 0 ||
      blockSize * bits % 8 != 0 || blocks * blockSize < k) {
    std::fprintf(stderr,
                 "cleave-run: error: rank %d: a GEMM by %lld-bit codes in "
                 "blocks of %lld cannot be read (A strides %lld, %lld)\n",
                 comm::rank(), (long long)bits, (long long)blockSize,
                 (long long)rowStrideA, (long long)colStrideA);
    comm::abortJob(70);
  }
  NBitsWeight weight{
      reinterpret_cast<const uint8_t *>(codes) + offsetCodes,
      zeros ? reinterpret_cast<const float *>(zeros) + offsetZeros : nullptr,
      reinterpret_cast<const float *>(scales) + offsetScales,
      blocks,
      blockSize,
      bits,
      zero,
      accuracyLevel >= 4};
  nbitsGemm(m, n, k, pa, *layoutA, weight,
            reinterpret_cast<float *>(c) + offsetC, ldc, beta,
            bias ? reinterpret_cast<const float *>(bias) + offsetBias
                 : nullptr);
}
}
