//===- IntegerGemm.cpp - Integer GEMMs on AMX and AVX-512 VNNI -----------===//
//
// Implements cleave_rt_igemm_<i8|i16> (Abi.h): C (int32) = A * B (+ C), A
// int16 and B int8 or int16, summed exactly. Import writes MatMulInteger's
// and QLinearMatMul's GEMMs so: A is the quantized activation minus its zero
// point (a difference of two 8-bit values, so int16), B the weight as stored
// in int8 where its zero point is 0 (a symmetric weight), else minus it.
//
// AMX's tdpbusd and VNNI's vpdpbusd multiply unsigned bytes of A by signed
// bytes of B, 4 a 32-bit sum. A row of A whose values span at most 256
// (every row of 8-bit data minus one zero point does) is read as u = a -
// min(row), unsigned bytes, and the row's products corrected after the sum:
// A * B = U * B + min(row) * (column sums of B). B is copied into panels of
// 16 columns, 4 steps of the sum to a 64-byte line (each column's 4 bytes
// in its lane; 16 lines are one AMX tile of B as they lie): a weight once,
// on its first GEMM, with its column sums (its own pages then given back:
// the copy is as large); any other B on each call. On AMX (AMX-INT8, the
// tiles granted) a block of C is 32 rows by 2 panels, 2 x 2 tiles, each
// step of 64 loading two tiles of A and two of B. On VNNI a tile is 12 rows
// by 2 panels, 24 zmm sums, each step broadcasting 4 bytes of a row against
// a line of each panel. Threads take blocks (panel pairs first). Where the
// CPU has neither, a row spans more than 256, or B is int16, the GEMM is
// summed in plain int32 loops.
//
//===----------------------------------------------------------------------===//

#include "IntegerGemm.h"

#include "AmxGemm.h"
#include "GemmCall.h"
#include "PackedGemm.h"
#include "Profile.h"
#include "comm/Comm.h"

#include <immintrin.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

using namespace cleave::rt;

