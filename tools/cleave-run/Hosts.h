//===- Hosts.h - Where a job's ranks run, and what each host holds --------===//
//
// A job across hosts runs its ranks through MPICH's hydra, which reaches the
// hosts with ssh (or a command standing in for it), Slurm's srun, or, on
// this host, fork. Before such a job cleave-run checks on every host that
// the files its ranks read are there and intact (`program --preflight`,
// started as the job will be), and with --stage-weights first copies them
// to a folder on each host that lacks them, reaching the host the way hydra
// does.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_CLEAVE_RUN_HOSTS_H
#define CLEAVE_TOOLS_CLEAVE_RUN_HOSTS_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::run {

/// Where the ranks run, as the user gave it (cleave-run's --hosts,
/// --hostfile, --launcher, --launcher-exec, --iface).
struct Placement {
  std::string hosts, hostfile, launcher, launcherExec, iface;

  /// Whether ranks may run on hosts other than this one.
  bool acrossHosts() const {
    return !hosts.empty() || !hostfile.empty() || launcher == "slurm";
  }
  /// hydra's options for it (-hosts, -f, -launcher, -launcher-exec, -iface).
  std::vector<std::string> hydraOptions() const;
  /// The host each of `ranks` ranks runs on, as hydra places them: each
  /// listed host's slots (1 where none is given) filled in rank order, the
  /// list repeated while ranks remain. An error where the hosts are not
  /// listed (Slurm chooses them) or the host file has a line this does not
  /// read.
  llvm::Expected<std::vector<std::string>> hostOfEachRank(int64_t ranks) const;
  /// The command that runs the shell command line `command` on `host`,
  /// reaching it as hydra does.
  std::vector<std::string> remoteCommand(const std::string &host,
                                         const std::string &command) const;
};

/// What one rank found of the files it reads (`program --preflight`).
struct RankFindings {
  std::string host;                  // as the host names itself
  std::vector<std::string> problems; // empty: all there and intact
  bool reported = false;             // false: the check never ran there
};

/// The files a job needs on the hosts: the bundle's program (its size and
/// checksum here) and the ranks' weight files.
struct BundleFiles {
  std::string dir; // the bundle on this host
  int64_t ranks = 1;
  int64_t writerRank = 0;
  uint64_t programBytes = 0, programChecksum = 0;
  /// Each rank's weight file, relative to `dir` (the manifest's list).
  std::vector<std::string> weightFiles;
  /// The largest weight file, to size how long a check may take.
  uint64_t largestWeightFile = 0;
};

/// Starts `program --preflight` once per rank, placed as the job will be,
/// each rank looking under `dir` on its host. The findings by rank; an
/// error where the check itself could not be run.
llvm::Expected<std::vector<RankFindings>> checkFiles(const std::string &mpiexec,
                                                     const Placement &where,
                                                     const BundleFiles &bundle,
                                                     const std::string &dir);

/// The problems found, by host, one line each; empty when there are none.
std::string describeProblems(const std::vector<RankFindings> &findings);

/// Copies into `dir` on each host of `hostOfRank` what its ranks lack there
/// (per `findings`: the program, the manifest and the rank's weight file)
/// and each of `inputs` (to `dir`/inputs/, named as `stagedInputs` says),
/// showing each copy on stderr.
llvm::Error stage(const Placement &where, const BundleFiles &bundle,
                  const std::vector<std::string> &hostOfRank,
                  const std::vector<RankFindings> &findings,
                  const std::string &dir,
                  const std::vector<std::string> &inputs,
                  const std::vector<std::string> &stagedInputs);

/// Copies folder `remoteDir` on `host` into `localDir` here, then removes
/// it there.
llvm::Error fetchFolder(const Placement &where, const std::string &host,
                        const std::string &remoteDir,
                        const std::string &localDir);

/// Removes `remoteDir` on `host`, whatever it holds; failures ignored.
void removeRemote(const Placement &where, const std::string &host,
                  const std::string &remoteDir);

/// `text` quoted for a POSIX shell.
std::string shellQuote(const std::string &text);

} // namespace cleave::run

#endif // CLEAVE_TOOLS_CLEAVE_RUN_HOSTS_H
