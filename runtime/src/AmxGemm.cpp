//===- AmxGemm.cpp - bfloat16 GEMMs on AMX tiles --------------------------===//
//
// AMX has eight tile registers of up to 16 rows of 64 bytes; TDPBF16PS adds
// to a 16 x 16 float32 tile the products of a 16 x 32 bfloat16 tile of A and
// a tile of B holding 32 of its rows by 16 columns, each row of the tile a
// pair of B's rows interleaved (B's element (2r + e, j) at tile row r, column
// 2j + e). A block of C of 32 x 32 is four accumulator tiles; each step of 32
// along the sum loads two tiles of A and two of B and makes four products.
//
// B is copied into that layout in panels of 32 columns, the sum padded with
// zeros to a multiple of 32 (a weight once, kept; anything else per call);
// A into whole tiles, its rows padded to a multiple of 32, so tiles never
// read past an operand. Threads take panels; each goes down all of A's row
// blocks with its panel in cache, bringing the next panel into L2 as it
// goes (a sum of a few steps goes the other way, row blocks outside, so
// that C is written along its rows). A batch of GEMMs is shared by GEMMs
// instead. A whole block of C that starts from zero, the bias or C itself is
// loaded into and stored from the tiles directly; any other (cut short, or
// with both a bias and beta * C) goes through a scratch block.
//
//===----------------------------------------------------------------------===//

#include "AmxGemm.h"
#include "PackedGemm.h"

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <utility>
#include <vector>

using namespace cleave::rt;

namespace {

/// A tile's rows, a block's rows and columns, and the steps of one product.
constexpr int64_t kTileRows = 16;
constexpr int64_t kBlock = 32;
constexpr int64_t kStep = 32;
/// Below this many multiply-adds a GEMM runs on one thread.
constexpr double kParallelWork = 1 << 20;
/// Most steps of a sum for which C is computed row block by row block
/// rather than panel by panel (see compute).
constexpr int64_t kFewSteps = 4;
/// Fewest rows of a GEMM whose B is not a weight for which copying B into
/// the tiles' layout on every call pays (a decoding step's attention, one
/// row a head, took 3.4 ms a step that way against 0.5 widened for OpenBLAS).
constexpr int64_t kMinRowsToCopyB = 16;

// The tile registers' use (GCC's tile intrinsics take literal numbers): 0-3
// C's four tiles (rows 0-15 by columns 0-15, by 16-31; rows 16-31 by the
// same), 4-5 A's two (rows 0-15, 16-31), 6-7 B's two (columns 0-15, 16-31).

/// Linux's request for permission to use the tile data state.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool amxUsable() {
  const char *env = std::getenv("CLEAVE_AMX");
  if (env && std::strcmp(env, "0") == 0)
    return false;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
    return false;
  bool bf16 = edx & (1u << 22), tile = edx & (1u << 24);
  return bf16 && tile &&
         syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

/// The tile configuration (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t bytesPerRow[16] = {};
  uint8_t rows[16] = {};

  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      bytesPerRow[t] = 64;
      rows[t] = kTileRows;
    }
  }
};

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/// B (k x n) into `out` in panels of 32 columns: for panel p and step s of
/// the sum, two tiles of 16 pairs of rows by 16 columns (see the top of the
/// file), 1 KiB each, at ((p * steps + s) * 2 + t) * 512; large ones shared
/// among threads when `parallel`.
void packB(const uint16_t *b, const MatrixLayout &layout, int64_t k, int64_t n,
           bool parallel, std::vector<uint16_t> &out) {
  const int64_t steps = roundUp(k, kStep) / kStep;
  const int64_t panels = roundUp(n, kBlock) / kBlock;
  // Only tiles cut short (past B's last column or row) need zeros.
  out.resize(panels * steps * 2 * 512);
#pragma omp parallel for schedule(static) if (parallel && k * n >= (1 << 18))
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t t = 0; t < 2; ++t) {
        uint16_t *tile = out.data() + ((p * steps + s) * 2 + t) * 512;
        const int64_t col0 = p * kBlock + t * 16, row0 = s * kStep;
        const int64_t cols = std::clamp<int64_t>(n - col0, 0, 16);
        const int64_t pairRows = std::min<int64_t>(kStep, k - row0);
        if (cols < 16 || pairRows < kStep)
          std::memset(tile, 0, 512 * sizeof(uint16_t));
        if (layout.transposed) {
          // Down a column, along its contiguous rows.
          for (int64_t j = 0; j < cols; ++j) {
            const uint16_t *column = b + (col0 + j) * layout.ld + row0;
            for (int64_t r = 0; r < pairRows; ++r)
              tile[(r / 2) * 32 + j * 2 + r % 2] = column[r];
          }
          continue;
        }
        for (int64_t r = 0; r < pairRows; ++r) {
          const uint16_t *row = b + (row0 + r) * layout.ld + col0;
          uint16_t *line = tile + (r / 2) * 32 + r % 2;
          for (int64_t j = 0; j < cols; ++j)
            line[j * 2] = row[j];
        }
      }
}