namespace {

/// Columns of a panel: one zmm of int32 sums.
constexpr int64_t kPanel = 16;
/// Rows of a tile: 12 x 2 zmm sums leave registers for B's two lines and
/// the broadcast.
constexpr int64_t kTileRows = 12;
/// Steps of the sum a line of a panel holds (vpdpbusd's 4 bytes a lane).
constexpr int64_t kStep = 4;
/// Below this many multiply-adds a GEMM runs on one thread.
constexpr double kParallelWork = 1 << 18;
/// Steps of the sum an AMX tile of A (16 rows of 64 bytes) holds.
constexpr int64_t kAmxSteps = 64;
/// Rows and columns of C an AMX block computes: 2 x 2 tiles of 16 x 16.
constexpr int64_t kAmxBlock = 32;

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

bool vnniUsable() {
  const char *env = std::getenv("CLEAVE_VNNI");
  if (env && std::strcmp(env, "0") == 0)
    return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

/// B (k x n, int8) in panels, and its column sums.
struct PackedB {
  /// Panel p's line s (steps 4s..4s+3 of the sum) at (p * lines + s) * 64:
  /// column j's 4 bytes at 4j. Zeros past B's last row and column.
  std::vector<int8_t> panels;
  std::vector<int32_t> columnSums;
  int64_t lines = 0;
};

void packB(const int8_t *b, const MatrixLayout &layout, int64_t k, int64_t n,
           bool parallel, PackedB &out) {
  const int64_t panels = roundUp(n, kPanel) / kPanel;
  // Whole tiles of 16 lines (64 steps) for AMX; zeros past k.
  out.lines = roundUp(k, kAmxSteps) / kStep;
  out.panels.assign(panels * out.lines * kPanel * kStep, 0);
  out.columnSums.assign(panels * kPanel, 0);
#pragma omp parallel for schedule(static) if (parallel && k * n >= (1 << 18))
  for (int64_t p = 0; p < panels; ++p) {
    int8_t *panel = out.panels.data() + p * out.lines * kPanel * kStep;
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t column = p * kPanel + j;
      int32_t sum = 0;
      for (int64_t r = 0; r < k; ++r) {
        int8_t v = b[layout.at(r, column)];
        panel[(r / kStep) * kPanel * kStep + j * kStep + r % kStep] = v;
        sum += v;
      }
      out.columnSums[column] = sum;
    }
  }
}

/// A weight's panels, made on its first GEMM and kept; the weight's own
/// pages are then given back. Null, said once, where memory for them
/// cannot be had: the weight's GEMMs then run in the plain loops.
const PackedB *packedWeight(const int8_t *b, const MatrixLayout &layout,
                            int64_t k, int64_t n) {
  using Key = std::tuple<const int8_t *, int64_t, int64_t, int64_t, bool>;
  struct Entry {
    bool tried = false, packed = false;
    PackedB b;
  };
  static std::mutex mutex;
  static std::map<Key, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  Entry &entry = cache[Key{b, k, n, layout.ld, layout.transposed}];
  if (!std::exchange(entry.tried, true)) {
    try {
      packB(b, layout, k, n, /*parallel=*/true, entry.b);
      entry.packed = true;
      releaseWeightPages(b, b + layout.extent(k, n));
    } catch (const std::bad_alloc &) {
      entry.b = PackedB{};
      static bool said = false;
      if (!std::exchange(said, true))
        std::fprintf(stderr,
                     "cleave-run: warning: no memory to copy a %lld x %lld "
                     "int8 weight into panels; such weights' GEMMs run in "
                     "plain loops\n",
                     (long long)k, (long long)n);
    }
  }
  return entry.packed ? &entry.b : nullptr;
}

/// A (m x k, int16) as unsigned bytes, row r at r * stride (stride a
/// multiple of 64, zeros past k and past m's last row, up to a multiple of
/// 32 rows): u = a - min(row r), the minimum kept in `offsets`. False where
/// a row's values span more than 256.
bool rebaseA(const int16_t *a, const MatrixLayout &layout, int64_t m, int64_t k,
             std::vector<uint8_t> &rows, int64_t &stride,
             std::vector<int32_t> &offsets) {
  // Whole AMX tiles: rows of 64-step multiples, 32-row multiples of rows.
  stride = roundUp(k, kAmxSteps);
  rows.assign(roundUp(m, kAmxBlock) * stride, 0);
  offsets.resize(m);
  std::vector<int16_t> gathered;
  for (int64_t r = 0; r < m; ++r) {
    // The row contiguous (copied when A is stored transposed), so that the
    // loops below vectorize.
    const int16_t *line = a + r * layout.ld;
    if (layout.transposed) {
      gathered.resize(k);
      for (int64_t i = 0; i < k; ++i)
        gathered[i] = a[layout.at(r, i)];
      line = gathered.data();
    }
    int16_t low = INT16_MAX, high = INT16_MIN;
    for (int64_t i = 0; i < k; ++i) {
      low = std::min(low, line[i]);
      high = std::max(high, line[i]);
    }
    if (int32_t(high) - int32_t(low) > 255)
      return false;
    offsets[r] = low;
    uint8_t *row = rows.data() + r * stride;
    for (int64_t i = 0; i < k; ++i)
      row[i] = uint8_t(line[i] - low);
  }
  return true;
}

/// What one GEMM's tiles read and write.
struct Problem {
  int64_t m, n;
  const uint8_t *a;
  int64_t strideA;
  const int32_t *offsets;
  const PackedB *b;
  int32_t *c;
  int64_t ldc;
  bool accumulate;
};

/// Panels p and p + 1 of B, which both kernels take together: where B has
/// no panel p + 1, panel p again, whose sums are then not written.
struct PanelPair {
  const int8_t *first, *second;
  bool both;
};

PanelPair panelPair(const Problem &pb, int64_t p) {
  const int64_t bytes = pb.b->lines * kPanel * kStep;
  const int8_t *first = pb.b->panels.data() + p * bytes;
  const bool both = (p + 1) * kPanel < pb.n;
  return {first, both ? first + bytes : first, both};
}

/// Row `row` of C's columns in panel `panel`: `sums` (of u * b) plus the
/// row's offset times the column sums, written (or added) into C.
__attribute__((target("avx512f"), always_inline)) inline void
writeSums(const Problem &pb, int64_t row, int64_t panel, __m512i sums) {
  const int64_t col0 = panel * kPanel;
  const __mmask16 mask = __mmask16((1u << std::min(kPanel, pb.n - col0)) - 1);
  int32_t *c = pb.c + row * pb.ldc + col0;
  __m512i v = _mm512_add_epi32(
      sums,
      _mm512_mullo_epi32(_mm512_set1_epi32(pb.offsets[row]),
                         _mm512_loadu_si512(pb.b->columnSums.data() + col0)));
  if (pb.accumulate)
    v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask, c));
  _mm512_mask_storeu_epi32(c, mask, v);
}

