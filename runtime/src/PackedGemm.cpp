//===- PackedGemm.cpp - GEMMs on B copied into panels ---------------------===//
//
// The layout: B's columns in panels of NR (32 floats with AVX-512, 24 with
// AVX2, zero-padded past the last column), each panel K rows of NR contiguous
// floats, so a tile reads one aligned line of its panel per step of the sum. A
// tile is MR rows by NR columns of C held in registers (12 x 2 zmm, 4 x 3 ymm),
// each step broadcasting one element of A per row and adding it times the
// panel's line. The sum runs in passes of kDepth steps over blocks of rows: for
// each, A's slice is copied tile by tile (MR elements a step, contiguous: one
// stream for the tile to read, whatever A's layout), then every panel is gone
// over, its slice (32 KiB at NR 32) staying in L1 while the block's row tiles
// use it and the slice after it is prefetched into L2. With few panels a
// row-major A is read where it lies instead. The first pass starts from the
// bias and beta * C, the others from C. A weight is packed on its second GEMM
// (the first goes to OpenBLAS), so a single run pays nothing for it. Threads
// take parts of C: column panels first, rows when there are more threads
// than panels. A batch of GEMMs whose B is not a weight (attention's, a GEMM
// per head) is shared by GEMMs instead, each thread copying the Bs of its
// own into panels it keeps between calls.
//
//===----------------------------------------------------------------------===//

#include "PackedGemm.h"

#include <xmmintrin.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

using namespace cleave::rt;

namespace {

/// Steps of the sum per pass over a panel.
constexpr int64_t kDepth = 256;
/// Most rows of C computed together, pass by pass: A's copied slice for a
/// pass (480 x kDepth, 480 KiB) stays in L2. Rows are cut into blocks of
/// equal size, in whole tiles: a short last block would stream every panel
/// again for a few rows (128 rows in blocks of 120 and 8 did).
constexpr int64_t kRowBlock = 480;
/// Row tiles in a block when the whole sum is one pass (attention's
/// scores, over a head's 64 dimensions): no copy of A is then kept for a
/// later pass, and a block of many rows only makes each panel write a long
/// column strip of C, whose rows, at a width of a power of two (the scores'
/// 1024 floats), all fall in the same L1 sets: scores for 1024 tokens took
/// 1.7x as long in blocks of 29 tiles as in blocks of one or two.
constexpr int64_t kOnePassBlockTiles = 2;
/// Weights of at least this many bytes are packed by all threads.
constexpr size_t kParallelPacking = 1 << 20;
/// Below this many multiply-adds a GEMM runs on one thread.
constexpr double kParallelWork = 1 << 18;
/// Fewest rows of a GEMM whose B is not a weight for which copying B into
/// panels on every call pays: the copy reads and writes B once, the GEMM
/// reads it once per tile of rows.
constexpr int64_t kMinRowsToPackB = 16;
/// Most panels a part of C may have for its tiles to read a row-major A in
/// place rather than from a copy.
constexpr int64_t kMostPanelsForInPlaceA = 4;

/// One tile's work: C's rows from `c` (`ldc` apart) by one panel, over
/// `depth` steps of `a` (the tile's copy of A: its rows' elements for each
/// step, contiguous; or A itself) and `panel` (the panel's line for the
/// pass's first step).
struct Tile {
  const float *a;
  /// 0 when `a` is the tile's copy of A; else A is read in place, its rows
  /// `lda` apart, from the pass's first step of the tile's first row.
  int64_t lda;
  const float *panel;
  int64_t depth;
  float *c;
  int64_t ldc;
  /// Whether C holds a partial sum to add to; else the tile starts from
  /// `bias` (when not null) plus `beta` * C (when beta is not 0).
  bool accumulate;
  const float *bias;
  float beta;
  /// Lines (64 bytes) from `prefetch` to bring into L2 for a later tile.
  const char *prefetch;
  int64_t prefetchLines;
};

/// Brings the tile's share of a later slice of the panels into L2, one line
/// every few steps (a burst at once stalls on the memory queue): the first
/// tile over a slice would otherwise wait on memory at every step.
struct Prefetcher {
  const char *line, *end;
  int64_t every, countdown;

