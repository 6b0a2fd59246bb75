//===- Parameters.h - The model's weights among @main's arguments ---------===//
//
// The importer makes each weight of the model an argument of @main tagged
// `cleave.param`. The preset, the rewrites that reshape projections and the
// passes that join them all ask the same question of a value: is it one?
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_PARAMETERS_H
#define CLEAVE_SUPPORT_PARAMETERS_H

#include "cleave/Support/Attributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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

} // namespace cleave

#endif // CLEAVE_SUPPORT_PARAMETERS_H
