#!/usr/bin/env python3
"""Compiles every layout a plan search ranks and checks each against ONNX
Runtime: the search may only offer plans the compiler builds correctly.

Usage: plan_layouts.py MODEL.onnx --input-shape NAME=DxD --devices N
                       --bin DIR --work DIR [--int-high H] [cleave-compile flags]

Prints one line per layout ('layout K (MESH, mb=M): max |diff| D') and
'every layout matches ONNX Runtime: yes' at the end, or exits 1 naming the
first layout that differs.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--input-shape", required=True)
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--int-high", type=int, default=2)
    args, extra = parser.parse_known_args()
    os.makedirs(args.work, exist_ok=True)
    name, dims = args.input_shape.split("=")
    shape = [int(d) for d in dims.split("x")]
    session = ort.InferenceSession(args.model)
    rng = np.random.default_rng(0)
    feeds = {}
    for value in session.get_inputs():
        if "int" in value.type:
            feeds[value.name] = rng.integers(0, args.int_high, shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    expected = dict(zip([o.name for o in session.get_outputs()],
                        session.run(None, feeds)))
    inputs = []
    for key, value in feeds.items():
        path = os.path.join(args.work, key + ".npy")
        np.save(path, value)
        inputs += ["--input", f"{key}={path}"]
    compile_cmd = [os.path.join(args.bin, "cleave-compile"), args.model,
                   "--input-shape", args.input_shape, "--mesh", "auto",
                   "--devices", str(args.devices), "--quiet", *extra]
    report = os.path.join(args.work, "search.json")
    subprocess.run(compile_cmd + ["-o", os.path.join(args.work, "best"),
                                  "--report", report], check=True)
    with open(report) as f:
        ranked = json.load(f)["search"]["ranked"]
    for k, plan in enumerate(ranked, 1):
        bundle = os.path.join(args.work, f"plan{k}")
        out = os.path.join(args.work, f"out{k}")
        subprocess.run(compile_cmd + ["-o", bundle, "--plan-index", str(k)],
                       check=True)
        subprocess.run([os.path.join(args.bin, "cleave-run"), bundle, *inputs,
                        "--output-dir", out], check=True, capture_output=True)
        worst = 0.0
        for key, want in expected.items():
            got = np.load(os.path.join(out, key + ".npy"))
            worst = max(worst, float(np.abs(got - want).max()))
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                print(f"layout {k} ({plan['mesh'] or 'one device'}, "
                      f"mb={plan['microbatches']}): output {key} differs from "
                      f"ONNX Runtime by {worst}")
                sys.exit(1)
        print(f"layout {k} ({plan['mesh'] or 'one device'}, "
              f"mb={plan['microbatches']}): max |diff| {worst:.2e}")
    print(f"every layout matches ONNX Runtime: yes ({len(ranked)} layouts)")


if __name__ == "__main__":
    main()
