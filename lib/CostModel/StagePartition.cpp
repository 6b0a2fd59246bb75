//===- StagePartition.cpp - Pipeline stages by dynamic programming --------===//
//
// best[k][i]: the best plan of the first i ops in k stages, ordered by
// (largest stage seconds, total cut bytes). best[k][i] = min over j of
// (max(best[k-1][j].seconds, seconds(j, i)), best[k-1][j].cut + cutBytes[j]),
// seconds(j, i) counting the transfers at both of the stage's cuts,
// for stages [j, i) within the memory limit and not spanning a fixed cut.
// O(stages x ops^2) time at worst; ops are the top-level ops of @main
// (thousands). An even plan's largest stage bounds the search: no stage
// longer than it is extended, which for balanced models leaves about
// O(stages x ops x ops per stage).
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/StagePartition.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

using namespace cleave;

double StagePlan::largestSeconds() const {
  return seconds.empty() ? 0
                         : *std::max_element(seconds.begin(), seconds.end());
}

namespace {
struct Best {
  double seconds = std::numeric_limits<double>::infinity();
  double cut = 0;
  size_t from = 0;

  bool betterThan(const Best &other) const {
    if (std::isinf(other.seconds))
      return !std::isinf(seconds);
    // Relative tolerance: stage times are sums of floating-point costs.
    double tol = 1e-12 * std::max(seconds, other.seconds);
    if (seconds < other.seconds - tol)
      return true;
    if (seconds > other.seconds + tol)
      return false;
    return cut < other.cut;
  }
};
} // namespace

llvm::Expected<StagePlan> cleave::partitionStages(const StageProblem &problem,
                                                  size_t stages) {
  size_t n = problem.seconds.size();
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (stages == 0 || stages > n)
    return fail("cannot cut " + llvm::Twine(n) + " ops into " +
                llvm::Twine(stages) + " stages");
  std::vector<bool> fixed(n + 1, false);
  for (size_t c : problem.fixedCuts)
    if (c > 0 && c < n)
      fixed[c] = true;
  size_t fixedCount = std::count(fixed.begin(), fixed.end(), true);
  if (fixedCount + 1 > stages)
    return fail(llvm::Twine(fixedCount) + " fixed cuts need at least " +
                llvm::Twine(fixedCount + 1) + " stages, not " +
                llvm::Twine(stages));

  std::vector<double> time(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    time[i + 1] = time[i] + problem.seconds[i];
  // A stage [j, i): its ops, receiving at j, sending at i.
  auto cut = [&](size_t c) {
    return c > 0 && c < n && c < problem.cutSeconds.size()
               ? problem.cutSeconds[c]
               : 0.0;
  };
  auto stageSeconds = [&](size_t j, size_t i) {
    return time[i] - time[j] + cut(j) + cut(i);
  };
  // The parameter bytes of ops [j, i), each parameter once, grown one op at
  // a time from a fixed start.
  std::vector<size_t> seenAt(problem.paramBytes.size(), SIZE_MAX);
  auto grow = [&](size_t j, size_t op, double &bytes) {
    for (size_t p : problem.params[op])
      if (seenAt[p] != j) {
        seenAt[p] = j;
        bytes += problem.paramBytes[p];
      }
  };
  auto stageMemory = [&](size_t j, size_t i) {
    std::fill(seenAt.begin(), seenAt.end(), SIZE_MAX);
    double bytes = 0;
    for (size_t op = j; op < i; ++op)
      grow(j, op, bytes);
    return bytes;
  };
  // nextFixed[j]: the first fixed cut after position j (n if none): a stage
  // starting at j must end there at the latest.
  std::vector<size_t> nextFixed(n + 1, n);
  for (size_t j = n; j-- > 0;)
    nextFixed[j] = fixed[j + 1] && j + 1 < n ? j + 1 : nextFixed[j + 1];

  // An upper bound on the best plan's largest stage, from a plan that cuts
  // the remaining time evenly: a stage that alone takes longer is no part
  // of the best plan, so the search stops extending one there (exact; it
  // makes the search about O(stages * ops * ops per stage)). Without it
  // (fixed cuts, or that plan over the memory) nothing is pruned.
  double bound = std::numeric_limits<double>::infinity();
  if (fixedCount == 0) {
    std::vector<size_t> even = {0};
    for (size_t s = 0; s < stages; ++s) {
      size_t at = even.back(), left = stages - s, end = n;
      if (left > 1) {
        double share = (time[n] - time[at]) / double(left);
        end = at + 1;
        while (end < n - (left - 1) && time[end] - time[at] < share)
          ++end;
      }
      even.push_back(end);
    }
    double worst = 0;
    bool fits = true;
    for (size_t s = 0; s < stages; ++s) {
      worst = std::max(worst, stageSeconds(even[s], even[s + 1]));
      fits &= stageMemory(even[s], even[s + 1]) <= problem.memoryLimit;
    }
    if (fits)
      bound = worst * (1 + 1e-9);
  }

  std::vector<std::vector<Best>> best(stages + 1, std::vector<Best>(n + 1));
  best[0][0].seconds = 0;
  for (size_t k = 1; k <= stages; ++k)
    for (size_t j = k - 1; j < n; ++j) {
      const Best &before = best[k - 1][j];
      if (std::isinf(before.seconds))
        continue;
      std::fill(seenAt.begin(), seenAt.end(), SIZE_MAX);
      double bytes = 0;
      for (size_t i = j + 1; i <= std::min(nextFixed[j], n); ++i) {
        if (time[i] - time[j] > bound)
          break;
        grow(j, i - 1, bytes);
        if (bytes > problem.memoryLimit)
          break;
        Best candidate;
        candidate.seconds = std::max(before.seconds, stageSeconds(j, i));
        if (candidate.seconds > bound)
          continue;
        candidate.cut = before.cut + (j > 0 ? problem.cutBytes[j] : 0);
        candidate.from = j;
        if (candidate.betterThan(best[k][i]))
          best[k][i] = candidate;
      }
    }
  if (std::isinf(best[stages][n].seconds)) {
    // Report the memory a plan would need: at least the largest single op's
    // parameters, and an even share of all of them.
    double lower = 0;
    for (size_t op = 0; op < n; ++op)
      lower = std::max(lower, stageMemory(op, op + 1));
    double total = stageMemory(0, n);
    lower = std::max(lower, total / stages);
    return fail("no cut into " + llvm::Twine(stages) +
                " stages keeps every "
                "stage within " +
                llvm::Twine(uint64_t(problem.memoryLimit)) +
                " bytes of device memory: the model's parameters take " +
                llvm::Twine(uint64_t(total)) + " bytes, at least " +
                llvm::Twine(uint64_t(lower)) + " per stage");
  }
  StagePlan plan;
  plan.begin.assign(stages + 1, 0);
  plan.begin[stages] = n;
  for (size_t k = stages, i = n; k > 0; --k) {
    i = best[k][i].from;
    plan.begin[k - 1] = i;
  }
  for (size_t s = 0; s < stages; ++s) {
    plan.seconds.push_back(stageSeconds(plan.begin[s], plan.begin[s + 1]));
    plan.memory.push_back(stageMemory(plan.begin[s], plan.begin[s + 1]));
    if (s > 0)
      plan.cutBytes.push_back(problem.cutBytes[plan.begin[s]]);
  }
  return plan;
}