/// Tile (rows from `row0`, `Rows` of them; panels `p` and, when there is
/// one, p + 1) of C: the sum of u * b over every step, then written
/// (writeSums).
template <int Rows>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
tile(const Problem &pb, int64_t row0, int64_t p) {
  const int64_t lines = pb.b->lines;
  const PanelPair pair = panelPair(pb, p);
  __m512i sums[Rows][2];
  for (int r = 0; r < Rows; ++r)
    sums[r][0] = sums[r][1] = _mm512_setzero_si512();
  const uint8_t *a = pb.a + row0 * pb.strideA;
  for (int64_t s = 0; s < lines; ++s) {
    __m512i b0 = _mm512_loadu_si512(pair.first + s * kPanel * kStep);
    __m512i b1 = _mm512_loadu_si512(pair.second + s * kPanel * kStep);
    for (int r = 0; r < Rows; ++r) {
      int32_t bytes;
      std::memcpy(&bytes, a + r * pb.strideA + s * kStep, sizeof(bytes));
      __m512i u = _mm512_set1_epi32(bytes);
      sums[r][0] = _mm512_dpbusd_epi32(sums[r][0], u, b0);
      sums[r][1] = _mm512_dpbusd_epi32(sums[r][1], u, b1);
    }
  }
  for (int half = 0; half < (pair.both ? 2 : 1); ++half)
    for (int r = 0; r < Rows; ++r)
      writeSums(pb, row0 + r, p + half, sums[r][half]);
}

/// Tile rows `rows` (at most kTileRows) from `row0` by panels p and p + 1.
void tileOf(const Problem &pb, int64_t row0, int64_t rows, int64_t p) {
  using Kernel = void (*)(const Problem &, int64_t, int64_t);
  static constexpr Kernel kernels[kTileRows] = {
      tile<1>, tile<2>, tile<3>, tile<4>,  tile<5>,  tile<6>,
      tile<7>, tile<8>, tile<9>, tile<10>, tile<11>, tile<12>};
  kernels[rows - 1](pb, row0, p);
}

/// C's rows [row0, row0 + 32) by panels p and p + 1 (32 columns) on AMX:
/// 2 x 2 tiles of int32 sums, each step of 64 loading two tiles of A's
/// rows and two of B's lines (16 lines of a panel are a tile, as they lie)
/// and multiplying them with tdpbusd; then written (writeSums).
__attribute__((target("amx-tile,amx-int8,avx512f"))) void
amxBlock(const Problem &pb, int64_t row0, int64_t p) {
  const int64_t lines = pb.b->lines;
  const PanelPair pair = panelPair(pb, p);
  const uint8_t *a0 = pb.a + row0 * pb.strideA;
  const uint8_t *a1 = a0 + 16 * pb.strideA;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t line = 0; line < lines; line += 16) {
    const int64_t step = line * kStep;
    _tile_loadd(4, a0 + step, pb.strideA);
    _tile_loadd(5, a1 + step, pb.strideA);
    _tile_loadd(6, pair.first + line * kPanel * kStep, 64);
    _tile_loadd(7, pair.second + line * kPanel * kStep, 64);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  alignas(64) int32_t sums[kAmxBlock * kAmxBlock];
  constexpr int64_t stride = kAmxBlock * sizeof(int32_t);
  _tile_stored(0, sums, stride);
  _tile_stored(1, sums + 16, stride);
  _tile_stored(2, sums + 16 * kAmxBlock, stride);
  _tile_stored(3, sums + 16 * kAmxBlock + 16, stride);
  const int64_t rows = std::min(kAmxBlock, pb.m - row0);
  for (int64_t half = 0; half < (pair.both ? 2 : 1); ++half)
    for (int64_t r = 0; r < rows; ++r)
      writeSums(pb, row0 + r, p + half,
                _mm512_load_si512(sums + r * kAmxBlock + half * 16));
}

