//===- LlvmEmitter.cpp - LLVM dialect to host object code -----------------===//
//
// Translation to LLVM IR, the entry wrapper the runtime calls, O3 for the host
// CPU with its vector features, and object emission, all in-process; a large
// module split into parts compiled on as many threads.
//
//===----------------------------------------------------------------------===//

#include "LlvmEmitter.h"

#include "cleave/Runtime/Abi.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"

using namespace mlir;

FailureOr<std::unique_ptr<llvm::Module>>
cleave::translateForRuntime(ModuleOp module, llvm::LLVMContext &context,
                            const ModelSignature &signature,
                            llvm::StringRef entry) {
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  // GPU programs: cubins embedded, loaded by global constructors, launched
  // through the runtime's mgpu* functions.
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  module->getContext()->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "cleave-model");
  if (!llvmModule) {
    module.emitError("translation to LLVM IR failed");
    return failure();
  }

  // @main becomes an internal function the wrapper can inline.
  llvm::Function *main = llvmModule->getFunction("main");
  if (!main) {
    module.emitError("no @main to wrap");
    return failure();
  }
  main->setName("cleave_model_main");
  main->setLinkage(llvm::GlobalValue::InternalLinkage);

  // void cleave_model_run(void **buffers): each buffer becomes the exploded
  // memref descriptor of the default calling convention (allocated and
  // aligned pointer, offset 0, sizes, row-major strides).
  llvm::Type *ptr = llvm::PointerType::getUnqual(context);
  auto *runType =
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, false);
  // A second program's definitions (helpers, OpenMP regions, segments that
  // become hidden symbols when the module is split) are named after its
  // entry; declarations name the runtime and libraries, shared by both.
  if (entry != CLEAVE_ABI_MODEL_RUN) {
    for (llvm::GlobalValue &g : llvmModule->global_values())
      if (!g.isDeclaration() && !g.getName().starts_with("llvm."))
        g.setName(entry + "." + g.getName());
  }
  auto *run = llvm::Function::Create(
      runType, llvm::GlobalValue::ExternalLinkage, entry, *llvmModule);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", run));
  SmallVector<llvm::Value *> args;
  for (auto [i, buffer] : llvm::enumerate(signature.buffers)) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, run->getArg(0), i);
    llvm::Value *p = b.CreateLoad(ptr, slot);
    args.append({p, p, b.getInt64(0)});
    for (int64_t d : buffer.shape)
      args.push_back(b.getInt64(d));
    int64_t stride = 1;
    SmallVector<llvm::Value *> strides(buffer.shape.size());
    for (int64_t d = buffer.shape.size() - 1; d >= 0; --d) {
      strides[d] = b.getInt64(stride);
      stride *= buffer.shape[d];
    }
    args.append(strides.begin(), strides.end());
  }
  if (args.size() != main->arg_size()) {
    module.emitError() << "@main takes " << main->arg_size()
                       << " LLVM arguments, the signature gives "
                       << args.size();
    return failure();
  }
  b.CreateCall(main, args);
  b.CreateRetVoid();
  return llvmModule;
}

namespace {

/// The host CPU as LLVM targets it: this machine's, with every feature it
/// has, or (`portable`) any x86-64 CPU of the last fifteen years.
struct HostTarget {
  const llvm::Target *target = nullptr;
  llvm::Triple triple;
  std::string cpu, features;
};

FailureOr<HostTarget> hostTarget(bool portable) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  HostTarget host;
  host.triple = llvm::Triple(llvm::sys::getProcessTriple());
  std::string error;
  host.target = llvm::TargetRegistry::lookupTarget(host.triple, error);
  if (!host.target) {
    llvm::errs() << "cleave-compile: error: no LLVM target for the host: "
                 << error << "\n";
    return failure();
  }
  if (portable && host.triple.getArch() == llvm::Triple::x86_64) {
    host.cpu = "x86-64-v2";
    return host;
  }
  host.cpu = llvm::sys::getHostCPUName().str();
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    host.features +=
        (feature.getValue() ? "+" : "-") + feature.getKey().str() + ",";
  return host;
}

