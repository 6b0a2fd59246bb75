//===- Preflight.cpp - The program's check of its own files on a host -----===//
//
// Before a job across hosts, cleave-run starts `program --bundle DIR
// --preflight CHECKSUM` once per rank, placed as the job will be, without
// joining an MPI job. Each reports whether what it would read is there and
// intact: the program itself (against the launching host's copy) and its
// rank's weight file (against the sizes and checksums compiled into the
// program). One line a finding, which cleave-run gathers by host:
//
//   cleave-preflight RANK HOST ok
//   cleave-preflight RANK HOST problem WHAT
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "cleave/Runtime/Abi.h"
#include "cleave/Runtime/WeightFile.h"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace cleave::rt;

/// The weight files' checksum over the whole of `path`; false where it
/// cannot be read.
static bool checksumOf(const std::string &path, uint64_t &checksum) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  void *mapped = ok && st.st_size > 0
                     ? mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                     : MAP_FAILED;
  ::close(fd);
  cleave_checksum_state state;
  cleave_checksum_init(&state);
  if (mapped != MAP_FAILED) {
    cleave_checksum_update(&state, mapped, st.st_size);
    munmap(mapped, st.st_size);
  }
  checksum = cleave_checksum_finish(&state);
  return ok && (st.st_size == 0 || mapped != MAP_FAILED);
}

int cleave::rt::runPreflight(const std::string &bundle,
                             const std::string &programChecksum) {
  // hydra numbers the processes it starts in PMI_RANK, Slurm in SLURM_PROCID.
  const char *rankText = std::getenv("PMI_RANK");
  if (!rankText)
    rankText = std::getenv("SLURM_PROCID");
  int rank = rankText ? std::atoi(rankText) : 0;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<std::string> problems;

  uint64_t checksum = 0;
  std::string program = bundle + "/program";
  if (!checksumOf(program, checksum))
    problems.push_back("cannot read " + program);
  else if (std::to_string(checksum) != programChecksum)
    problems.push_back(program +
                       " differs from the launching host's (its checksum)");

  ModelDesc desc = parseModelDesc(cleave_model_desc);
  if (rank < 0 || rank >= desc.ranks) {
    problems.push_back("rank " + std::to_string(rank) + " of a job for " +
                       std::to_string(desc.ranks) + " ranks");
  } else {
    // Every rank of a bundle has its weight file, held parameters or not.
    try {
      openWeightFile(bundle, desc, rank);
    } catch (const std::exception &e) {
      problems.push_back(e.what());
    }
  }
  for (const std::string &p : problems)
    std::printf("cleave-preflight %d %s problem %s\n", rank, host, p.c_str());
  if (problems.empty())
    std::printf("cleave-preflight %d %s ok\n", rank, host);
  return 0;
}