  explicit Prefetcher(const Tile &t)
      : line(t.prefetch), end(t.prefetch + t.prefetchLines * 64),
        every(t.prefetchLines ? std::max<int64_t>(1, t.depth / t.prefetchLines)
                              : t.depth + 1),
        countdown(0) {}
  void step() {
    if (--countdown > 0 || line >= end)
      return;
    _mm_prefetch(line, _MM_HINT_T1);
    line += 64;
    countdown = every;
  }
};

/// The kernels' vectors, in GCC's vector extensions: the one tile body
/// below becomes AVX-512 or AVX2 code in the function of that target it is
/// inlined into (a * b + c contracts to an FMA there).
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec8 __attribute__((vector_size(32)));
// The helpers return vectors wider than the default target's, which GCC
// warns would change the ABI; they are always inlined, and no vector
// crosses a call.
#pragma GCC diagnostic ignored "-Wpsabi"
#define CLEAVE_INLINE __attribute__((always_inline)) inline

template <typename V> CLEAVE_INLINE V splat(float value) {
  V v;
  for (int lane = 0; lane < int(sizeof(V) / sizeof(float)); ++lane)
    v[lane] = value;
  return v;
}

template <typename V> CLEAVE_INLINE V loadVec(const float *p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <typename V> CLEAVE_INLINE void storeVec(float *p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}

/// A tile of `Rows` rows by `Cols` vectors of columns (one panel), reading
/// A in place (`InPlaceA`, rows t.lda apart) or from its copy.
template <typename V, int Cols, int Rows, bool InPlaceA>
CLEAVE_INLINE void tileBody(const Tile &t) {
  constexpr int lanes = sizeof(V) / sizeof(float);
  Prefetcher prefetcher(t);
  V acc[Rows][Cols];
  V bias[Cols] = {};
  if (!t.accumulate && t.bias)
    for (int j = 0; j < Cols; ++j)
      bias[j] = loadVec<V>(t.bias + j * lanes);
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
    float *ci = t.c + i * t.ldc;
#pragma GCC unroll 4
    for (int j = 0; j < Cols; ++j) {
      if (t.accumulate)
        acc[i][j] = loadVec<V>(ci + j * lanes);
      else if (t.beta != 0.0f)
        acc[i][j] = t.beta * loadVec<V>(ci + j * lanes) + bias[j];
      else
        acc[i][j] = bias[j];
    }
  }
#pragma GCC unroll 4
  for (int64_t step = 0; step < t.depth; ++step) {
    prefetcher.step();
    V b[Cols];
#pragma GCC unroll 4
    for (int j = 0; j < Cols; ++j)
      b[j] = *reinterpret_cast<const V *>(t.panel + (step * Cols + j) * lanes);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      V x = splat<V>(InPlaceA ? t.a[i * t.lda + step] : t.a[step * Rows + i]);
#pragma GCC unroll 4
      for (int j = 0; j < Cols; ++j)
        acc[i][j] += x * b[j];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < Cols; ++j)
      storeVec(t.c + i * t.ldc + j * lanes, acc[i][j]);
}

template <int Rows, bool InPlaceA>
__attribute__((target("avx512f"))) void tileAvx512(const Tile &t) {
  tileBody<Vec16, 2, Rows, InPlaceA>(t);
}

template <int Rows, bool InPlaceA>
__attribute__((target("avx2,fma"))) void tileAvx2(const Tile &t) {
  tileBody<Vec8, 3, Rows, InPlaceA>(t);
}

using TileFn = void (*)(const Tile &);
constexpr int kMaxRows = 12;

/// An instruction set's kernel: its panel width, its tile height, and tile
/// functions for every height up to it (rows[r - 1]), reading A's copy or
/// (inPlaceRows) A itself.
struct Kernel {
  const char *name;
  int64_t panelWidth, tileRows;
  TileFn rows[kMaxRows];
  TileFn inPlaceRows[kMaxRows];
};

template <template <int, bool> class Fns, size_t... R>
constexpr Kernel makeKernel(const char *name, int64_t width,
                            std::index_sequence<R...>) {
  return Kernel{name,
                width,
                sizeof...(R),
                {Fns<R + 1, false>::fn...},
                {Fns<R + 1, true>::fn...}};
}

template <int Rows, bool InPlaceA> struct Avx512Fns {
  static constexpr TileFn fn = tileAvx512<Rows, InPlaceA>;
};
template <int Rows, bool InPlaceA> struct Avx2Fns {
  static constexpr TileFn fn = tileAvx2<Rows, InPlaceA>;
};

constexpr Kernel kAvx512 =
    makeKernel<Avx512Fns>("AVX-512", 32, std::make_index_sequence<12>());
constexpr Kernel kAvx2 =
    makeKernel<Avx2Fns>("AVX2", 24, std::make_index_sequence<4>());

/// The kernel for this CPU and CLEAVE_PACKED_GEMM, chosen once. By default
/// only AVX-512's: it beats OpenBLAS's SkylakeX kernels where OpenBLAS
/// copies B on every call (GEMMs of a few hundred rows), while the AVX2 one
/// is 2 to 6 % behind OpenBLAS's Haswell kernels (docs/performance.md), so
/// it runs only when asked for.
const Kernel *kernel() {
  static const Kernel *chosen = []() -> const Kernel * {
    const char *env = std::getenv("CLEAVE_PACKED_GEMM");
    if (env && std::strcmp(env, "0") == 0)
      return nullptr;
    __builtin_cpu_init();
    if (env && std::strcmp(env, "avx2") == 0)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                 ? &kAvx2
                 : nullptr;
    return __builtin_cpu_supports("avx512f") ? &kAvx512 : nullptr;
  }();
  return chosen;
}

const char *weightBegin = nullptr;
const char *weightEnd = nullptr;

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};

