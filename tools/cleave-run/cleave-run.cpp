//===- cleave-run.cpp - Runs a Cleave program bundle ----------------------===//
//
// Checks the bundle (manifest, program, rank count) and starts its program
// with the user's options: directly for one rank, under MPICH's mpiexec for
// several. The program itself validates inputs, runs the model and writes the
// outputs. For multi-rank runs this launcher gives the ranks a folder for
// their progress files and a collective timeout, so that a rank that dies or
// hangs ends the whole job with a message naming it (see runtime/src/comm).
//
//===----------------------------------------------------------------------===//

#include "Hosts.h"

#include "cleave/Runtime/BlasCore.h"
#include "cleave/Runtime/Progress.h"
#include "cleave/Runtime/WeightFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

static const char *kUsage =
    R"(usage: cleave-run BUNDLE --input NAME=FILE.npy ... --output-dir DIR
                  [--bench N] [--profile] [--threads N] [--ranks N]
                  [--timeout SECONDS]
                  [--heartbeat-timeout SECONDS]
       (either, on several hosts: [--hosts HOST[:SLOTS],... | --hostfile FILE]
        [--launcher ssh|slurm|fork] [--launcher-exec CMD] [--iface IFACE]
        [--stage-weights DIR] [--no-preflight])
       cleave-run BUNDLE --generate --prompt IDS.npy
                  [--attention-mask MASK.npy] --max-new-tokens N
                  [--greedy | --temperature T [--top-k K] [--top-p P]
                   [--seed S]] [--eos ID]... --output-dir DIR
                  [--threads N] [--ranks N] [--timeout SECONDS]

Runs a bundle written by cleave-compile.
  --input NAME=FILE.npy  one per model input (dtype and shape as compiled)
  --output-dir DIR       receives one NAME.npy per model output, written only
                         when the run succeeds (characters outside
                         [A-Za-z0-9._-] in NAME become '_')
  --bench N              run N times after warm-up and print p50/p90 latency;
                         with pipeline stages, also each stage's busy time
                         (time waiting in transfers excluded) next to the
                         cost model's prediction
  --profile              after the runs (--bench's, less warm-up; else the
                         one), print where rank 0's time went: each kind of
                         GEMM, collective, transfer and (GPU) kernel, by
                         calls and milliseconds a run, and the rest (on the
                         CPU the compiled loops); a GPU program's calls are
                         timed by CUDA events on its stream
  --threads N            threads per rank (default: CLEAVE_NUM_THREADS, else
                         the cores divided among the ranks)
  --ranks N              the rank count you expect; a bundle compiled with
                         --fallback-devices runs its plan for N (plans/N);
                         refused before start if the bundle has neither
  --timeout SECONDS      a collective that waits longer ends the job, naming
                         the ranks that did not reach it (default: 600 s,
                         and once a run has completed, 20 times the longest
                         wait so far, at least 20 s)
  --heartbeat-timeout SECONDS
                         a rank that hears nothing from its neighbour this
                         long (a stopped process, a host cut off) ends the
                         job, naming it (default 10; 0: no heartbeat)
