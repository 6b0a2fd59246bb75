//===- Hosts.cpp - Where a job's ranks run, and what each host holds ------===//

#include "Hosts.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <map>

using namespace cleave::run;
namespace fs = llvm::sys::fs;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string cleave::run::shellQuote(const std::string &text) {
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

static std::string shellLine(const std::vector<std::string> &argv) {
  std::vector<std::string> quoted;
  for (const std::string &a : argv)
    quoted.push_back(shellQuote(a));
  return llvm::join(quoted, " ");
}

/// Runs the shell command line `line` with nothing on its stdin (hydra would
/// pass this terminal's on to a rank) and its stdout to `output` (empty:
/// this one's); its exit status, -1 where it could not be run, -2 where it
/// ran past `seconds` (0: no limit).
static int runShell(const std::string &line, unsigned seconds = 0,
                    llvm::StringRef output = "") {
  llvm::StringRef argv[] = {"/bin/sh", "-c", line};
  std::optional<llvm::StringRef> redirects[] = {
      llvm::StringRef(""),
      output.empty() ? std::nullopt : std::optional<llvm::StringRef>(output),
      std::nullopt};
  return llvm::sys::ExecuteAndWait("/bin/sh", argv, std::nullopt, redirects,
                                   seconds);
}

std::vector<std::string> Placement::hydraOptions() const {
  std::vector<std::string> options;
  if (!hosts.empty())
    llvm::append_range(options, std::vector<std::string>{"-hosts", hosts});
  if (!hostfile.empty())
    llvm::append_range(options, std::vector<std::string>{"-f", hostfile});
  if (!launcher.empty())
    llvm::append_range(options,
                       std::vector<std::string>{"-launcher", launcher});
  if (!launcherExec.empty())
    llvm::append_range(
        options, std::vector<std::string>{"-launcher-exec", launcherExec});
  if (!iface.empty())
    llvm::append_range(options, std::vector<std::string>{"-iface", iface});
  return options;
}

llvm::Expected<std::vector<std::string>>
Placement::hostOfEachRank(int64_t ranks) const {
  // Each entry HOST or HOST:SLOTS, from the list or one a line of the file.
  std::vector<std::string> entries;
  std::string source;
  if (!hosts.empty()) {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(hosts).split(parts, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef p : parts)
      entries.push_back(p.trim().str());
    source = "--hosts";
  } else if (!hostfile.empty()) {
    auto text = llvm::MemoryBuffer::getFile(hostfile);
    if (!text)
      return makeError("cannot read host file '" + hostfile +
                       "': " + text.getError().message());
    llvm::SmallVector<llvm::StringRef> lines;
    (*text)->getBuffer().split(lines, '\n');
    // Only the first word: hydra allows settings after it (ifhn=...).
    for (llvm::StringRef line : lines) {
      line = line.split('#').first.trim();
      if (!line.empty())
        entries.push_back(line.split(' ').first.split('\t').first.str());
    }
    source = "host file '" + hostfile + "'";
  } else {
    return makeError("the hosts are chosen by the launcher, not listed");
  }
  std::vector<std::pair<std::string, int64_t>> slots;
  for (const std::string &entry : entries) {
    auto [name, count] = llvm::StringRef(entry).split(':');
    int64_t n = 1;
    if (name.empty() ||
        (!count.empty() && (count.getAsInteger(10, n) || n <= 0)))
      return makeError(source + ": '" + entry + "' is not HOST or HOST:SLOTS");
    slots.push_back({name.str(), n});
  }
  if (slots.empty())
    return makeError(source + " names no host");
  std::vector<std::string> placed;
  while (int64_t(placed.size()) < ranks)
    for (const auto &[name, n] : slots)
      for (int64_t i = 0; i < n && int64_t(placed.size()) < ranks; ++i)
        placed.push_back(name);
  return placed;
}

std::vector<std::string>
Placement::remoteCommand(const std::string &host,
                         const std::string &command) const {
  if (launcher == "fork")
    return {"/bin/sh", "-c", command};
  if (launcher == "slurm")
    return {"srun",    "--nodes=1", "--ntasks=1", "--nodelist=" + host,
            "/bin/sh", "-c",        command};
  // hydra's ssh launcher calls its command as `CMD -x HOST COMMAND`.
  return {launcherExec.empty() ? "ssh" : launcherExec, "-x", host, command};
}

//===----------------------------------------------------------------------===//
// The check of every host's files
//===----------------------------------------------------------------------===//

/// What each rank runs: the program's own check where the program is there
/// and of the launching host's size; one `cleave-preflight RANK HOST ...`
/// line a finding whatever fails. Arguments: the folder, the program's size
/// and checksum.
static const char *kCheckScript = R"(r=${PMI_RANK:-${SLURM_PROCID:-0}}
h=$(uname -n)
p="$1/program"
say() { printf 'cleave-preflight %s %s problem %s\n' "$r" "$h" "$*"; }
if [ ! -f "$p" ]; then say "$p is missing"; exit 0; fi
s=$(wc -c < "$p")
if [ "$s" -ne "$2" ]; then say "$p holds $s bytes, the launching host's $2"; exit 0; fi
if ! out=$("$p" --bundle "$1" --preflight "$3" 2>&1); then
  printf '%s\n' "$out" | while IFS= read -r line; do say "$p: $line"; done
  exit 0
fi
printf '%s\n' "$out"
)";

