//===- Launch.cpp - Loading and launching compiled kernels ----------------===//
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
// device-visible buffers for inputs, outputs and weights, the wait for a run
// to finish, and the collectives' start and end (Collectives.cpp).
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include "../Device.h"
#include "../Profile.h"
#include "../Runtime.h"
#include "../comm/Comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// The device, chosen once: cubins are loaded into its context. Throws where
/// there is none; the first call (the runtime's start-up, in every rank)
/// reports it through the runtime's error handling.
void ensureContext() {
  static std::string failure = [] {
    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0)
      return std::string("this program was compiled for a CUDA GPU and none "
                         "is available (") +
             (status != cudaSuccess ? cudaGetErrorName(status) : "no device") +
             ")";
    // One device per rank on a node: the local rank picks it (hydra's
    // MPI_LOCALRANKID; Slurm's SLURM_LOCALID when started by srun alone).
    const char *local = std::getenv("MPI_LOCALRANKID");
    if (!local)
      local = std::getenv("SLURM_LOCALID");
    int device = local ? std::atoi(local) % devices : 0;
    try {
      check(cudaSetDevice(device), "cudaSetDevice");
      check(cudaFree(nullptr), "cudaFree (context creation)");
      // The model frees and allocates the same intermediates every run:
      // the pool keeps what it was given instead of returning it at every
      // synchronization.
      cudaMemPool_t pool;
      check(cudaDeviceGetDefaultMemPool(&pool, device),
            "cudaDeviceGetDefaultMemPool");
      uint64_t keep = UINT64_MAX;
      check(
          cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
          "cudaMemPoolSetAttribute");
    } catch (const std::exception &e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  if (!failure.empty())
    throw RuntimeError(failure);
}

/// A cubin, loaded on its first kernel lookup: global constructors register
/// every cubin before main, where a missing GPU cannot yet be reported
/// cleanly.
struct Module {
  const void *data;
  cudaLibrary_t library = nullptr;
  /// Host code looks its kernel up before every launch, by the same name
  /// string each time.
  std::unordered_map<const char *, cudaKernel_t> kernels;
};

/// Each kernel's name, for --profile: the compiler names a kernel after the
/// ONNX nodes it computes.
std::unordered_map<const void *, std::string> &kernelNames() {
  static std::unordered_map<const void *, std::string> names;
  return names;
}

/// --profile's events, recorded on the stream during a run and reused by
/// the next.
struct Marks {
  std::vector<cudaEvent_t> events;
  size_t used = 0;
};

Marks &marks() {
  static Marks m;
  return m;
}

} // namespace

extern "C" {

void *mgpuModuleLoad(void *data, size_t /*size*/) { return new Module{data}; }

void mgpuModuleUnload(void *module) {
  auto *m = static_cast<Module *>(module);
  if (m->library)
    cudaLibraryUnload(m->library);
  delete m;
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  auto *m = static_cast<Module *>(module);
  cudaKernel_t &kernel = m->kernels[name];
  if (kernel)
    return kernel;
  orExit([&] {
    if (!m->library) {
      ensureContext();
      check(cudaLibraryLoadData(&m->library, m->data, nullptr, nullptr, 0,
                                nullptr, nullptr, 0),
            "cudaLibraryLoadData");
    }
    check(cudaLibraryGetKernel(&kernel, m->library, name),
          "cudaLibraryGetKernel");
  });
  kernelNames()[kernel] = name;
  return kernel;
}

void *mgpuStreamCreate() { return processStream(); }

void mgpuStreamDestroy(void * /*stream*/) {}

/// Upstream's host code waits after every launch. Every launch, GEMM,
/// collective and allocation is on the one stream, in program order, and
/// the compiler puts a cleave_rt_cuda_synchronize before host code touches
/// memory itself (cleave-allocs-to-gpu), so this wait is not needed.
void mgpuStreamSynchronize(void *stream) {
  if (stream == processStream())
    return;
  orExit([&] {
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
          "cudaStreamSynchronize");
  });
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void ** /*extra*/, size_t /*paramCount*/) {
  profile::Span span([&] { return "kernel " + kernelNames()[function]; });
  // A cudaKernel_t is accepted where a kernel symbol is.
  orExit([&] {
    check(cudaLaunchKernel(
              function, dim3(unsigned(gridX), unsigned(gridY), unsigned(gridZ)),
              dim3(unsigned(blockX), unsigned(blockY), unsigned(blockZ)),
              params, size_t(sharedBytes), static_cast<cudaStream_t>(stream)),
          "cudaLaunchKernel");
  });
}