/// A weight in panels: panel p's line for step s at [(p * k + s) * NR].
using PackedB = std::unique_ptr<float, FreeDeleter>;

/// A weight as a GEMM reads it: where, k, n, and its layout (ld, transposed).
using PackKey = std::tuple<const float *, int64_t, int64_t, int64_t, bool>;

/// `b` (k x n, `layout`) copied into panels of `width` columns at `out`
/// (panels * k * width floats), the panels shared among threads when
/// `parallel`.
void packInto(const float *b, const MatrixLayout &layout, int64_t k, int64_t n,
              int64_t width, float *out, bool parallel) {
  int64_t panels = (n + width - 1) / width;
  // In B's own order: along rows, or (transposed) along columns.
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p = 0; p < panels; ++p) {
    float *panel = out + p * k * width;
    int64_t cols = std::min(width, n - p * width);
    if (layout.transposed) {
      const float *column = b + p * width * layout.ld;
      int64_t j = 0;
      // Four columns by four steps at a time, transposed in registers.
      for (; j + 4 <= cols; j += 4) {
        const float *c0 = column + j * layout.ld;
        int64_t s = 0;
        for (; s + 4 <= k; s += 4) {
          __m128 r0 = _mm_loadu_ps(c0 + s),
                 r1 = _mm_loadu_ps(c0 + layout.ld + s),
                 r2 = _mm_loadu_ps(c0 + 2 * layout.ld + s),
                 r3 = _mm_loadu_ps(c0 + 3 * layout.ld + s);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          _mm_storeu_ps(panel + s * width + j, r0);
          _mm_storeu_ps(panel + (s + 1) * width + j, r1);
          _mm_storeu_ps(panel + (s + 2) * width + j, r2);
          _mm_storeu_ps(panel + (s + 3) * width + j, r3);
        }
        for (; s < k; ++s)
          for (int64_t jj = j; jj < j + 4; ++jj)
            panel[s * width + jj] = column[s + jj * layout.ld];
      }
      for (; j < width; ++j)
        for (int64_t s = 0; s < k; ++s)
          panel[s * width + j] = j < cols ? column[s + j * layout.ld] : 0.0f;
      continue;
    }
    for (int64_t s = 0; s < k; ++s) {
      std::memcpy(panel + s * width, b + s * layout.ld + p * width,
                  cols * sizeof(float));
      std::fill(panel + s * width + cols, panel + (s + 1) * width, 0.0f);
    }
  }
}

/// Floats in the panels of a k x n B at panel width `width`.
size_t packedFloats(int64_t k, int64_t n, int64_t width) {
  return static_cast<size_t>((n + width - 1) / width * k * width);
}

/// Memory for `floats` panel floats, aligned to a cache line; null when
/// there is none.
PackedB allocatePanels(size_t floats) {
  size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  return PackedB(static_cast<float *>(std::aligned_alloc(64, bytes)));
}