/// A weight's packed copy, made on its first GEMM and kept; the weight's
/// own pages are then given back. Null, said once, when memory for it
/// cannot be had: the weight's GEMMs then widen their operands for
/// OpenBLAS, and it is not asked for again.
const uint16_t *packedWeight(const uint16_t *b, const MatrixLayout &layout,
                             int64_t k, int64_t n) {
  using Key = std::tuple<const uint16_t *, int64_t, int64_t, int64_t, bool>;
  struct Entry {
    bool tried = false;
    std::vector<uint16_t> tiles;
  };
  static std::mutex mutex;
  static std::map<Key, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  Entry &entry = cache[Key{b, k, n, layout.ld, layout.transposed}];
  if (!std::exchange(entry.tried, true)) {
    try {
      packB(b, layout, k, n, /*parallel=*/true, entry.tiles);
      releaseWeightPages(b, b + layout.extent(k, n));
    } catch (const std::bad_alloc &) {
      entry.tiles = {};
      static bool said = false;
      if (!std::exchange(said, true))
        std::fprintf(stderr,
                     "cleave-run: warning: no memory to copy a %lld x %lld "
                     "bfloat16 weight for AMX; such weights' GEMMs widen "
                     "their operands for OpenBLAS\n",
                     (long long)k, (long long)n);
    }
  }
  return entry.tiles.empty() ? nullptr : entry.tiles.data();
}

/// A (m x k) in tiles: for each 16 rows and each step of 32 along the sum,
/// one tile of 16 x 32 (1 KiB) at (rowTile * steps + step) * 512, a row
/// tile's steps one after another, so that a block reads each of its two
/// tiles of A as one stream; zeros past A's rows and sum.
void packA(const uint16_t *a, const MatrixLayout &layout, int64_t m, int64_t k,
           std::vector<uint16_t> &out) {
  const int64_t steps = roundUp(k, kStep) / kStep;
  const int64_t rowTiles = roundUp(m, kBlock) / kTileRows;
  out.resize(rowTiles * steps * 512);
  for (int64_t i = 0; i < rowTiles * kTileRows; ++i) {
    uint16_t *tileRow =
        out.data() + (i / kTileRows) * steps * 512 + (i % kTileRows) * kStep;
    for (int64_t s = 0; s < steps; ++s) {
      int64_t length = i < m ? std::min(kStep, k - s * kStep) : 0;
      uint16_t *to = tileRow + s * 512;
      // Zeros past A's rows and sum: only there.
      std::fill(to + length, to + kStep, uint16_t(0));
      if (!layout.transposed) {
        std::memcpy(to, a + i * layout.ld + s * kStep,
                    length * sizeof(uint16_t));
        continue;
      }
      for (int64_t e = 0; e < length; ++e)
        to[e] = a[i + (s * kStep + e) * layout.ld];
    }
  }
}

struct Problem {
  int64_t m, n, k;
  const uint16_t *a; // packA's copy
  const uint16_t *b; // packB's copy
  float *c;
  int64_t ldc;
  float beta;
  const float *bias;
};

