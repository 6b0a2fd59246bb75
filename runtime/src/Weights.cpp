//===- Weights.cpp - Mapping and checking weights.bin ---------------------===//

#include "Runtime.h"

#include "Device.h"

#include "cleave/Runtime/WeightFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace cleave::rt;

AlignedBuffer::AlignedBuffer(size_t bytes, bool deviceOnly) : size(bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (onDevice()) {
    // A GPU program: memory its kernels can read and write.
    data = cleave_rt_device_alloc(rounded ? rounded : 64, !deviceOnly);
    return;
  }
  data = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data)
    throw RuntimeError("out of memory allocating " + std::to_string(bytes) +
                       " bytes");
  std::memset(data, 0, rounded ? rounded : 64);
}

AlignedBuffer::~AlignedBuffer() {
  if (onDevice())
    cleave_rt_device_free(data);
  else
    std::free(data);
}

WeightFile::WeightFile(const std::string &path, uint64_t expectedSize,
                       uint64_t expectedChecksum) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw RuntimeError("cannot open weight file '" + path +
                       "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw RuntimeError("cannot stat weight file '" + path + "'");
  }
  size = st.st_size;
  if (size != expectedSize || size < CLEAVE_WEIGHTS_HEADER_BYTES) {
    ::close(fd);
    throw RuntimeError("weight file '" + path + "' is corrupt: it holds " +
                       std::to_string(size) + " bytes, the model expects " +
                       std::to_string(expectedSize));
  }
  void *mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED)
    throw RuntimeError("cannot map weight file '" + path +
                       "': " + std::strerror(errno));
  base = static_cast<const char *>(mapped);
  uint64_t storedSize, storedChecksum;
  std::memcpy(&storedSize, base + 8, 8);
  std::memcpy(&storedChecksum, base + 16, 8);
  cleave_checksum_state state;
  cleave_checksum_init(&state);
  cleave_checksum_update(&state, base + CLEAVE_WEIGHTS_HEADER_BYTES,
                         size - CLEAVE_WEIGHTS_HEADER_BYTES);
  uint64_t actual = cleave_checksum_finish(&state);
  if (std::memcmp(base, CLEAVE_WEIGHTS_MAGIC, 8) != 0 || storedSize != size ||
      storedChecksum != expectedChecksum || actual != expectedChecksum) {
    munmap(const_cast<char *>(base), size);
    base = nullptr;
    throw RuntimeError("weight file '" + path +
                       "' is corrupt: its checksum does not match the model's");
  }
}

WeightFile::~WeightFile() {
  if (base)
    munmap(const_cast<char *>(base), size);
}
