//===- Bundle.cpp - Writing the program bundle ----------------------------===//
//
// Assembles the bundle in `OUT.partial`: weights first (their checksum goes
// into the program), then the object code, the link with the runtime, the
// manifest and the plan; then renames the folder to OUT.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Bundle.h"
#include "cleave/Support/Attributes.h"

#include "LlvmEmitter.h"

#include "cleave/Import/OnnxImporter.h"
#include "cleave/Import/WeightWriter.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Runtime/Abi.h"
#include "cleave/Sharding/Mesh.h"
#include "cleave/Sharding/Plan.h"
#include "cleave/Support/Dtype.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <future>

using namespace mlir;
using namespace cleave;

#ifndef CLEAVE_LLVM_TOOLS_DIR
#define CLEAVE_LLVM_TOOLS_DIR ""
#endif

/// The most bytes the allocations of `main` hold at once, in program order
/// (allocations are freed by cleave-free-buffers). A pipelined program's
/// stages are walked one after another: each frees what it allocates.
static uint64_t activationPeak(func::FuncOp main) {
  uint64_t live = 0, peak = 0;
  llvm::DenseMap<Value, uint64_t> sizes;
  main.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      uint64_t bytes = storageBytes(alloc.getType());
      sizes[alloc.getResult()] = bytes;
      live += bytes;
      peak = std::max(peak, live);
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      live -= sizes.lookup(dealloc.getMemref());
    }
  });
  return peak;
}

/// The module's `cleave.pipeline` plan (pipeline-lower-stages), if any.
static PipelineSignature pipelineOf(ModuleOp module) {
  PipelineSignature p;
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttrName);
  if (!plan)
    return p;
  p.axis = plan.getAs<IntegerAttr>("axis").getInt();
  p.stages = plan.getAs<IntegerAttr>("stages").getInt();
  p.microbatches = plan.getAs<IntegerAttr>("microbatches").getInt();
  auto doubles = [&](StringRef name, std::vector<double> &out) {
    if (auto list = plan.getAs<ArrayAttr>(name))
      for (auto v : list.getAsRange<FloatAttr>())
        out.push_back(v.getValueAsDouble());
  };
  doubles("seconds", p.seconds);
  doubles("memory", p.memory);
  for (auto t : plan.getAs<ArrayAttr>("transfers").getAsRange<DictionaryAttr>())
    p.transfers.push_back({t.getAs<IntegerAttr>("from").getInt(),
                           t.getAs<IntegerAttr>("to").getInt(),
                           uint64_t(t.getAs<IntegerAttr>("bytes").getInt()),
                           t.getAs<StringAttr>("node").str()});
  return p;
}

/// What a parameter's argument attributes say about how the model's tensor
/// is held: its split over the mesh (and so its shape in the model), the
/// reorder of a fused projection, its pipeline stages, who chose the split.
static LogicalResult describeParameter(BufferSignature &buffer,
                                       DictionaryAttr attrs,
                                       const MeshSpec &mesh,
                                       func::FuncOp main) {
  buffer.globalShape = buffer.shape;
  if (!attrs)
    return success();
  if (auto split = attrs.getAs<ArrayAttr>(kShardingAttrName)) {
    for (auto [d, axes] :
         llvm::enumerate(split.getAsRange<DenseI16ArrayAttr>())) {
      buffer.split.emplace_back(axes.asArrayRef());
      for (int16_t a : axes.asArrayRef())
        buffer.globalShape[d] *= mesh.axisSizes[a];
    }
  }
  if (auto block = attrs.getAs<DenseI64ArrayAttr>(kParamBlockAttrName)) {
    if (block.size() != 2 || block[0] < 0 ||
        block[0] >= int64_t(buffer.shape.size()) || block[1] < 0 ||
        attrs.get(kColumnGroupsAttrName))
      return main.emitError()
             << "parameter '" << buffer.name
             << "' does not say which block of the model's tensor it holds, "
                "or is also stored reordered";
    buffer.blockDim = block[0];
    buffer.blockOffset = block[1];
  }
  if (auto groups = attrs.getAs<DenseI64ArrayAttr>(kColumnGroupsAttrName))
    buffer.columnGroups.assign(groups.asArrayRef().begin(),
                               groups.asArrayRef().end());
  if (auto stages = attrs.getAs<DenseI64ArrayAttr>(kStagesAttrName))
    buffer.stages.assign(stages.asArrayRef().begin(),
                         stages.asArrayRef().end());
  if (auto origin = attrs.getAs<StringAttr>(kShardingOriginAttrName))
    buffer.origin = origin.str();
  return success();
}

