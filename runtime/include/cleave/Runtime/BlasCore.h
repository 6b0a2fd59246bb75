//===- BlasCore.h - OpenBLAS kernels for CPUs OpenBLAS does not know -----===//
//
// Debian's OpenBLAS 0.3.21 falls back to its generic Prescott (SSE3)
// kernels on CPUs newer than it (Emerald Rapids), about 3x slower. It
// takes other kernels from OPENBLAS_CORETYPE, read only when it loads.
// Shared by the runtime (a program restarts itself with it) and cleave-run
// (which sets it for bundles built before the runtime did that).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_BLASCORE_H
#define CLEAVE_RUNTIME_BLASCORE_H

#include <cstring>

namespace cleave::rt {

/// The OPENBLAS_CORETYPE to ask for when OpenBLAS chose `core` (its core
/// name) on this CPU: SkylakeX on a CPU with AVX-512, Haswell on one with
/// AVX2, where `core` is the generic Prescott; otherwise null (keep it).
inline const char *betterBlasCore(const char *core) {
  if (!core || std::strcmp(core, "Prescott") != 0)
    return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
  return nullptr;
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_BLASCORE_H
