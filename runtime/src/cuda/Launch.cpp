//===- Launch.cpp - What compiled GPU code calls to load and launch kernels ===//
//
// MLIR's GPU lowering emits calls to `mgpu*` functions: global constructors
// load each kernel's cubin (mgpuModuleLoad), host code launches kernels on a
// stream and allocates device buffers. Debian ships no libmlir_cuda_runtime,
// so Cleave's runtime provides them, on the CUDA runtime API only (its
// library calls load cubins), so that programs need no libcuda at link time
// and say so clearly where there is no driver. Every launch and every cuBLASLt
// GEMM uses the process's one stream (processStream), so they run in program
// order. These are called from compiled code, which no exception may cross:
// failures end the program (orExit) with the call, rank and device named.
//
// Also the hooks the runtime's main uses for GPU programs (Device.h):
// device-visible buffers for inputs, outputs and weights, and the wait for
// a run to finish.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include "../Device.h"
#include "../Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// The device, chosen once: cubins are loaded into its context.
void ensureContext() {
  static bool ready = [] {
    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0)
      fatal(std::string("this program was compiled for a CUDA GPU and none is "
                        "available (") +
            (status != cudaSuccess ? cudaGetErrorName(status) : "no device") +
            ")");
    // One device per rank on a node: the local rank picks it.
    const char *local = std::getenv("MPI_LOCALRANKID");
    int device = local ? std::atoi(local) % devices : 0;
    orExit([&] {
      check(cudaSetDevice(device), "cudaSetDevice");
      check(cudaFree(nullptr), "cudaFree (context creation)");
    });
    return true;
  }();
  (void)ready;
}

} // namespace

extern "C" {

void *mgpuModuleLoad(void *data, size_t /*size*/) {
  ensureContext();
  cudaLibrary_t library = nullptr;
  orExit([&] {
    check(cudaLibraryLoadData(&library, data, nullptr, nullptr, 0, nullptr,
                              nullptr, 0),
          "cudaLibraryLoadData");
  });
  return library;
}

void mgpuModuleUnload(void *module) {
  cudaLibraryUnload(static_cast<cudaLibrary_t>(module));
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  cudaKernel_t kernel = nullptr;
  orExit([&] {
    check(cudaLibraryGetKernel(&kernel, static_cast<cudaLibrary_t>(module), name),
          "cudaLibraryGetKernel");
  });
  return kernel;
}

void *mgpuStreamCreate() { return processStream(); }

void mgpuStreamDestroy(void * /*stream*/) {}

void mgpuStreamSynchronize(void *stream) {
  orExit([&] {
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
          "cudaStreamSynchronize");
  });
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void ** /*extra*/, size_t /*paramCount*/) {
  // A cudaKernel_t is accepted where a kernel symbol is.
  orExit([&] {
    check(cudaLaunchKernel(
              function, dim3(unsigned(gridX), unsigned(gridY), unsigned(gridZ)),
              dim3(unsigned(blockX), unsigned(blockY), unsigned(blockZ)), params,
              size_t(sharedBytes), static_cast<cudaStream_t>(stream)),
          "cudaLaunchKernel");
  });
}

void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/, bool hostShared) {
  void *p = nullptr;
  orExit([&] {
    if (hostShared)
      check(cudaMallocManaged(&p, bytes ? bytes : 1), "cudaMallocManaged");
    else
      check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  });
  return p;
}

void mgpuMemFree(void *pointer, void * /*stream*/) {
  orExit([&] { check(cudaFree(pointer), "cudaFree"); });
}

} // extern "C"

//===----------------------------------------------------------------------===//
// The hooks of Device.h
//===----------------------------------------------------------------------===//

extern "C" void *cleave_rt_device_alloc(size_t bytes) {
  ensureContext();
  void *p = nullptr;
  check(cudaMallocManaged(&p, bytes ? bytes : 1), "cudaMallocManaged");
  std::memset(p, 0, bytes);
  return p;
}

extern "C" void cleave_rt_device_free(void *pointer) { cudaFree(pointer); }

extern "C" void cleave_rt_device_wait() {
  check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
}