FailureOr<ModelSignature> cleave::extractSignature(ModuleOp module) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main) {
    module.emitError("no func @main");
    return failure();
  }
  ModelSignature signature;
  if (std::optional<MeshSpec> mesh = meshOf(module))
    signature.mesh = std::move(*mesh);
  if (auto groups = module->getAttrOfType<ArrayAttr>(kCommGroupsAttrName))
    for (auto group : groups.getAsRange<DenseI16ArrayAttr>())
      signature.commGroups.emplace_back(group.asArrayRef());
  if (auto list = module->getAttrOfType<ArrayAttr>(kCollectivesAttrName))
    for (auto entry : list.getAsRange<DictionaryAttr>()) {
      CollectiveSignature c;
      c.kind = entry.getAs<StringAttr>("kind").str();
      c.axes.assign(entry.getAs<DenseI16ArrayAttr>("axes").asArrayRef().begin(),
                    entry.getAs<DenseI16ArrayAttr>("axes").asArrayRef().end());
      c.bytes = entry.getAs<IntegerAttr>("bytes").getInt();
      c.node = entry.getAs<StringAttr>("node").str();
      signature.collectives.push_back(std::move(c));
    }
  if (auto list = module->getAttrOfType<ArrayAttr>(kIndexBoundsAttrName))
    for (auto entry : list.getAsRange<DictionaryAttr>()) {
      IndexBoundSignature bound;
      bound.input = entry.getAs<StringAttr>("input").str();
      bound.node = entry.getAs<StringAttr>("node").str();
      bound.op = entry.getAs<StringAttr>("op").str();
      bound.low = entry.getAs<IntegerAttr>("low").getInt();
      bound.high = entry.getAs<IntegerAttr>("high").getInt();
      signature.indexBounds.push_back(std::move(bound));
    }
  signature.pipeline = pipelineOf(module);
  for (int64_t r = 0; r < signature.mesh.rankCount(); ++r)
    if (signature.stageOf(r) == signature.pipeline.stages - 1) {
      signature.writerRank = r;
      break;
    }
  signature.activationPeakBytes = activationPeak(main);
  llvm::StringSet<> unsignedIO;
  if (auto list = module->getAttrOfType<ArrayAttr>(kUnsignedIOAttrName))
    for (auto name : list.getAsRange<StringAttr>())
      unsignedIO.insert(name.getValue());
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    auto type = dyn_cast<MemRefType>(main.getArgument(i).getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity()) {
      main.emitError() << "argument " << i
                       << " is not a static, row-major memref";
      return failure();
    }
    BufferSignature buffer;
    if (auto name = main.getArgAttrOfType<StringAttr>(i, kInputAttrName)) {
      buffer.kind = BufferSignature::Kind::Input;
      buffer.name = name.str();
    } else if (auto name =
                   main.getArgAttrOfType<StringAttr>(i, kParamAttrName)) {
      buffer.kind = BufferSignature::Kind::Param;
      buffer.name = name.str();
    } else if (auto name =
                   main.getArgAttrOfType<StringAttr>(i, kOutputAttrName)) {
      buffer.kind = BufferSignature::Kind::Output;
      buffer.name = name.str();
    } else {
      main.emitError() << "argument " << i << " has no cleave name";
      return failure();
    }
    buffer.dtype = dtypeName(type.getElementType());
    // u8: the graph's uint8 inputs and outputs, held in i8 (the importer
    // refuses UINT16 ones).
    if (buffer.kind != BufferSignature::Kind::Param &&
        unsignedIO.contains(buffer.name) && buffer.dtype == "i8")
      buffer.dtype = "u8";
    if (buffer.dtype.empty()) {
      main.emitError() << "argument " << i << " has unsupported element type "
                       << type.getElementType();
      return failure();
    }
    buffer.shape.assign(type.getShape().begin(), type.getShape().end());
    buffer.bytes = storageBytes(type);
    if (failed(describeParameter(buffer, main.getArgAttrDict(i), signature.mesh,
                                 main)))
      return failure();
    auto parts = main.getArgAttrOfType<ArrayAttr>(i, kJoinedAttrName);
    auto widths =
        main.getArgAttrOfType<DenseI64ArrayAttr>(i, kJoinedWidthsAttrName);
    auto axis = main.getArgAttrOfType<IntegerAttr>(i, kJoinedAxisAttrName);
    auto isPart = [](Attribute a) {
      auto attrs = dyn_cast<DictionaryAttr>(a);
      return attrs && attrs.getAs<StringAttr>(kParamAttrName);
    };
    if (parts &&
        (!widths || widths.size() != int64_t(parts.size()) || !axis ||
         axis.getInt() < 0 || axis.getInt() >= int64_t(buffer.shape.size()) ||
         !llvm::all_of(parts, isPart))) {
      main.emitError() << "joined parameter '" << buffer.name
                       << "' does not say how its parts are joined";
      return failure();
    }
    if (parts)
      buffer.joinAxis = axis.getInt();
    for (auto [attrs, width] :
         llvm::zip(parts ? parts.getValue() : ArrayRef<Attribute>(),
                   widths ? widths.asArrayRef() : ArrayRef<int64_t>())) {
      BufferSignature part;
      part.kind = BufferSignature::Kind::Param;
      auto partAttrs = cast<DictionaryAttr>(attrs);
      part.name = partAttrs.getAs<StringAttr>(kParamAttrName).str();
      part.dtype = buffer.dtype;
      part.shape = buffer.shape;
      part.shape[buffer.joinAxis] = width;
      part.bytes = buffer.bytes / buffer.shape[buffer.joinAxis] * width;
      if (failed(describeParameter(part, partAttrs, signature.mesh, main)))
        return failure();
      buffer.parts.push_back(std::move(part));
    }
    signature.buffers.push_back(std::move(buffer));
  }
  return signature;
}