/// `b` (k x n, `layout`) copied into newly allocated panels of `width`
/// columns. A weight of several megabytes takes a while; threads share the
/// panels.
PackedB pack(const float *b, const MatrixLayout &layout, int64_t k, int64_t n,
             int64_t width) {
  size_t floats = packedFloats(k, n, width);
  PackedB data = allocatePanels(floats);
  if (data)
    packInto(b, layout, k, n, width, data.get(),
             floats * sizeof(float) >= kParallelPacking);
  return data;
}

/// Whether B (k x n, `layout`, at `b`) lies in the weight memory.
bool inWeights(const float *b, const MatrixLayout &layout, int64_t k,
               int64_t n) {
  return cleave::rt::inWeightMemory(b, b + layout.extent(k, n));
}

/// The packed copy of weight `b` for `kern`, made on the weight's second
/// GEMM; null on its first (which OpenBLAS does: a program started for one
/// run, as `cleave-run` does for one input, would pay for packing and not
/// gain from it), and, said once, when memory for it cannot be had (the
/// weight then stays on OpenBLAS, not asked for again). After packing, the
/// weight's own pages are given back (releaseWeightPages).
const float *packedWeight(const Kernel &kern, const float *b,
                          const MatrixLayout &layout, int64_t k, int64_t n) {
  struct Entry {
    int uses = 0;
    PackedB data;
  };
  static std::mutex mutex;
  static std::map<PackKey, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  Entry &entry = cache[PackKey{b, k, n, layout.ld, layout.transposed}];
  if (entry.uses == 2)
    return entry.data.get();
  if (++entry.uses == 1)
    return nullptr;
  entry.data = pack(b, layout, k, n, kern.panelWidth);
  if (!entry.data) {
    static bool said = false;
    if (!std::exchange(said, true))
      std::fprintf(stderr,
                   "cleave-run: warning: no memory to pack a %lld x %lld "
                   "weight for the CPU GEMM kernel; such weights stay on "
                   "OpenBLAS\n",
                   (long long)k, (long long)n);
    return nullptr;
  }
  releaseWeightPages(b, b + layout.extent(k, n));
  return entry.data.get();
}

struct Problem {
  int64_t m, n, k;
  const float *a;
  MatrixLayout layoutA;
  const float *packed;
  float *c;
  int64_t ldc;
  float beta;
  const float *bias;
};

/// One whole tile of `Rows` rows of a row-major A (rows `lda` apart), steps
/// [0, depth) from `a`, into `tile`: the row count known, the copy unrolls.
template <int Rows>
void copyRowMajorTile(const float *a, int64_t lda, int64_t depth, float *tile) {
  for (int64_t s = 0; s < depth; ++s)
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r)
      tile[s * Rows + r] = a[r * lda + s];
}

/// Rows [row0, row1) of A, steps [s0, s0 + depth), copied tile by tile
/// into `out`: a tile of R rows starting at row i holds, from (i - row0) *
/// depth, its R elements of each step in turn. Whole tiles of a row-major
/// A at the two kernels' heights (12, 4) take the unrolled copy.
void copyA(const Kernel &kern, const Problem &pb, int64_t row0, int64_t row1,
           int64_t s0, int64_t depth, float *out) {
  const int64_t lda = pb.layoutA.ld;
  for (int64_t i = row0; i < row1; i += kern.tileRows) {
    int64_t rows = std::min(kern.tileRows, row1 - i);
    float *tile = out + (i - row0) * depth;
    if (!pb.layoutA.transposed && rows == 12) {
      copyRowMajorTile<12>(pb.a + i * lda + s0, lda, depth, tile);
      continue;
    }
    if (!pb.layoutA.transposed && rows == 4) {
      copyRowMajorTile<4>(pb.a + i * lda + s0, lda, depth, tile);
      continue;
    }
    if (pb.layoutA.transposed) {
      for (int64_t s = 0; s < depth; ++s)
        for (int64_t r = 0; r < rows; ++r)
          tile[s * rows + r] = pb.a[(i + r) + (s0 + s) * lda];
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t s = 0; s < depth; ++s)
          tile[s * rows + r] = pb.a[(i + r) * lda + s0 + s];
    }
  }
}

