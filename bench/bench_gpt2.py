#!/usr/bin/env python3
"""Benchmarks Cleave against ONNX Runtime on a GPT-2-small-shaped stack.

1. A 2-layer stack (d_model 768, 12 heads, sequence 128, batch 1, float32;
   bench/gpt2_stack.py) is compiled, checked against ONNX Runtime, and both
   are timed at 1 and 2 threads in the same run, --rounds times each,
   alternating; the median latency ratio Cleave / ONNX Runtime is printed
   (below 1.0 means Cleave is faster).
2. A 12-layer stack of the same shape, weights in external data (about
   340 MB), is compiled to a bundle and the compile time printed.

Usage: bench_gpt2.py [--runs N] [--rounds R] [--work DIR] [--bin DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import make_stack  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", default=tempfile.mkdtemp(prefix="cleave-bench-"))
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    small = os.path.join(args.work, "stack2.onnx")
    make_stack(small, layers=2)
    check = os.path.join(HERE, "..", "scripts", "check_model.py")
    for threads in (1, 2):
        subprocess.run([sys.executable, check, small, "--bench", str(args.runs),
                        "--bench-rounds", str(args.rounds), "--threads", str(threads), "--bin", args.bin,
                        "--work", os.path.join(args.work, f"run{threads}")],
                       check=True)

    big = os.path.join(args.work, "stack12.onnx")
    make_stack(big, layers=12, external=True)
    start = time.monotonic()
    subprocess.run([os.path.join(args.bin, "cleave-compile"), big, "-o",
                    os.path.join(args.work, "bundle12")], check=True)
    elapsed = time.monotonic() - start
    size = os.path.getsize(os.path.join(args.work, "bundle12", "weights.bin"))
    print(f"12-layer stack: compiled in {elapsed:.1f} s "
          f"(weights.bin {size / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
