//===- cleave-opt.cpp - mlir-opt with everything Cleave registers ---------===//
//
// The driver of the lit tests: every upstream dialect, pass and extension, plus
// Cleave's own dialects, passes and interface models.
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Registration.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  cleave::registerEverything(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Cleave optimizer driver\n", registry));
}
