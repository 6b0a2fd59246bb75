//===- Profile.h - Where a run's time goes (--profile) -----------*- C++ --===//
//
// With --profile the program times each call into the runtime that does a
// run's heavy work: GEMMs, collectives and pipeline transfers, and in a GPU
// program every kernel launch. Calls are summed by what they are (a GEMM by
// type and shape, a kernel by its name, which names the ONNX nodes it
// computes; a collective by kind and size), and the rest of each run is
// reported as one line: on the CPU the compiled loops (elementwise work,
// reductions), on a GPU the host's own time and the gaps between the
// device's work.
//
// On the CPU a call is timed by the clock around it. A GPU program's calls
// only queue work on its stream, so a call is timed by two CUDA events
// around it (Device.h's marks), read once the run has finished; a launch
// that waits for the host counts that wait as its own.
//
// Only the outermost call on a thread is timed (a collective that falls
// back to the host's MPI counts once), and only during the runs the
// program reports on (not --bench's warm-up).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PROFILE_H
#define CLEAVE_RUNTIME_PROFILE_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cleave::rt::profile {

/// Turns profiling on (the program's --profile).
void enable();
bool enabled();

/// Times its own lifetime under the label `describe()` returns, which is
/// built only when the call is timed.
class Span {
public:
  template <typename Describe> explicit Span(Describe describe) {
    if (enabled() && claim())
      open(describe());
  }
  ~Span() {
    if (timed)
      close();
  }
  Span(const Span &) = delete;
  Span &operator=(const Span &) = delete;

private:
  /// Whether this span is the outermost one in a reported run.
  bool claim();
  void open(std::string label);
  void close();
  bool timed = false;
  /// Its place among the run's timed calls.
  size_t slot = 0;
};

/// Brackets one reported run; `finished` once its work is done (a GPU
/// program's stream drained), with the run's wall time.
void runStarted();
void runFinished(double ms);

/// The table of the reported runs, largest share first, to `out`; `who`
/// names the process (e.g. "rank 0").
void report(std::FILE *out, const std::string &who);

/// Labels: "GEMM bf16 128x2304x768" (operand type, M x N x K), with
/// " (24 GEMMs)" when one call makes several and ", bf16 result" when the
/// result is `rounded` to the operands' type; "all_reduce 1.5 MiB" (the
/// bytes each rank gives: its part, for a gather).
std::string describeGemm(const char *type, bool rounded, int64_t gemms,
                         int64_t m, int64_t n, int64_t k);
std::string describeTransfer(const char *kind, uint64_t bytes);

} // namespace cleave::rt::profile

#endif // CLEAVE_RUNTIME_PROFILE_H
