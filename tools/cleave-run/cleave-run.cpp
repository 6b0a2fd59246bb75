//===- cleave-run.cpp - Runs a Cleave program bundle ----------------------===//
//
// Checks the bundle (manifest, program, rank count) and starts its program
// with the user's options. The program itself validates inputs, runs the model
// and writes the outputs; this launcher is where multi-rank launching goes.
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

static const char *kUsage = R"(usage: cleave-run BUNDLE --input NAME=FILE.npy ... --output-dir DIR
                  [--bench N] [--threads N]

Runs a bundle written by cleave-compile.
  --input NAME=FILE.npy  one per model input (dtype and shape as compiled)
  --output-dir DIR       receives one NAME.npy per model output, written only
                         when the run succeeds (characters outside
                         [A-Za-z0-9._-] in NAME become '_')
  --bench N              run N times after warm-up and print p50/p90 latency
  --threads N            threads for the GEMMs (default: CLEAVE_NUM_THREADS,
                         else all cores)
bfloat16 tensors are exchanged as uint16 arrays of their bit patterns.
)";

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "cleave-run") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    llvm::outs() << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string bundle = argv[1];
  llvm::SmallString<256> manifestPath(bundle);
  llvm::sys::path::append(manifestPath, "manifest.json");
  auto text = llvm::MemoryBuffer::getFile(manifestPath);
  if (!text)
    return fail("'" + bundle + "' is not a Cleave bundle: cannot read '" +
                manifestPath + "': " + text.getError().message());
  auto manifest = llvm::json::parse((*text)->getBuffer());
  if (!manifest)
    return fail("'" + manifestPath +
                "' is not valid JSON: " + llvm::toString(manifest.takeError()));
  const llvm::json::Object *root = manifest->getAsObject();
  std::optional<int64_t> ranks = root ? root->getInteger("ranks") : std::nullopt;
  if (!root || root->getString("format") != "cleave-bundle" || !ranks)
    return fail("'" + manifestPath + "' is not a Cleave bundle manifest");
  if (*ranks != 1)
    return fail("the bundle needs " + llvm::Twine(*ranks) +
                " ranks; this cleave-run launches single-rank bundles only");

  llvm::SmallString<256> program(bundle);
  llvm::sys::path::append(program, "program");
  if (!llvm::sys::fs::can_execute(program))
    return fail("the bundle's program '" + program + "' is missing");

  // OpenBLAS reads this when it loads: its threads should sleep soon after a
  // GEMM instead of spinning while the model's own loops run.
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
  std::vector<std::string> args = {program.str().str(), "--bundle", bundle};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  std::vector<char *> argvOut;
  for (std::string &a : args)
    argvOut.push_back(a.data());
  argvOut.push_back(nullptr);
  execv(program.c_str(), argvOut.data());
  return fail("cannot start '" + program + "': " + std::strerror(errno));
}
