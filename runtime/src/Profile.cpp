//===- Profile.cpp - Where a run's time goes (--profile) ------------------===//

#include "Profile.h"

#include "Device.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace cleave::rt;

namespace {

/// A point in time: on the CPU, milliseconds of the steady clock; in a GPU
/// program, a device mark, resolved when the run has finished.
struct Mark {
  double ms = 0;
  int device = -1;
};

Mark now() {
  Mark m;
  if (onDevice())
    m.device = cleave_rt_device_mark();
  else
    m.ms = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count();
  return m;
}

double between(const Mark &from, const Mark &to) {
  if (from.device >= 0)
    return cleave_rt_device_elapsed_ms(from.device, to.device);
  return to.ms - from.ms;
}

struct Entry {
  std::string label;
  double ms = 0;
  int64_t calls = 0;
};

struct Open {
  size_t entry;
  Mark start, end;
};

struct State {
  bool on = false;
  bool inRun = false;
  std::mutex mutex;
  std::vector<Entry> entries;
  std::unordered_map<std::string, size_t> byLabel;
  /// This run's timed calls, in the order they started.
  std::vector<Open> calls;
  int runs = 0;
  double runMs = 0;
};

State &state() {
  static State s;
  return s;
}

/// Whether this thread is inside a timed call.
thread_local bool insideSpan = false;

std::string formatBytes(uint64_t bytes) {
  char text[32];
  if (bytes < 1024)
    std::snprintf(text, sizeof(text), "%llu B", (unsigned long long)bytes);
  else if (bytes < 1024 * 1024)
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

} // namespace

void profile::enable() { state().on = true; }
bool profile::enabled() { return state().on; }

bool profile::Span::claim() {
  if (insideSpan || !state().inRun)
    return false;
  insideSpan = timed = true;
  return true;
}

void profile::Span::open(std::string label) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto [it, added] = s.byLabel.try_emplace(label, s.entries.size());
  if (added)
    s.entries.push_back({std::move(label)});
  slot = s.calls.size();
  s.calls.push_back({it->second, now(), {}});
}

void profile::Span::close() {
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.calls[slot].end = now();
  }
  insideSpan = false;
}

void profile::runStarted() {
  State &s = state();
  if (!s.on)
    return;
  s.inRun = true;
}

void profile::runFinished(double ms) {
  State &s = state();
  if (!s.on)
    return;
  s.inRun = false;
  for (const Open &call : s.calls) {
    Entry &e = s.entries[call.entry];
    e.ms += between(call.start, call.end);
    ++e.calls;
  }
  s.calls.clear();
  if (onDevice())
    cleave_rt_device_forget_marks();
  ++s.runs;
  s.runMs += ms;
}

void profile::report(std::FILE *out, const std::string &who) {
  State &s = state();
  if (!s.on || s.runs == 0)
    return;
  std::vector<Entry> rows = s.entries;
  double timed = 0;
  for (const Entry &e : rows)
    timed += e.ms;
  double perRun = s.runMs / s.runs;
  rows.push_back({onDevice() ? "the rest: host code, and gaps between the "
                               "device's work"
                             : "the rest: compiled loops (elementwise work, "
                               "reductions, copies)",
                  std::max(0.0, s.runMs - timed), 0});
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Entry &a, const Entry &b) { return a.ms > b.ms; });
  std::fprintf(out,
               "profile of %s over %d run%s: %.3f ms a run, %.1f%% of it in "
               "%zu kinds of timed call\n",
               who.c_str(), s.runs, s.runs == 1 ? "" : "s", perRun,
               s.runMs > 0 ? 100.0 * timed / s.runMs : 0.0, s.entries.size());
  std::fprintf(out, "  %10s %6s %9s  %s\n", "ms/run", "share", "calls/run",
               "what");
  for (const Entry &e : rows) {
    double ms = e.ms / s.runs;
    double share = s.runMs > 0 ? 100.0 * e.ms / s.runMs : 0.0;
    if (e.calls == 0)
      std::fprintf(out, "  %10.3f %5.1f%% %9s  %s\n", ms, share, "-",
                   e.label.c_str());
    else
      std::fprintf(out, "  %10.3f %5.1f%% %9.4g  %s\n", ms, share,
                   double(e.calls) / s.runs, e.label.c_str());
  }
  std::fflush(out);
}

std::string profile::describeGemm(const char *type, bool rounded, int64_t gemms,
                                  int64_t m, int64_t n, int64_t k) {
  std::string text = std::string("GEMM ") + type + " " + std::to_string(m) +
                     "x" + std::to_string(n) + "x" + std::to_string(k);
  if (gemms != 1)
    text += " (" + std::to_string(gemms) + " GEMMs)";
  if (rounded)
    text += std::string(", ") + type + " result";
  return text;
}

std::string profile::describeTransfer(const char *kind, uint64_t bytes) {
  return std::string(kind) + " " + formatBytes(bytes);
}