llvm::Expected<std::vector<RankFindings>>
cleave::run::checkFiles(const std::string &mpiexec, const Placement &where,
                        const BundleFiles &bundle, const std::string &dir) {
  std::vector<std::string> argv = {mpiexec, "-n", std::to_string(bundle.ranks)};
  llvm::append_range(argv, where.hydraOptions());
  llvm::append_range(
      argv, std::vector<std::string>{"/bin/sh", "-c", kCheckScript, "sh", dir,
                                     std::to_string(bundle.programBytes),
                                     std::to_string(bundle.programChecksum)});
  llvm::SmallString<128> output;
  if (std::error_code ec =
          fs::createTemporaryFile("cleave-preflight", "txt", output))
    return makeError("cannot create a file for the check's output: " +
                     ec.message());
  // Time to reach the hosts and read a weight file at 50 MB/s.
  unsigned seconds = 60 + unsigned(bundle.largestWeightFile / 50'000'000);
  int status = runShell(shellLine(argv) + " 2>&1", seconds, output);
  auto text = llvm::MemoryBuffer::getFile(output);
  fs::remove(output);
  std::string log = text ? (*text)->getBuffer().str() : "";
  std::vector<RankFindings> findings(bundle.ranks);
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(log).split(lines, '\n');
  std::vector<std::string> other;
  for (llvm::StringRef line : lines) {
    llvm::StringRef rest = line;
    int64_t rank = -1;
    if (!rest.consume_front("cleave-preflight ") ||
        rest.consumeInteger(10, rank) || rank < 0 || rank >= bundle.ranks) {
      if (!line.trim().empty())
        other.push_back(line.str());
      continue;
    }
    auto [host, what] = rest.ltrim().split(' ');
    RankFindings &f = findings[rank];
    f.reported = true;
    f.host = host.str();
    if (what.consume_front("problem "))
      f.problems.push_back(what.str());
  }
  bool anyReport =
      llvm::any_of(findings, [](const RankFindings &f) { return f.reported; });
  if (!anyReport) {
    std::string tail = llvm::join(
        llvm::ArrayRef(other).take_back(std::min<size_t>(other.size(), 8)),
        "\n  ");
    return makeError(llvm::Twine(status == -2
                                     ? "did not finish within " +
                                           std::to_string(seconds) + " s"
                                     : "reached no host (exit status " +
                                           std::to_string(status) + ")") +
                     (tail.empty() ? "" : ":\n  " + tail));
  }
  return findings;
}

std::string
cleave::run::describeProblems(const std::vector<RankFindings> &findings) {
  // Hosts in the order their first rank appears.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> byHost;
  for (auto [rank, f] : llvm::enumerate(findings)) {
    std::string host = f.reported ? f.host : "(a host that did not report)";
    std::vector<std::string> lines;
    if (!f.reported)
      lines.push_back("rank " + std::to_string(rank) +
                      ": no report (its process did not start)");
    for (const std::string &p : f.problems)
      lines.push_back("rank " + std::to_string(rank) + ": " + p);
    if (lines.empty())
      continue;
    if (!byHost.count(host))
      order.push_back(host);
    llvm::append_range(byHost[host], lines);
  }
  std::string report;
  for (const std::string &host : order) {
    report += "  on host " + host + ":\n";
    for (const std::string &line : byHost[host])
      report += "    " + line + "\n";
  }
  return report;
}

//===----------------------------------------------------------------------===//
// Copying to and from the hosts
//===----------------------------------------------------------------------===//

