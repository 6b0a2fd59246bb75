//===- Mpi.cpp - The MPI backend of the collective ABI --------------------===//
//
// Communicators are split from MPI_COMM_WORLD once per group at start-up: the
// ranks that differ only on a group's axes share one, ordered by their
// position on those axes (first axis major), which is the order the `shard`
// dialect gathers and scatters in. Collectives along a tensor axis other
// than the outermost are packed into and out of MPI's rank-major order.
//
//===----------------------------------------------------------------------===//

#include "Buffer.h"
#include "Comm.h"
#include "Heartbeat.h"
#include "../Profile.h"

#include "cleave/Runtime/Abi.h"
#include "cleave/Runtime/Float16.h"
#include "cleave/Runtime/Progress.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <functional>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace cleave::rt;

namespace {

struct State {
  bool active = false;
  int rank = 0;
  int size = 1;
  std::vector<int64_t> meshSizes;
  std::vector<int64_t> coords;
  std::vector<MPI_Comm> groups;
  /// How messages name this rank: "rank R", and its host where the job
  /// spans several.
  std::string label = "rank 0";
  /// The communicator each group id of the running program stands for
  /// (setGroupTable); empty: the identity.
  std::vector<int64_t> table;
};
State state;

//===----------------------------------------------------------------------===//
// Progress and the watchdog
//===----------------------------------------------------------------------===//

/// What this rank publishes (cleave/Runtime/Progress.h), updated with atomic
/// stores since peers and cleave-run read it concurrently.
cleave_progress localProgress;
cleave_progress *published = &localProgress;

uint64_t load(uint64_t &field) {
  return __atomic_load_n(&field, __ATOMIC_ACQUIRE);
}
/// Once a run has completed, a collective may wait kLearnedLimitFactor
/// times the longest any has waited so far, and at least
/// kLearnedLimitFloorMs (comm::runCompleted).
constexpr int64_t kLearnedLimitFactor = 20;
constexpr int64_t kLearnedLimitFloorMs = 20000;
/// How long a rank of a job that succeeded waits for MPI_Finalize.
constexpr unsigned kFinalizeSeconds = 5;
/// How long a rank waits for MPI_Abort before it ends itself.
constexpr unsigned kAbortSeconds = 3;
void store(uint64_t &field, uint64_t v) {
  __atomic_store_n(&field, v, __ATOMIC_RELEASE);
}
/// MPI_Abort, which asks the launcher to end every rank; where the launcher
/// cannot be reached (its host's network down) it may never return, so
/// the rank ends itself a few seconds later all the same (SIGALRM's
/// default action ends the process). First a pause: hydra's proxy passes a
/// rank's stderr on, and on a loaded machine it could end the ranks on the
/// abort before it has passed on the message that says why.
[[noreturn]] void abortWithin(int code) {
  alarm(kAbortSeconds);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

/// Publishes that this rank ends the job with `code`, then ends it.
[[noreturn]] void endJob(int code, bool abortPeers) {
  store(published->status, static_cast<uint64_t>(code));
  store(published->exited, 1);
  std::fflush(stderr);
  if (abortPeers)
    abortWithin(code);
  std::_Exit(code);
}

std::string progressDir;
std::atomic<int64_t> enteredAt{0}; // steady-clock ms, 0 outside collectives
/// The longest any collective of this rank has waited, and the limit it
/// sets once a run has completed (0: none yet): see comm::runCompleted.
std::atomic<int64_t> longestWaitMs{0};
std::atomic<int64_t> learnedLimitMs{0};
const char *currentKind = "";
bool currentCounted = true;
int64_t currentGroup = -1;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Maps this rank's progress file, if cleave-run gave a folder for them.
void publishProgress() {
  const char *dir = std::getenv("CLEAVE_PROGRESS_DIR");
  if (!dir || !*dir)
    return;
  progressDir = dir;
  std::string path = progressDir + "/rank" + std::to_string(state.rank);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(cleave_progress)) != 0)
    return;
  void *mapped = mmap(nullptr, sizeof(cleave_progress), PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapped != MAP_FAILED)
    published = static_cast<cleave_progress *>(mapped);
}