With --generate (a bundle from cleave-compile --generate): generates up to
N tokens after each prompt (int64 ids [batch, tokens] or [tokens]; prompts
of different lengths left-padded, with a 0/1 mask, zeros first), greedily
(the default) or by a draw seeded with --seed after --temperature, --top-k
and --top-p; a sequence that produces an --eos id stops, its remaining
tokens that id. Rank 0 prints each step's tokens, then the set-up, the
time to first token, decode tokens/s, per-token p50/p90 and its cache;
DIR/tokens.npy holds the tokens (int64, batch x N). The token is chosen on
one rank and broadcast, so every rank count gives the same tokens.
Bundles compiled for several ranks are started with MPICH's mpiexec, one
process per rank; rank 0 writes the outputs (with pipeline stages, the
first rank of the last stage). Each rank maps only its own weight file.
--hosts, --hostfile, --launcher, --launcher-exec and --iface go to MPICH's
hydra (-hosts, -f, -launcher, -launcher-exec, -iface: the interface its
proxies connect back on). Ranks fill each host's slots in rank order, the
mesh's last axis (tp) fastest, so a tp group shares a host where the slots
are a multiple of tp. Inside a Slurm allocation (SLURM_JOB_ID) without
hosts, hydra starts the ranks with Slurm's launcher. cleave-run says which
ranks run where. Each host needs the bundle at the same path: before a job
across hosts, each rank's program and weight file are checked on its host
(sizes, checksums) and the job is not started while any is missing or
differs, the report listing them by host (--no-preflight skips the check).
--stage-weights DIR (an absolute path) copies what each host lacks of its
ranks' files, and the inputs, into DIR there first, the way hydra reaches
the host (ssh or the --launcher-exec command, srun, fork); the outputs are
then written on the writer rank's host and copied back to --output-dir.
The job ends with cleave-run: SIGTERM, SIGINT or SIGHUP is passed to
mpiexec, which ends every rank (cleave-run then exits 128 + the signal);
cleave-run killed outright takes mpiexec with it, and a rank whose
launcher is gone ends too.
Where ranks x threads exceed the cores, cleave-run sets
CLEAVE_RANKS_SHARE_CORES=1: a rank waiting in a collective then sleeps
between polls instead of MPICH's busy wait, so the peer it waits for can
run (set it to 0 to keep the busy wait).
bfloat16 tensors are exchanged as uint16 arrays of their bit patterns.
OpenBLAS chooses its GEMM kernels for the CPU when it loads; one that does
not know the CPU (Debian's 0.3.21 on Emerald Rapids) falls back to its
Prescott (SSE3) kernels, about 3x slower here. When OPENBLAS_CORETYPE is
unset and OpenBLAS reports Prescott on a CPU with AVX-512 or AVX2,
cleave-run sets it to SkylakeX or Haswell for the program. On a CPU with
AVX-512, GEMMs by a weight run on Cleave's own kernel instead, the weight
packed on its second use (so from a program's second run, or its second
microbatch), and so do GEMMs of two activations (attention's) of 16 rows
or more; CLEAVE_PACKED_GEMM=0 sends them to OpenBLAS too,
CLEAVE_PACKED_GEMM=avx2 asks for the AVX2 kernel. On a CPU with AMX,
GEMMs of bfloat16 operands (--precision bf16) run on its tiles, elsewhere
(and with CLEAVE_AMX=0) widened to float32 for OpenBLAS. --bench names
each.
)";

/// The OpenBLAS kernels to ask for when the OpenBLAS the program will load
/// falls back to its generic ones here (BlasCore.h); otherwise null. The
/// program does this itself since 2026-12-01; setting it here keeps
/// bundles built before that fast, and spares the others a restart.
static const char *betterOpenBlasCore() {
  void *lib = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_LOCAL);
  if (!lib)
    return nullptr;
  using CoreName = char *(*)();
  auto coreName =
      reinterpret_cast<CoreName>(dlsym(lib, "openblas_get_corename"));
  const char *better =
      cleave::rt::betterBlasCore(coreName ? coreName() : nullptr);
  dlclose(lib);
  return better;
}

/// The launcher (mpiexec) while it runs, for the signal handler.
static volatile pid_t launcherPid = 0;
/// The signal that stopped cleave-run, forwarded to the launcher.
static volatile sig_atomic_t stoppedBy = 0;

/// SIGTERM, SIGINT and SIGHUP (a scheduler's cancel, Ctrl-C, a closed
/// terminal) are passed on to mpiexec, which ends every rank; cleave-run
/// then waits for it and reports.
static void forwardSignal(int signal) {
  stoppedBy = signal;
  if (launcherPid > 0)
    kill(launcherPid, signal);
}

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "cleave-run") << message << "\n";
  return 1;
}

/// After a failed job: the ranks that left it outside any collective without
/// finishing (they died or exited early), from their progress files; if
/// every unfinished rank was waiting in a collective, those ranks.
static std::string ranksThatEndedEarly(llvm::StringRef dir, int64_t ranks,
                                       bool acrossHosts) {
  std::vector<std::string> early, waiting;
  for (int64_t r = 0; r < ranks; ++r) {
    std::string path = (dir + "/rank" + llvm::Twine(r)).str();
    cleave_progress p{};
    FILE *f = std::fopen(path.c_str(), "rb");
    bool read = f && std::fread(&p, sizeof(p), 1, f) == 1;
    if (f)
      std::fclose(f);
    if (!read) {
      // A rank on another host keeps its progress there.
      if (!acrossHosts)
        early.push_back(std::to_string(r) + " (never started)");
      continue;
    }
    if (p.finished)
      continue;
    std::string where = "after " + std::to_string(p.completed) + " collectives";
    if (p.exited)
      where += ", exit status " + std::to_string(p.status);
    if (p.inside)
      waiting.push_back(std::to_string(r) + " (waiting in " + p.kind + ", " +
                        where + ")");
    else
      early.push_back(std::to_string(r) + " (" + where + ")");
  }
  const std::vector<std::string> &named = early.empty() ? waiting : early;
  if (named.empty())
    return "";
  return std::string(early.empty() ? "ranks left waiting: "
                                   : "ranks that ended early: ") +
         llvm::join(named, ", ");
}