/// Every block of the GEMM on AMX, threads taking (panel pair, row block)
/// in order, each with the tiles configured for itself.
__attribute__((target("amx-tile"))) void computeAmx(const Problem &pb,
                                                    int64_t k) {
  const int64_t pairs = roundUp(roundUp(pb.n, kPanel) / kPanel, 2) / 2;
  const int64_t rowBlocks = roundUp(pb.m, kAmxBlock) / kAmxBlock;
  const bool parallel = double(pb.m) * pb.n * k >= kParallelWork;
#pragma omp parallel if (parallel)
  {
    configureTiles();
#pragma omp for collapse(2) schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair)
      for (int64_t r = 0; r < rowBlocks; ++r)
        amxBlock(pb, r * kAmxBlock, pair * 2);
    _tile_release();
  }
}

/// Every tile of the GEMM, threads taking (panel pair, row tile) in order.
void compute(const Problem &pb, int64_t k) {
  const int64_t pairs = roundUp(roundUp(pb.n, kPanel) / kPanel, 2) / 2;
  const int64_t rowTiles = roundUp(pb.m, kTileRows) / kTileRows;
  const bool parallel = double(pb.m) * pb.n * k >= kParallelWork;
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (int64_t pair = 0; pair < pairs; ++pair)
    for (int64_t t = 0; t < rowTiles; ++t) {
      const int64_t row0 = t * kTileRows;
      tileOf(pb, row0, std::min(kTileRows, pb.m - row0), pair * 2);
    }
}

/// The plain loops: C = A * B (+ C), summed in int32 (wrapping, as the
/// kernel does: the sum is computed modulo 2^32 in unsigned arithmetic).
template <typename ElementB>
void plainGemm(int64_t m, int64_t n, int64_t k, const int16_t *a,
               const MatrixLayout &layoutA, const ElementB *b,
               const MatrixLayout &layoutB, int32_t *c, int64_t ldc,
               bool accumulate) {
  // B row-major in int32 (once per call), so each row's sum vectorizes.
  std::vector<uint32_t> wide(k * n);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j)
      wide[r * n + j] = uint32_t(int32_t(b[layoutB.at(r, j)]));
  const bool parallel = double(m) * n * k >= kParallelWork;
#pragma omp parallel if (parallel)
  {
    // Each thread's sums of one row, reused row after row.
    std::vector<uint32_t> row(n);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      std::fill(row.begin(), row.end(), 0u);
      for (int64_t i = 0; i < k; ++i) {
        const uint32_t x = uint32_t(int32_t(a[layoutA.at(r, i)]));
        const uint32_t *line = wide.data() + i * n;
        for (int64_t j = 0; j < n; ++j)
          row[j] += x * line[j];
      }
      int32_t *out = c + r * ldc;
      for (int64_t j = 0; j < n; ++j)
        out[j] = int32_t(row[j] + (accumulate ? uint32_t(out[j]) : 0u));
    }
  }
}

/// Whether integer GEMMs run on AMX's tiles: AMX-INT8 there and granted
/// (amxInt8(); CLEAVE_AMX=0 turns it off, leaving VNNI), and the integer
/// kernels not turned off (CLEAVE_VNNI=0).
bool useAmx() { return integerGemmKernel() && amxInt8(); }