/// A peer's progress, if its file exists.
bool readProgress(int peer, uint64_t &completed, uint64_t &inside) {
  std::string path = progressDir + "/rank" + std::to_string(peer);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return false;
  cleave_progress p;
  bool ok = ::read(fd, &p, sizeof(p)) == static_cast<ssize_t>(sizeof(p));
  ::close(fd);
  completed = p.completed;
  inside = p.inside;
  return ok;
}

[[noreturn]] void reportHang(double timeout, bool learned = false) {
  uint64_t mine = load(published->completed);
  std::string late;
  if (!progressDir.empty())
    for (int peer = 0; peer < state.size; ++peer) {
      uint64_t completed = 0, inside = 0;
      if (peer == state.rank)
        continue;
      if (!readProgress(peer, completed, inside)) {
        late += " " + std::to_string(peer) + " (no progress file)";
        continue;
      }
      if (completed < mine || (completed == mine && !inside))
        late += " " + std::to_string(peer) + " (finished " +
                std::to_string(completed) + " collectives, " +
                (inside ? "waiting in one" : "not in a collective") + ")";
    }
  std::string what = currentKind;
  if (currentCounted)
    what += " #" + std::to_string(mine + 1) + " on group " +
            std::to_string(currentGroup);
  std::fprintf(stderr,
               "cleave-run: error: %s: %s did not complete within %.0f s%s; "
               "ranks that have not reached it:%s\n",
               state.label.c_str(), what.c_str(), timeout,
               learned ? " (the limit the job's completed runs set: "
                         "--timeout sets one)"
                       : "",
               late.empty() ? " unknown (a peer may have died or hung)"
                            : late.c_str());
  std::fflush(stderr);
  abortWithin(124);
}

/// This rank's heartbeats to its successor (Heartbeat.h), sent and watched
/// by the watchdog's thread.
comm::Heartbeat heartbeat;
/// Every rank's host, to name one; empty where they all share one.
std::vector<std::string> hostOfRank;

/// The heartbeat's turn of the watchdog: ends the job when the predecessor
/// has fallen silent.
void listenForHeartbeats() {
  comm::Heartbeat::Finding found = heartbeat.beat(nowMs());
  if (found == comm::Heartbeat::Finding::Nothing)
    return;
  int peer = heartbeat.predecessorRank();
  std::string name = "rank " + std::to_string(peer);
  if (!hostOfRank.empty())
    name += " on host " + hostOfRank[peer];
  if (found == comm::Heartbeat::Finding::Unheard) {
    std::fprintf(stderr,
                 "cleave-run: warning: %s: no heartbeat has come from %s (UDP "
                 "between their hosts blocked?): a stop or a network fault "
                 "there is found only at the collective timeout\n",
                 state.label.c_str(), name.c_str());
    return;
  }
  std::fprintf(stderr,
               "cleave-run: error: %s: no heartbeat from %s for %.0f s: it is "
               "stopped, or its host cannot be reached\n",
               state.label.c_str(), name.c_str(), heartbeat.timeout());
  std::fflush(stderr);
  abortWithin(125);
}

/// The watchdog's thread: ends the job when a collective waits past the
/// timeout, and keeps the heartbeats.
std::thread watchdog;
std::atomic<bool> stopWatchdog{false};

void startWatchdog() {
  double timeout = comm::collectiveTimeout();
  watchdog = std::thread([timeout] {
    while (!stopWatchdog.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int64_t since = enteredAt.load();
      int64_t learned = learnedLimitMs.load();
      if (since != 0 && learned > 0 && learned < timeout * 1000 &&
          nowMs() - since > learned)
        reportHang(learned / 1000.0, /*learned=*/true);
      if (since != 0 && nowMs() - since > timeout * 1000)
        reportHang(timeout);
      listenForHeartbeats();
    }
  });
}

