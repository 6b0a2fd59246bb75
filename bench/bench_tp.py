#!/usr/bin/env python3
"""Benchmarks tensor parallelism on the 2 cores of a CPU machine.

The 2-layer GPT-2-small-shaped stack (d_model 768, 12 heads, sequence 128,
batch 1 or --batch, float32; bench/gpt2_stack.py) is compiled twice, for one
rank and for tp=2 with the megatron preset, each checked against ONNX Runtime
(and the tp=2 program against the one-rank program). Both use the same 2 cores:
one rank with 2 threads, or 2 ranks with 1 thread each. The script prints each
latency next to ONNX Runtime's at 2 threads, measured in the same run, and the
ratio tp=2 / tp=1 (below 1.0: tensor parallelism is faster).

Usage: bench_tp.py [--runs N] [--batch B] [--work DIR] [--bin DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import make_stack  # noqa: E402


def run(check, model, args, extra, threads, name):
    result = subprocess.run(
        [sys.executable, check, model, "--bench", str(args.runs), "--threads",
         str(threads), "--bin", args.bin, "--work", os.path.join(args.work, name)]
        + extra, check=True, capture_output=True, text=True)
    print(result.stdout, end="")
    match = re.search(r"Cleave ([0-9.]+) ms .* ONNX Runtime ([0-9.]+) ms", result.stdout)
    return float(match.group(1)), float(match.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1,
                        help="sequences of 128 tokens per run (default 1)")
    parser.add_argument("--work", default=tempfile.mkdtemp(prefix="cleave-bench-tp-"))
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "stack2.onnx")
    make_stack(model, layers=2, batch=args.batch)
    check = os.path.join(HERE, "..", "scripts", "check_model.py")

    print("== tp=1: one rank, 2 threads")
    tp1, ort1 = run(check, model, args, [], 2, "tp1")
    print("== tp=2: two ranks (megatron preset), 1 thread each")
    tp2, ort2 = run(check, model, args,
                    ["--compile-arg=--mesh=tp=2", "--compile-arg=--shard-preset=megatron",
                     "--compare-single-rank"], 1, "tp2")
    print(f"tp=2 / tp=1 latency: {tp2 / tp1:.2f}x (tp=1 {tp1:.3f} ms, tp=2 {tp2:.3f} ms; "
          f"ONNX Runtime at 2 threads {ort1:.3f} / {ort2:.3f} ms)")


if __name__ == "__main__":
    main()
