#!/usr/bin/env python3
"""Predicted against measured time of every feasible plan, and where the
automatic choice ranks.

For each model (the 12-layer GPT-2-small-shaped stack, bench/gpt2_stack.py,
and a LLaMA-style decoder, bench/llama_stack.py; batch 4, sequence 128,
float32) and each device count (1, 2, 4 by default), `cleave-compile --mesh
auto --devices N --machine MACHINE` ranks the layouts; every feasible one is
then compiled (--plan-index K) and run with cleave-run --bench, its outputs
checked against ONNX Runtime's. Rounds alternate the plans so that a shared
machine's noise falls on all of them alike; each plan's figure is the median
over rounds of its p50.

Prints per plan the predicted and measured time and the error, and per
model and device count: the mean absolute error, Spearman's rank
correlation of predicted against measured, and the measured rank of the
plan the search chose (and how far its time is from the best measured).

MACHINE is a machine file; without --machine, cleave-calibrate measures one
first (with the device counts as its rank counts).

Usage: bench_plans.py [--devices 1,2,4] [--models gpt2,llama] [--runs N]
                      [--rounds R] [--machine FILE] [--work DIR] [--bin DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import make_stack  # noqa: E402
from llama_stack import make_llama  # noqa: E402

BATCH, SEQ = 4, 128


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"bench_plans: {' '.join(cmd[:4])} ... failed:\n"
                 f"{result.stderr[-3000:]}")
    return result.stdout + result.stderr


def make_model(name, work):
    path = os.path.join(work, f"{name}.onnx")
    rng = np.random.default_rng(0)
    if name == "gpt2":
        if not os.path.exists(path):
            make_stack(path, layers=12, batch=BATCH, seq=SEQ)
        inputs = {"hidden": rng.standard_normal((BATCH, SEQ, 768)).astype(np.float32)}
    else:
        if not os.path.exists(path):
            make_llama(path, layers=8, batch=BATCH, seq=SEQ)
        inputs = {"input_ids": rng.integers(0, 8000, (BATCH, SEQ)).astype(np.int64)}
    args = []
    for key, value in inputs.items():
        file = os.path.join(work, f"{name}-{key}.npy")
        np.save(file, value)
        args += ["--input", f"{key}={file}"]
    import onnxruntime as ort
    session = ort.InferenceSession(path)
    reference = session.run(None, inputs)[0]
    return path, args, (session.get_outputs()[0].name, reference)


def spearman(a, b):
    if len(a) < 2:
        return float("nan")
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="1,2,4")
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--machine")
    parser.add_argument("--work", default=tempfile.mkdtemp(prefix="cleave-plans-"))
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    devices = [int(d) for d in args.devices.split(",")]
    os.makedirs(args.work, exist_ok=True)
    compile_tool = os.path.join(args.bin, "cleave-compile")
    run_tool = os.path.join(args.bin, "cleave-run")
    machine = args.machine
    if not machine:
        machine = os.path.join(args.work, "machine.json")
        print(f"calibrating this machine (ranks {args.devices}) ...", flush=True)
        run([os.path.join(args.bin, "cleave-calibrate"), "-o", machine,
             "--ranks", args.devices])

    summary, all_errors = [], []
    for model in args.models.split(","):
        path, inputs, (output, reference) = make_model(model, args.work)
        for n in devices:
            folder = os.path.join(args.work, f"{model}-{n}")
            report = folder + "-search.json"
            run([compile_tool, path, "--mesh", "auto", "--devices", str(n),
                 "--machine", machine, "-o", folder + "-best", "--quiet",
                 "--report", report])
            with open(report) as f:
                search = json.load(f)["search"]
            plans = search["ranked"]
            print(f"\n{model}, {n} device(s): {len(plans)} feasible layouts, "
                  f"{len(search['rejected'])} rejected, search "
                  f"{search['search_seconds']:.2f} s", flush=True)
            bundles = []
            for k, plan in enumerate(plans, 1):
                bundle = f"{folder}-plan{k}"
                run([compile_tool, path, "--mesh", "auto", "--devices", str(n),
                     "--machine", machine, "-o", bundle, "--quiet",
                     "--plan-index", str(k)])
                bundles.append(bundle)
            measured = [[] for _ in plans]
            for _ in range(args.rounds):
                for k, bundle in enumerate(bundles):
                    out = os.path.join(args.work, f"out-{model}")
                    text = run([run_tool, bundle, *inputs, "--bench",
                                str(args.runs), "--output-dir", out])
                    p50 = float(re.search(r"p50 ([0-9.]+) ms", text).group(1))
                    measured[k].append(p50 / 1e3)
                    got = np.load(os.path.join(out, output + ".npy"))
                    error = float(np.abs(got - reference).max())
                    if error > 1e-3 * max(1.0, float(np.abs(reference).max())):
                        sys.exit(f"bench_plans: {model} plan {k} ({plan['mesh']}) "
                                 f"differs from ONNX Runtime by {error}")
            times = [float(np.median(m)) for m in measured]
            predicted = [p["predicted_seconds"] for p in plans]
            print(f"  {'rank':>4}  {'layout':<26} {'predicted':>10} {'measured':>10}"
                  f" {'error':>7}")
            errors = []
            for k, plan in enumerate(plans):
                error = (predicted[k] - times[k]) / times[k]
                errors.append(abs(error))
                layout = (f"dp={plan['dp']} tp={plan['tp']} pp={plan['pp']} "
                          f"mb={plan['microbatches']}")
                print(f"  {k + 1:>4}  {layout:<26} {predicted[k] * 1e3:>8.1f}ms "
                      f"{times[k] * 1e3:>8.1f}ms {100 * error:>+6.1f}%")
            best = int(np.argmin(times))
            chosen_rank = sorted(times).index(times[0]) + 1
            gap = times[0] / times[best] - 1
            rho = spearman(predicted, times)
            mae = float(np.mean(errors))
            print(f"  mean absolute error {100 * mae:.1f}%, rank correlation "
                  f"{rho:.2f}; the chosen plan is measured #{chosen_rank} of "
                  f"{len(plans)}, {100 * gap:.1f}% slower than the best measured",
                  flush=True)
            summary.append((model, n, len(plans), mae, rho, chosen_rank, gap))
            all_errors += errors
            # Bundles hold a copy of the weights each: free the disk.
            for bundle in bundles + [folder + "-best"]:
                shutil.rmtree(bundle, ignore_errors=True)
    print("\nsummary")
    print(f"  {'model':<6} {'devices':>7} {'plans':>5} {'MAE':>6} {'rho':>5} "
          f"{'chosen':>6} {'gap':>6}")
    for model, n, count, mae, rho, rank, gap in summary:
        print(f"  {model:<6} {n:>7} {count:>5} {100 * mae:>5.1f}% {rho:>5.2f} "
              f"{'#' + str(rank):>6} {100 * gap:>5.1f}%")
    print(f"  every plan ({len(all_errors)}): mean absolute error "
          f"{100 * float(np.mean(all_errors)):.1f}%")


if __name__ == "__main__":
    main()
