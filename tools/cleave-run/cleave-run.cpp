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

#include "cleave/Runtime/BlasCore.h"
#include "cleave/Runtime/Progress.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
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
       (either, on several hosts: [--hosts HOST[:SLOTS],... | --hostfile FILE]
        [--launcher ssh|slurm|fork] [--launcher-exec CMD] [--iface IFACE])
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
  --ranks N              the rank count you expect; refused before start if
                         the bundle was compiled for another
  --timeout SECONDS      a collective that waits longer ends the job, naming
                         the ranks that did not reach it (default 600)
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
hosts, hydra starts the ranks with Slurm's launcher. Each host needs the
bundle at the same path.
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
static std::string ranksThatEndedEarly(llvm::StringRef dir, int64_t ranks) {
  std::vector<std::string> early, waiting;
  for (int64_t r = 0; r < ranks; ++r) {
    std::string path = (dir + "/rank" + llvm::Twine(r)).str();
    cleave_progress p{};
    FILE *f = std::fopen(path.c_str(), "rb");
    bool read = f && std::fread(&p, sizeof(p), 1, f) == 1;
    if (f)
      std::fclose(f);
    if (!read) {
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

int main(int argc, char **argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    llvm::outs() << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string bundle = argv[1];
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
  std::string timeout = "600";
  bool threadsGiven = false;
  std::string threadsText; // --threads's value, forwarded to the program
  // Hosts, a host file, hydra's launcher and its command, the interface
  // the launcher's proxies connect back on.
  std::string hosts, hostfile, launcher, launcherExec, iface;
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
          {"--launcher-exec", &launcherExec},
          {"--iface", &iface}})
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
                "; recompile with another --mesh to change it");

  llvm::SmallString<256> program(bundle);
  llvm::sys::path::append(program, "program");
  if (!llvm::sys::fs::can_execute(program))
    return fail("the bundle's program '" + program + "' is missing");

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
    // Ranks fill each host's slots in turn, in rank order: the mesh's last
    // axis (tp) varies fastest, so a tp group shares a host where each
    // host's slots are a multiple of the tp size.
    if (!hosts.empty())
      llvm::append_range(args, std::vector<std::string>{"-hosts", hosts});
    if (!hostfile.empty())
      llvm::append_range(args, std::vector<std::string>{"-f", hostfile});
    // Inside a Slurm allocation hydra asks Slurm for the hosts and starts
    // its proxies with srun, unless told otherwise.
    if (launcher.empty() && hosts.empty() && hostfile.empty() &&
        std::getenv("SLURM_JOB_ID"))
      launcher = "slurm";
    if (!launcher.empty())
      llvm::append_range(args, std::vector<std::string>{"-launcher", launcher});
    if (!launcherExec.empty())
      llvm::append_range(
          args, std::vector<std::string>{"-launcher-exec", launcherExec});
    if (!iface.empty())
      llvm::append_range(args, std::vector<std::string>{"-iface", iface});
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
  args.push_back(program.str().str());
  args.push_back("--bundle");
  args.push_back(bundle);
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
  setenv("CLEAVE_COLLECTIVE_TIMEOUT", timeout.c_str(), 1);
  struct sigaction forward = {};
  forward.sa_handler = forwardSignal;
  sigemptyset(&forward.sa_mask);
  for (int signal : {SIGTERM, SIGINT, SIGHUP})
    sigaction(signal, &forward, nullptr);
  pid_t self = getpid();
  pid_t child = fork();
  if (child == 0) {
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
  std::string ended = ranksThatEndedEarly(progress, *ranks);
  llvm::sys::fs::remove_directories(progress);
  if (stoppedBy) {
    fail("stopped by signal " + llvm::Twine(int(stoppedBy)) + " (" +
         strsignal(stoppedBy) + "); every rank was ended");
    return 128 + stoppedBy;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  std::string how = WIFSIGNALED(status)
                        ? "killed by signal " + std::to_string(WTERMSIG(status))
                        : "exit status " + std::to_string(WEXITSTATUS(status));
  fail("the job failed (" + how + ")" + (ended.empty() ? "" : "; " + ended));
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status)
                                                       : 1;
}
