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

/// A key equal for two requests exactly when they ask for the same bytes:
/// a generation bundle's two programs share every parameter they cut alike.
static std::string requestKey(const WeightRequest &r) {
  std::string key;
  llvm::raw_string_ostream os(key);
  auto list = [&](auto &&values) {
    for (auto v : values)
      os << v << ",";
    os << ";";
  };
  os << r.name.size() << ":" << r.name << ";" << r.dtype << ";";
  list(r.sliceShape);
  for (const auto &offsets : r.offsets)
    list(offsets);
  os << ";";
  list(r.columnParts);
  os << r.columnShards << ";";
  list(r.heldBy);
  os << r.joinAxis << ";" << r.parts.size() << "[";
  for (const WeightRequest &part : r.parts)
    os << requestKey(part) << "|";
  os << "]";
  return key;
}

/// The generation lines of cleave_generate_desc (Abi.h).
static std::string generationText(const GenerationSignature &g) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << CLEAVE_GEN_GENERATE " " << g.maxSeq << " " << g.maxBatch << " "
     << g.promptLength << " " << g.vocabulary << " " << g.cacheWrite << "\n";
  for (auto [role, name] : {std::pair<StringRef, StringRef>{"ids", g.ids},
                            {"mask", g.mask},
                            {"positions", g.positions},
                            {"cache_position", g.cachePosition},
                            {"logits", g.logits}})
    if (!name.empty())
      os << CLEAVE_GEN_ROLE " " << role << " " << encodeName(name) << "\n";
  for (const GenerationSignature::Cache &c : g.caches) {
    os << CLEAVE_GEN_CACHE " " << encodeName(c.past) << " "
       << encodeName(c.present) << " " << c.batchDim << " " << c.seqDim;
    for (int64_t stage : c.stages)
      os << " " << stage;
    os << "\n";
  }
  return text;
}

/// The plan's section on generation: the two programs and the cache.
static std::string generationReport(const GenerationSignature &g,
                                    const ModelSignature &decode) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "\nGeneration (--generate)\n"
     << "  programs: prefill of " << g.promptLength
     << (g.cacheWrite == "end"
             ? " tokens (a prompt left-padded to it, after one masked past "
               "position)"
         : g.cacheWrite == "count"
             ? " tokens (a prompt right-padded to it, no past: the graph "
               "places new keys and values after the mask's count)"
             : " tokens (a prompt right-padded to it, written at "
               "cache_position 0..: a static cache, one position for the "
               "whole batch)")
     << ", decode of 1 token a step; one set of weights\n"
     << "  up to " << g.maxSeq << " tokens a sequence (prompt and new), "
     << g.maxBatch << " sequence" << (g.maxBatch == 1 ? "" : "s")
     << " at once\n"
     << "  key/value cache: " << g.caches.size() << " tensors, "
     << llvm::format("%.3f", g.cacheBytes / 1048576.0) << " MiB in all, up to "
     << llvm::format("%.3f", g.cacheBytesPerRank / 1048576.0)
     << " MiB on a rank: " << g.cacheLayout << "\n";
  int64_t ranks = decode.mesh.rankCount();
  for (int64_t rank = 0; rank < ranks; ++rank)
    os << "  rank " << rank << ": "
       << llvm::format("%.3f", decode.paramBytesHeldBy(rank) / 1048576.0)
       << " MiB of weights + "
       << llvm::format("%.3f", g.cacheBytesByRank[rank] / 1048576.0)
       << " MiB of cache\n";
  return text;
}

static LogicalResult writePrograms(BundleProgram &main, BundleProgram *prefill,
                                   const GenerationSignature *generation,
                                   const BundleOptions &options);

LogicalResult cleave::writeBundle(ModuleOp module, ModelSignature signature,
                                  const BundleOptions &options) {
  BundleProgram program{module, std::move(signature)};
  return writePrograms(program, nullptr, nullptr, options);
}

LogicalResult
cleave::writeGenerationBundle(BundleProgram decode, BundleProgram prefill,
                              const GenerationSignature &generation,
                              const BundleOptions &options) {
  return writePrograms(decode, &prefill, &generation, options);
}

