#!/usr/bin/env python3
"""A model of several GB through Cleave, checked against a float64 reference.

Writes a GPT-2-medium-shaped stack (bench/gpt2_stack.py; 96 layers by
default: 4.8 GB of float32 weights in external data, past any 32-bit size or
offset), compiles and runs it with Cleave on one rank and on each --mesh
given, and compares every output, and ONNX Runtime's, with the same stack
computed in float64 by PyTorch (bench_gpu_prefill.eager_forward, op for op).

At this depth float32 rounding alone moves outputs by more than
check_model.py's elementwise tolerance (rtol 1e-4, atol 1e-5) allows near
zero, for ONNX Runtime too, and a split over ranks sums in another order.
So the criterion is the one an independent reference allows: each Cleave
run's mean |diff| to the float64 outputs must be within 2x ONNX Runtime's.
Prints one line per run (max and mean |diff|, the ratio, compile and run
seconds); exits 1 if a run misses the criterion.

Needs torch and onnxruntime; about 20 GB of disk and 10 GB of memory at the
default size. Usage:
  check_large_stack.py WORK [--layers N] [--seq S] [--mesh tp=2 ...] [--bin DIR]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import SHAPES, make_stack, stack_weights  # noqa: E402

# Allowed ratio of a Cleave run's mean |diff| to ONNX Runtime's, both
# against the float64 outputs.
RATIO = 2.0


class Float64Weights(dict):
    """The stack's float32 weights, widened to float64 tensors when read, so
    that the float64 copy of the whole model never exists at once."""

    def __init__(self, torch, arrays):
        super().__init__(arrays)
        self.torch = torch

    def __getitem__(self, name):
        return self.torch.from_numpy(super().__getitem__(name)).double()


def float64_reference(layers, x):
    import torch
    from bench_gpu_prefill import eager_forward

    _, heads, _ = SHAPES["medium"]
    seq = x.shape[1]
    mask = torch.from_numpy(np.triu(np.full((seq, seq), -1e9), 1)[None, None])
    weights = Float64Weights(torch, stack_weights(layers, "medium"))
    with torch.no_grad():
        return eager_forward(torch, weights, layers, heads,
                             torch.from_numpy(x).double(), mask).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("--layers", type=int, default=96)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--mesh", action="append", default=[],
                        help="a --mesh for cleave-compile (repeatable); one "
                             "rank always runs")
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    model = os.path.join(args.work, "stack.onnx")
    if not os.path.exists(model):
        print(f"writing {args.layers} GPT-2-medium-shaped layers to {model}",
              flush=True)
        make_stack(model, layers=args.layers, batch=1, seq=args.seq,
                   external=True, shape="medium")
    d_model = SHAPES["medium"][0]
    x = np.random.default_rng(0).standard_normal(
        (1, args.seq, d_model)).astype(np.float32)
    inputs = os.path.join(args.work, "hidden.npy")
    np.save(inputs, x)

    print("float64 reference (PyTorch, layer by layer)", flush=True)
    reference = float64_reference(args.layers, x)

    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    start = time.perf_counter()
    ort_out = ort.InferenceSession(model, options).run(None, {"hidden": x})[0]
    ort_s = time.perf_counter() - start
    ort_mean = float(np.abs(ort_out - reference).mean())
    print(f"{'ONNX Runtime':14} max |diff| {np.abs(ort_out - reference).max():.2e}"
          f" mean {ort_mean:.2e}; load and run {ort_s:.1f} s", flush=True)

    failed = False
    for mesh in [None] + args.mesh:
        label = mesh or "1 rank"
        bundle = os.path.join(args.work, "bundle-" + (mesh or "1").replace("=", ""))
        command = [os.path.join(args.bin, "cleave-compile"), model, "--quiet",
                   "-o", bundle]
        if mesh:
            command += [f"--mesh={mesh}"]
            if "tp" in mesh:
                command += ["--shard-preset=megatron"]
        out_dir = os.path.join(bundle, "out")
        run = [os.path.join(args.bin, "cleave-run"), bundle,
               "--output-dir", out_dir, f"--input=hidden={inputs}"]
        seconds = []
        for step in (command, run):
            start = time.perf_counter()
            if subprocess.run(step).returncode != 0:
                # The tool said why on stderr; the other meshes still run.
                print(f"{label:14} {os.path.basename(step[0])} failed: NO",
                      flush=True)
                break
            seconds.append(time.perf_counter() - start)
        if len(seconds) < 2:
            failed = True
            continue
        compile_s, run_s = seconds
        out = np.load(os.path.join(out_dir, "out.npy"))
        diff = np.abs(out - reference)
        ratio = float(diff.mean()) / ort_mean
        ok = ratio <= RATIO
        failed |= not ok
        print(f"{label:14} max |diff| {diff.max():.2e} mean {diff.mean():.2e}"
              f" ({ratio:.2f}x ONNX Runtime's): {'yes' if ok else 'NO'}; "
              f"compile {compile_s:.1f} s, run {run_s:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