/// Passes the job's stdout and stderr on as they come, on a thread of its
/// own, keeping back the lines by which each rank says on stderr that its
/// work is done (`cleave-rank-done R`, printed before MPI_Finalize) and
/// noting the host and code hydra gives on stdout for a process that ended
/// badly.
class JobOutput {
public:
  JobOutput(int out, int err, int64_t ranks)
      : streams{{{out, STDOUT_FILENO, {}}, {err, STDERR_FILENO, {}}}},
        done(ranks, false) {
    reader = std::thread([this] { read(); });
  }
  ~JobOutput() {
    if (reader.joinable())
      reader.join();
  }
  /// After the launcher has ended: whether every rank said it was done.
  /// Waits a moment for the rest of the streams (a host's proxy may still
  /// hold them open).
  bool wait() {
    for (int i = 0; i < 100 && !ended.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (ended.load())
      reader.join();
    else
      reader.detach(); // ends with this process
    std::lock_guard<std::mutex> lock(mutex);
    return llvm::all_of(done, [](bool d) { return d; });
  }
  /// Where hydra says a process ended badly, and its code ("9": by signal
  /// 9); empty if it did not say.
  std::pair<std::string, std::string> badEnd() {
    std::lock_guard<std::mutex> lock(mutex);
    return {badHost, badCode};
  }

private:
  struct Stream {
    int from, to;
    std::string line; // the unfinished line
  };

  void read() {
    std::array<pollfd, 2> fds;
    for (size_t i = 0; i < streams.size(); ++i)
      fds[i] = {streams[i].from, POLLIN, 0};
    char buffer[4096];
    for (int open = 2; open > 0;) {
      if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR)
        break;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0) {
          take(streams[i], /*atEnd=*/true);
          fds[i].fd = -1;
          --open;
          continue;
        }
        streams[i].line.append(buffer, n);
        take(streams[i], /*atEnd=*/false);
      }
    }
    ended.store(true);
  }

  /// Passes on what `s` holds: whole lines (each looked at), and, on
  /// stdout, a partial one at once (a generation's tokens come so).
  void take(Stream &s, bool atEnd) {
    for (size_t eol; (eol = s.line.find('\n')) != std::string::npos;) {
      if (!keepBack(llvm::StringRef(s.line.data(), eol)))
        writeAll(s.to, s.line.data(), eol + 1);
      s.line.erase(0, eol + 1);
    }
    if (!s.line.empty() && (atEnd || s.to == STDOUT_FILENO)) {
      writeAll(s.to, s.line.data(), s.line.size());
      s.line.clear();
    }
  }

  /// Whether `line` is a rank's done line; notes hydra's report of a
  /// process that ended badly ("=   PID N RUNNING AT HOST", "=   EXIT
  /// CODE: C").
  bool keepBack(llvm::StringRef line) {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t rank = -1;
    llvm::StringRef rest = line;
    if (rest.consume_front("cleave-rank-done ") &&
        !rest.getAsInteger(10, rank) && rank >= 0 &&
        rank < int64_t(done.size())) {
      done[rank] = true;
      return true;
    }
    llvm::StringRef text = line.ltrim("= ");
    if (text.consume_front("PID ") && text.contains(" RUNNING AT "))
      badHost = text.split(" RUNNING AT ").second.trim().str();
    else if (text.consume_front("EXIT CODE: "))
      badCode = text.trim().str();
    return false;
  }

  static void writeAll(int fd, const char *data, size_t size) {
    while (size > 0) {
      ssize_t n = ::write(fd, data, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return;
      data += n;
      size -= n;
    }
  }

  std::array<Stream, 2> streams;
  std::vector<bool> done;
  std::string badHost, badCode;
  std::mutex mutex;
  std::atomic<bool> ended{false};
  std::thread reader;
};

/// A job across hosts: the bundle as its ranks read it and, when staged,
/// where the outputs are written and where they come back to.
struct HostJob {
  std::string dir;
  std::string writerHost, remoteOutputs, localOutputs;
  /// Each rank's host, where known (a list or the ranks' own reports).
  std::vector<std::string> hostOf;
};

