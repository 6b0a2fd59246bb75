#!/usr/bin/env python3
"""Checks that a multi-rank job ends with its launcher.

A 2-rank bundle (BUNDLE) runs a long benchmark under cleave-run; then one
process is signalled: cleave-run itself with SIGTERM, SIGINT or SIGKILL (as
a scheduler's cancel, Ctrl-C or an out-of-memory kill would), or MPICH's
per-host proxy, the ranks' parent, with SIGKILL. Within --within seconds no
process of the job may be left (mpiexec, its proxy, the ranks), and
cleave-run's exit and last message are reported. One line per case; exits
1 when processes are left.

Usage: launcher_signals.py BUNDLE --bin BIN --input NAME=FILE.npy --work DIR
                           [--within SECONDS]
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def job_processes(bundle):
    """PIDs of processes whose command line names the bundle's program."""
    program = os.path.join(bundle, "program")
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if program in cmdline:
            found.append((int(pid), cmdline))
    return found


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--within", type=float, default=10)
    args = parser.parse_args()
    bundle = os.path.abspath(args.bundle)
    cases = [("cleave-run", signal.SIGTERM), ("cleave-run", signal.SIGINT),
             ("cleave-run", signal.SIGKILL), ("proxy", signal.SIGKILL)]
    ok = True
    for target, sig in cases:
        log = open(os.path.join(args.work, f"{target}-{sig.name}.log"), "w+")
        run = subprocess.Popen(
            [os.path.join(args.bin, "cleave-run"), bundle, "--input", args.input,
             "--output-dir", os.path.join(args.work, "out"), "--bench", "1000000",
             "--timeout", "60"], stdout=log, stderr=subprocess.STDOUT)
        # Both ranks started: two processes whose parent is the proxy.
        ranks = lambda: [p for p, c in job_processes(bundle)
                         if c.startswith(os.path.join(bundle, "program"))]
        if not wait_for(lambda: len(ranks()) == 2, 60):
            print(f"{target} {sig.name}: the job did not start")
            run.kill()
            sys.exit(1)
        time.sleep(0.5)
        if target == "cleave-run":
            os.kill(run.pid, sig)
        else:
            proxy = [p for p, c in job_processes(bundle) if "hydra_pmi_proxy" in c]
            parent = int(open(f"/proc/{ranks()[0]}/stat").read().split()[3])
            os.kill(parent, sig)
        start = time.monotonic()
        ended = wait_for(lambda: not job_processes(bundle), args.within)
        elapsed = time.monotonic() - start
        try:
            code = run.wait(timeout=args.within)
        except subprocess.TimeoutExpired:
            run.kill()
            code = run.wait()
        left = job_processes(bundle)
        for pid, _ in left:
            os.kill(pid, signal.SIGKILL)
        log.seek(0)
        lines = [l.strip() for l in log.read().splitlines() if "cleave-run:" in l]
        last = lines[-1] if lines else "(no message)"
        if ended:
            print(f"{target} {sig.name}: no process of the job left "
                  f"(within {args.within:g} s); cleave-run exit {code}: {last}")
        else:
            print(f"{target} {sig.name}: {len(left)} processes LEFT after "
                  f"{elapsed:.1f} s: {[c for _, c in left]}")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