/// Test hook (CLEAVE_RT_FAULT=RANK:exit|hang|stop:N): this rank exits, hangs
/// (its heartbeat going on) or stops (SIGSTOP) before its Nth collective (N =
/// 0: before the check after setup), to exercise the failure handling. `point`
/// is where the caller stands.
void maybeInjectFault(int64_t point) {
  static const char *spec = std::getenv("CLEAVE_RT_FAULT");
  if (!spec)
    return;
  int rank = -1, at = 1;
  char what[8] = {};
  if (std::sscanf(spec, "%d:%7[a-z]:%d", &rank, what, &at) < 2 ||
      rank != state.rank || point != at)
    return;
  if (std::strcmp(what, "exit") == 0)
    endJob(3, /*abortPeers=*/false);
  if (std::strcmp(what, "stop") == 0)
    raise(SIGSTOP); // the whole process, as a debugger or ^Z would
  while (true)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

/// Brackets one collective for the watchdog and the progress file.
/// A collective of the model is counted (its number names it in messages and
/// the fault hook); the runtime's own agreements between ranks (after setup,
/// around benchmark runs) are watched but not counted.
struct CollectiveScope {
  CollectiveScope(const char *kind, int64_t group, bool counted = true,
                  int64_t faultPoint = -1)
      : counted(counted) {
    maybeInjectFault(counted ? int64_t(load(published->completed)) + 1
                             : faultPoint);
    currentCounted = counted;
    currentKind = kind;
    currentGroup = group;
    std::snprintf(published->kind, sizeof(published->kind), "%s", kind);
    store(published->inside, 1);
    enteredAt.store(nowMs());
  }
  ~CollectiveScope() {
    int64_t waited = nowMs() - enteredAt.load();
    if (waited > longestWaitMs.load())
      longestWaitMs.store(waited);
    enteredAt.store(0);
    store(published->inside, 0);
    if (counted)
      store(published->completed, load(published->completed) + 1);
  }
  bool counted;
};

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// The buffer `descriptor` describes; a non-contiguous one ends the job.
comm::View viewOf(int64_t rank, void *descriptor, size_t elementBytes) {
  comm::View v = comm::viewOf(rank, descriptor, elementBytes);
  if (!v.contiguous) {
    std::fprintf(stderr,
                 "cleave-run: error: rank %d: a collective got a "
                 "non-contiguous buffer\n",
                 state.rank);
    comm::abortJob(70);
  }
  return v;
}

using comm::product;
using comm::View;

void check(int code, const char *call) {
  if (code == MPI_SUCCESS)
    return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  std::fprintf(stderr, "cleave-run: error: %s: %s failed: %s\n",
               state.label.c_str(), call, message);
  comm::abortJob(71);
}

MPI_Comm groupComm(int64_t group) {
  if (!state.table.empty())
    group = group >= 0 && group < int64_t(state.table.size())
                ? state.table[group]
                : -1;
  if (group < 0 || group >= static_cast<int64_t>(state.groups.size())) {
    std::fprintf(stderr,
                 "cleave-run: error: rank %d: collective on unknown "
                 "group %lld\n",
                 state.rank, (long long)group);
    comm::abortJob(70);
  }
  return state.groups[group];
}

int groupSize(MPI_Comm c) {
  int n = 1;
  MPI_Comm_size(c, &n);
  return n;
}

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// How an element type travels through MPI.
struct Element {
  MPI_Datatype type;
  size_t bytes;
  int widen; // 0: as is; 1: f16 and 2: bf16 are reduced in float32
};

MPI_Op reductionOp(int64_t code) {
  switch (code) {
  case CLEAVE_REDUCE_SUM:
    return MPI_SUM;
  case CLEAVE_REDUCE_MAX:
    return MPI_MAX;
  case CLEAVE_REDUCE_MIN:
    return MPI_MIN;
  case CLEAVE_REDUCE_PROD:
    return MPI_PROD;
  }
  std::fprintf(stderr, "cleave-run: error: rank %d: unknown reduction %lld\n",
               state.rank, (long long)code);
  comm::abortJob(70);
}

void waitFor(MPI_Request &request, const char *call);

/// Whether this machine's ranks share its cores (cleave-run sets
/// CLEAVE_RANKS_SHARE_CORES when ranks x threads exceed them): a rank that
/// waits busily in a collective then holds the core the peer it waits for
/// needs.
bool ranksShareCores() {
  static const bool share = [] {
    const char *v = std::getenv("CLEAVE_RANKS_SHARE_CORES");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return share;
}

/// Runs one collective: MPI's blocking call, or, where ranks share cores,
/// its nonblocking form waited for politely (waitFor).
template <typename Blocking, typename Start>
void collective(const char *blockingName, Blocking blocking,
                const char *startName, Start start) {
  if (!ranksShareCores()) {
    check(blocking(), blockingName);
    return;
  }
  MPI_Request request;
  check(start(&request), startName);
  waitFor(request, startName);
}

/// Reduces `count` elements of `in` into `out` over `c`, with `scatter`:
/// MPI_Reduce_scatter_block of `count` / group size per member.
void reduce(const Element &e, const char *in, char *out, int64_t count,
            int64_t code, MPI_Comm c, bool scatter) {
  int64_t outCount = scatter ? count / groupSize(c) : count;
  if (e.widen == 0) {
    const void *send = in == out ? MPI_IN_PLACE : in;
    if (scatter)
      collective(
          "MPI_Reduce_scatter_block",
          [&] {
            return MPI_Reduce_scatter_block(in, out, outCount, e.type,
                                            reductionOp(code), c);
          },
          "MPI_Ireduce_scatter_block",
          [&](MPI_Request *r) {
            return MPI_Ireduce_scatter_block(in, out, outCount, e.type,
                                             reductionOp(code), c, r);
          });
    else
      collective(
          "MPI_Allreduce",
          [&] {
            return MPI_Allreduce(send, out, count, e.type, reductionOp(code),
                                 c);
          },
          "MPI_Iallreduce",
          [&](MPI_Request *r) {
            return MPI_Iallreduce(send, out, count, e.type, reductionOp(code),
                                  c, r);
          });
    return;
  }
  std::vector<float> wide(count), result(outCount);
  auto *halves = reinterpret_cast<const uint16_t *>(in);
  for (int64_t i = 0; i < count; ++i)
    wide[i] = e.widen == 1 ? halfToFloat(halves[i]) : bf16ToFloat(halves[i]);
  if (scatter)
    collective(
        "MPI_Reduce_scatter_block",
        [&] {
          return MPI_Reduce_scatter_block(wide.data(), result.data(), outCount,
                                          MPI_FLOAT, reductionOp(code), c);
        },
        "MPI_Ireduce_scatter_block",
        [&](MPI_Request *r) {
          return MPI_Ireduce_scatter_block(wide.data(), result.data(), outCount,
                                           MPI_FLOAT, reductionOp(code), c, r);
        });
  else
    collective(
        "MPI_Allreduce",
        [&] {
          return MPI_Allreduce(wide.data(), result.data(), count, MPI_FLOAT,
                               reductionOp(code), c);
        },
        "MPI_Iallreduce",
        [&](MPI_Request *r) {
          return MPI_Iallreduce(wide.data(), result.data(), count, MPI_FLOAT,
                                reductionOp(code), c, r);
        });
  auto *outHalves = reinterpret_cast<uint16_t *>(out);
  for (int64_t i = 0; i < outCount; ++i)
    outHalves[i] =
        e.widen == 1 ? floatToHalf(result[i]) : floatToBf16(result[i]);
}

/// A program compiled for a one-rank mesh (tp=1) runs without MPI: every
/// group has one member and each collective is a copy.
bool alone(const View &in, const View &out, const Element &e) {
  if (state.active)
    return false;
  if (in.data != out.data)
    std::memmove(out.data, in.data, std::min(in.count, out.count) * e.bytes);
  return true;
}

/// How --profile names a collective: its kind and what each rank gives.
std::string describe(const char *kind, const View &given, const Element &e) {
  return profile::describeTransfer(kind, given.count * e.bytes);
}

//===----------------------------------------------------------------------===//
// The collectives, for any element type
//===----------------------------------------------------------------------===//

void allReduce(const Element &e, int64_t inRank, void *inDesc, int64_t outRank,
               void *outDesc, int64_t code, int64_t group) {
  CollectiveScope scope("all_reduce", group);
  View in = viewOf(inRank, inDesc, e.bytes),
       out = viewOf(outRank, outDesc, e.bytes);
  profile::Span span([&] { return describe("all_reduce", in, e); });
  if (alone(in, out, e))
    return;
  reduce(e, in.data, out.data, in.count, code, groupComm(group), false);
}

void allGather(const Element &e, int64_t inRank, void *inDesc, int64_t outRank,
               void *outDesc, int64_t axis, int64_t group) {
  CollectiveScope scope("all_gather", group);
  View in = viewOf(inRank, inDesc, e.bytes),
       out = viewOf(outRank, outDesc, e.bytes);
  profile::Span span([&] { return describe("all_gather", in, e); });
  if (alone(in, out, e))
    return;
  MPI_Comm c = groupComm(group);
  int n = groupSize(c);
  int64_t outer = product(in.shape, 0, axis);
  size_t block = in.count * e.bytes; // one member's part
  size_t inner = block / outer;      // bytes of one outer row of a part
  if (outer == 1) {
    collective(
        "MPI_Allgather",
        [&] {
          return MPI_Allgather(in.data, block, MPI_BYTE, out.data, block,
                               MPI_BYTE, c);
        },
        "MPI_Iallgather",
        [&](MPI_Request *r) {
          return MPI_Iallgather(in.data, block, MPI_BYTE, out.data, block,
                                MPI_BYTE, c, r);
        });
    return;
  }
  std::vector<char> staged(block * n);
  collective(
      "MPI_Allgather",
      [&] {
        return MPI_Allgather(in.data, block, MPI_BYTE, staged.data(), block,
                             MPI_BYTE, c);
      },
      "MPI_Iallgather",
      [&](MPI_Request *r) {
        return MPI_Iallgather(in.data, block, MPI_BYTE, staged.data(), block,
                              MPI_BYTE, c, r);
      });
  for (int j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.data + (o * n + j) * inner,
                  staged.data() + j * block + o * inner, inner);
}

void reduceScatter(const Element &e, int64_t inRank, void *inDesc,
                   int64_t outRank, void *outDesc, int64_t axis, int64_t code,
                   int64_t group) {
  CollectiveScope scope("reduce_scatter", group);
  View in = viewOf(inRank, inDesc, e.bytes),
       out = viewOf(outRank, outDesc, e.bytes);
  profile::Span span([&] { return describe("reduce_scatter", in, e); });
  if (alone(in, out, e))
    return;
  MPI_Comm c = groupComm(group);
  int n = groupSize(c);
  int64_t outer = product(in.shape, 0, axis);
  size_t inner = out.count / outer * e.bytes;
  std::vector<char> staged(in.count * e.bytes);
  for (int j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(staged.data() + (j * outer + o) * inner,
                  in.data + (o * n + j) * inner, inner);
  reduce(e, staged.data(), out.data, in.count, code, c, true);
}

void allToAll(const Element &e, int64_t inRank, void *inDesc, int64_t outRank,
              void *outDesc, int64_t splitAxis, int64_t concatAxis,
              int64_t group) {
  CollectiveScope scope("all_to_all", group);
  View in = viewOf(inRank, inDesc, e.bytes),
       out = viewOf(outRank, outDesc, e.bytes);
  profile::Span span([&] { return describe("all_to_all", in, e); });
  if (alone(in, out, e))
    return;
  MPI_Comm c = groupComm(group);
  int n = groupSize(c);
  // Send: part j is in's slice j along splitAxis, packed row-major.
  int64_t outerS = product(in.shape, 0, splitAxis);
  size_t innerS = in.count / outerS / n * e.bytes;
  size_t part = in.count / n * e.bytes;
  std::vector<char> send(in.count * e.bytes), recv(out.count * e.bytes);
  for (int j = 0; j < n; ++j)
    for (int64_t o = 0; o < outerS; ++o)
      std::memcpy(send.data() + j * part + o * innerS,
                  in.data + (o * n + j) * innerS, innerS);
  collective(
      "MPI_Alltoall",
      [&] {
        return MPI_Alltoall(send.data(), part, MPI_BYTE, recv.data(), part,
                            MPI_BYTE, c);
      },
      "MPI_Ialltoall",
      [&](MPI_Request *r) {
        return MPI_Ialltoall(send.data(), part, MPI_BYTE, recv.data(), part,
                             MPI_BYTE, c, r);
      });
  // Receive: part j goes to slice j along concatAxis.
  int64_t outerC = product(out.shape, 0, concatAxis);
  size_t innerC = out.count / outerC / n * e.bytes;
  for (int j = 0; j < n; ++j)
    for (int64_t o = 0; o < outerC; ++o)
      std::memcpy(out.data + (o * n + j) * innerC,
                  recv.data() + j * part + o * innerC, innerC);
}

/// Seconds spent in point-to-point transfers since the last
/// comm::takeTransferSeconds: a pipeline stage's time waiting for its
/// neighbours.
double transferSeconds = 0;

/// Adds the lifetime of the scope to transferSeconds.
struct TransferTimer {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  ~TransferTimer() {
    transferSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
};

/// Waits for `request` politely (comm::waitPolitely).
void waitFor(MPI_Request &request, const char *call) {
  comm::waitPolitely([&] {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), call);
    return done != 0;
  });
}

/// Point to point: `desc`'s buffer to (`send`) or from group member `peer`,
/// waited for politely.
void transfer(bool send, const Element &e, int64_t rank, void *desc,
              int64_t peer, int64_t group) {
  CollectiveScope scope(send ? "send" : "recv", group);
  TransferTimer timer;
  View buffer = viewOf(rank, desc, e.bytes);
  profile::Span span(
      [&] { return describe(send ? "send" : "recv", buffer, e); });
  if (!state.active)
    return;
  MPI_Request request;
  const char *call = send ? "MPI_Isend" : "MPI_Irecv";
  int count = buffer.count * e.bytes;
  check(send ? MPI_Isend(buffer.data, count, MPI_BYTE, peer, 0,
                         groupComm(group), &request)
             : MPI_Irecv(buffer.data, count, MPI_BYTE, peer, 0,
                         groupComm(group), &request),
        call);
  waitFor(request, call);
}

} // namespace

//===----------------------------------------------------------------------===//
// Start-up and helpers
//===----------------------------------------------------------------------===//

void comm::start(const ModelDesc &desc, int *argc, char ***argv) {
  // A rank whose launcher is gone (its host's MPI proxy killed, or the
  // whole launch stopped) ends too, rather than computing or waiting on
  // for no one. (Checked after asking: the parent may already be gone.)
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    std::_Exit(1);
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
        "MPI_Init_thread");
  state.active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &state.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &state.size);
  if (state.size != desc.ranks)
    throw RuntimeError("the program was compiled for " +
                       std::to_string(desc.ranks) + " ranks but started on " +
                       std::to_string(state.size) +
                       "; start it with cleave-run, which launches the right "
                       "number");
  // Every rank's host and where its heartbeats reach it. Where the hosts
  // differ, every message names the host too.
  double beatTimeout = heartbeatTimeout();
  std::string noSocket;
  if (beatTimeout > 0 && !heartbeat.open(noSocket) && state.rank == 0)
    std::fprintf(stderr, "cleave-run: warning: no heartbeats: %s\n",
                 noSocket.c_str());
  comm::HeartbeatAddress mine = heartbeat.address();
  mine.token = uint64_t(getpid()) << 32 ^ uint64_t(nowMs());
  std::vector<comm::HeartbeatAddress> everyone(state.size);
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, everyone.data(), sizeof mine,
                MPI_BYTE, MPI_COMM_WORLD);
  for (const comm::HeartbeatAddress &a : everyone)
    hostOfRank.emplace_back(a.host);
  bool spansHosts =
      std::any_of(hostOfRank.begin(), hostOfRank.end(),
                  [](const std::string &h) { return h != hostOfRank.front(); });
  state.label = "rank " + std::to_string(state.rank) +
                (spansHosts ? " on host " + hostOfRank[state.rank] : "");
  if (!spansHosts)
    hostOfRank.clear(); // messages name ranks alone
  // The first heartbeat now, before any collective: a rank stopped in its
  // first moments has then been heard, and is watched.
  if (beatTimeout > 0) {
    heartbeat.start(state.rank, everyone, everyone.front().token, beatTimeout,
                    nowMs());
    heartbeat.beat(nowMs());
  }
  state.meshSizes = desc.meshSizes;
  state.coords.assign(desc.meshSizes.size(), 0);
  int64_t rest = state.rank;
  for (int i = static_cast<int>(desc.meshSizes.size()) - 1; i >= 0; --i) {
    state.coords[i] = rest % desc.meshSizes[i];
    rest /= desc.meshSizes[i];
  }
  for (const std::vector<int> &axes : desc.groups) {
    int color = 0, key = 0;
    for (size_t a = 0; a < desc.meshSizes.size(); ++a) {
      bool inGroup = false;
      for (int g : axes)
        inGroup |= g == static_cast<int>(a);
      if (!inGroup)
        color = color * desc.meshSizes[a] + state.coords[a];
    }
    for (int g : axes)
      key = key * desc.meshSizes[g] + state.coords[g];
    MPI_Comm c;
    check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c), "MPI_Comm_split");
    state.groups.push_back(c);
  }
  publishProgress();
  startWatchdog();
}

