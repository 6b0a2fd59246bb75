//===- Npy.h - numpy .npy arrays, read and written ------------------------===//
//
// The one .npy implementation of the project: the runtime reads inputs and
// writes outputs with it, the compiler reads --bind-input files with it.
// Versions 1 to 3, little endian, C order. Dtypes use Cleave's names (f32 f16
// bf16 f64 i64 i32 i16 i8 bool); bfloat16 has no numpy dtype and travels as
// uint16 bit patterns.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_NPY_H
#define CLEAVE_RUNTIME_NPY_H

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cleave::rt {

/// A bad or unreadable .npy file; the message names the file.
struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A .npy array: its Cleave dtype, shape and payload.
struct NpyArray {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Bytes of one element of Cleave dtype `dtype`, 0 if unknown.
size_t dtypeBytes(const std::string &dtype);

/// Parses the .npy bytes of `path` (the name is for messages).
NpyArray parseNpy(const std::string &path, const char *bytes, size_t size);
NpyArray readNpy(const std::string &path);
void writeNpy(const std::string &path, const std::string &dtype,
              const std::vector<int64_t> &shape, const void *data,
              size_t bytes);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_NPY_H