/// Percent-encodes the characters the descriptor uses as separators.
static std::string encodeName(StringRef name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '%' || c == '\n' || c == '\t' || c == '\r')
      out += llvm::formatv("%{0:X-2}", static_cast<unsigned char>(c)).str();
    else
      out.push_back(c);
  }
  return out;
}

static std::string descriptorText(const ModelSignature &signature) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << CLEAVE_DESC_HEADER " " << CLEAVE_ABI_VERSION << "\n";
  os << CLEAVE_DESC_WEIGHTS " " << signature.weightChecksums.size();
  for (auto [bytes, checksum] :
       llvm::zip(signature.weightFileBytes, signature.weightChecksums))
    os << " " << bytes << " " << llvm::format_hex_no_prefix(checksum, 16);
  os << "\n";
  const PipelineSignature &pipeline = signature.pipeline;
  if (pipeline.stages > 1 || pipeline.microbatches > 1) {
    os << CLEAVE_DESC_PIPELINE " " << pipeline.axis << " " << pipeline.stages
       << " " << pipeline.microbatches;
    for (double s : pipeline.seconds)
      os << " " << llvm::formatv("{0:e}", s * pipeline.microbatches);
    os << "\n";
  }
  os << CLEAVE_DESC_WRITER " " << signature.writerRank << "\n";
  if (!signature.mesh.axisSizes.empty()) {
    os << CLEAVE_DESC_MESH " " << signature.mesh.rankCount() << " "
       << signature.mesh.axisSizes.size();
    for (int64_t size : signature.mesh.axisSizes)
      os << " " << size;
    os << "\n";
    for (const auto &group : signature.commGroups) {
      os << CLEAVE_DESC_GROUP " " << group.size();
      for (int16_t axis : group)
        os << " " << axis;
      os << "\n";
    }
  }
  for (const BufferSignature &b : signature.buffers) {
    os << (b.kind == BufferSignature::Kind::Input   ? CLEAVE_DESC_INPUT
           : b.kind == BufferSignature::Kind::Param ? CLEAVE_DESC_PARAM
                                                    : CLEAVE_DESC_OUTPUT)
       << " " << encodeName(b.name) << " " << b.dtype << " " << b.shape.size();
    for (int64_t d : b.shape)
      os << " " << d;
    if (b.kind == BufferSignature::Kind::Param) {
      os << " " << b.bytes;
      for (int64_t offset : b.offsets)
        os << " " << offset;
    }
    os << "\n";
  }
  for (const IndexBoundSignature &b : signature.indexBounds)
    os << CLEAVE_DESC_BOUNDS " " << encodeName(b.input) << " " << b.low << " "
       << b.high << " " << encodeName("'" + b.node + "' (" + b.op + ")")
       << "\n";
  return text;
}