void comm::finish(bool succeeded) {
  if (!state.active)
    return;
  stopWatchdog.store(true);
  if (watchdog.joinable())
    watchdog.join();
  heartbeat.leave();
  // cleave-run counts these (its DoneRanks): a job whose every rank got
  // here succeeded, whatever MPI_Finalize does next.
  if (const char *report = std::getenv("CLEAVE_REPORT_DONE");
      succeeded && report && *report == '1') {
    std::fprintf(stderr, "cleave-rank-done %d\n", state.rank);
    std::fflush(stderr);
  }
  for (MPI_Comm &c : state.groups)
    MPI_Comm_free(&c);
  // MPI_Finalize with UCX over TCP (Ethernet between hosts) can wait forever:
  // a rank still flushing a connection whose peer has already gone on to
  // the launcher's closing barrier, which makes no more progress on it
  // (openucx/ucx#8738). The job's outcome is agreed by then, so a rank
  // still in MPI_Finalize after kFinalizeSeconds leaves without it.
  std::thread([succeeded] {
    std::this_thread::sleep_for(std::chrono::seconds(kFinalizeSeconds));
    if (succeeded)
      store(published->finished, 1);
    std::_Exit(succeeded ? 0 : 1);
  }).detach();
  MPI_Finalize();
  state.active = false;
  store(published->finished, 1);
}

