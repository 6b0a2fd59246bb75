//===- RuntimeNames.h - The runtime function a target calls ----*- C++ -*-===//
//
// Abi.h names the CPU runtime's functions (cleave_rt_...); a CUDA program
// calls the same function of libcleave_rt_cuda, whose name has
// CLEAVE_ABI_CUDA_PREFIX in place of CLEAVE_ABI_PREFIX.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_RUNTIMENAMES_H
#define CLEAVE_SUPPORT_RUNTIMENAMES_H

#include "cleave/Runtime/Abi.h"
#include "cleave/Support/Options.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace cleave {

/// The name of the runtime function `cpuName` for `target`.
inline std::string runtimeFunction(llvm::StringRef cpuName, Target target) {
  if (target != Target::CUDA || !cpuName.starts_with(CLEAVE_ABI_PREFIX))
    return cpuName.str();
  return CLEAVE_ABI_CUDA_PREFIX +
         cpuName.drop_front(llvm::StringRef(CLEAVE_ABI_PREFIX).size()).str();
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_RUNTIMENAMES_H