/// Optimizes `module` at O3 and writes its object code to `path` (and its
/// optimized IR to `ir`, when given). Thread-safe for modules of distinct
/// contexts. Returns an error message, empty on success.
std::string optimizeAndEmit(const HostTarget &host, llvm::Module &module,
                            llvm::StringRef path, std::string *ir) {
  // Constructors (a GPU program's cubin loads) in .init_array, which the C
  // library runs: TargetOptions' default is the old .ctors, which nothing
  // on a modern x86-64 system runs, so every CUDA program crashed at its
  // first kernel lookup (the first GPU session, 2026-12-04).
  llvm::TargetOptions options;
  options.UseInitArray = true;
  std::unique_ptr<llvm::TargetMachine> machine(host.target->createTargetMachine(
      host.triple, host.cpu, host.features, options, llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  module.setTargetTriple(host.triple);
  module.setDataLayout(machine->createDataLayout());
  // Written on every function too, so that the IR says what it is for.
  for (llvm::Function &f : module) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", host.cpu);
    if (!host.features.empty())
      f.addFnAttr("target-features", host.features);
    // LLVM vectorizes with 256 bits on AVX-512 CPUs by default, so that
    // short loops do not drop the clock for the code around them. Here the
    // code around them is the GEMMs, which run 512-bit kernels anyway (the
    // packed kernel, OpenBLAS's SkylakeX kernels): full-width loops between
    // them cost nothing more, and a 1024-token softmax's took 22 % less
    // time.
    if (llvm::StringRef(host.features).contains("+avx512f,"))
      f.addFnAttr("prefer-vector-width", "512");
  }

  // O3 with the loop and SLP vectorizers, but no loop unrolling: every loop
  // has a static trip count, and full unrolling multiplies code size (and
  // compile time) by the trip counts for little speed.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine.get(), tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
  if (ir) {
    llvm::raw_string_ostream os(*ir);
    module.print(os, nullptr);
  }

  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return "cannot write '" + path.str() + "': " + ec.message();
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return "the host target cannot emit objects";
  pm.run(module);
  out.close();
  if (!out.has_error())
    return "";
  // Cleared, or the stream's destructor would abort the compiler.
  std::string error =
      "cannot write '" + path.str() + "': " + out.error().message();
  out.clear_error();
  return error;
}

/// How many parts to compile `module` in at most: `jobs` (0: one per core,
/// at most 16), or one for a module with appending globals (a GPU program's
/// constructors, which must stay one list).
unsigned partsFor(const llvm::Module &module, unsigned jobs) {
  if (llvm::any_of(module.globals(), [](const llvm::GlobalVariable &g) {
        return g.hasAppendingLinkage();
      }))
    return 1;
  if (jobs > 0)
    return jobs;
  return std::min(
      16u, llvm::heavyweight_hardware_concurrency().compute_thread_count());
}

/// Whether `f` is a segment cleave-outline-segments cut out of a longer
/// function: local, never inlined, and only ever called.
bool isSegment(const llvm::Function &f) {
  return f.hasLocalLinkage() && f.hasFnAttribute(llvm::Attribute::NoInline) &&
         llvm::all_of(f.uses(), [](const llvm::Use &use) {
           auto *call = dyn_cast<llvm::CallBase>(use.getUser());
           return call && call->isCallee(&use);
         });
}

/// The global values `f` refers to, through constant expressions too.
llvm::SmallPtrSet<const llvm::GlobalValue *, 8>
referencedGlobals(const llvm::Function &f) {
  llvm::SmallPtrSet<const llvm::GlobalValue *, 8> globals;
  llvm::SmallPtrSet<const llvm::Constant *, 16> seen;
  SmallVector<const llvm::Constant *> work;
  for (const llvm::Instruction &inst : llvm::instructions(f))
    for (const llvm::Value *operand : inst.operands())
      if (auto *c = dyn_cast<llvm::Constant>(operand))
        work.push_back(c);
  while (!work.empty()) {
    const llvm::Constant *c = work.pop_back_val();
    if (!seen.insert(c).second)
      continue;
    if (auto *g = dyn_cast<llvm::GlobalValue>(c)) {
      globals.insert(g);
      continue;
    }
    for (const llvm::Value *operand : c->operands())
      if (auto *inner = dyn_cast<llvm::Constant>(operand))
        work.push_back(inner);
  }
  return globals;
}

/// `module` cut into `parts` modules of about equal size (fewer where it has
/// fewer groups of functions than that), as bitcode: each is read back into
/// a context of its own, for a thread of its own. A function stays with the
/// local functions and variables it refers to (an OpenMP region with the
/// function it was outlined from), so each is optimized as it would be in
/// one module; only segments (cleave-outline-segments) are called across
/// parts, made hidden symbols for that. Local constants and linkonce or
/// weak definitions are copied into every part; other module-level globals
/// go to the first. Groups go to the least loaded part, largest first,
/// sizes counted in instructions.
SmallVector<SmallString<0>> splitModule(llvm::Module &module, unsigned parts) {
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && isSegment(f)) {
      f.setLinkage(llvm::GlobalValue::ExternalLinkage);
      f.setVisibility(llvm::GlobalValue::HiddenVisibility);
    }
  // Local constants, and what may be defined in several objects (helpers
  // like math-to-funcs' integer powers, linkonce_odr), which a part drops
  // where it does not use them.
  auto copiedEverywhere = [](const llvm::GlobalValue *g) {
    if (g->hasLinkOnceLinkage() || g->hasWeakLinkage())
      return true;
    auto *v = dyn_cast<llvm::GlobalVariable>(g);
    return v && v->hasLocalLinkage() && v->isConstant();
  };

  llvm::EquivalenceClasses<const llvm::GlobalValue *> groups;
  for (const llvm::Function &f : module) {
    if (f.isDeclaration() || copiedEverywhere(&f))
      continue;
    groups.insert(&f);
    for (const llvm::GlobalValue *g : referencedGlobals(f))
      if (g->hasLocalLinkage() && !g->isDeclaration() && !copiedEverywhere(g))
        groups.unionSets(&f, g);
  }
  // Each group's size, in the module's order of their first functions.
  llvm::MapVector<const llvm::GlobalValue *, size_t> sizes;
  for (const llvm::Function &f : module)
    if (groups.contains(&f))
      sizes[groups.getLeaderValue(&f)] += f.getInstructionCount();
  parts = std::max<size_t>(1, std::min<size_t>(parts, sizes.size()));
  SmallVector<std::pair<const llvm::GlobalValue *, size_t>> bySize(
      sizes.begin(), sizes.end());
  llvm::stable_sort(
      bySize, [](const auto &a, const auto &b) { return a.second > b.second; });
  llvm::DenseMap<const llvm::GlobalValue *, unsigned> partOf;
  SmallVector<size_t> load(parts, 0);
  for (auto [leader, size] : bySize) {
    unsigned least = llvm::min_element(load) - load.begin();
    partOf[leader] = least;
    load[least] += size;
  }

  SmallVector<SmallString<0>> bitcode(parts);
  for (unsigned k = 0; k < parts; ++k) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> part =
        llvm::CloneModule(module, map, [&](const llvm::GlobalValue *g) {
          if (copiedEverywhere(g))
            return true;
          if (groups.contains(g))
            return partOf.lookup(groups.getLeaderValue(g)) == k;
          return k == 0;
        });
    llvm::raw_svector_ostream os(bitcode[k]);
    llvm::WriteBitcodeToFile(*part, os);
  }
  return bitcode;
}

} // namespace