int comm::rank() { return state.rank; }
bool comm::active() { return state.active; }

int comm::firstFailure(bool failed) {
  if (!state.active)
    return failed ? 0 : -1;
  // The first check follows setup: the fault hook's point 0.
  static bool setupChecked = false;
  CollectiveScope scope("the check that every rank succeeded", -1,
                        /*counted=*/false, setupChecked ? -1 : 0);
  setupChecked = true;
  int mine = failed ? state.rank : state.size, lowest = state.size;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return lowest == state.size ? -1 : lowest;
}

double comm::maxOverRanks(double value) {
  std::vector<double> values = {value};
  maxOverRanks(values);
  return values.front();
}

void comm::maxOverRanks(std::vector<double> &values) {
  if (!state.active)
    return;
  CollectiveScope scope("the benchmark's timing", -1, /*counted=*/false);
  std::vector<double> result(values.size());
  MPI_Allreduce(values.data(), result.data(), int(values.size()), MPI_DOUBLE,
                MPI_MAX, MPI_COMM_WORLD);
  values = std::move(result);
}

double comm::takeTransferSeconds() {
  double seconds = transferSeconds;
  transferSeconds = 0;
  return seconds;
}

void comm::barrier() {
  if (!state.active)
    return;
  CollectiveScope scope("the benchmark's barrier", -1, /*counted=*/false);
  MPI_Barrier(MPI_COMM_WORLD);
}

