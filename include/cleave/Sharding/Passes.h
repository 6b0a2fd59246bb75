//===- Passes.h - The sharding step as a pass -------------------*- C++ -*-===//

#ifndef CLEAVE_SHARDING_PASSES_H
#define CLEAVE_SHARDING_PASSES_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Sharding/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Sharding/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_SHARDING_PASSES_H