/// Writes the bundle of `main` (and a generation bundle's `prefill`).
static LogicalResult writePrograms(BundleProgram &main, BundleProgram *prefill,
                                   const GenerationSignature *generation,
                                   const BundleOptions &options) {
  ModelSignature &signature = main.signature;
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
  // Each program's parameters' requests, in order; a parameter both
  // programs ask for alike is written once.
  SmallVector<BundleProgram *, 2> programs = {&main};
  if (prefill)
    programs.push_back(prefill);
  std::vector<WeightRequest> requests;
  llvm::StringMap<size_t> requestIndex;
  std::vector<std::vector<size_t>> paramRequests(programs.size());
  for (auto [p, program] : llvm::enumerate(programs))
    for (const BufferSignature &b : program->signature.buffers) {
      if (b.kind != BufferSignature::Kind::Param)
        continue;
      WeightRequest request = requestFor(b);
      request.joinAxis = b.joinAxis;
      for (const BufferSignature &part : b.parts)
        request.parts.push_back(requestFor(part));
      auto [it, added] =
          requestIndex.try_emplace(requestKey(request), requests.size());
      if (added)
        requests.push_back(std::move(request));
      paramRequests[p].push_back(it->second);
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
  // Each program in a context of its own: LLVM's contexts are not shared
  // across threads, and the prefill's symbols are renamed after its entry.
  SmallVector<std::unique_ptr<llvm::LLVMContext>, 2> contexts;
  SmallVector<std::unique_ptr<llvm::Module>, 2> llvmModules;
  for (BundleProgram *program : programs) {
    contexts.push_back(std::make_unique<llvm::LLVMContext>());
    auto llvmModule = translateForRuntime(
        program->module, *contexts.back(), program->signature,
        program == prefill ? CLEAVE_ABI_PREFILL_RUN : CLEAVE_ABI_MODEL_RUN);
    if (failed(llvmModule))
      return failure();
    llvmModules.push_back(std::move(*llvmModule));
  }
  bool dumpIr = !options.dumpDir.empty();
  // A GPU program's host code only launches work: built for any x86-64, as
  // the GPU machine is often not this one.
  bool portable = !options.cudaRoot.empty();
  // Declared after everything it uses: leaving early waits for it first.
  std::future<FailureOr<HostObjects>> compiling =
      std::async(std::launch::async, [&]() -> FailureOr<HostObjects> {
        HostObjects all;
        for (auto [k, llvmModule] : llvm::enumerate(llvmModules)) {
          auto objects = emitHostObjects(
              *llvmModule, staging + (k == 0 ? "/model" : "/prefill"),
              options.jobs, portable, dumpIr);
          if (failed(objects))
            return failure();
          all.paths.append(objects->paths);
          all.ir += objects->ir;
        }
        return all;
      });
  auto weights = writeWeightFiles(options.modelPath, requests, weightPaths);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  for (auto [p, program] : llvm::enumerate(programs)) {
    size_t next = 0;
    for (BufferSignature &b : program->signature.buffers)
      if (b.kind == BufferSignature::Kind::Param) {
        for (const WeightFileInfo &info : *weights) {
          const WeightPlacement &placed =
              info.placements[paramRequests[p][next]];
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
      program->signature.weightFileBytes.push_back(info.fileBytes);
      program->signature.weightChecksums.push_back(info.checksum);
    }
  }

  // Program: the code's objects and the descriptor's, linked with the
  // runtime.
  FailureOr<HostObjects> code = compiling.get();
  if (failed(code))
    return failure();
  std::vector<std::pair<std::string, std::string>> descriptors = {
      {CLEAVE_ABI_MODEL_DESC, descriptorText(signature)}};
  if (prefill) {
    descriptors.emplace_back(CLEAVE_ABI_PREFILL_DESC,
                             descriptorText(prefill->signature));
    descriptors.emplace_back(CLEAVE_ABI_GENERATE_DESC,
                             generationText(*generation));
  }
  FailureOr<HostObjects> descriptor = emitDescriptorObject(
      descriptors, staging + "/descriptor.o", portable, dumpIr);
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
  if (generation) {
    llvm::json::Array caches;
    for (const GenerationSignature::Cache &c : generation->caches)
      caches.push_back(llvm::json::Object{{"past", c.past},
                                          {"present", c.present},
                                          {"batch_dim", c.batchDim},
                                          {"sequence_dim", c.seqDim}});
    manifest["generate"] = llvm::json::Object{
        {"max_seq", generation->maxSeq},
        {"max_batch", generation->maxBatch},
        {"prompt_length", generation->promptLength},
        {"vocabulary", generation->vocabulary},
        {"cache_write", generation->cacheWrite},
        {"input_ids", generation->ids},
        {"attention_mask", generation->mask},
        {"position_ids", generation->positions},
        {"cache_position", generation->cachePosition},
        {"logits", generation->logits},
        {"cache", std::move(caches)},
        {"cache_bytes_per_rank", int64_t(generation->cacheBytesPerRank)}};
  }
  std::string manifestText;
  llvm::raw_string_ostream(manifestText)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  if (failed(writeText(staging + "/manifest.json", manifestText)))
    return failure();

  std::string plan = planReport(signature, options);
  if (generation)
    plan += generationReport(*generation, signature);
  if (!options.planSearch.empty())
    plan += "\n" + options.planSearch;
  if (failed(writeText(staging + "/plan.txt", plan)))
    return failure();
  if (!options.reportPath.empty()) {
    // A .json report holds the plan's text and the search's table as data.
    std::string report = plan;
    if (llvm::StringRef(options.reportPath).ends_with(".json")) {
      llvm::json::Object object{{"plan", plan}};
      if (options.planSearchJson)
        object["search"] = *options.planSearchJson;
      report.clear();
      llvm::raw_string_ostream(report)
          << llvm::formatv("{0:2}", llvm::json::Value(std::move(object)))
          << "\n";
    }
    if (failed(writeText(options.reportPath, report)))
      return failure();
  }

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