void comm::broadcast(int root, void *data, size_t bytes) {
  if (!state.active)
    return;
  CollectiveScope scope("the generation loop's broadcast", -1,
                        /*counted=*/false);
  // MPI counts in int: the prompt's keys and values may pass 2 GiB.
  constexpr size_t kChunk = size_t(1) << 30;
  for (size_t done = 0; done < bytes; done += kChunk)
    check(MPI_Bcast(static_cast<char *>(data) + done,
                    int(std::min(kChunk, bytes - done)), MPI_BYTE, root,
                    MPI_COMM_WORLD),
          "MPI_Bcast");
}

void comm::setGroupTable(std::vector<int64_t> table) {
  state.table = std::move(table);
}

const std::string &comm::label() { return state.label; }

int64_t comm::groupCount() { return state.groups.size(); }

int comm::groupPosition(int64_t group) {
  int position = 0;
  MPI_Comm_rank(groupComm(group), &position);
  return position;
}

int comm::groupSize(int64_t group) { return ::groupSize(groupComm(group)); }

void comm::broadcastInGroup(int64_t group, void *data, size_t bytes) {
  CollectiveScope scope("a device communicator's set-up", group,
                        /*counted=*/false);
  check(MPI_Bcast(data, int(bytes), MPI_BYTE, 0, groupComm(group)),
        "MPI_Bcast");
}

