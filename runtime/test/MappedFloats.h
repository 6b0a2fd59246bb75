//===- MappedFloats.h - Floats in a read-only mapped file -------*- C++ -*-===//
//
// The packed GEMM takes a B from the mapped weight file only; its test and
// its benchmark put their B matrices in such a mapping.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TEST_MAPPEDFLOATS_H
#define CLEAVE_RUNTIME_TEST_MAPPEDFLOATS_H

#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace cleave::rt::test {

/// `values` written to a temporary file (removed at once) and mapped back
/// read-only and private, as cleave-run maps a weight file. Exits with
/// status 2, saying why, if that fails.
inline const float *mappedFloats(const std::vector<float> &values) {
  char path[] = "/tmp/cleave-mapped-floats-XXXXXX";
  size_t bytes = values.size() * sizeof(float);
  int fd = mkstemp(path);
  if (fd < 0 ||
      write(fd, values.data(), bytes) != static_cast<ssize_t>(bytes)) {
    std::perror("writing the mapped floats' file");
    std::exit(2);
  }
  void *mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  unlink(path);
  if (mapped == MAP_FAILED) {
    std::perror("mapping the mapped floats' file");
    std::exit(2);
  }
  return static_cast<const float *>(mapped);
}

} // namespace cleave::rt::test

#endif // CLEAVE_RUNTIME_TEST_MAPPEDFLOATS_H
