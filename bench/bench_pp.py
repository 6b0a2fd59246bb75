#!/usr/bin/env python3
"""Benchmarks pipeline stages on a CPU machine against one rank.

A GPT-2-small-shaped stack (bench/gpt2_stack.py; 12 layers by default,
batch 4, sequence 128, float32) is compiled for one rank and for pipeline
meshes (pp=2 with 1, 2 and 4 microbatches by default). Each pipelined
program's outputs are compared with the one-rank program's, then every
program runs --runs times with cleave-run --bench: the one-rank program
with as many threads as the pipelined ones have ranks, each pipeline rank
with one thread, so all use the same cores. The script prints the p50
latencies, the ratio pipelined / one rank, the plan's predicted stage
balance, and each stage's measured busy time next to the cost model's
prediction (the ratio measured / predicted should be about the same for
every stage when the cost model balances them well; its size only says how
far the default machine description is from this CPU).

Usage: bench_pp.py [--layers N] [--runs N] [--configs pp=2:1,pp=2:2,...]
                   [--work DIR] [--bin DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import make_stack  # noqa: E402


def compile_bundle(args, model, out, extra):
    subprocess.run([os.path.join(args.bin, "cleave-compile"), model, "-o", out,
                    "--quiet"] + extra, check=True)


def run_bundle(args, bundle, inputs, out, threads, bench=0):
    cmd = [os.path.join(args.bin, "cleave-run"), bundle, "--output-dir", out,
           "--threads", str(threads), f"--input=hidden={inputs}"]
    if bench:
        cmd += ["--bench", str(bench)]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--configs", default="pp=2:1,pp=2:2,pp=2:4",
                        help="comma-separated MESH:MICROBATCHES")
    parser.add_argument("--work", default=tempfile.mkdtemp(prefix="cleave-bench-pp-"))
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, f"stack{args.layers}.onnx")
    make_stack(model, layers=args.layers, batch=4, seq=128)
    inputs = os.path.join(args.work, "hidden.npy")
    np.save(inputs, np.random.default_rng(0).standard_normal((4, 128, 768)).astype(np.float32))

    configs = [c.split(":") for c in args.configs.split(",")]
    ranks = max(int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")]))
                for mesh, _ in configs)

    single = os.path.join(args.work, "single")
    compile_bundle(args, model, single, [])
    run_bundle(args, single, inputs, os.path.join(args.work, "single-out"), ranks)
    reference = np.load(os.path.join(args.work, "single-out", "out.npy"))
    text = run_bundle(args, single, inputs, os.path.join(args.work, "single-out"),
                      ranks, args.runs)
    base = float(re.search(r"p50 ([0-9.]+) ms", text).group(1))
    print(f"1 rank x {ranks} threads: p50 {base:.1f} ms")

    for mesh, micro in configs:
        name = f"{mesh.replace(',', '_').replace('=', '')}_m{micro}"
        bundle = os.path.join(args.work, name)
        compile_bundle(args, model, bundle, [f"--mesh={mesh}", f"--microbatches={micro}"])
        out = os.path.join(args.work, name + "-out")
        run_bundle(args, bundle, inputs, out, 1)
        diff = float(np.abs(np.load(os.path.join(out, "out.npy")) - reference).max())
        text = run_bundle(args, bundle, inputs, out, 1, args.runs)
        p50 = float(re.search(r"p50 ([0-9.]+) ms", text).group(1))
        plan = open(os.path.join(bundle, "plan.txt")).read()
        balance = re.search(r"balance \(largest / smallest predicted stage\): ([0-9.]+)", plan)
        print(f"{mesh}, {micro} microbatch(es): p50 {p50:.1f} ms, {p50 / base:.2f}x one rank; "
              f"max |diff| vs one rank {diff:.2e}; predicted balance "
              f"{balance.group(1) if balance else '-'}")
        stages = re.findall(r"stage (\d+): busy p50 ([0-9.]+) ms .*predicted ([0-9.]+) ms, "
                            r"measured/predicted ([0-9.]+)", text)
        busy = [float(b) for _, b, _, _ in stages]
        for s, b, p, r in stages:
            print(f"  stage {s}: busy {float(b):.1f} ms per run, predicted {float(p):.2f} ms, "
                  f"measured/predicted {float(r):.1f}")
        if busy and min(busy) > 0:
            print(f"  measured balance (largest / smallest busy stage): {max(busy) / min(busy):.3f}")


if __name__ == "__main__":
    main()
