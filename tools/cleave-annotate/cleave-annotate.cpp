//===- cleave-annotate.cpp - Writes sharding hints into an ONNX model -----===//
//
// cleave-annotate MODEL.onnx --mesh dp=2,tp=2 --shard-hints FILE.yaml -o
// OUT.onnx The library does the work (cleave/Sharding/Annotate.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/Annotate.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
using namespace cleave;

static cl::OptionCategory category("cleave-annotate options");
static cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                                      cl::cat(category));
static cl::opt<std::string> outputPath("o", cl::desc("The annotated model"),
                                       cl::value_desc("OUT.onnx"),
                                       cl::cat(category));
static cl::opt<std::string>
    meshOption("mesh",
               cl::desc("Device mesh the hints name, e.g. tp=4 or dp=2,tp=2; "
                        "recorded in the model as metadata 'cleave.mesh'"),
               cl::value_desc("AXIS=N[,AXIS=N]"), cl::cat(category));
static cl::opt<std::string>
    hintsPath("shard-hints",
              cl::desc("YAML hints file (the format cleave-compile reads)"),
              cl::value_desc("FILE.yaml"), cl::cat(category));

static int fail(const Twine &message) {
  WithColor::error(errs(), "cleave-annotate") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&category, &getColorCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "cleave-annotate: writes sharding hints into an ONNX model as ONNX's own "
      "sharding fields (IR version 11 ShardingSpecProto in each node's "
      "device_configurations), so that the model carries its plan; "
      "cleave-compile reads them back.\n");
  if (modelPath.empty() || outputPath.empty() || meshOption.empty() ||
      hintsPath.empty())
    return fail("usage: cleave-annotate MODEL.onnx --mesh AXIS=N[,...] "
                "--shard-hints FILE.yaml -o OUT.onnx");
  auto mesh = parseMesh(meshOption);
  if (!mesh)
    return fail(toString(mesh.takeError()));
  auto hints = parseHintFile(hintsPath);
  if (!hints)
    return fail(toString(hints.takeError()));
  auto result = annotateOnnxModel(modelPath, outputPath, *mesh, *hints);
  if (!result)
    return fail(toString(result.takeError()));
  if (!result->unmatched.empty())
    WithColor::warning(errs(), "cleave-annotate")
        << result->unmatched.size()
        << (result->unmatched.size() == 1 ? " hint matches" : " hints match")
        << " no tensor of the model: " << join(result->unmatched, " ") << "\n";
  outs() << "cleave-annotate: " << result->annotated
         << " tensors annotated for " << mesh->str() << " in '" << outputPath
         << "'\n";
  return 0;
}
