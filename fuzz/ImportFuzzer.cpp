//===- ImportFuzzer.cpp - libFuzzer target: bytes as an ONNX model ---------===//
//
// Each input is written to a file and imported as cleave-compile
// --compile-to=import would (inputs pinned where the model leaves them open
// is not attempted: an unpinned model is refused, which is an answer too).
// Every outcome but a clean import or an error is a finding: a crash, a
// sanitizer report, an assertion, a hang (libFuzzer's -timeout).
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *c = new mlir::MLIRContext();
    // Errors are the expected answer to most inputs: swallow them.
    c->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
    return c;
  }();
  static const std::string path =
      "/tmp/cleave-import-fuzz-" + std::to_string(getpid()) + ".onnx";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  cleave::ImportOptions options;
  // Keep a mutant that asks for a huge compile-time tensor quick to refuse.
  options.constantByteLimit = int64_t(64) << 20;
  (void)cleave::importOnnxModel(*context, path, options);
  return 0;
}