static std::string findClang() {
  for (StringRef name : {"clang++-22", "clang++"}) {
    if (auto path = llvm::sys::findProgramByName(name, {CLEAVE_LLVM_TOOLS_DIR}))
      return *path;
    if (auto path = llvm::sys::findProgramByName(name))
      return *path;
  }
  return "";
}

static LogicalResult linkProgram(ArrayRef<std::string> objects,
                                 StringRef runtime, StringRef output,
                                 StringRef logPath, StringRef cudaRoot) {
  std::string clang = findClang();
  if (clang.empty()) {
    llvm::errs() << "cleave-compile: error: clang++-22 not found to link the "
                    "program\n";
    return failure();
  }
  SmallVector<std::string> args = {clang, "-o", output.str()};
  args.append(objects.begin(), objects.end());
  if (!cudaRoot.empty()) {
    // libcleave_rt_cuda.a beside libcleave_rt.a, before it: it uses it.
    SmallString<256> cudaRuntime(llvm::sys::path::parent_path(runtime));
    llvm::sys::path::append(cudaRuntime, "libcleave_rt_cuda.a");
    args.push_back(std::string(cudaRuntime));
  }
  args.push_back(runtime.str());
  for (StringRef a :
       {"-fuse-ld=lld", "-lopenblas", "-lmpich", "-fopenmp", "-lm"})
    args.push_back(a.str());
  // cuBLASLt and cudart are in the toolkit's lib64; CUDA 13 puts NCCL in
  // its lib.
  if (!cudaRoot.empty())
    for (std::string a :
         {"-L" + cudaRoot.str() + "/lib64", "-L" + cudaRoot.str() + "/lib",
          std::string("-lcublasLt"), std::string("-lcudart"),
          std::string("-lnccl"), "-Wl,-rpath," + cudaRoot.str() + "/lib64",
          "-Wl,-rpath," + cudaRoot.str() + "/lib"})
      args.push_back(a);
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(clang, argRefs, std::nullopt, redirects, 0,
                                     0, &error);
  if (rc != 0) {
    auto log = llvm::MemoryBuffer::getFile(logPath);
    llvm::errs() << "cleave-compile: error: linking the program failed"
                 << (error.empty() ? "" : ": " + error) << "\n"
                 << (log ? (*log)->getBuffer() : "") << "\n";
    return failure();
  }
  return success();
}

static llvm::json::Array bufferList(const ModelSignature &signature,
                                    BufferSignature::Kind kind) {
  llvm::json::Array list;
  for (const BufferSignature &b : signature.buffers)
    if (b.kind == kind)
      list.push_back(llvm::json::Object{
          {"name", b.name},
          {"dtype", b.dtype},
          {"shape", llvm::json::Array(b.shape)},
      });
  return list;
}

