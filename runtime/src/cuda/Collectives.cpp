//===- Collectives.cpp - The collective ABI on device buffers: NCCL -------===//
//
// A CUDA program's collectives (cleave_rt_cuda_*) read and write device
// buffers and are queued on the process's stream, after the kernels and GEMMs
// that produce their operands and before those that read their results.
//
// Communicators: one NCCL communicator per descriptor group, created once at
// start-up (startCollectives): the group's first member makes the unique id
// and MPI broadcasts it within the group. NCCL refuses two ranks of one
// communicator on the same GPU, so a group whose ranks share a GPU (several
// ranks on a one-GPU machine) gets no NCCL communicator; its collectives wait
// for the stream, copy the operand to host memory, run the MPI collective
// and copy the result back. The program says so once at start-up.
//
// Layouts follow the MPI backend (comm/Mpi.cpp): parts along an axis other
// than the outermost are packed into and out of rank-major order, here with
// strided device-to-device copies on the stream.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include "../Profile.h"
#include "../Runtime.h"
#include "../comm/Buffer.h"
#include "../comm/Comm.h"

#include "cleave/Runtime/Abi.h"

#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

void checkNccl(ncclResult_t status, const char *call,
               ncclComm_t comm = nullptr) {
  if (status == ncclSuccess)
    return;
  std::string detail = ncclGetErrorString(status);
  if (const char *last = ncclGetLastError(comm); last && *last)
    detail += std::string(": ") + last;
  throw RuntimeError(std::string(call) + " failed on " + where() + ": " +
                     detail);
}

/// Per group: its NCCL communicator, or null where it goes through MPI.
std::vector<ncclComm_t> communicators;

/// Where a rank's GPU is: host name and PCI bus id.
struct DevicePlace {
  char host[64] = {};
  char bus[64] = {};
  bool operator==(const DevicePlace &o) const {
    return std::strncmp(host, o.host, sizeof(host)) == 0 &&
           std::strncmp(bus, o.bus, sizeof(bus)) == 0;
  }
};

DevicePlace thisDevicePlace() {
  DevicePlace place;
  gethostname(place.host, sizeof(place.host) - 1);
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetPCIBusId(place.bus, sizeof(place.bus) - 1, device),
        "cudaDeviceGetPCIBusId");
  return place;
}

/// Scratch device memory for packing, reused by every collective: all of
/// them run in order on the one stream.
void *scratch(size_t bytes) {
  static void *buffer = nullptr;
  static size_t capacity = 0;
  if (bytes > capacity) {
    if (buffer) {
      check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
      check(cudaFree(buffer), "cudaFree");
    }
    check(cudaMalloc(&buffer, bytes), "cudaMalloc (collective scratch)");
    capacity = bytes;
  }
  return buffer;
}

/// The buffer `descriptor` describes, which must be contiguous.
comm::View viewOf(int64_t rank, void *descriptor, size_t elementBytes) {
  comm::View v = comm::viewOf(rank, descriptor, elementBytes);
  if (!v.contiguous)
    throw RuntimeError("a collective got a non-contiguous buffer");
  return v;
}

using comm::product;
using comm::View;

/// `rows` rows of `width` bytes from `src` (rows `srcPitch` apart) to `dst`
/// (rows `dstPitch` apart), device to device, on the stream.
void copyRows(char *dst, size_t dstPitch, const char *src, size_t srcPitch,
              size_t width, size_t rows) {
  check(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, rows,
                          cudaMemcpyDeviceToDevice, processStream()),
        "cudaMemcpy2DAsync");
}

/// How an element type travels: its NCCL type for reductions (none for
/// 16-bit integers, which NCCL cannot reduce) and the host MPI collective
/// used where the group has no NCCL communicator.
struct Element {
  size_t bytes;
  bool reducible;
  ncclDataType_t type;
  void (*hostAllReduce)(int64_t, void *, int64_t, void *, int64_t, int64_t);
  void (*hostAllGather)(int64_t, void *, int64_t, void *, int64_t, int64_t);
  void (*hostReduceScatter)(int64_t, void *, int64_t, void *, int64_t, int64_t,
                            int64_t);
  void (*hostAllToAll)(int64_t, void *, int64_t, void *, int64_t, int64_t,
                       int64_t);
  void (*hostSend)(int64_t, void *, int64_t, int64_t);
  void (*hostRecv)(int64_t, void *, int64_t, int64_t);
};

ncclRedOp_t reductionOp(int64_t code) {
  switch (code) {
  case CLEAVE_REDUCE_SUM:
    return ncclSum;
  case CLEAVE_REDUCE_MAX:
    return ncclMax;
  case CLEAVE_REDUCE_MIN:
    return ncclMin;
  case CLEAVE_REDUCE_PROD:
    return ncclProd;
  }
  throw RuntimeError("unknown reduction " + std::to_string(code));
}