/// Device buffers come from the stream-ordered pool (kept between runs, see
/// ensureContext); buffers host code touches are managed memory.
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared) {
  void *p = nullptr;
  orExit([&] {
    if (hostShared)
      check(cudaMallocManaged(&p, bytes ? bytes : 1), "cudaMallocManaged");
    else
      check(cudaMallocAsync(&p, bytes ? bytes : 1,
                            static_cast<cudaStream_t>(stream)),
            "cudaMallocAsync");
  });
  return p;
}

void mgpuMemFree(void *pointer, void * /*stream*/) {
  orExit([&] { freeBuffer(pointer); });
}

} // extern "C"

//===----------------------------------------------------------------------===//
// The hooks of Device.h
//===----------------------------------------------------------------------===//

extern "C" void *cleave_rt_device_alloc(size_t bytes, int hostVisible) {
  ensureContext();
  void *p = nullptr;
  if (hostVisible) {
    check(cudaMallocManaged(&p, bytes ? bytes : 1), "cudaMallocManaged");
    std::memset(p, 0, bytes);
    return p;
  }
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}

extern "C" void cleave_rt_device_upload(void *device, const void *host,
                                        size_t bytes) {
  check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

extern "C" void cleave_rt_device_download(void *host, const void *device,
                                          size_t bytes) {
  check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

extern "C" void cleave_rt_device_free(void *pointer) { cudaFree(pointer); }

extern "C" int cleave_rt_device_mark() {
  Marks &m = marks();
  orExit([&] {
    if (m.used == m.events.size()) {
      m.events.emplace_back();
      check(cudaEventCreate(&m.events.back()), "cudaEventCreate");
    }
    check(cudaEventRecord(m.events[m.used], processStream()),
          "cudaEventRecord");
  });
  return int(m.used++);
}

extern "C" double cleave_rt_device_elapsed_ms(int from, int to) {
  float ms = 0;
  Marks &m = marks();
  orExit([&] {
    check(cudaEventElapsedTime(&ms, m.events.at(from), m.events.at(to)),
          "cudaEventElapsedTime");
  });
  return ms;
}

extern "C" void cleave_rt_device_forget_marks() { marks().used = 0; }

/// Waits for the stream politely, and not forever: a collective whose peer
/// died or hangs never completes, and NCCL would wait for it without end.
/// After CLEAVE_COLLECTIVE_TIMEOUT seconds (default 600) the whole job ends
/// with a message naming this rank.
extern "C" void cleave_rt_device_wait() {
  double timeout = comm::collectiveTimeout();
  auto start = std::chrono::steady_clock::now();
  comm::waitPolitely([&] {
    cudaError_t status = cudaStreamQuery(processStream());
    if (status == cudaSuccess)
      return true;
    if (status != cudaErrorNotReady)
      check(status, "cudaStreamQuery");
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count() > timeout) {
      std::fprintf(stderr,
                   "cleave-run: error: %s: the run did not finish on the GPU "
                   "within %.0f s (a peer of one of its collectives may have "
                   "died or hung)\n",
                   where().c_str(), timeout);
      comm::abortJob(124);
    }
    return false;
  });
}

extern "C" void cleave_rt_device_start() {
  ensureContext();
  startCollectives();
}

extern "C" void cleave_rt_device_finish() { finishCollectives(); }