FailureOr<cleave::HostObjects>
cleave::emitHostObjects(llvm::Module &module, llvm::StringRef stem,
                        unsigned jobs, bool portable, bool keepIr) {
  auto host = hostTarget(portable);
  if (failed(host))
    return failure();
  unsigned parts = partsFor(module, jobs);

  HostObjects objects;
  SmallVector<std::string> errors(1), irs(1);
  if (parts == 1) {
    objects.paths.push_back((stem + ".o").str());
    errors[0] = optimizeAndEmit(*host, module, objects.paths[0],
                                keepIr ? &irs[0] : nullptr);
  } else {
    SmallVector<SmallString<0>> bitcode = splitModule(module, parts);
    parts = bitcode.size();
    errors.resize(parts);
    irs.resize(parts);
    for (unsigned i = 0; i < parts; ++i)
      objects.paths.push_back((stem + "." + llvm::Twine(i) + ".o").str());
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency(parts));
    for (unsigned i = 0; i < parts; ++i)
      pool.async([&, i] {
        llvm::LLVMContext context;
        auto part = llvm::parseBitcodeFile(
            llvm::MemoryBufferRef(bitcode[i].str(), "part"), context);
        if (!part) {
          errors[i] = llvm::toString(part.takeError());
          return;
        }
        errors[i] = optimizeAndEmit(*host, **part, objects.paths[i],
                                    keepIr ? &irs[i] : nullptr);
      });
    pool.wait();
  }
  for (const std::string &error : errors)
    if (!error.empty()) {
      llvm::errs() << "cleave-compile: error: " << error << "\n";
      return failure();
    }
  for (auto [i, text] : llvm::enumerate(irs)) {
    if (parts > 1)
      objects.ir += ("; ==== part " + llvm::Twine(i + 1) + " of " +
                     llvm::Twine(parts) + ", compiled on its own thread\n")
                        .str();
    objects.ir += text;
  }
  return objects;
}

FailureOr<cleave::HostObjects> cleave::emitDescriptorObject(
    llvm::ArrayRef<std::pair<std::string, std::string>> texts,
    llvm::StringRef path, bool portable, bool keepIr) {
  auto host = hostTarget(portable);
  if (failed(host))
    return failure();
  llvm::LLVMContext context;
  llvm::Module module("cleave-model-descriptor", context);
  for (const auto &[symbol, descriptor] : texts) {
    auto *text = llvm::ConstantDataArray::getString(context, descriptor);
    new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage, text, symbol);
  }
  HostObjects object;
  object.paths.push_back(path.str());
  std::string error =
      optimizeAndEmit(*host, module, path, keepIr ? &object.ir : nullptr);
  if (!error.empty()) {
    llvm::errs() << "cleave-compile: error: " << error << "\n";
    return failure();
  }
  return object;
}