/// C's block at rows [row0, row0 + 32) by panel p's columns. A whole block
/// of C starting from zero, from the bias alone (loaded with a row stride of
/// 0) or from C itself (beta 1, no bias) is loaded into and stored from the
/// tiles directly; any other goes through a scratch block.
void block(const Problem &pb, int64_t p, int64_t row0, const char *prefetch,
           int64_t prefetchLines) {
  const int64_t steps = roundUp(pb.k, kStep) / kStep;
  const int64_t rows = std::min(kBlock, pb.m - row0);
  const int64_t col0 = p * kBlock, cols = std::min(kBlock, pb.n - col0);
  float *c = pb.c + row0 * pb.ldc + col0;
  const int64_t ldcBytes = pb.ldc * sizeof(float);
  const bool whole = rows == kBlock && cols == kBlock;
  const bool direct =
      whole && (pb.beta == 0.0f || (pb.beta == 1.0f && !pb.bias));
  if (direct && pb.beta == 1.0f) {
    _tile_loadd(0, c, ldcBytes);
    _tile_loadd(1, c + 16, ldcBytes);
    _tile_loadd(2, c + kTileRows * pb.ldc, ldcBytes);
    _tile_loadd(3, c + kTileRows * pb.ldc + 16, ldcBytes);
  } else if (direct && pb.bias) {
    _tile_loadd(0, pb.bias + col0, 0);
    _tile_loadd(1, pb.bias + col0 + 16, 0);
    _tile_loadd(2, pb.bias + col0, 0);
    _tile_loadd(3, pb.bias + col0 + 16, 0);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const uint16_t *a0 = pb.a + (row0 / kTileRows) * steps * 512;
  const uint16_t *a1 = a0 + steps * 512;
  const uint16_t *panel = pb.b + p * steps * 2 * 512;
  // This block's share of the next panel, brought into L2 a few lines a
  // step: the panel after this one is otherwise read from memory by the
  // tile loads themselves.
  const int64_t linesPerStep = (prefetchLines + steps - 1) / steps;
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t l = 0; l < linesPerStep && prefetchLines > 0;
         ++l, --prefetchLines, prefetch += 64)
      _mm_prefetch(prefetch, _MM_HINT_T1);
    _tile_loadd(4, a0 + s * 512, 64);
    _tile_loadd(5, a1 + s * 512, 64);
    _tile_loadd(6, panel + s * 1024, 64);
    _tile_loadd(7, panel + s * 1024 + 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (direct) {
    _tile_stored(0, c, ldcBytes);
    _tile_stored(1, c + 16, ldcBytes);
    _tile_stored(2, c + kTileRows * pb.ldc, ldcBytes);
    _tile_stored(3, c + kTileRows * pb.ldc + 16, ldcBytes);
    return;
  }
  alignas(64) float out[kBlock * kBlock];
  constexpr int64_t stride = kBlock * sizeof(float);
  _tile_stored(0, out, stride);
  _tile_stored(1, out + 16, stride);
  _tile_stored(2, out + kTileRows * kBlock, stride);
  _tile_stored(3, out + kTileRows * kBlock + 16, stride);
  for (int64_t i = 0; i < rows; ++i) {
    float *ci = c + i * pb.ldc;
    for (int64_t j = 0; j < cols; ++j) {
      float sum = out[i * kBlock + j];
      if (pb.bias)
        sum += pb.bias[col0 + j];
      if (pb.beta != 0.0f)
        sum += pb.beta * ci[j];
      ci[j] = sum;
    }
  }
}

} // namespace

void cleave::rt::configureTiles() {
  // Static: the configuration must be read from 64-byte-aligned memory,
  // which a leaf function's stack (its red zone) does not guarantee.
  static const TileConfig config;
  _tile_loadconfig(&config);
}

bool cleave::rt::amxInt8() {
  static const bool usable = [] {
    unsigned eax, ebx, ecx, edx;
    return amxKernel() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
           (edx & (1u << 25));
  }();
  return usable;
}

const char *cleave::rt::amxKernel() {
  static const bool usable = amxUsable();
  return usable ? "AMX" : nullptr;
}