/// A device buffer's host copy, described as a ranked memref for the MPI
/// backend's entry points.
class HostCopy {
public:
  HostCopy(int64_t rank, void *descriptor, size_t elementBytes, bool read) {
    View device = viewOf(rank, descriptor, elementBytes);
    deviceData = device.data;
    bytes = device.count * elementBytes;
    data.resize(bytes ? bytes : 1);
    // {allocated, aligned, offset, sizes, strides}, contiguous row-major.
    words.assign(3 + 2 * rank, 0);
    char *host = data.data();
    std::memcpy(&words[0], &host, sizeof(host));
    std::memcpy(&words[1], &host, sizeof(host));
    int64_t stride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      words[3 + i] = device.shape[i];
      words[3 + rank + i] = stride;
      stride *= device.shape[i];
    }
    if (read) {
      check(cudaMemcpyAsync(data.data(), deviceData, bytes,
                            cudaMemcpyDeviceToHost, processStream()),
            "cudaMemcpyAsync (to host)");
      check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
    }
  }
  void *descriptor() { return words.data(); }
  void writeBack() {
    check(cudaMemcpyAsync(deviceData, data.data(), bytes,
                          cudaMemcpyHostToDevice, processStream()),
          "cudaMemcpyAsync (to device)");
    // `data` dies with this object: the copy must be done first.
    check(cudaStreamSynchronize(processStream()), "cudaStreamSynchronize");
  }

private:
  char *deviceData;
  size_t bytes;
  std::vector<char> data;
  std::vector<int64_t> words;
};

/// The group's NCCL communicator, or null: staged through host and MPI.
ncclComm_t communicator(int64_t group) {
  if (group < 0 || group >= static_cast<int64_t>(communicators.size()))
    throw RuntimeError("collective on unknown group " + std::to_string(group));
  return communicators[group];
}

/// A one-rank program: each collective is a copy.
bool alone(const View &in, const View &out, size_t elementBytes) {
  if (comm::active())
    return false;
  if (in.data != out.data)
    check(cudaMemcpyAsync(out.data, in.data,
                          std::min(in.count, out.count) * elementBytes,
                          cudaMemcpyDeviceToDevice, processStream()),
          "cudaMemcpyAsync");
  return true;
}

/// One collective (`kind`, for --profile, with the size of `in`) from `in`
/// to `out` over `group`: a copy in a one-rank program;
/// `onHost(inDescriptor, outDescriptor)`, the MPI backend's, on host copies
/// where the group has no NCCL communicator (or NCCL cannot reduce the type
/// and `reduces`); else `onDevice(in, out, communicator)`.
template <typename OnHost, typename OnDevice>
void collective(const char *kind, const Element &e, int64_t inRank,
                void *inDesc, int64_t outRank, void *outDesc, int64_t group,
                bool reduces, OnHost onHost, OnDevice onDevice) {
  View in = viewOf(inRank, inDesc, e.bytes),
       out = viewOf(outRank, outDesc, e.bytes);
  profile::Span span(
      [&] { return profile::describeTransfer(kind, in.count * e.bytes); });
  if (alone(in, out, e.bytes))
    return;
  ncclComm_t c = communicator(group);
  if (!c || (reduces && !e.reducible)) {
    HostCopy hostIn(inRank, inDesc, e.bytes, /*read=*/true);
    HostCopy hostOut(outRank, outDesc, e.bytes, /*read=*/false);
    onHost(hostIn.descriptor(), hostOut.descriptor());
    hostOut.writeBack();
    return;
  }
  onDevice(in, out, c);
}

void allReduce(const Element &e, int64_t inRank, void *inDesc, int64_t outRank,
               void *outDesc, int64_t code, int64_t group) {
  collective(
      "all_reduce", e, inRank, inDesc, outRank, outDesc, group,
      /*reduces=*/true,
      [&](void *hostIn, void *hostOut) {
        e.hostAllReduce(inRank, hostIn, outRank, hostOut, code, group);
      },
      [&](View &in, View &out, ncclComm_t c) {
        checkNccl(ncclAllReduce(in.data, out.data, in.count, e.type,
                                reductionOp(code), c, processStream()),
                  "ncclAllReduce", c);
      });
}