/// One pass of the sum (steps [s0, s0 + depth)) for rows [row0, row1) of
/// panel `p`, from `a` (copyA's copy of them; null: A read in place) into
/// `c` (rows `ldc` apart, the panel's first column): from C if
/// `accumulate`, else from `bias` and beta * C. The row tiles share the
/// prefetch of `nextLines` lines at `next`, the slice read after this one.
void panelPass(const Kernel &kern, const Problem &pb, int64_t p, int64_t s0,
               int64_t depth, int64_t row0, int64_t row1, const float *a,
               float *c, int64_t ldc, bool accumulate, const float *bias,
               const char *next, int64_t nextLines) {
  Tile t;
  t.lda = a ? 0 : pb.layoutA.ld;
  t.panel = pb.packed + (p * pb.k + s0) * kern.panelWidth;
  t.depth = depth;
  t.ldc = ldc;
  t.accumulate = accumulate;
  t.bias = bias;
  t.beta = pb.beta;
  int64_t tiles = (row1 - row0 + kern.tileRows - 1) / kern.tileRows;
  for (int64_t i = row0, j = 0; i < row1; i += kern.tileRows, ++j) {
    int64_t rows = std::min(kern.tileRows, row1 - i);
    t.a = a ? a + (i - row0) * depth : pb.a + i * t.lda + s0;
    t.c = c + (i - row0) * ldc;
    int64_t firstLine = j * nextLines / tiles;
    t.prefetch = next ? next + firstLine * 64 : nullptr;
    t.prefetchLines = next ? (j + 1) * nextLines / tiles - firstLine : 0;
    (a ? kern.rows : kern.inPlaceRows)[rows - 1](t);
  }
}

/// Rows [row0, row1) of C by panels [p0, p1), in equal blocks of at most
/// kRowBlock rows, each block pass by pass, each pass over every panel (see
/// the top of the file). A last panel narrower than the kernel's width is
/// computed in a scratch tile and its columns copied out.
void part(const Kernel &kern, const Problem &pb, int64_t p0, int64_t p1,
          int64_t row0, int64_t row1) {
  const int64_t width = kern.panelWidth;
  const bool narrowLast = pb.n - (p1 - 1) * width < width;
  // A thread's buffers stay between calls (no allocation for each GEMM of
  // a batch).
  thread_local std::vector<float> scratch, copiedA;
  if (narrowLast) {
    int64_t col0 = (p1 - 1) * width, cols = pb.n - col0;
    scratch.assign((row1 - row0) * width, 0.0f);
    for (int64_t i = row0; i < row1; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float cij = pb.c[i * pb.ldc + col0 + j];
        scratch[(i - row0) * width + j] =
            (pb.bias ? pb.bias[col0 + j] : 0.0f) +
            (pb.beta != 0.0f ? pb.beta * cij : 0.0f);
      }
  }
  const int64_t blocks = (row1 - row0 + kRowBlock - 1) / kRowBlock;
  const int64_t tiles = (row1 - row0 + kern.tileRows - 1) / kern.tileRows;
  const int64_t blockRows = pb.k <= kDepth
                                ? kOnePassBlockTiles * kern.tileRows
                                : (tiles + blocks - 1) / blocks * kern.tileRows;
  // Copying A costs about as much as one panel's work: with few panels
  // the tiles read a row-major A where it lies instead.
  const bool inPlaceA =
      !pb.layoutA.transposed && p1 - p0 <= kMostPanelsForInPlaceA;
  if (!inPlaceA)
    copiedA.resize(
        std::max<size_t>(copiedA.size(), std::min(blockRows, row1 - row0) *
                                             std::min(kDepth, pb.k)));
  const float *a = inPlaceA ? nullptr : copiedA.data();
  auto depthAt = [&](int64_t s0) { return std::min(kDepth, pb.k - s0); };
  for (int64_t r0 = row0; r0 < row1; r0 += blockRows) {
    int64_t r1 = std::min(row1, r0 + blockRows);
    for (int64_t s0 = 0; s0 < pb.k; s0 += kDepth) {
      int64_t depth = depthAt(s0);
      if (!inPlaceA)
        copyA(kern, pb, r0, r1, s0, depth, copiedA.data());
      for (int64_t p = p0; p < p1; ++p) {
        // The slice read after this one: the next panel's in this pass,
        // else the first panel's in the next pass or the next row block.
        int64_t nextP = p + 1, nextS = s0;
        if (nextP == p1) {
          nextP = p0;
          nextS = s0 + kDepth < pb.k ? s0 + kDepth : 0;
          if (nextS == 0 && r1 == row1)
            nextP = p1;
        }
        const char *next = nullptr;
        int64_t nextLines = 0;
        if (nextP < p1) {
          next = reinterpret_cast<const char *>(pb.packed +
                                                (nextP * pb.k + nextS) * width);
          nextLines = depthAt(nextS) * width * int64_t(sizeof(float)) / 64;
        }
        int64_t col0 = p * width;
        if (narrowLast && p == p1 - 1)
          panelPass(kern, pb, p, s0, depth, r0, r1, a,
                    scratch.data() + (r0 - row0) * width, width,
                    /*accumulate=*/true, nullptr, next, nextLines);
        else
          panelPass(kern, pb, p, s0, depth, r0, r1, a,
                    pb.c + r0 * pb.ldc + col0, pb.ldc,
                    /*accumulate=*/s0 > 0, pb.bias ? pb.bias + col0 : nullptr,
                    next, nextLines);
      }
    }
  }
  if (narrowLast) {
    int64_t col0 = (p1 - 1) * width;
    for (int64_t i = row0; i < row1; ++i)
      std::memcpy(pb.c + i * pb.ldc + col0, &scratch[(i - row0) * width],
                  (pb.n - col0) * sizeof(float));
  }
}