llvm::Error cleave::run::stage(const Placement &where,
                               const BundleFiles &bundle,
                               const std::vector<std::string> &hostOfRank,
                               const std::vector<RankFindings> &findings,
                               const std::string &dir,
                               const std::vector<std::string> &inputs,
                               const std::vector<std::string> &stagedInputs) {
  // The inputs, under the names the ranks will read them by, as links in a
  // folder of their own (tar follows them with -h).
  llvm::SmallString<128> links;
  if (std::error_code ec = fs::createUniqueDirectory("cleave-stage", links))
    return makeError("cannot create a folder for the inputs: " + ec.message());
  auto removeLinks = llvm::scope_exit([&] { fs::remove_directories(links); });
  if (!inputs.empty())
    if (std::error_code ec = fs::create_directory(links + "/inputs"))
      return makeError("cannot create a folder for the inputs: " +
                       ec.message());
  for (auto [input, staged] : llvm::zip(inputs, stagedInputs)) {
    llvm::SmallString<256> absolute(input);
    fs::make_absolute(absolute);
    if (std::error_code ec = fs::create_link(absolute, links + "/" + staged))
      return makeError("cannot stage input '" + input + "': " + ec.message());
  }

  std::vector<std::string> hosts;
  for (const std::string &h : hostOfRank)
    if (!llvm::is_contained(hosts, h))
      hosts.push_back(h);
  for (const std::string &host : hosts) {
    std::vector<std::string> files;
    std::vector<int64_t> ranks;
    uint64_t bytes = 0;
    for (int64_t r = 0; r < int64_t(hostOfRank.size()); ++r)
      if (hostOfRank[r] == host &&
          (!findings[r].reported || !findings[r].problems.empty())) {
        ranks.push_back(r);
        files.push_back(bundle.weightFiles[r]);
      }
    if (!ranks.empty())
      files.insert(files.begin(), {"program", "manifest.json"});
    for (const std::string &f : files) {
      uint64_t size = 0;
      fs::file_size(bundle.dir + "/" + f, size);
      bytes += size;
    }
    for (const std::string &f : inputs) {
      uint64_t size = 0;
      fs::file_size(f, size);
      bytes += size;
    }
    std::string what =
        ranks.empty()
            ? ""
            : "the program and the weights of rank" +
                  std::string(ranks.size() > 1 ? "s " : " ") +
                  llvm::join(
                      llvm::map_range(
                          ranks, [](int64_t r) { return std::to_string(r); }),
                      ", ");
    if (!inputs.empty())
      what += (what.empty() ? "" : ", ") + std::to_string(inputs.size()) +
              " input file" + (inputs.size() > 1 ? "s" : "");
    if (what.empty())
      continue;
    llvm::errs() << "cleave-run: copying " << what << " ("
                 << (bytes < (1 << 20)
                         ? llvm::formatv("{0} KiB", (bytes + 1023) / 1024).str()
                         : llvm::formatv("{0:f1} MiB", bytes / 1048576.0).str())
                 << ") to " << host << ":" << dir << "\n";
    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> tar = {"tar", "-chf", "-"};
    if (!files.empty()) {
      llvm::append_range(tar, std::vector<std::string>{"-C", bundle.dir});
      llvm::append_range(tar, files);
    }
    if (!inputs.empty())
      llvm::append_range(
          tar, std::vector<std::string>{"-C", links.str().str(), "inputs"});
    std::string unpack = "mkdir -p " + shellQuote(dir) + " && tar -C " +
                         shellQuote(dir) + " -xf -";
    int status = runShell(shellLine(tar) + " | " +
                          shellLine(where.remoteCommand(host, unpack)));
    if (status != 0)
      return makeError("copying to host " + host + " failed (exit status " +
                       std::to_string(status) + ")");
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    llvm::errs() << llvm::format("cleave-run: copied to %s in %.1f s\n",
                                 host.c_str(), seconds);
  }
  return llvm::Error::success();
}

llvm::Error cleave::run::fetchFolder(const Placement &where,
                                     const std::string &host,
                                     const std::string &remoteDir,
                                     const std::string &localDir) {
  llvm::SmallString<128> archive;
  if (std::error_code ec =
          fs::createTemporaryFile("cleave-outputs", "tar", archive))
    return makeError("cannot create a file for the outputs: " + ec.message());
  auto removeArchive = llvm::scope_exit([&] { fs::remove(archive); });
  std::string pack = "cd " + shellQuote(remoteDir) + " && tar -cf - .";
  if (int status =
          runShell(shellLine(where.remoteCommand(host, pack)), 0, archive))
    return makeError("cannot read the outputs in " + host + ":" + remoteDir +
                     " (exit status " + std::to_string(status) + ")");
  if (std::error_code ec = fs::create_directories(localDir))
    return makeError("cannot create '" + localDir + "': " + ec.message());
  if (int status = runShell(
          shellLine({"tar", "-C", localDir, "-xf", archive.str().str()})))
    return makeError("cannot unpack the outputs into '" + localDir +
                     "' (exit status " + std::to_string(status) + ")");
  removeRemote(where, host, remoteDir);
  return llvm::Error::success();
}

void cleave::run::removeRemote(const Placement &where, const std::string &host,
                               const std::string &remoteDir) {
  runShell(
      shellLine(where.remoteCommand(host, "rm -rf " + shellQuote(remoteDir))),
      60);
}
