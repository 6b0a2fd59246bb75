//===- Parameters.h - The model's weights among @main's arguments ---------===//
//
// The importer makes each weight of the model an argument of @main tagged
// `cleave.param`. The preset, the rewrites that reshape projections and the
// passes that join them all ask the same question of a value: is it one?
// (or, for a weight stored quantized, what does it dequantize?)
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_PARAMETERS_H
#define CLEAVE_SUPPORT_PARAMETERS_H

#include "cleave/Support/Attributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"

namespace cleave {

/// `v` as a parameter of `main` (an entry block argument tagged
/// `cleave.param`), or null.
inline mlir::BlockArgument parameterArgument(mlir::func::FuncOp main,
                                             mlir::Value v) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(v);
  if (arg && arg.getOwner() == &main.getBody().front() &&
      main.getArgAttr(arg.getArgNumber(), kParamAttrName))
    return arg;
  return nullptr;
}

/// The one operand of elementwise `generic` that has the result's shape,
/// read element for element, when every other operand is broadcast onto it
/// (a scalar, a per-channel vector), or the integers of a dequantization
/// the importer marked (kDequantizeAttrName): the integers a dequantization
/// (widen, subtract the zero point, scale) reads. A weight stored quantized
/// reaches its GEMM through a chain of these. Null otherwise.
inline mlir::Value elementwiseSource(mlir::linalg::GenericOp generic) {
  if (generic.getNumDpsInits() != 1 || !mlir::linalg::isElementwise(generic) ||
      !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
           .isIdentity())
    return nullptr;
  llvm::ArrayRef<int64_t> shape =
      llvm::cast<mlir::RankedTensorType>(generic.getResult(0).getType())
          .getShape();
  if (generic->hasAttr(kDequantizeAttrName))
    return generic.getDpsInputs()[0];
  mlir::Value source;
  for (mlir::OpOperand *in : generic.getDpsInputOperands()) {
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(in->get().getType());
    if (!type || type.getShape() != shape)
      continue;
    if (source || !generic.getMatchingIndexingMap(in).isIdentity())
      return nullptr;
    source = in->get();
  }
  return source;
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_PARAMETERS_H