void run(const Kernel &kern, const Problem &pb) {
  const int64_t panels = (pb.n + kern.panelWidth - 1) / kern.panelWidth;
  const int64_t rowTiles = (pb.m + kern.tileRows - 1) / kern.tileRows;
  int64_t threads = static_cast<double>(pb.m) * pb.n * pb.k < kParallelWork
                        ? 1
                        : omp_get_max_threads();
  // Columns first: each thread then reads only its own panels.
  const int64_t columnParts = std::min(panels, threads);
  const int64_t rowParts =
      std::min(rowTiles, std::max<int64_t>(1, threads / columnParts));
  const int64_t parts = columnParts * rowParts;
  auto doPart = [&](int64_t index) {
    int64_t cp = index % columnParts, rp = index / columnParts;
    int64_t row0 = std::min(pb.m, rp * rowTiles / rowParts * kern.tileRows);
    int64_t row1 =
        std::min(pb.m, (rp + 1) * rowTiles / rowParts * kern.tileRows);
    part(kern, pb, cp * panels / columnParts, (cp + 1) * panels / columnParts,
         row0, row1);
  };
  if (parts == 1) {
    doPart(0);
    return;
  }
#pragma omp parallel num_threads(std::min(parts, threads))
  {
    for (int64_t index = omp_get_thread_num(); index < parts;
         index += omp_get_num_threads())
      doPart(index);
  }
}

} // namespace

void cleave::rt::setWeightMemory(const void *begin, size_t bytes) {
  weightBegin = static_cast<const char *>(begin);
  weightEnd = weightBegin + bytes;
}

