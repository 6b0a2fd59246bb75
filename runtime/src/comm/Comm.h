//===- Comm.h - The runtime's view of the other ranks ---------------------===//
//
// Start-up and tear-down of a multi-rank program and the helpers Main needs;
// the collectives themselves are the C ABI in cleave/Runtime/Abi.h. The MPI
// backend (Mpi.cpp) implements both. A single-rank program never touches MPI.
//
// Every collective runs under a watchdog: if one does not complete within
// the timeout (CLEAVE_COLLECTIVE_TIMEOUT seconds; without it 600, and once a
// run has completed, what runCompleted learned), the rank
// reports which collective it waits in and which ranks have not reached it
// (read from the progress files cleave-run provides in CLEAVE_PROGRESS_DIR),
// then aborts the whole job, so that a dead or hung rank never leaves the
// others waiting forever. Ranks also send heartbeats around a ring
// (Heartbeat.h), so that a stopped rank, or a host the network no longer
// reaches, ends the job within the heartbeat timeout
// (CLEAVE_HEARTBEAT_TIMEOUT, default 10 s).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_COMM_H
#define CLEAVE_RUNTIME_COMM_COMM_H

#include "../Runtime.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace cleave::rt::comm {

/// Joins the job and creates the descriptor's communicator groups. Throws if
/// the job's size is not the mesh's rank count.
void start(const ModelDesc &desc, int *argc, char ***argv);
/// Leaves the job, saying to cleave-run whether this rank `succeeded` (its
/// work done and agreed by every rank).
void finish(bool succeeded = true);
/// This process's rank (0 for single-rank programs).
int rank();
/// How messages name this rank: "rank R", and "on host H" where the job
/// spans several hosts.
const std::string &label();
bool active();
/// Agrees across ranks whether every one succeeded; returns the lowest rank
/// that failed, or -1.
int firstFailure(bool failed);
/// The largest of every rank's `value`.
double maxOverRanks(double value);
/// Element by element, the largest of every rank's `values`.
void maxOverRanks(std::vector<double> &values);
/// Seconds this rank spent in point-to-point transfers (blocked on its
/// pipeline neighbours) since the last call.
double takeTransferSeconds();
void barrier();
/// Which of the groups start() created each group id of the program about
/// to run stands for: a generation bundle's two programs number their
/// groups each in their own order. Empty: the ids as created.
void setGroupTable(std::vector<int64_t> table);
/// Copies `bytes` from rank `root` to every rank's `data` (the generation
/// loop's tokens and new keys and values); nothing on a single rank.
void broadcast(int root, void *data, size_t bytes);

/// For a device backend that creates its own communicators (NCCL) over the
/// descriptor's groups: how many groups there are, this rank's position in
/// group `group` (first axis major) and the group's size, and byte exchanges
/// within the group. All ranks of the group must call the exchanges.
int64_t groupCount();
int groupPosition(int64_t group);
int groupSize(int64_t group);
/// Copies `bytes` from the group's first member to every member's `data`.
void broadcastInGroup(int64_t group, void *data, size_t bytes);
/// Every member's `bytes` of `mine`, in group order, into `all`.
void allGatherInGroup(int64_t group, const void *mine, void *all, size_t bytes);
/// Ends every rank of the job with `code`.
[[noreturn]] void abortJob(int code);

/// How long a peer may be silent (no heartbeat) before the job is ended:
/// CLEAVE_HEARTBEAT_TIMEOUT seconds, default 10; 0 keeps no heartbeat.
double heartbeatTimeout();
/// How long a collective may take before the job is ended:
/// CLEAVE_COLLECTIVE_TIMEOUT seconds, default 600.
double collectiveTimeout();
/// Says that a run of the model (a generation step) has completed. Without
/// CLEAVE_COLLECTIVE_TIMEOUT, a collective may then wait 20 times the
/// longest any has waited so far, at least 20 s, before the job is ended:
/// a rank that hangs while its heartbeat goes on ends a job that has shown
/// how long its waits are within half a minute, and the first run (weights
/// read from disk, packed) keeps the default's room.
void runCompleted();

/// Calls `done` until it returns true, without holding a core: a rank
/// waits for its peers for as long as they compute, and on a machine with
/// fewer cores than ranks a busy wait would take a peer's core. Polls
/// briefly, then sleeps between polls.
template <typename Done> void waitPolitely(Done done) {
  for (int polls = 0; !done(); ++polls)
    if (polls >= 64)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
}

} // namespace cleave::rt::comm

#endif // CLEAVE_RUNTIME_COMM_COMM_H
