//===- Float16.h - float16 and bfloat16 to and from float32 ----*- C++ -*-===//
//
// Bit-exact conversions shared by the runtime (16-bit collectives reduced in
// float32, 16-bit GEMMs on a float32 BLAS) and the compiler (weights stored
// in 16 bits for --precision). Narrowing rounds to nearest, ties to even;
// NaN stays NaN, overflow becomes infinity, float16 subnormals are kept.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FLOAT16_H
#define CLEAVE_RUNTIME_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace cleave::rt {

inline float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// `value >> shift` (shift >= 1), rounded to nearest, ties to even. A
/// carry out of the kept bits is wanted: it moves a float16 to the next
/// exponent (or from subnormal to normal).
inline uint32_t shiftRoundingToEven(uint32_t value, uint32_t shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1), mid = 1u << (shift - 1);
  return kept + (rest > mid || (rest == mid && (kept & 1)));
}

inline uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = ((bits >> 23) & 0xff) - 127 + 15;
  uint32_t man = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff)
    return sign | 0x7c00u | (man ? 0x200 : 0);
  if (exp >= 31)
    return sign | 0x7c00u;
  if (exp <= 0) // a float16 subnormal, or zero
    return exp < -10 ? sign
                     : sign | shiftRoundingToEven(man | 0x800000, 14 - exp);
  return sign | ((uint32_t(exp) << 10) + shiftRoundingToEven(man, 13));
}

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (bits >> 16) | 0x40;
  return (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_FLOAT16_H
