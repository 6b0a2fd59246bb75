//===- cleave-opt.cpp - mlir-opt with everything Cleave registers ---------===//
//
// The driver of the lit tests: every upstream dialect, pass and extension, plus
// Cleave's own dialects, passes and interface models as they are added.
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/OnnxImporter.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  cleave::registerImportDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
