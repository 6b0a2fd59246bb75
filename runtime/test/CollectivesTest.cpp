//===- CollectivesTest.cpp - MPI collectives against their definitions ----===//
//
// Run on 4 ranks as a 2 x 2 mesh (mpiexec -n 4). Every rank fills its input
// with values that encode (rank, position), calls each collective of the ABI
// along a tensor axis other than the outermost (where packing matters), and
// checks every output element against the collective's definition computed
// here element by element. Prints one line per collective and exits non-zero
// on the first mismatch.
//
//===----------------------------------------------------------------------===//

#include "../src/comm/Comm.h"

#include "cleave/Runtime/Abi.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace cleave::rt;

namespace {

/// An MLIR ranked memref descriptor for a 2-D row-major buffer.
struct Descriptor2D {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
};

Descriptor2D describe(std::vector<float> &data, int64_t rows, int64_t cols) {
  return {data.data(), data.data(), 0, {rows, cols}, {cols, 1}};
}

/// The value rank `r` holds at (i, j) of its input.
float value(int r, int64_t i, int64_t j) { return r * 1000 + i * 10 + j; }

int failures = 0;

void check(const char *what, const std::vector<float> &got,
           const std::vector<float> &want) {
  for (size_t k = 0; k < want.size(); ++k)
    if (got[k] != want[k]) {
      std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n",
                   comm::rank(), what, k, got[k], want[k]);
      ++failures;
      return;
    }
  if (comm::rank() == 0)
    std::printf("%s: ok\n", what);
}

} // namespace

int main(int argc, char **argv) {
  ModelDesc desc;
  desc.ranks = 4;
  desc.meshSizes = {2, 2};
  desc.groups = {{1}, {0}, {0, 1}}; // along tp, along dp, the whole mesh
  comm::start(desc, &argc, &argv);
  int rank = comm::rank();
  int tp = rank % 2; // position in group 0
  const int64_t rows = 2, cols = 4;
  std::vector<float> in(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      in[i * cols + j] = value(rank, i, j);
  Descriptor2D inDesc = describe(in, rows, cols);
  // Peers in group 0: the same axis-0 coordinate, tp 0 and 1.
  int peer[2] = {rank - tp, rank - tp + 1};

  {
    std::vector<float> out(rows * cols), want(rows * cols);
    Descriptor2D outDesc = describe(out, rows, cols);
    cleave_rt_all_reduce_f32(2, &inDesc, 2, &outDesc, CLEAVE_REDUCE_SUM, 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        want[i * cols + j] = value(peer[0], i, j) + value(peer[1], i, j);
    check("all_reduce sum over tp", out, want);
  }
  {
    // Gather along axis 1: out[i][g * cols + j] = member g's in[i][j].
    std::vector<float> out(rows * cols * 2), want(rows * cols * 2);
    Descriptor2D outDesc = describe(out, rows, cols * 2);
    cleave_rt_all_gather_f32(2, &inDesc, 2, &outDesc, 1, 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int g = 0; g < 2; ++g)
        for (int64_t j = 0; j < cols; ++j)
          want[i * cols * 2 + g * cols + j] = value(peer[g], i, j);
    check("all_gather axis 1 over tp", out, want);
  }
  {
    // Reduce, then keep this member's half of axis 1.
    std::vector<float> out(rows * cols / 2), want(rows * cols / 2);
    Descriptor2D outDesc = describe(out, rows, cols / 2);
    cleave_rt_reduce_scatter_f32(2, &inDesc, 2, &outDesc, 1, CLEAVE_REDUCE_SUM,
                                 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols / 2; ++j) {
        int64_t col = tp * (cols / 2) + j;
        want[i * (cols / 2) + j] =
            value(peer[0], i, col) + value(peer[1], i, col);
      }
    check("reduce_scatter axis 1 over tp", out, want);
  }
  {
    // Split axis 1 into 2 parts, part g to member g; concatenate the parts
    // received along axis 0: out[g * rows + i][j] = member g's in[i][tp*2+j].
    std::vector<float> out(rows * 2 * cols / 2), want(rows * 2 * cols / 2);
    Descriptor2D outDesc = describe(out, rows * 2, cols / 2);
    cleave_rt_all_to_all_f32(2, &inDesc, 2, &outDesc, 1, 0, 0);
    for (int g = 0; g < 2; ++g)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols / 2; ++j)
          want[(g * rows + i) * (cols / 2) + j] =
              value(peer[g], i, tp * (cols / 2) + j);
    check("all_to_all split 1 concat 0 over tp", out, want);
  }
  {
    // Group 1 (axis 0): members rank % 2 + {0, 2}.
    std::vector<float> out(rows * cols), want(rows * cols);
    Descriptor2D outDesc = describe(out, rows, cols);
    cleave_rt_all_reduce_f32(2, &inDesc, 2, &outDesc, CLEAVE_REDUCE_MAX, 1);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        want[i * cols + j] = value(tp + 2, i, j);
    check("all_reduce max over dp", out, want);
  }
  {
    // A ring over the whole mesh (group 2: both axes): send to the next
    // rank, receive from the previous one. Even ranks send first.
    Descriptor2D sendDesc = inDesc;
    std::vector<float> got(rows * cols), want(rows * cols);
    Descriptor2D recvDesc = describe(got, rows, cols);
    int next = (rank + 1) % 4, previous = (rank + 3) % 4;
    if (rank % 2 == 0) {
      cleave_rt_send_f32(2, &sendDesc, next, 2);
      cleave_rt_recv_f32(2, &recvDesc, previous, 2);
    } else {
      cleave_rt_recv_f32(2, &recvDesc, previous, 2);
      cleave_rt_send_f32(2, &sendDesc, next, 2);
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        want[i * cols + j] = value(previous, i, j);
    check("send and recv around a ring", got, want);
  }
  if (rank == 0 && cleave_rt_grid_index(1) == 0 && cleave_rt_grid_index(0) == 0)
    std::printf("grid index: ok\n");
  int failed = comm::firstFailure(failures != 0);
  comm::finish();
  return failed < 0 ? 0 : 1;
}