/// The value of each of the program's options that name files (--input
/// NAME=FILE, --prompt, --attention-mask, --output-dir) in `options`, for
/// `visit` to read or change.
template <typename Visit>
static void forEachFileOption(std::vector<std::string> &options, Visit visit) {
  for (size_t i = 0; i < options.size(); ++i)
    for (llvm::StringRef name :
         {"--input", "--prompt", "--attention-mask", "--output-dir"}) {
      llvm::StringRef arg = options[i];
      if (arg == name && i + 1 < options.size()) {
        visit(name, options[++i]);
        break;
      }
      if (arg.consume_front(name) && arg.consume_front("=")) {
        std::string value = arg.str();
        visit(name, value);
        options[i] = (name + "=" + value).str();
        break;
      }
    }
}

/// "0-1 on node1, 2-3 on node2": which ranks each host runs.
static std::string describePlacement(const std::vector<std::string> &hostOf) {
  std::vector<std::string> parts;
  for (size_t first = 0; first < hostOf.size();) {
    size_t last = first;
    while (last + 1 < hostOf.size() && hostOf[last + 1] == hostOf[first])
      ++last;
    parts.push_back((first == last
                         ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last)) +
                    " on " + hostOf[first]);
    first = last + 1;
  }
  return llvm::join(parts, ", ");
}