static LogicalResult writeText(StringRef path, StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec) {
    os << text;
    os.close();
    ec = os.error();
    // Cleared, or the stream's destructor would abort the compiler.
    os.clear_error();
  }
  if (!ec)
    return success();
  llvm::errs() << "cleave-compile: error: cannot write '" << path
               << "': " << ec.message() << "\n";
  return failure();
}

/// Whether `dir` holds a bundle cleave-compile wrote: a manifest of the
/// bundle format, and nothing but what a bundle holds.
static bool isBundle(llvm::StringRef dir) {
  namespace fs = llvm::sys::fs;
  auto manifest = llvm::MemoryBuffer::getFile(dir + "/manifest.json");
  if (!manifest)
    return false;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*manifest)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return false;
  }
  const llvm::json::Object *root = json->getAsObject();
  if (!root || root->getString("format") != "cleave-bundle")
    return false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!llvm::is_contained(
            {"manifest.json", "plan.txt", "program", "weights.bin", "weights"},
            name))
      return false;
  }
  return !ec;
}

LogicalResult cleave::writeBundle(ModuleOp module, ModelSignature signature,
                                  const BundleOptions &options) {
  namespace fs = llvm::sys::fs;
  auto fail = [](const llvm::Twine &message) {
    llvm::errs() << "cleave-compile: error: " << message << "\n";
    return failure();
  };
  // One spelling of the folder (`OUT/`, `.`, `a/../OUT` alike), so that the
  // staging folder is its sibling, never inside it.
  llvm::SmallString<256> outDir(options.outDir);
  if (std::error_code ec = fs::make_absolute(outDir))
    return fail("cannot resolve '" + options.outDir + "': " + ec.message());
  llvm::sys::path::remove_dots(outDir, /*remove_dot_dot=*/true);
  while (outDir.size() > 1 && llvm::sys::path::is_separator(outDir.back()))
    outDir.pop_back();
  if (!llvm::sys::path::has_parent_path(outDir) ||
      llvm::sys::path::parent_path(outDir) == outDir)
    return fail("'" + options.outDir +
                "' cannot hold a bundle: pass a folder "
                "below it");
  // Refuse to replace a folder that is not a bundle.
  if (fs::exists(outDir)) {
    std::error_code ec;
    bool empty = fs::directory_iterator(outDir, ec) == fs::directory_iterator();
    if (!fs::is_directory(outDir) || (!empty && !isBundle(outDir)))
      return fail("'" + options.outDir +
                  "' exists and is not a Cleave bundle; not replacing it");
  }
  std::string staging = (outDir + ".partial").str();
  fs::remove_directories(staging);
  if (std::error_code ec = fs::create_directories(staging))
    return fail("cannot create '" + staging + "': " + ec.message());
  llvm::scope_exit cleanup([&] { fs::remove_directories(staging); });

  int64_t ranks = signature.mesh.rankCount();
  // Weights: streamed from the model, cut per rank, placements recorded in
  // the signature (every rank's file has the same layout).
  auto requestFor = [&](const BufferSignature &b) {
    WeightRequest request;
    request.name = b.name;
    request.dtype = b.dtype;
    bool split =
        llvm::any_of(b.split, [](auto &axes) { return !axes.empty(); });
    // Each rank's block of the model's tensor: its share of the split, inside
    // the parameter's own block of the tensor if it is one.
    if (split || b.blockDim >= 0) {
      request.sliceShape = b.shape;
      for (int64_t rank = 0; rank < ranks; ++rank) {
        SmallVector<int64_t> offsets;
        for (auto [d, axes] : llvm::enumerate(b.split))
          offsets.push_back(signature.mesh.indexInGroup(rank, axes) *
                            b.shape[d]);
        offsets.resize(b.shape.size(), 0);
        if (b.blockDim >= 0)
          offsets[b.blockDim] += b.blockOffset;
        request.offsets.push_back(std::move(offsets));
      }
      if (!b.columnGroups.empty()) {
        request.columnParts = b.columnGroups;
        request.columnShards = b.globalShape.back() / b.shape.back();
      }
    }
    if (!b.stages.empty())
      for (int64_t rank = 0; rank < ranks; ++rank)
        request.heldBy.push_back(
            llvm::is_contained(b.stages, signature.stageOf(rank)));
    return request;
  };
  std::vector<WeightRequest> requests;
  for (const BufferSignature &b : signature.buffers) {
    if (b.kind != BufferSignature::Kind::Param)
      continue;
    requests.push_back(requestFor(b));
    requests.back().joinAxis = b.joinAxis;
    for (const BufferSignature &part : b.parts)
      requests.back().parts.push_back(requestFor(part));
  }
  std::vector<std::string> weightPaths;
  if (ranks == 1) {
    weightPaths.push_back(staging + "/weights.bin");
  } else {
    if (std::error_code ec = fs::create_directories(staging + "/weights"))
      return fail("cannot create '" + staging + "/weights': " + ec.message());
    for (int64_t rank = 0; rank < ranks; ++rank)
      weightPaths.push_back(staging + "/weights/rank" + std::to_string(rank) +
                            ".bin");
  }
  // The program's code does not depend on the weights (their placements and
  // checksums go into the descriptor, an object of its own): LLVM optimizes
  // and compiles it on other threads while the weights are written.
  llvm::LLVMContext context;
  auto llvmModule = translateForRuntime(module, context, signature);
  if (failed(llvmModule))
    return failure();
  bool dumpIr = !options.dumpDir.empty();
  // A GPU program's host code only launches work: built for any x86-64, as
  // the GPU machine is often not this one.
  bool portable = !options.cudaRoot.empty();
  // Declared after everything it uses: leaving early waits for it first.
  std::future<FailureOr<HostObjects>> compiling =
      std::async(std::launch::async, [&] {
        return emitHostObjects(**llvmModule, staging + "/model", options.jobs,
                               portable, dumpIr);
      });
  auto weights = writeWeightFiles(options.modelPath, requests, weightPaths);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  size_t next = 0;
  for (BufferSignature &b : signature.buffers)
    if (b.kind == BufferSignature::Kind::Param) {
      for (const WeightFileInfo &info : *weights) {
        const WeightPlacement &placed = info.placements[next];
        if (placed.held && placed.bytes != b.bytes)
          return fail("parameter '" + b.name + "' holds " +
                      llvm::Twine(placed.bytes) +
                      " bytes per rank in the model, the program expects " +
                      llvm::Twine(b.bytes));
        b.offsets.push_back(placed.held ? int64_t(placed.offset) : -1);
      }
      ++next;
    }
  for (const WeightFileInfo &info : *weights) {
    signature.weightFileBytes.push_back(info.fileBytes);
    signature.weightChecksums.push_back(info.checksum);
  }

  // Program: the code's objects and the descriptor's, linked with the
  // runtime.
  FailureOr<HostObjects> code = compiling.get();
  if (failed(code))
    return failure();
  FailureOr<HostObjects> descriptor = emitDescriptorObject(
      descriptorText(signature), staging + "/descriptor.o", portable, dumpIr);
  if (failed(descriptor))
    return failure();
  if (dumpIr &&
      failed(writeText(options.dumpDir + "/model.ll",
                       code->ir +
                           "; ==== the descriptor, compiled once the weights "
                           "are written\n" +
                           descriptor->ir)))
    return failure();
  SmallVector<std::string> objects = code->paths;
  objects.append(descriptor->paths);
  if (failed(linkProgram(objects, options.runtimeLibrary, staging + "/program",
                         staging + "/link.log", options.cudaRoot)))
    return failure();
  for (const std::string &object : objects)
    fs::remove(object);
  fs::remove(staging + "/link.log");

  // Manifest and plan.
  auto modelChecksum = checksumFile(options.modelPath);
  if (!modelChecksum)
    return fail(llvm::toString(modelChecksum.takeError()));
  // The most parameter bytes any rank holds (stages hold different ones).
  uint64_t paramBytes = 0, paramCount = 0;
  for (int64_t rank = 0; rank < ranks; ++rank)
    paramBytes = std::max(paramBytes, signature.paramBytesHeldBy(rank));
  for (const BufferSignature &b : signature.buffers)
    paramCount += b.modelParams().size();
  llvm::json::Array meshAxes;
  for (auto [name, size] :
       llvm::zip(signature.mesh.axisNames, signature.mesh.axisSizes))
    meshAxes.push_back(llvm::json::Object{{"name", name}, {"size", size}});
  llvm::json::Array weightFiles, bytesPerRank;
  for (auto [path, bytes] : llvm::zip(weightPaths, signature.weightFileBytes)) {
    weightFiles.push_back(path.substr(staging.size() + 1));
    bytesPerRank.push_back(int64_t(bytes));
  }
  llvm::json::Object target{
      {"kind", options.cudaRoot.empty() ? "cpu" : "cuda"},
      {"triple", llvm::sys::getProcessTriple()},
      {"cpu", llvm::sys::getHostCPUName().str()},
      {"precision", precisionName(options.precision).str()}};
  if (!options.cudaRoot.empty())
    target["gpu_arch"] = options.gpuArch;
  llvm::json::Object manifest{
      {"format", "cleave-bundle"},
      {"format_version", 1},
      {"compiler", options.compilerVersion},
      {"model", llvm::json::Object{{"path", options.modelPath},
                                   {"checksum",
                                    llvm::utohexstr(*modelChecksum,
                                                    /*LowerCase=*/true, 16)}}},
      {"target", std::move(target)},
      {"mesh", llvm::json::Object{{"spec", signature.mesh.str()},
                                  {"axes", std::move(meshAxes)}}},
      {"ranks", ranks},
      {"program", "program"},
      {"weights", std::move(weightFiles)},
      {"inputs", bufferList(signature, BufferSignature::Kind::Input)},
      {"outputs", bufferList(signature, BufferSignature::Kind::Output)},
      {"parameters",
       llvm::json::Object{{"count", int64_t(paramCount)},
                          {"bytes_per_rank", int64_t(paramBytes)}}},
      {"bytes_per_rank", std::move(bytesPerRank)},
      {"collectives", int64_t(signature.collectives.size())},
      {"pipeline",
       llvm::json::Object{{"stages", signature.pipeline.stages},
                          {"microbatches", signature.pipeline.microbatches}}},
      {"writer_rank", signature.writerRank},
  };
  if (!signature.indexBounds.empty()) {
    llvm::json::Array bounds;
    for (const IndexBoundSignature &b : signature.indexBounds)
      bounds.push_back(llvm::json::Object{{"input", b.input},
                                          {"low", b.low},
                                          {"high", b.high},
                                          {"node", b.node},
                                          {"op", b.op}});
    manifest["index_bounds"] = std::move(bounds);
  }
  std::string manifestText;
  llvm::raw_string_ostream(manifestText)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  if (failed(writeText(staging + "/manifest.json", manifestText)))
    return failure();

  std::string plan = planReport(signature, options);
  if (failed(writeText(staging + "/plan.txt", plan)))
    return failure();
  if (!options.reportPath.empty() &&
      failed(writeText(options.reportPath, plan)))
    return failure();

  // Swap the finished bundle into place.
  if (fs::exists(outDir))
    if (std::error_code ec = fs::remove_directories(outDir))
      return fail("cannot replace '" + options.outDir + "': " + ec.message());
  if (std::error_code ec = fs::rename(staging, outDir))
    return fail("cannot move the bundle to '" + options.outDir +
                "': " + ec.message());
  cleanup.release();
  return success();
}
