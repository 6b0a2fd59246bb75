//===- Npy.cpp - numpy .npy reading and writing ---------------------------===//
//
// See cleave/Runtime/Npy.h. Shared by the runtime and the compiler.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Npy.h"

#include <cerrno>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

using namespace cleave::rt;

namespace {

struct DtypeName {
  const char *cleave;
  const char *numpy;
};
const DtypeName kDtypes[] = {{"f32", "<f4"}, {"f16", "<f2"},  {"f64", "<f8"},
                             {"i64", "<i8"}, {"i32", "<i4"},  {"i16", "<i2"},
                             {"i8", "|i1"},  {"bool", "|b1"}, {"bf16", "<u2"},
                             {"u8", "|u1"}};

std::string numpyDtype(const std::string &dtype) {
  for (const DtypeName &d : kDtypes)
    if (dtype == d.cleave)
      return d.numpy;
  throw NpyError("no .npy dtype for '" + dtype + "'");
}

std::string cleaveDtype(const std::string &descr) {
  for (const DtypeName &d : kDtypes)
    if (descr == d.numpy)
      return d.cleave;
  if (descr == "<i1" || descr == "i1")
    return "i8";
  if (descr == "<u1" || descr == "u1")
    return "u8";
  return "";
}

/// The value text of `key` in a Python dict literal header.
std::string headerField(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  size_t colon = header.find(':', at);
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos)
    return "";
  if (header[start] == '\'') {
    size_t end = header.find('\'', start + 1);
    return header.substr(start + 1, end - start - 1);
  }
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    return header.substr(start + 1, end - start - 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

} // namespace

size_t cleave::rt::dtypeBytes(const std::string &dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "f64" || dtype == "i64")
    return 8;
  if (dtype == "f16" || dtype == "bf16" || dtype == "i16")
    return 2;
  if (dtype == "i8" || dtype == "u8" || dtype == "bool")
    return 1;
  return 0;
}

NpyArray cleave::rt::readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw NpyError("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  return parseNpy(path, bytes.data(), bytes.size());
}

NpyArray cleave::rt::parseNpy(const std::string &path, const char *data,
                              size_t size) {
  std::string_view bytes(data, size);
  auto bad = [&](const std::string &why) {
    return NpyError("'" + path + "' is not a valid .npy file: " + why);
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    throw bad("missing the \\x93NUMPY magic");
  uint8_t major = bytes[6];
  size_t headerStart = major == 1 ? 10 : 12;
  if (bytes.size() < headerStart)
    throw bad("truncated header");
  size_t headerLen =
      static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
  if (major != 1)
    headerLen |= static_cast<size_t>(static_cast<uint8_t>(bytes[10])) << 16 |
                 static_cast<size_t>(static_cast<uint8_t>(bytes[11])) << 24;
  if (bytes.size() < headerStart + headerLen)
    throw bad("truncated header");
  std::string header(bytes.substr(headerStart, headerLen));

  NpyArray array;
  std::string descr = headerField(header, "descr");
  array.dtype = cleaveDtype(descr);
  if (array.dtype.empty())
    throw bad("unsupported dtype '" + descr + "'");
  if (header.find("'shape'") == std::string::npos)
    throw bad("no 'shape' in the header");
  if (headerField(header, "fortran_order") == "True")
    throw bad("Fortran-ordered arrays are not supported; save in C order");
  std::istringstream dims(headerField(header, "shape"));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    size_t first = dim.find_first_not_of(' ');
    if (first == std::string::npos)
      continue;
    char *end = nullptr;
    long long value = std::strtoll(dim.c_str() + first, &end, 10);
    if (end == dim.c_str() + first || value < 0)
      throw bad("malformed shape '" + headerField(header, "shape") + "'");
    array.shape.push_back(value);
  }
  size_t count = 1;
  for (int64_t d : array.shape)
    count *= d;
  size_t need = count * dtypeBytes(array.dtype);
  size_t dataStart = headerStart + headerLen;
  if (bytes.size() - dataStart < need)
    throw bad("it holds fewer bytes than its shape needs");
  array.data.assign(data + dataStart, data + dataStart + need);
  return array;
}

void cleave::rt::writeNpy(const std::string &path, const std::string &dtype,
                          const std::vector<int64_t> &shape, const void *data,
                          size_t bytes) {
  std::string shapeText;
  for (int64_t d : shape)
    shapeText += std::to_string(d) + ", ";
  if (shape.size() > 1)
    shapeText.erase(shapeText.size() - 2);
  else if (shape.size() == 1)
    shapeText.erase(shapeText.size() - 1);
  std::string header = "{'descr': '" + numpyDtype(dtype) +
                       "', 'fortran_order': False, 'shape': (" + shapeText +
                       "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw NpyError("cannot write '" + path + "': " + std::strerror(errno));
  uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  char lenBytes[2] = {static_cast<char>(len & 0xff),
                      static_cast<char>(len >> 8)};
  out.write(lenBytes, 2);
  out.write(header.data(), header.size());
  out.write(static_cast<const char *>(data), bytes);
  out.close();
  if (!out)
    throw NpyError("cannot write '" + path + "': " + std::strerror(errno));
}