void allGather(const Element &e, int64_t inRank, void *inDesc, int64_t outRank,
               void *outDesc, int64_t axis, int64_t group) {
  collective(
      "all_gather", e, inRank, inDesc, outRank, outDesc, group,
      /*reduces=*/false,
      [&](void *hostIn, void *hostOut) {
        e.hostAllGather(inRank, hostIn, outRank, hostOut, axis, group);
      },
      [&](View &in, View &out, ncclComm_t c) {
        int n = comm::groupSize(group);
        int64_t outer = product(in.shape, 0, axis);
        size_t block = in.count * e.bytes, inner = block / outer;
        // Gathered member by member; parts along an inner axis are then
        // interleaved row by row.
        char *gathered =
            outer == 1 ? out.data : static_cast<char *>(scratch(block * n));
        checkNccl(ncclAllGather(in.data, gathered, block, ncclInt8, c,
                                processStream()),
                  "ncclAllGather", c);
        if (outer > 1)
          for (int j = 0; j < n; ++j)
            copyRows(out.data + j * inner, n * inner, gathered + j * block,
                     inner, inner, outer);
      });
}

void reduceScatter(const Element &e, int64_t inRank, void *inDesc,
                   int64_t outRank, void *outDesc, int64_t axis, int64_t code,
                   int64_t group) {
  collective(
      "reduce_scatter", e, inRank, inDesc, outRank, outDesc, group,
      /*reduces=*/true,
      [&](void *hostIn, void *hostOut) {
        e.hostReduceScatter(inRank, hostIn, outRank, hostOut, axis, code,
                            group);
      },
      [&](View &in, View &out, ncclComm_t c) {
        int n = comm::groupSize(group);
        int64_t outer = product(in.shape, 0, axis);
        const char *packed = in.data;
        if (outer > 1) {
          // Member j's part, row by row, made contiguous.
          size_t inner = out.count / outer * e.bytes;
          auto *staged = static_cast<char *>(scratch(in.count * e.bytes));
          for (int j = 0; j < n; ++j)
            copyRows(staged + j * outer * inner, inner, in.data + j * inner,
                     n * inner, inner, outer);
          packed = staged;
        }
        checkNccl(ncclReduceScatter(packed, out.data, out.count, e.type,
                                    reductionOp(code), c, processStream()),
                  "ncclReduceScatter", c);
      });
}

void allToAll(const Element &e, int64_t inRank, void *inDesc, int64_t outRank,
              void *outDesc, int64_t splitAxis, int64_t concatAxis,
              int64_t group) {
  collective(
      "all_to_all", e, inRank, inDesc, outRank, outDesc, group,
      /*reduces=*/false,
      [&](void *hostIn, void *hostOut) {
        e.hostAllToAll(inRank, hostIn, outRank, hostOut, splitAxis, concatAxis,
                       group);
      },
      [&](View &in, View &out, ncclComm_t c) {
        int n = comm::groupSize(group);
        size_t part = in.count / n * e.bytes;
        auto *send = static_cast<char *>(scratch(2 * in.count * e.bytes));
        char *recv = send + in.count * e.bytes;
        // Part j is in's slice j along splitAxis, packed row-major.
        int64_t outerS = product(in.shape, 0, splitAxis);
        size_t innerS = in.count / outerS / n * e.bytes;
        for (int j = 0; j < n; ++j)
          copyRows(send + j * part, innerS, in.data + j * innerS, n * innerS,
                   innerS, outerS);
        checkNccl(ncclGroupStart(), "ncclGroupStart");
        for (int j = 0; j < n; ++j) {
          checkNccl(
              ncclSend(send + j * part, part, ncclInt8, j, c, processStream()),
              "ncclSend", c);
          checkNccl(
              ncclRecv(recv + j * part, part, ncclInt8, j, c, processStream()),
              "ncclRecv", c);
        }
        checkNccl(ncclGroupEnd(), "ncclGroupEnd", c);
        // Received part j goes to slice j along concatAxis.
        int64_t outerC = product(out.shape, 0, concatAxis);
        size_t innerC = out.count / outerC / n * e.bytes;
        for (int j = 0; j < n; ++j)
          copyRows(out.data + j * innerC, n * innerC, recv + j * part, innerC,
                   innerC, outerC);
      });
}

void transfer(bool send, const Element &e, int64_t rank, void *desc,
              int64_t peer, int64_t group) {
  if (!comm::active())
    return;
  profile::Span span([&] {
    return profile::describeTransfer(
        send ? "send" : "recv", viewOf(rank, desc, e.bytes).count * e.bytes);
  });
  ncclComm_t c = communicator(group);
  if (!c) {
    HostCopy host(rank, desc, e.bytes, send);
    (send ? e.hostSend : e.hostRecv)(rank, host.descriptor(), peer, group);
    if (!send)
      host.writeBack();
    return;
  }
  View buffer = viewOf(rank, desc, e.bytes);
  size_t bytes = buffer.count * e.bytes;
  if (send)
    checkNccl(ncclSend(buffer.data, bytes, ncclInt8, peer, c, processStream()),
              "ncclSend", c);
  else
    checkNccl(ncclRecv(buffer.data, bytes, ncclInt8, peer, c, processStream()),
              "ncclRecv", c);
}

} // namespace

