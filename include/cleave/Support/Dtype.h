//===- Dtype.h - Cleave's names for element types -------------------------===//
//
// One name per element type, used in the model descriptor, the manifest and
// the suffixes of the runtime's collective functions: f32 f16 bf16 f64 bool
// i8 i16 i32 i64 (the names .npy files are read and written with); and the
// bytes a static tensor or buffer takes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_DTYPE_H
#define CLEAVE_SUPPORT_DTYPE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"

#include <algorithm>
#include <string>

namespace cleave {

/// The name of `type`, or "" for an element type Cleave's runtime does not
/// exchange.
inline std::string dtypeName(mlir::Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF64())
    return "f64";
  if (type.isInteger(1))
    return "bool";
  if (type.isInteger(8))
    return "i8";
  if (type.isInteger(16))
    return "i16";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  return "";
}

/// Bytes of a static shaped value of `type` as stored (an i1 takes a byte),
/// 0 for a dynamic shape.
inline int64_t storageBytes(mlir::ShapedType type) {
  if (!type.hasStaticShape())
    return 0;
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// Bytes of `value` if it is a static tensor or memref, else 0.
inline int64_t storageBytes(mlir::Value value) {
  auto type = llvm::dyn_cast<mlir::ShapedType>(value.getType());
  return type && type.hasRank() ? storageBytes(type) : 0;
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_DTYPE_H
