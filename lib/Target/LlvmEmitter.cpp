//===- LlvmEmitter.cpp - LLVM dialect to host object code -----------------===//
//
// Translation to LLVM IR, the entry wrapper the runtime calls, O3 for the host
// CPU with its vector features, and object emission, all in-process.
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
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

FailureOr<std::unique_ptr<llvm::Module>>
cleave::translateForRuntime(ModuleOp module, llvm::LLVMContext &context,
                            const ModelSignature &signature,
                            llvm::StringRef descriptor) {
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
  auto *run = llvm::Function::Create(runType, llvm::GlobalValue::ExternalLinkage,
                                     CLEAVE_ABI_MODEL_RUN, *llvmModule);
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
                       << " LLVM arguments, the signature gives " << args.size();
    return failure();
  }
  b.CreateCall(main, args);
  b.CreateRetVoid();

  auto *text = llvm::ConstantDataArray::getString(context, descriptor);
  new llvm::GlobalVariable(*llvmModule, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text,
                           CLEAVE_ABI_MODEL_DESC);
  return llvmModule;
}

LogicalResult cleave::emitHostObject(llvm::Module &module, llvm::StringRef path,
                                     llvm::StringRef optimizedIrPath) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    llvm::errs() << "cleave-compile: error: no LLVM target for the host: "
                 << error << "\n";
    return failure();
  }
  std::string features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    features += (feature.getValue() ? "+" : "-") + feature.getKey().str() + ",";
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features, llvm::TargetOptions(),
      llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());

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
  if (!optimizedIrPath.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream ir(optimizedIrPath, ec);
    if (!ec)
      module.print(ir, nullptr);
  }

  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "cleave-compile: error: cannot write '" << path
                 << "': " << ec.message() << "\n";
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    llvm::errs() << "cleave-compile: error: the host target cannot emit objects\n";
    return failure();
  }
  pm.run(module);
  out.close();
  return success();
}