/// One GEMM of int8 B: on AMX or VNNI where it can, else the plain loops.
void gemmI8(int64_t m, int64_t n, int64_t k, const int16_t *a,
            const MatrixLayout &layoutA, const int8_t *b,
            const MatrixLayout &layoutB, int32_t *c, int64_t ldc,
            bool accumulate) {
  if (integerGemmKernel()) {
    thread_local std::vector<uint8_t> rows;
    thread_local std::vector<int32_t> offsets;
    int64_t strideA = 0;
    if (rebaseA(a, layoutA, m, k, rows, strideA, offsets)) {
      const PackedB *packed = nullptr;
      PackedB local;
      if (inWeightMemory(b, b + layoutB.extent(k, n)))
        packed = packedWeight(b, layoutB, k, n);
      if (!packed) {
        packB(b, layoutB, k, n, /*parallel=*/false, local);
        packed = &local;
      }
      const Problem pb{m,      n, rows.data(), strideA,   offsets.data(),
                       packed, c, ldc,         accumulate};
      if (useAmx())
        computeAmx(pb, k);
      else
        compute(pb, k);
      return;
    }
  }
  plainGemm(m, n, k, a, layoutA, b, layoutB, c, ldc, accumulate);
}

/// Every GEMM of the call.
template <typename ElementB>
void run(const char *type, CLEAVE_ABI_GEMM_PARAMS) {
  profile::Span span([&] {
    return profile::describeGemm(type, /*rounded=*/false, outer * batch, m, n,
                                 k);
  });
  GemmCall g;
  try {
    if (bias != 0 || (beta != 0.0f && beta != 1.0f))
      throw RuntimeError("an integer GEMM takes no bias, and beta 0 or 1");
    g = decodeGemm(CLEAVE_ABI_GEMM_ARGS);
  } catch (const RuntimeError &e) {
    std::fprintf(stderr, "cleave-run: error: rank %d: %s\n", comm::rank(),
                 e.what());
    comm::abortJob(70);
  }
  for (int64_t index = 0; index < g.count(); ++index) {
    GemmOffsets at = g.at(index);
    const int16_t *ai = reinterpret_cast<const int16_t *>(a) + at.a;
    const ElementB *bi = reinterpret_cast<const ElementB *>(b) + at.b;
    int32_t *ci = reinterpret_cast<int32_t *>(c) + at.c;
    if constexpr (std::is_same_v<ElementB, int8_t>)
      gemmI8(g.m, g.n, g.k, ai, g.a.layout, bi, g.b.layout, ci, g.c.layout.ld,
             g.beta != 0.0f);
    else
      plainGemm(g.m, g.n, g.k, ai, g.a.layout, bi, g.b.layout, ci,
                g.c.layout.ld, g.beta != 0.0f);
  }
}

} // namespace

const char *cleave::rt::integerGemmKernel() {
  static const char *kernel = !vnniUsable() ? nullptr
                              : amxInt8()   ? "AMX"
                                            : "AVX-512 VNNI";
  return kernel;
}

void cleave::rt::integerGemm(int64_t m, int64_t n, int64_t k, const int16_t *a,
                             const MatrixLayout &layoutA, const int8_t *b,
                             const MatrixLayout &layoutB, int32_t *c,
                             int64_t ldc, bool accumulate) {
  gemmI8(m, n, k, a, layoutA, b, layoutB, c, ldc, accumulate);
}

void cleave::rt::integerGemmPlain(int64_t m, int64_t n, int64_t k,
                                  const int16_t *a, const MatrixLayout &layoutA,
                                  const int16_t *b, const MatrixLayout &layoutB,
                                  int32_t *c, int64_t ldc, bool accumulate) {
  plainGemm(m, n, k, a, layoutA, b, layoutB, c, ldc, accumulate);
}

extern "C" {
void cleave_rt_igemm_i8(CLEAVE_ABI_GEMM_PARAMS) {
  run<int8_t>("i16 x i8", CLEAVE_ABI_GEMM_ARGS);
}
void cleave_rt_igemm_i16(CLEAVE_ABI_GEMM_PARAMS) {
  run<int16_t>("i16 x i16", CLEAVE_ABI_GEMM_ARGS);
}
}
