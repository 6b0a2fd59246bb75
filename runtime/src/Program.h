//===- Program.h - What the program's two modes share ---------------------===//
//
// A compiled program runs its model once per launch (Main.cpp) or, in a
// generation bundle with --generate, a prompt and then one token at a time
// (Generate.cpp). Both set up threads and weights alike and fail together.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PROGRAM_H
#define CLEAVE_RUNTIME_PROGRAM_H

#include "Runtime.h"
#include "comm/Comm.h"

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

/// Walks a command line's options, each `--name VALUE` or `--name=VALUE`.
class OptionReader {
public:
  OptionReader(int argc, char **argv) : argc(argc), argv(argv) {}
  /// Moves to the next option; false past the last.
  bool next() {
    if (++index >= argc)
      return false;
    current = argv[index];
    return true;
  }
  /// The option as given, and its name (before any '=').
  const std::string &arg() const { return current; }
  std::string name() const { return current.substr(0, current.find('=')); }
  /// Its value: after the '=', else the next argument (consumed).
  std::string value() {
    size_t eq = current.find('=');
    if (eq != std::string::npos)
      return current.substr(eq + 1);
    if (index + 1 >= argc)
      throw RuntimeError("option '" + current + "' needs a value");
    return argv[++index];
  }

private:
  int argc;
  char **argv;
  int index = 0;
  std::string current;
};

/// A positive count from the value of `option`, or an error naming it.
int parseCount(const std::string &option, const std::string &text);
/// Creates `path` and the folders above it.
void makeDirs(const std::string &path);
/// The `p` quantile (0..1) of `v`, the nearest sample.
double percentile(std::vector<double> v, double p);

/// The pipeline stage `rank` runs: its coordinate on the stage axis.
int64_t stageOf(const ModelDesc &desc, int rank);

/// Sets the threads OpenMP and OpenBLAS use per rank: `requested`, else
/// CLEAVE_NUM_THREADS, else the cores, at most the cores. Returns the count.
int setUpThreads(int requested);

/// Opens rank `rank`'s weight file of `bundle` (weights.bin for one rank,
/// weights/rank<r>.bin for several), checked against `desc`'s size and
/// checksum; throws, naming the file, where it is missing or differs.
std::unique_ptr<WeightFile> openWeightFile(const std::string &bundle,
                                           const ModelDesc &desc, int rank);

/// Maps this rank's weight file (checked against the first descriptor's
/// checksum), or returns null where no parameter of any of `descs` is held
/// on this rank.
std::unique_ptr<WeightFile>
mapWeights(const std::string &bundle,
           std::initializer_list<const ModelDesc *> descs);

/// Runs `step` on every rank; if it fails anywhere, the lowest failing rank
/// reports and every rank ends with an error.
template <typename Step> void together(Step step) {
  std::string error;
  try {
    step();
  } catch (const std::exception &e) {
    error = e.what();
  }
  int failed = comm::firstFailure(!error.empty());
  if (failed < 0)
    return;
  if (failed == comm::rank()) {
    if (comm::active())
      std::fprintf(stderr, "cleave-run: error: %s: %s\n", comm::label().c_str(),
                   error.c_str());
    else
      std::fprintf(stderr, "cleave-run: error: %s\n", error.c_str());
  }
  comm::finish(/*succeeded=*/false);
  std::exit(1);
}

/// The program's --generate mode (Generate.cpp): the whole run.
int runGeneration(int argc, char **argv);

/// The program's --preflight mode (Preflight.cpp): reports on stdout
/// whether this rank's files under `bundle` are there and intact, the
/// program's own against `programChecksum`; the rank from the launcher's
/// environment, no MPI job joined.
int runPreflight(const std::string &bundle, const std::string &programChecksum);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_PROGRAM_H