void comm::allGatherInGroup(int64_t group, const void *mine, void *all,
                            size_t bytes) {
  CollectiveScope scope("a device communicator's set-up", group,
                        /*counted=*/false);
  check(MPI_Allgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE,
                      groupComm(group)),
        "MPI_Allgather");
}

void comm::runCompleted() {
  // Only without a limit given (CLEAVE_COLLECTIVE_TIMEOUT), read once: this
  // runs after every generation step.
  static const bool learns = !std::getenv("CLEAVE_COLLECTIVE_TIMEOUT");
  if (!state.active || !learns)
    return;
  learnedLimitMs.store(std::max<int64_t>(
      kLearnedLimitFloorMs, kLearnedLimitFactor * longestWaitMs.load()));
}

double comm::heartbeatTimeout() {
  const char *env = std::getenv("CLEAVE_HEARTBEAT_TIMEOUT");
  return env && *env ? std::atof(env) : 10;
}

double comm::collectiveTimeout() {
  const char *env = std::getenv("CLEAVE_COLLECTIVE_TIMEOUT");
  double seconds = env ? std::atof(env) : 0;
  return seconds > 0 ? seconds : 600;
}

void comm::abortJob(int code) { endJob(code, state.active); }

//===----------------------------------------------------------------------===//
// The C ABI
//===----------------------------------------------------------------------===//