/// Before a job across hosts: says where each rank runs (warning where a
/// tp group is split between hosts), with --stage-weights copies what the
/// hosts lack into that folder and points the inputs and outputs there,
/// then checks that every rank's files are in place. Returns 0, or the
/// exit status after reporting what is wrong (nothing started).
static int prepareHosts(const std::string &mpiexec,
                        const cleave::run::Placement &where,
                        const llvm::json::Object &manifest,
                        const std::string &bundle, const std::string &stageDir,
                        bool check, std::vector<std::string> &forwarded,
                        HostJob &job) {
  namespace fs = llvm::sys::fs;
  cleave::run::BundleFiles files;
  files.dir = bundle;
  files.ranks = manifest.getInteger("ranks").value_or(1);
  files.writerRank = manifest.getInteger("writer_rank").value_or(0);
  std::string program = bundle + "/program";
  auto text = llvm::MemoryBuffer::getFile(program, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!text)
    return fail("cannot read '" + program + "': " + text.getError().message());
  cleave_checksum_state sum;
  cleave_checksum_init(&sum);
  cleave_checksum_update(&sum, (*text)->getBufferStart(),
                         (*text)->getBufferSize());
  files.programBytes = (*text)->getBufferSize();
  files.programChecksum = cleave_checksum_finish(&sum);
  // Each rank's weight file, as the manifest lists them.
  if (const llvm::json::Array *weights = manifest.getArray("weights"))
    for (const llvm::json::Value &w : *weights)
      if (auto path = w.getAsString())
        files.weightFiles.push_back(path->str());
  if (int64_t(files.weightFiles.size()) != files.ranks)
    return fail("the bundle's manifest lists " +
                llvm::Twine(files.weightFiles.size()) + " weight files for " +
                llvm::Twine(files.ranks) + " ranks");
  for (const std::string &w : files.weightFiles) {
    uint64_t size = 0;
    fs::file_size(bundle + "/" + w, size);
    files.largestWeightFile = std::max(files.largestWeightFile, size);
  }

  // Each rank's host: from the list, else (Slurm) as the ranks report it.
  std::vector<std::string> hostOf;
  if (auto placed = where.hostOfEachRank(files.ranks))
    hostOf = std::move(*placed);
  else if (!where.hosts.empty() || !where.hostfile.empty())
    return fail(llvm::toString(placed.takeError()));
  else
    llvm::consumeError(placed.takeError());
  auto checkAt = [&](const std::string &dir)
      -> std::optional<std::vector<cleave::run::RankFindings>> {
    auto found = cleave::run::checkFiles(mpiexec, where, files, dir);
    if (!found) {
      fail("the check of the hosts' files " +
           llvm::toString(found.takeError()));
      return std::nullopt;
    }
    if (hostOf.empty() &&
        llvm::all_of(*found, [](const auto &f) { return f.reported; }))
      for (const cleave::run::RankFindings &f : *found)
        hostOf.push_back(f.host);
    return std::move(*found);
  };

  job.dir = bundle;
  if (!stageDir.empty()) {
    if (!llvm::sys::path::is_absolute(stageDir))
      return fail("--stage-weights needs an absolute folder (it is made on "
                  "each host), not '" +
                  stageDir + "'");
    std::vector<cleave::run::RankFindings> found(files.ranks);
    if (check) {
      auto atStage = checkAt(stageDir);
      if (!atStage)
        return 1;
      found = std::move(*atStage);
    }
    if (hostOf.empty())
      return fail("--stage-weights: not every rank's host could be found (the "
                  "check reached only some)");
    // The inputs go to every host (every rank reads them), the outputs come
    // back from the writer's.
    std::vector<std::string> inputs, staged;
    int64_t job_id = getpid();
    forEachFileOption(forwarded, [&](llvm::StringRef name, std::string &value) {
      if (name == "--output-dir") {
        job.localOutputs = value;
        job.remoteOutputs = stageDir + "/outputs-" + std::to_string(job_id);
        job.writerHost = hostOf[files.writerRank];
        value = job.remoteOutputs;
        return;
      }
      std::string prefix;
      std::string path = value;
      if (name == "--input") {
        size_t eq = value.find('=');
        if (eq == std::string::npos)
          return; // the program says what is wrong
        prefix = value.substr(0, eq + 1);
        path = value.substr(eq + 1);
      }
      std::string as = "inputs/" + std::to_string(inputs.size()) + "-" +
                       llvm::sys::path::filename(path).str();
      inputs.push_back(path);
      staged.push_back(as);
      value = prefix + stageDir + "/" + as;
    });
    if (llvm::Error e = cleave::run::stage(where, files, hostOf, found,
                                           stageDir, inputs, staged))
      return fail("--stage-weights: " + llvm::toString(std::move(e)));
    job.dir = stageDir;
  }
  if (!hostOf.empty()) {
    llvm::errs() << "cleave-run: ranks " << describePlacement(hostOf) << "\n";
    // The mesh's last axis varies fastest: its groups are consecutive ranks.
    int64_t inner = 1;
    std::string innerName;
    if (const llvm::json::Object *mesh = manifest.getObject("mesh"))
      if (const llvm::json::Array *axes = mesh->getArray("axes"))
        if (!axes->empty())
          if (const llvm::json::Object *last = axes->back().getAsObject()) {
            inner = last->getInteger("size").value_or(1);
            innerName = last->getString("name").value_or("").str();
          }
    for (int64_t first = 0; inner > 1 && first + inner <= files.ranks;
         first += inner)
      if (hostOf[first] != hostOf[first + inner - 1]) {
        llvm::WithColor::warning(llvm::errs(), "cleave-run")
            << "the " << innerName << " group of ranks " << first << "-"
            << first + inner - 1
            << " spans hosts, so its collectives cross the network; give "
               "each host a multiple of "
            << inner << " slots\n";
        break;
      }
  }
  if (check) {
    auto found = checkAt(job.dir);
    if (!found)
      return 1;
    std::string problems = cleave::run::describeProblems(*found);
    if (!problems.empty())
      return fail("the bundle's files are not all in place on the hosts "
                  "(nothing was started" +
                  std::string(stageDir.empty()
                                  ? "; --stage-weights DIR copies them"
                                  : "") +
                  "):\n" + problems);
  }
  job.hostOf = std::move(hostOf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    llvm::outs() << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string bundle = argv[1];
  // A bundle with plans for fewer devices (cleave-compile
  // --fallback-devices) runs the one for --ranks K from plans/K.
  // (Only a count names a plan: --ranks is checked again below.)
  for (int i = 2; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    llvm::StringRef given = arg.consume_front("--ranks=") ? arg
                            : arg == "--ranks" && i + 1 < argc
                                ? llvm::StringRef(argv[i + 1])
                                : llvm::StringRef();
    unsigned n = 0;
    if (given.getAsInteger(10, n) || n == 0)
      continue;
    std::string count = std::to_string(n);
    llvm::SmallString<256> fallback(bundle);
    llvm::sys::path::append(fallback, "plans", count, "manifest.json");
    if (llvm::sys::fs::exists(fallback)) {
      llvm::SmallString<256> plan(bundle);
      llvm::sys::path::append(plan, "plans", count);
      llvm::errs() << "cleave-run: running the bundle's plan for " << count
                   << " ranks (" << plan << ")\n";
      bundle = std::string(plan);
    }
  }
  llvm::SmallString<256> manifestPath(bundle);
  llvm::sys::path::append(manifestPath, "manifest.json");
  auto text = llvm::MemoryBuffer::getFile(manifestPath);
  if (!text)
    return fail("'" + bundle + "' is not a Cleave bundle: cannot read '" +
                manifestPath + "': " + text.getError().message());
  auto manifest = llvm::json::parse((*text)->getBuffer());
  if (!manifest)
    return fail("'" + manifestPath +
                "' is not valid JSON: " + llvm::toString(manifest.takeError()));
  const llvm::json::Object *root = manifest->getAsObject();
  std::optional<int64_t> ranks =
      root ? root->getInteger("ranks") : std::nullopt;
  if (!root || root->getString("format") != "cleave-bundle" || !ranks)
    return fail("'" + manifestPath + "' is not a Cleave bundle manifest");
  // Options for this launcher; the rest go to the program.
  std::vector<std::string> forwarded;
  std::optional<int64_t> expectedRanks;
  std::string timeout; // --timeout's value; none: the runtime's own limits
  bool threadsGiven = false;
  std::string threadsText; // --threads's value, forwarded to the program
  // Hosts, a host file, hydra's launcher and its command, the interface
  // the launcher's proxies connect back on.
  cleave::run::Placement where;
  std::string &hosts = where.hosts, &hostfile = where.hostfile,
              &launcher = where.launcher;
  std::string heartbeat = "10";
  std::string stageDir; // --stage-weights
  bool preflight = true;
  for (int i = 2; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    auto value = [&](llvm::StringRef name) -> std::optional<std::string> {
      if (arg.consume_front(name)) {
        if (arg.consume_front("="))
          return arg.str();
        if (arg.empty() && i + 1 < argc)
          return std::string(argv[++i]);
      }
      return std::nullopt;
    };
    if (arg == "--ranks" || arg.starts_with("--ranks=")) {
      auto v = value("--ranks");
      int64_t n = 0;
      if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n <= 0)
        return fail("--ranks expects a positive number");
      expectedRanks = n;
      continue;
    }
    // Where the ranks run: passed to MPICH's hydra (mpiexec).
    bool placement = false;
    for (auto [name, out] :
         {std::pair<llvm::StringRef, std::string *>{"--hosts", &hosts},
          {"--hostfile", &hostfile},
          {"--launcher", &launcher},
          {"--launcher-exec", &where.launcherExec},
          {"--iface", &where.iface},
          {"--stage-weights", &stageDir}})
      if (arg == name || arg.starts_with((name + "=").str())) {
        auto v = value(name);
        if (!v || v->empty())
          return fail(name + " needs a value");
        *out = *v;
        placement = true;
        break;
      }
    if (placement) {
      if (!launcher.empty() && launcher != "ssh" && launcher != "slurm" &&
          launcher != "fork")
        return fail("--launcher must be ssh, slurm or fork, not '" + launcher +
                    "'");
      continue;
    }
    if (arg == "--timeout" || arg.starts_with("--timeout=")) {
      auto v = value("--timeout");
      double seconds = 0;
      if (!v || llvm::StringRef(*v).getAsDouble(seconds) || seconds <= 0)
        return fail("--timeout expects a positive number of seconds");
      timeout = *v;
      continue;
    }
    if (arg == "--heartbeat-timeout" ||
        arg.starts_with("--heartbeat-timeout=")) {
      auto v = value("--heartbeat-timeout");
      double seconds = 0;
      if (!v || llvm::StringRef(*v).getAsDouble(seconds) || seconds < 0)
        return fail("--heartbeat-timeout expects a number of seconds (0: "
                    "no heartbeat)");
      heartbeat = *v;
      continue;
    }
    if (arg == "--no-preflight") {
      preflight = false;
      continue;
    }
    if (arg == "--threads" || arg.starts_with("--threads=")) {
      threadsGiven = true;
      threadsText = arg.consume_front("--threads=") ? arg.str()
                    : i + 1 < argc                  ? std::string(argv[i + 1])
                                                    : std::string();
    }
    forwarded.push_back(argv[i]);
  }
  std::string mesh;
  if (const llvm::json::Object *m = root->getObject("mesh"))
    if (auto spec = m->getString("spec"))
      mesh = spec->str();
  if (expectedRanks && *expectedRanks != *ranks)
    return fail("the bundle was compiled for " + llvm::Twine(*ranks) +
                " ranks" + (mesh.empty() ? "" : " (mesh " + mesh + ")") +
                ", not " + llvm::Twine(*expectedRanks) +
                ", and holds no plan for " + llvm::Twine(*expectedRanks) +
                " (plans/" + llvm::Twine(*expectedRanks) +
                "); recompile with another --mesh, or with --mesh auto "
                "--fallback-devices, to change it");

  llvm::SmallString<256> program(bundle);
  llvm::sys::path::append(program, "program");
  if (!llvm::sys::fs::can_execute(program))
    return fail("the bundle's program '" + program + "' is missing");
  if (!stageDir.empty() && (*ranks == 1 || !where.acrossHosts()))
    return fail("--stage-weights copies the bundle to the job's hosts: it "
                "needs a bundle for several ranks and --hosts, --hostfile or "
                "a Slurm allocation");
  // The bundle where the ranks read it (another folder once staged), and
  // for a job across hosts, where its ranks run and its outputs come from.
  std::string runDir = bundle;
  std::optional<HostJob> hostJob;

  // OpenBLAS reads this when it loads: its threads should sleep soon after a
  // GEMM instead of spinning while the model's own loops run.
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
  if (!std::getenv("OPENBLAS_CORETYPE"))
    if (const char *core = betterOpenBlasCore())
      setenv("OPENBLAS_CORETYPE", core, 1);
  std::vector<std::string> args;
  if (*ranks > 1) {
    std::string mpiexec;
    for (const char *name : {"mpiexec.mpich", "mpiexec.hydra", "mpiexec"})
      if (auto path = llvm::sys::findProgramByName(name)) {
        mpiexec = *path;
        break;
      }
    if (mpiexec.empty())
      return fail("the bundle needs " + llvm::Twine(*ranks) +
                  " ranks, but MPICH's mpiexec is not installed (apt install "
                  "mpich)");
    args = {mpiexec, "-n", std::to_string(*ranks)};
    if (!hosts.empty() && !hostfile.empty())
      return fail("give --hosts or --hostfile, not both");
    // Inside a Slurm allocation hydra asks Slurm for the hosts and starts
    // its proxies with srun, unless told otherwise.
    if (launcher.empty() && hosts.empty() && hostfile.empty() &&
        std::getenv("SLURM_JOB_ID"))
      launcher = "slurm";
    // Ranks fill each host's slots in turn, in rank order: the mesh's last
    // axis (tp) varies fastest, so a tp group shares a host where each
    // host's slots are a multiple of the tp size.
    llvm::append_range(args, where.hydraOptions());
    if (where.acrossHosts()) {
      HostJob job;
      if (int code = prepareHosts(args.front(), where, *root, bundle, stageDir,
                                  preflight, forwarded, job))
        return code;
      runDir = job.dir;
      hostJob = job;
    }
    // Ranks share the cores unless told otherwise.
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (!threadsGiven && !std::getenv("CLEAVE_NUM_THREADS"))
      setenv("CLEAVE_NUM_THREADS",
             std::to_string(std::max<int64_t>(1, cores / *ranks)).c_str(), 1);
    // More threads than cores: a rank waiting in a collective must not hold
    // the core its peer needs to get there (MPICH waits busily).
    int64_t threads = 1;
    llvm::StringRef(threadsGiven ? threadsText.c_str()
                                 : std::getenv("CLEAVE_NUM_THREADS"))
        .getAsInteger(10, threads);
    if (*ranks * std::max<int64_t>(1, threads) > int64_t(cores))
      setenv("CLEAVE_RANKS_SHARE_CORES", "1", /*overwrite=*/0);
  }
  args.push_back(runDir == bundle ? program.str().str() : runDir + "/program");
  args.push_back("--bundle");
  args.push_back(runDir);
  llvm::append_range(args, forwarded);
  std::vector<char *> argvOut;
  for (std::string &a : args)
    argvOut.push_back(a.data());
  argvOut.push_back(nullptr);
  if (*ranks == 1) {
    execv(program.c_str(), argvOut.data());
    return fail("cannot start '" + program + "': " + std::strerror(errno));
  }

  // Several ranks: a folder for their progress files, removed afterwards.
  llvm::SmallString<128> progress;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("cleave-run", progress))
    return fail("cannot create a folder for the ranks' progress: " +
                ec.message());
  setenv("CLEAVE_PROGRESS_DIR", progress.c_str(), 1);
  if (!timeout.empty())
    setenv("CLEAVE_COLLECTIVE_TIMEOUT", timeout.c_str(), 1);
  setenv("CLEAVE_HEARTBEAT_TIMEOUT", heartbeat.c_str(), 1);
  struct sigaction forward = {};
  forward.sa_handler = forwardSignal;
  sigemptyset(&forward.sa_mask);
  for (int signal : {SIGTERM, SIGINT, SIGHUP})
    sigaction(signal, &forward, nullptr);
  // The job's output comes through pipes: each rank says on stderr when its
  // work is done and agreed, before MPI_Finalize (CLEAVE_REPORT_DONE), and
  // hydra on stdout which host a process that ended badly ran on.
  setenv("CLEAVE_REPORT_DONE", "1", 1);
  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0)
    return fail(llvm::Twine("cannot make a pipe: ") + std::strerror(errno));
  pid_t self = getpid();
  pid_t child = fork();
  if (child == 0) {
    dup2(outPipe[1], STDOUT_FILENO);
    dup2(errPipe[1], STDERR_FILENO);
    // A cleave-run killed outright (SIGKILL: no handler runs) still takes
    // its job with it: the kernel sends mpiexec SIGTERM when its parent
    // dies. (Checked after asking: the parent may already be gone.)
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != self)
      _exit(1);
    execv(argvOut[0], argvOut.data());
    std::fprintf(stderr, "cleave-run: error: cannot start '%s': %s\n",
                 argvOut[0], std::strerror(errno));
    _exit(127);
  }
  launcherPid = child;
  // A reader of this output that goes away (`| head`) must not end
  // cleave-run, which holds the job; the output is then dropped.
  signal(SIGPIPE, SIG_IGN);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  JobOutput jobOutput(outPipe[0], errPipe[0], *ranks);
  if (stoppedBy) // a signal that came before the launcher was known
    kill(child, stoppedBy);
  // Once stopped by a signal, mpiexec has kSignalGraceSeconds to end its
  // ranks (it may wait on a host it cannot reach), then is killed.
  constexpr int kSignalGraceSeconds = 10;
  int status = 0;
  for (auto stoppedAt = std::chrono::steady_clock::time_point();;) {
    // Blocks until the job ends or a signal interrupts (the handler is
    // installed without SA_RESTART); once stopped, polls for the grace.
    pid_t done = waitpid(child, &status, stoppedBy ? WNOHANG : 0);
    if (done == child || (done < 0 && errno != EINTR))
      break;
    if (done < 0)
      continue;
    if (stoppedBy && stoppedAt == std::chrono::steady_clock::time_point())
      stoppedAt = std::chrono::steady_clock::now();
    if (stoppedBy && std::chrono::steady_clock::now() - stoppedAt >
                         std::chrono::seconds(kSignalGraceSeconds))
      kill(child, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  launcherPid = 0;
  bool allDone = jobOutput.wait();
  std::string ended =
      ranksThatEndedEarly(progress, *ranks, where.acrossHosts());
  llvm::sys::fs::remove_directories(progress);
  if (stoppedBy) {
    fail("stopped by signal " + llvm::Twine(int(stoppedBy)) + " (" +
         strsignal(stoppedBy) + "); every rank was ended");
    return 128 + stoppedBy;
  }
  bool launcherFailed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (launcherFailed && allDone) {
    // mpiexec reports a failure that came after every rank had finished
    // and agreed on success: a rank stuck in MPI_Finalize left it (see
    // comm::finish) and the launcher killed the others at their closing.
    llvm::WithColor::warning(llvm::errs(), "cleave-run")
        << "every rank finished its work, but MPI_Finalize did not complete "
           "on all of them (UCX over TCP: openucx/ucx#8738), so they left it; "
           "the outputs are complete\n";
    launcherFailed = false;
  }
  if (!launcherFailed) {
    // Staged: the outputs are on the writer's host.
    if (hostJob && !hostJob->remoteOutputs.empty())
      if (llvm::Error e = cleave::run::fetchFolder(where, hostJob->writerHost,
                                                   hostJob->remoteOutputs,
                                                   hostJob->localOutputs))
        return fail("the job succeeded, but its outputs could not be "
                    "fetched: " +
                    llvm::toString(std::move(e)));
    return 0;
  }
  if (hostJob && !hostJob->remoteOutputs.empty())
    cleave::run::removeRemote(where, hostJob->writerHost,
                              hostJob->remoteOutputs);
  std::string how = WIFSIGNALED(status)
                        ? "killed by signal " + std::to_string(WTERMSIG(status))
                        : "exit status " + std::to_string(WEXITSTATUS(status));
  // hydra names the host of a process that ended badly, not its rank: the
  // ranks placed there.
  auto [badHost, badCode] = jobOutput.badEnd();
  std::string badProcess;
  if (!badHost.empty()) {
    std::vector<std::string> there;
    if (hostJob)
      for (auto [r, host] : llvm::enumerate(hostJob->hostOf))
        if (host == badHost)
          there.push_back(std::to_string(r));
    badProcess = "; a process of " +
                 (there.empty() ? std::string("the job")
                                : (there.size() > 1 ? "ranks " : "rank ") +
                                      llvm::join(there, ", ")) +
                 " on host " + badHost + " ended badly (hydra: exit code " +
                 badCode + "; a signal's number where it was killed)";
  }
  fail("the job failed (" + how + ")" + badProcess +
       (ended.empty() ? "" : "; " + ended));
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status)
                                                       : 1;
}