void cuda::startCollectives() {
  if (!comm::active())
    return;
  DevicePlace mine = thisDevicePlace();
  std::string shared;
  for (int64_t group = 0; group < comm::groupCount(); ++group) {
    int size = comm::groupSize(group), position = comm::groupPosition(group);
    std::vector<DevicePlace> places(size);
    comm::allGatherInGroup(group, &mine, places.data(), sizeof(DevicePlace));
    bool distinct = true;
    for (int i = 0; i < size; ++i)
      for (int j = 0; j < i; ++j)
        distinct &= !(places[i] == places[j]);
    if (!distinct) {
      communicators.push_back(nullptr);
      shared += (shared.empty() ? "" : ", ") + std::to_string(group);
      continue;
    }
    ncclUniqueId id;
    if (position == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    comm::broadcastInGroup(group, &id, sizeof(id));
    ncclComm_t c = nullptr;
    checkNccl(ncclCommInitRank(&c, size, id, position), "ncclCommInitRank");
    communicators.push_back(c);
  }
  if (!shared.empty() && comm::rank() == 0)
    std::fprintf(stderr,
                 "cleave-run: note: ranks share a GPU in communicator group(s) "
                 "%s; NCCL needs one GPU per rank, so their collectives go "
                 "through host memory and MPI\n",
                 shared.c_str());
}

void cuda::finishCollectives() {
  for (ncclComm_t c : communicators)
    if (c)
      ncclCommDestroy(c);
  communicators.clear();
}

//===----------------------------------------------------------------------===//
// The C ABI
//===----------------------------------------------------------------------===//

#define CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(suffix, bytes, reducible, ncclType)  \
  static const Element element_##suffix = {bytes,                              \
                                           reducible,                          \
                                           ncclType,                           \
                                           cleave_rt_all_reduce_##suffix,      \
                                           cleave_rt_all_gather_##suffix,      \
                                           cleave_rt_reduce_scatter_##suffix,  \
                                           cleave_rt_all_to_all_##suffix,      \
                                           cleave_rt_send_##suffix,            \
                                           cleave_rt_recv_##suffix};           \
  extern "C" void cleave_rt_cuda_all_reduce_##suffix(                          \
      int64_t ir, void *i, int64_t orank, void *o, int64_t code, int64_t g) {  \
    orExit([&] { allReduce(element_##suffix, ir, i, orank, o, code, g); });    \
  }                                                                            \
  extern "C" void cleave_rt_cuda_all_gather_##suffix(                          \
      int64_t ir, void *i, int64_t orank, void *o, int64_t axis, int64_t g) {  \
    orExit([&] { allGather(element_##suffix, ir, i, orank, o, axis, g); });    \
  }                                                                            \
  extern "C" void cleave_rt_cuda_reduce_scatter_##suffix(                      \
      int64_t ir, void *i, int64_t orank, void *o, int64_t axis, int64_t code, \
      int64_t g) {                                                             \
    orExit([&] {                                                               \
      reduceScatter(element_##suffix, ir, i, orank, o, axis, code, g);         \
    });                                                                        \
  }                                                                            \
  extern "C" void cleave_rt_cuda_all_to_all_##suffix(                          \
      int64_t ir, void *i, int64_t orank, void *o, int64_t split,              \
      int64_t concat, int64_t g) {                                             \
    orExit([&] {                                                               \
      allToAll(element_##suffix, ir, i, orank, o, split, concat, g);           \
    });                                                                        \
  }                                                                            \
  extern "C" void cleave_rt_cuda_send_##suffix(int64_t r, void *b,             \
                                               int64_t peer, int64_t g) {      \
    orExit([&] { transfer(true, element_##suffix, r, b, peer, g); });          \
  }                                                                            \
  extern "C" void cleave_rt_cuda_recv_##suffix(int64_t r, void *b,             \
                                               int64_t peer, int64_t g) {      \
    orExit([&] { transfer(false, element_##suffix, r, b, peer, g); });         \
  }

CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(f32, 4, true, ncclFloat32)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(f64, 8, true, ncclFloat64)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(f16, 2, true, ncclFloat16)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(bf16, 2, true, ncclBfloat16)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(i64, 8, true, ncclInt64)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(i32, 4, true, ncclInt32)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(i16, 2, false, ncclInt8)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(i8, 1, true, ncclInt8)
CLEAVE_RT_DEFINE_CUDA_COLLECTIVES(bool, 1, true, ncclUint8)
#undef CLEAVE_RT_DEFINE_CUDA_COLLECTIVES