extern "C" int64_t cleave_rt_grid_index(int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(state.coords.size()))
    return 0;
  return state.coords[axis];
}

#define CLEAVE_RT_DEFINE_COLLECTIVES(suffix, mpiType, size, widen)             \
  extern "C" void cleave_rt_all_reduce_##suffix(int64_t ir, void *i,           \
                                                int64_t orank, void *o,        \
                                                int64_t code, int64_t group) { \
    allReduce({mpiType, size, widen}, ir, i, orank, o, code, group);           \
  }                                                                            \
  extern "C" void cleave_rt_all_gather_##suffix(int64_t ir, void *i,           \
                                                int64_t orank, void *o,        \
                                                int64_t axis, int64_t group) { \
    allGather({mpiType, size, widen}, ir, i, orank, o, axis, group);           \
  }                                                                            \
  extern "C" void cleave_rt_reduce_scatter_##suffix(                           \
      int64_t ir, void *i, int64_t orank, void *o, int64_t axis, int64_t code, \
      int64_t group) {                                                         \
    reduceScatter({mpiType, size, widen}, ir, i, orank, o, axis, code, group); \
  }                                                                            \
  extern "C" void cleave_rt_all_to_all_##suffix(                               \
      int64_t ir, void *i, int64_t orank, void *o, int64_t split,              \
      int64_t concat, int64_t group) {                                         \
    allToAll({mpiType, size, widen}, ir, i, orank, o, split, concat, group);   \
  }                                                                            \
  extern "C" void cleave_rt_send_##suffix(int64_t r, void *b, int64_t peer,    \
                                          int64_t group) {                     \
    transfer(true, {mpiType, size, widen}, r, b, peer, group);                 \
  }                                                                            \
  extern "C" void cleave_rt_recv_##suffix(int64_t r, void *b, int64_t peer,    \
                                          int64_t group) {                     \
    transfer(false, {mpiType, size, widen}, r, b, peer, group);                \
  }

CLEAVE_RT_DEFINE_COLLECTIVES(f32, MPI_FLOAT, 4, 0)
CLEAVE_RT_DEFINE_COLLECTIVES(f64, MPI_DOUBLE, 8, 0)
CLEAVE_RT_DEFINE_COLLECTIVES(f16, MPI_UINT16_T, 2, 1)
CLEAVE_RT_DEFINE_COLLECTIVES(bf16, MPI_UINT16_T, 2, 2)
CLEAVE_RT_DEFINE_COLLECTIVES(i64, MPI_INT64_T, 8, 0)
CLEAVE_RT_DEFINE_COLLECTIVES(i32, MPI_INT32_T, 4, 0)
CLEAVE_RT_DEFINE_COLLECTIVES(i16, MPI_INT16_T, 2, 0)
CLEAVE_RT_DEFINE_COLLECTIVES(i8, MPI_INT8_T, 1, 0)
CLEAVE_RT_DEFINE_COLLECTIVES(bool, MPI_UINT8_T, 1, 0)
#undef CLEAVE_RT_DEFINE_COLLECTIVES
