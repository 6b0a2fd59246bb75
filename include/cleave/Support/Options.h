//===- Options.h - The choices several phases make alike --------*- C++ -*-===//
//
// The code generation target, the GEMM operands' precision and the CPU's
// GEMM backend, as enums with one spelling each: the driver's flags, the
// passes' textual options and the bundle's manifest use these names, and
// every decision compares enums, not strings.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_OPTIONS_H
#define CLEAVE_SUPPORT_OPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace cleave {

/// Where the program runs.
enum class Target {
  /// Host code: GEMMs on the runtime's CPU kernels, loops on OpenMP.
  CPU,
  /// One kernel per fused op as a cubin, GEMMs on cuBLASLt, NCCL.
  CUDA,
};

/// The operand type of GEMMs (results stay float32).
enum class Precision { F32, BF16, F16 };

/// How the CPU target runs float32 GEMMs.
enum class GemmBackend {
  /// Calls to the runtime's GEMM entry points (its own kernel, OpenBLAS).
  Library,
  /// Compiled loops like every other op (kept for measurement).
  Loops,
};

inline llvm::StringRef targetName(Target target) {
  return target == Target::CUDA ? "cuda" : "cpu";
}

inline std::optional<Target> parseTarget(llvm::StringRef name) {
  if (name == "cpu")
    return Target::CPU;
  if (name == "cuda")
    return Target::CUDA;
  return std::nullopt;
}

inline llvm::StringRef precisionName(Precision precision) {
  switch (precision) {
  case Precision::F32:
    return "f32";
  case Precision::BF16:
    return "bf16";
  case Precision::F16:
    return "f16";
  }
  return "f32";
}

inline std::optional<Precision> parsePrecision(llvm::StringRef name) {
  for (Precision p : {Precision::F32, Precision::BF16, Precision::F16})
    if (precisionName(p) == name)
      return p;
  return std::nullopt;
}

/// Each enum's spellings, for cleave-compile's flags and cleave-opt's
/// pipeline options alike.
inline auto targetValues() {
  return llvm::cl::values(
      clEnumValN(Target::CPU, "cpu", "the host CPU"),
      clEnumValN(Target::CUDA, "cuda",
                 "a kernel per fused op as a cubin, GEMMs on cuBLASLt, "
                 "collectives on NCCL, one stream; not yet run on a GPU by "
                 "Cleave's tests"));
}
inline auto precisionValues() {
  return llvm::cl::values(clEnumValN(Precision::F32, "f32", "float32"),
                          clEnumValN(Precision::BF16, "bf16", "bfloat16"),
                          clEnumValN(Precision::F16, "f16", "float16"));
}
inline auto gemmBackendValues() {
  return llvm::cl::values(
      clEnumValN(GemmBackend::Library, "blas",
                 "the runtime's GEMM kernels and OpenBLAS"),
      clEnumValN(GemmBackend::Loops, "loops",
                 "compiled like every other op; for comparison"));
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_OPTIONS_H