namespace {

/// Whether a GEMM of `m` rows with B at `b` runs on AMX, and whether B is a
/// weight.
bool takes(int64_t m, int64_t n, int64_t k, const uint16_t *b,
           const MatrixLayout &layoutB, bool &weight) {
  if (!amxKernel() || m <= 0 || n <= 0 || k <= 0)
    return false;
  weight = inWeightMemory(b, b + layoutB.extent(k, n));
  return weight || m >= kMinRowsToCopyB;
}

/// B's tiles: a weight's kept copy (null if there is none), or B copied
/// into `own`.
const uint16_t *tilesOfB(const uint16_t *b, const MatrixLayout &layout,
                         int64_t k, int64_t n, bool weight, bool parallel,
                         std::vector<uint16_t> &own) {
  if (weight)
    return packedWeight(b, layout, k, n);
  packB(b, layout, k, n, parallel, own);
  return own.data();
}

/// Every block of C: threads share the panels when `parallel`, else this
/// thread does them all. Each thread loads the tile configuration for
/// itself, and gives the tiles back when done.
void compute(const Problem &pb, bool parallel) {
  const int64_t panels = roundUp(pb.n, kBlock) / kBlock;
  const int64_t rowBlocks = roundUp(pb.m, kBlock) / kBlock;
  const int64_t steps = roundUp(pb.k, kStep) / kStep;
  const int64_t panelLines = steps * 2 * 1024 / 64;
#pragma omp parallel if (parallel)
  {
    configureTiles();
    if (steps <= kFewSteps) {
      // A short sum (attention's scores, over a head's 64 dimensions): each
      // block is mostly its store, so C is written along its rows, a row
      // block at a time; down a panel, C's rows a power of two apart (the
      // scores' 1024 floats) fall in the same cache sets.
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rowBlocks; ++r)
        for (int64_t p = 0; p < panels; ++p)
          block(pb, p, r * kBlock, nullptr, 0);
    } else {
#pragma omp for schedule(static)
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t r = 0; r < rowBlocks; ++r) {
          // Row block r prefetches its part of panel p + 1.
          const int64_t first = r * panelLines / rowBlocks;
          const int64_t last = (r + 1) * panelLines / rowBlocks;
          const char *next =
              reinterpret_cast<const char *>(pb.b + (p + 1) * steps * 2 * 512) +
              first * 64;
          block(pb, p, r * kBlock, next, p + 1 < panels ? last - first : 0);
        }
    }
    _tile_release();
  }
}

} // namespace

bool cleave::rt::amxGemmBf16(int64_t m, int64_t n, int64_t k, const uint16_t *a,
                             const MatrixLayout &layoutA, const uint16_t *b,
                             const MatrixLayout &layoutB, float *c, int64_t ldc,
                             float beta, const float *bias) {
  bool weight;
  if (!takes(m, n, k, b, layoutB, weight))
    return false;
  std::vector<uint16_t> ownB;
  const uint16_t *packedB =
      tilesOfB(b, layoutB, k, n, weight, /*parallel=*/true, ownB);
  if (!packedB)
    return false;
  thread_local std::vector<uint16_t> packedA;
  packA(a, layoutA, m, k, packedA);
  const int64_t panels = roundUp(n, kBlock) / kBlock;
  compute(Problem{m, n, k, packedA.data(), packedB, c, ldc, beta, bias},
          panels > 1 && static_cast<double>(m) * n * k >= kParallelWork);
  return true;
}

bool cleave::rt::amxGemmBf16Batch(
    int64_t count, int64_t m, int64_t n, int64_t k, const MatrixLayout &layoutA,
    const MatrixLayout &layoutB, int64_t ldc, float beta, const float *bias,
    const std::function<Bf16GemmOperands(int64_t)> &operands,
    const std::function<void(int64_t)> &finished) {
  if (count <= 0)
    return false;
  // Every GEMM of the batch alike: B a weight in all or in none, and the
  // weights copied before any C is written (a copy that cannot be had
  // leaves the whole batch to OpenBLAS).
  bool weight;
  if (!takes(m, n, k, operands(0).b, layoutB, weight))
    return false;
  for (int64_t i = 0; i < count; ++i) {
    bool other;
    const uint16_t *b = operands(i).b;
    if (!takes(m, n, k, b, layoutB, other) || other != weight ||
        (weight && !packedWeight(b, layoutB, k, n)))
      return false;
  }
  const bool parallel = count > 1 && omp_get_max_threads() > 1 &&
                        static_cast<double>(count) * m * n * k >= kParallelWork;
#pragma omp parallel if (parallel)
  {
    thread_local std::vector<uint16_t> ownB, packedA;
    // The B whose tiles this thread holds: GEMMs that share a B
    // (grouped-query attention's repeated key/value heads, a batch stride
    // of 0) copy it once.
    const uint16_t *copied = nullptr, *packedB = nullptr;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < count; ++i) {
      Bf16GemmOperands ops = operands(i);
      if (ops.b != copied) {
        packedB =
            tilesOfB(ops.b, layoutB, k, n, weight, /*parallel=*/false, ownB);
        copied = ops.b;
      }
      packA(ops.a, layoutA, m, k, packedA);
      compute(Problem{m, n, k, packedA.data(), packedB, ops.c, ldc, beta, bias},
              /*parallel=*/false);
      if (finished)
        finished(i);
    }
  }
  return true;
}
