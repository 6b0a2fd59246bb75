//===- Buffer.h - Collective buffers as MLIR describes them -------*- C++ -===//
//
// The collective ABI passes buffers as MLIR unranked memrefs (Abi.h): the
// rank, then a ranked descriptor {allocated, aligned, offset, sizes[rank],
// strides[rank]}. Both backends (MPI on the host, NCCL on the device) read
// them the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_BUFFER_H
#define CLEAVE_RUNTIME_COMM_BUFFER_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cleave::rt::comm {

/// A buffer's first element, shape and element count.
struct View {
  char *data;
  std::vector<int64_t> shape;
  int64_t count;
  /// Row-major without gaps, as every collective requires.
  bool contiguous;
};

inline View viewOf(int64_t rank, void *descriptor, size_t elementBytes) {
  struct Ranked {
    void *allocated;
    char *aligned;
    int64_t offset;
    int64_t rest[];
  };
  auto *d = static_cast<Ranked *>(descriptor);
  View v{d->aligned + d->offset * elementBytes,
         {d->rest, d->rest + rank},
         1,
         true};
  int64_t expected = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    if (d->rest[rank + i] != expected && d->rest[i] != 1)
      v.contiguous = false;
    expected *= d->rest[i];
  }
  for (int64_t s : v.shape)
    v.count *= s;
  return v;
}

/// The product of `shape[from, to)`.
inline int64_t product(const std::vector<int64_t> &shape, size_t from,
                       size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= shape[i];
  return p;
}

} // namespace cleave::rt::comm

#endif // CLEAVE_RUNTIME_COMM_BUFFER_H
