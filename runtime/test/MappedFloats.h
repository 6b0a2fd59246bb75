//===- MappedFloats.h - Floats in a read-only mapped file -------*- C++ -*-===//
//
// The packed and integer GEMMs keep a B from the mapped weight file only;
// their tests and benchmark put their B matrices in such a mapping.
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
template <typename T> const T *mappedValues(const std::vector<T> &values) {
  char path[] = "/tmp/cleave-mapped-values-XXXXXX";
  size_t bytes = values.size() * sizeof(T);
  int fd = mkstemp(path);
  if (fd < 0 ||
      write(fd, values.data(), bytes) != static_cast<ssize_t>(bytes)) {
    std::perror("writing the mapped values' file");
    std::exit(2);
  }
  void *mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  unlink(path);
  if (mapped == MAP_FAILED) {
    std::perror("mapping the mapped values' file");
    std::exit(2);
  }
  return static_cast<const T *>(mapped);
}

inline const float *mappedFloats(const std::vector<float> &values) {
  return mappedValues(values);
}

} // namespace cleave::rt::test

#endif // CLEAVE_RUNTIME_TEST_MAPPEDFLOATS_H