void cleave::rt::releaseWeightPages(const void *begin, const void *end) {
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t first =
      (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  uintptr_t last = reinterpret_cast<uintptr_t>(end) / page * page;
  if (last > first)
    madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

bool cleave::rt::inWeightMemory(const void *begin, const void *end) {
  return static_cast<const char *>(begin) >= weightBegin &&
         static_cast<const char *>(end) <= weightEnd;
}

const char *cleave::rt::packedGemmKernel() {
  const Kernel *kern = kernel();
  return kern ? kern->name : nullptr;
}

bool cleave::rt::packedSgemm(int64_t m, int64_t n, int64_t k, const float *a,
                             const MatrixLayout &layoutA, const float *b,
                             const MatrixLayout &layoutB, float *c, int64_t ldc,
                             float beta, const float *bias) {
  const Kernel *kern = kernel();
  if (!kern || m <= 0 || n <= 0 || k <= 0 || !inWeights(b, layoutB, k, n))
    return false;
  const float *packed = packedWeight(*kern, b, layoutB, k, n);
  if (!packed)
    return false;
  run(*kern, Problem{m, n, k, a, layoutA, packed, c, ldc, beta, bias});
  return true;
}

int64_t cleave::rt::packedPanelWidth() {
  const Kernel *kern = kernel();
  return kern ? kern->panelWidth : 0;
}

void cleave::rt::packPanels(const float *b, const MatrixLayout &layout,
                            int64_t k, int64_t n, float *panels) {
  if (const Kernel *kern = kernel())
    packInto(b, layout, k, n, kern->panelWidth, panels, /*parallel=*/false);
}

bool cleave::rt::packedSgemmOnPanels(int64_t m, int64_t n, int64_t k,
                                     const float *a,
                                     const MatrixLayout &layoutA,
                                     const float *panels, float *c, int64_t ldc,
                                     float beta, const float *bias) {
  const Kernel *kern = kernel();
  if (!kern || m <= 0 || n <= 0 || k <= 0)
    return false;
  run(*kern, Problem{m, n, k, a, layoutA, panels, c, ldc, beta, bias});
  return true;
}

bool cleave::rt::packedSgemmBatch(
    int64_t count, int64_t m, int64_t n, int64_t k, const MatrixLayout &layoutA,
    const MatrixLayout &layoutB, int64_t ldc, float beta, const float *bias,
    const std::function<GemmOperands(int64_t)> &operands) {
  const Kernel *kern = kernel();
  if (!kern || count <= 0 || m < kMinRowsToPackB || n <= 0 || k <= 0)
    return false;
  for (int64_t i = 0; i < count; ++i)
    if (inWeights(operands(i).b, layoutB, k, n))
      return false;
  const int64_t panels = (n + kern->panelWidth - 1) / kern->panelWidth;
  const int64_t rowTiles = (m + kern->tileRows - 1) / kern->tileRows;
  const int64_t threads = static_cast<double>(count) * m * n * k < kParallelWork
                              ? 1
                              : omp_get_max_threads();
  // Units of work: a GEMM's rows in `rowParts` parts. Whole GEMMs when they
  // share evenly among the threads (or are many against them), else the
  // fewest parts that make them so.
  int64_t rowParts = 1;
  while (rowParts < rowTiles && (count * rowParts) % threads != 0 &&
         count * rowParts < 4 * threads)
    ++rowParts;
  const int64_t units = count * rowParts;
  const size_t floats = packedFloats(k, n, kern->panelWidth);
  bool failed = false;
  // Each thread takes consecutive units.
#pragma omp parallel num_threads(                                              \
        std::min(units, threads)) if (units > 1 && threads > 1)
  {
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
    // Each thread's panels stay between calls: the same shapes come back
    // every layer.
    thread_local PackedB panelsB;
    thread_local size_t capacity = 0;
    if (capacity < floats) {
      panelsB = allocatePanels(floats);
      capacity = panelsB ? floats : 0;
    }
    if (!panelsB) {
#pragma omp atomic write
      failed = true;
    }
    // Nothing is written unless every thread has its panels: the caller
    // then gives the whole batch to OpenBLAS.
#pragma omp barrier
    bool anyFailed;
#pragma omp atomic read
    anyFailed = failed;
    // The B in the panels: a GEMM's row parts, and GEMMs that share a B
    // (grouped-query attention's repeated key/value heads, a batch stride
    // of 0), copy it once.
    const float *packedB = nullptr;
    for (int64_t unit = me * units / team;
         !anyFailed && unit < (me + 1) * units / team; ++unit) {
      int64_t item = unit / rowParts, rowPart = unit % rowParts;
      GemmOperands ops = operands(item);
      if (ops.b != packedB) {
        packInto(ops.b, layoutB, k, n, kern->panelWidth, panelsB.get(),
                 /*parallel=*/false);
        packedB = ops.b;
      }
      int64_t row0 =
          std::min(m, rowPart * rowTiles / rowParts * kern->tileRows);
      int64_t row1 =
          std::min(m, (rowPart + 1) * rowTiles / rowParts * kern->tileRows);
      part(*kern,
           Problem{m, n, k, ops.a, layoutA, panelsB.get(), ops.c, ldc, beta,
                   bias},
           0, panels, row0, row1);
    }
  }
  return !failed;
}
