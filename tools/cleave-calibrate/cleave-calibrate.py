#!/usr/bin/env python3
"""cleave-calibrate: measures this machine for the cost model and writes a
machine file (JSON) that cleave-compile --machine reads.

Usage:
  cleave-calibrate -o machine.json [--ranks 1,2,4] [--precisions f32,bf16]
                   [--runs N] [--work DIR] [--name NAME]

Everything is measured through programs Cleave compiles and cleave-run runs,
timed by their own --profile, so the figures are those of the calls a
compiled model makes (the packed GEMM kernels, the compiled loops, MPI
through the runtime), with as many ranks running at once as a plan will
have, each with its share of the cores:

  - GEMM FLOP/s by shape (M rows of activations times a K x N weight, and
    attention's batched GEMMs of two activations) and operand precision: a
    program of independent MatMuls, its batch split over R ranks (dp=R),
    so every rank runs the same GEMMs at once;
  - the compiled loops' memory bandwidth: one fused elementwise loop over
    16 MiB vectors that every rank computes ('the rest' of --profile's
    time);
  - all_reduce and all_gather (row- and column-split MatMuls) among each
    group size g dividing R (dp=R/g, tp=g), and send/recv (two pipeline
    stages, dp=R/2) latency and bandwidth, a least-squares fit of seconds =
    latency + bytes / bandwidth over sizes from 4 KiB to 8 MiB, measured
    with all R ranks running;
  - where R ranks outnumber the cores, a time-scale: a whole program (a
    2-layer GPT-2-small-shaped stack, dp=R) measured against its
    prediction from the figures above (ranks taking turns on cores run
    slower than per-call timings show); 1 where each rank has a core.

It writes {"name", "peak", "mem-bw", "memory", "memory-shared", "gemm":
[{bits, m, n, k, batched, flops, ranks}], "links": [{kind, ranks, job,
latency, bandwidth}], "shared": [{ranks, peak, mem-bw, time-scale}]};
docs/cost-model.md describes how the cost model uses each.
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

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit(f"cleave-calibrate: needs the onnx package ({e})")

BIN = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, "@CLEAVE_BENCH_DIR@")
# Weight GEMMs: (K, N) for each M; attention's: heads of S x S x 64.
WEIGHT_KN = [(512, 512), (1024, 1024), (768, 3072), (3072, 768),
             (2048, 2048)]
ROWS = [16, 128, 512, 2048]
HEADS, HEAD = 12, 64
SEQS = [128, 512]
LOOP_FLOATS = 4 << 20
LINK_ROWS = [1, 8, 64, 512, 2048]
LINK_COLS = 1024


def say(text):
    print(f"cleave-calibrate: {text}", file=sys.stderr, flush=True)


def tensor_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save_model(nodes, inputs, outputs, inits, path):
    graph = helper.make_graph(nodes, "calibrate", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def gemm_model(path, ranks):
    """Independent GEMMs and an elementwise chain, batch split over ranks."""
    rng = np.random.default_rng(0)
    nodes, inputs, outputs, inits, labels = [], [], [], [], []
    for m in ROWS:
        for k, n in WEIGHT_KN:
            tag = f"{m}x{n}x{k}"
            inputs.append(tensor_input(f"x_{tag}", [ranks * m, k]))
            inits.append(numpy_helper.from_array(
                (rng.standard_normal((k, n)) * 0.02).astype(np.float32),
                f"w_{tag}"))
            nodes.append(helper.make_node("MatMul", [f"x_{tag}", f"w_{tag}"],
                                          [f"y_{tag}"], name=f"mm_{tag}"))
            outputs.append(tensor_input(f"y_{tag}", [ranks * m, n]))
            labels.append(("weights", m, n, k, 1))
    for s in SEQS:
        q, kt = f"q_{s}", f"kt_{s}"
        inputs += [tensor_input(q, [ranks * HEADS, s, HEAD]),
                   tensor_input(kt, [ranks * HEADS, HEAD, s])]
        nodes.append(helper.make_node("MatMul", [q, kt], [f"s_{s}"],
                                      name=f"scores_{s}"))
        outputs.append(tensor_input(f"s_{s}", [ranks * HEADS, s, s]))
        labels.append(("batched", s, s, HEAD, HEADS))
    save_model(nodes, inputs, outputs, inits, path)
    hints = "shardings:\n" + "".join(
        f"  \"{i.name}\": [dp{', null' * (len(i.type.tensor_type.shape.dim) - 1)}]\n"
        for i in inputs)
    return hints, labels


def loop_model(path):
    """One fused elementwise loop: three 16 MiB vectors read, one written.
    Every rank computes all of it (nothing is split): the program's only
    untimed work is the loop."""
    inputs = [tensor_input(v, [LOOP_FLOATS]) for v in "abc"]
    nodes = [helper.make_node("Add", ["a", "b"], ["ab"], name="loop_add"),
             helper.make_node("Mul", ["ab", "c"], ["loop"], name="loop_mul")]
    save_model(nodes, inputs, [tensor_input("loop", [LOOP_FLOATS])], [], path)


def link_model(path, ranks):
    """Row-split GEMMs (an all_reduce each) and column-split ones (their
    outputs gathered): tp=ranks."""
    rng = np.random.default_rng(1)
    nodes, inputs, outputs, inits = [], [], [], []
    hints = ["shardings:"]
    k = 64 * ranks
    for m in LINK_ROWS:
        inputs.append(tensor_input(f"x{m}", [m, k]))
        for kind, split in (("r", "[tp, null]"), ("c", "[null, tp]")):
            w = f"w{kind}{m}"
            inits.append(numpy_helper.from_array(
                (rng.standard_normal((k, LINK_COLS)) * 0.02).astype(np.float32),
                w))
            nodes.append(helper.make_node("MatMul", [f"x{m}", w], [f"y{kind}{m}"],
                                          name=f"mm{kind}{m}"))
            outputs.append(tensor_input(f"y{kind}{m}", [m, LINK_COLS]))
            hints.append(f"  {w}: {split}")
    save_model(nodes, inputs, outputs, inits, path)
    return "\n".join(hints) + "\n"


def pipe_model(path):
    """Two stages: every first-stage result crosses the cut."""
    rng = np.random.default_rng(2)
    nodes, inputs, outputs, inits, second = [], [], [], [], []
    for m in LINK_ROWS:
        inputs.append(tensor_input(f"x{m}", [m, 64]))
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((64, LINK_COLS)) * 0.02).astype(np.float32),
            f"a{m}"))
        nodes.append(helper.make_node("MatMul", [f"x{m}", f"a{m}"], [f"h{m}"],
                                      name=f"first{m}"))
        second.append(helper.make_node("Neg", [f"h{m}"], [f"y{m}"],
                                       name=f"second{m}"))
        outputs.append(tensor_input(f"y{m}", [m, LINK_COLS]))
    save_model(nodes + second, inputs, outputs, inits, path)
    return f"stages:\n  - \"second{LINK_ROWS[0]}\"\n"


def random_inputs(model_path, folder):
    model = onnx.load(model_path, load_external_data=False)
    rng = np.random.default_rng(3)
    args = []
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        path = os.path.join(folder, value.name + ".npy")
        np.save(path, rng.standard_normal(shape).astype(np.float32))
        args += ["--input", f"{value.name}={path}"]
    return args


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"cleave-calibrate: {' '.join(cmd[:3])} ... failed:\n"
                 f"{result.stderr[-3000:]}")
    return result.stdout + result.stderr


PROFILE_LINE = re.compile(
    r"^\s*([\d.]+)\s+[\d.]+%\s+(\d+|-)\s+(.*?)\s*$")


def profile(bundle, inputs, runs, out):
    """--profile's lines of rank 0: {label: (ms a run, calls a run)}."""
    text = run([os.path.join(BIN, "cleave-run"), bundle, *inputs,
                "--bench", str(runs), "--profile", "--output-dir", out])
    table = {}
    started = False
    for line in text.splitlines():
        if line.startswith("profile of "):
            started = True
            continue
        match = PROFILE_LINE.match(line) if started else None
        if match:
            calls = 0 if match.group(2) == "-" else int(match.group(2))
            table[match.group(3)] = (float(match.group(1)), calls)
    if not table:
        sys.exit("cleave-calibrate: no --profile table in cleave-run's "
                 f"output:\n{text[-2000:]}")
    return table


def compile_bundle(model, bundle, flags):
    run([os.path.join(BIN, "cleave-compile"), model, "-o", bundle, "--quiet",
         *flags])


SIZE = re.compile(r"([\d.]+) (B|KiB|MiB)")


def label_bytes(label):
    match = SIZE.search(label)
    scale = {"B": 1, "KiB": 1024, "MiB": 1024 * 1024}[match.group(2)]
    return float(match.group(1)) * scale


def fit(points):
    """Least squares seconds = latency + bytes / bandwidth, latency >= 0."""
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    slope, latency = np.polyfit(x, y, 1) if len(points) > 1 else (y[0] / x[0], 0)
    if latency < 0 or slope <= 0:
        latency = 0.0
        slope = float((x @ y) / (x @ x))
    return max(float(latency), 0.0), 1.0 / max(float(slope), 1e-30)


def link_fits(table, ranks, kinds, job):
    """Fits of each kind among `ranks` ranks, measured in a job of `job`."""
    fits = []
    for kind in kinds:
        points = [(label_bytes(label), ms / 1e3 / calls)
                  for label, (ms, calls) in table.items()
                  if label.startswith(kind + " ") and calls > 0]
        if len(points) >= 2:
            latency, bandwidth = fit(points)
            fits.append({"kind": "send_recv" if kind == "send" else kind,
                         "ranks": ranks, "job": job, "latency": latency,
                         "bandwidth": bandwidth, "points": len(points)})
    return fits


def calibrate_ranks(ranks, precisions, runs, work):
    entries, links, shared = [], [], None
    model = os.path.join(work, f"gemm{ranks}.onnx")
    hints, labels = gemm_model(model, ranks)
    hints_path = os.path.join(work, f"gemm{ranks}.yaml")
    with open(hints_path, "w") as f:
        f.write(hints)
    inputs = random_inputs(model, work)
    for precision in precisions:
        bundle = os.path.join(work, f"gemm{ranks}-{precision}")
        flags = ["--precision", precision]
        if ranks > 1:
            flags += ["--mesh", f"dp={ranks}", "--shard-hints", hints_path]
        say(f"{ranks} rank(s), {precision} GEMMs and loops: compiling")
        compile_bundle(model, bundle, flags)
        table = profile(bundle, inputs, runs, os.path.join(work, "out"))
        bits = 32 if precision == "f32" else 16
        for kind, m, n, k, batch in labels:
            label = next((l for l in table
                          if l.startswith("GEMM ") and f" {m}x{n}x{k}" in l
                          and ("GEMMs)" in l) == (kind == "batched")), None)
            if label is None:
                sys.exit(f"cleave-calibrate: the {precision} program's "
                         f"profile has no line for its {kind} GEMM "
                         f"{m}x{n}x{k}: the figures would be incomplete")
            ms, calls = table[label]
            flops = 2.0 * m * n * k * batch * calls
            entries.append({"bits": bits, "m": m * batch, "n": n, "k": k,
                            "batched": kind == "batched",
                            "flops": flops / (ms / 1e3), "ranks": ranks})
        if precision == "f32" and ranks > 1:
            links += link_fits(table, ranks, ["all_gather"], ranks)
    model = os.path.join(work, "loops.onnx")
    loop_model(model)
    bundle = os.path.join(work, f"loops{ranks}")
    say(f"{ranks} rank(s), compiled loops: compiling")
    compile_bundle(model, bundle,
                   ["--mesh", f"dp={ranks}"] if ranks > 1 else [])
    table = profile(bundle, random_inputs(model, work), runs,
                    os.path.join(work, "out"))
    rest = next((ms for label, (ms, _) in table.items()
                 if label.startswith("the rest")), None)
    if not rest:
        sys.exit("cleave-calibrate: the loop program's profile has no "
                 "'the rest' line")
    # The rate of the largest float32 GEMM: small ones measured while other
    # ranks wait can run faster than a rank's share of the cores.
    peak = max((e for e in entries if e["bits"] == 32 and not e["batched"]),
               key=lambda e: e["m"] * e["n"] * e["k"])["flops"]
    shared = {"ranks": ranks, "peak": peak,
              "mem-bw": 4 * 4 * LOOP_FLOATS / (rest / 1e3)}
    # Collectives among each group size the job can have (a tp=2 group in a
    # 4-rank job waits on cores the other group uses), and transfers
    # between two stages, with every rank of the job running.
    for group in [g for g in range(2, ranks + 1) if ranks % g == 0]:
        model = os.path.join(work, f"link{group}.onnx")
        hints_path = os.path.join(work, f"link{group}.yaml")
        with open(hints_path, "w") as f:
            f.write(link_model(model, group))
        mesh = f"tp={group}" if group == ranks else f"dp={ranks // group},tp={group}"
        bundle = os.path.join(work, f"link{ranks}-{group}")
        say(f"{ranks} ranks, all_reduce and all_gather among {group}: compiling")
        compile_bundle(model, bundle, ["--mesh", mesh, "--shard-hints",
                                       hints_path])
        table = profile(bundle, random_inputs(model, work), runs,
                        os.path.join(work, "out"))
        measured = link_fits(table, group, ["all_reduce", "all_gather"], ranks)
        # These all_gathers replace the GEMM program's (smaller sizes, no
        # GEMM beside them).
        kinds = {(f["kind"], f["ranks"]) for f in measured}
        links = [f for f in links if (f["kind"], f["ranks"]) not in kinds]
        links += measured
    if ranks % 2 == 0:
        model = os.path.join(work, "pipe.onnx")
        hints_path = os.path.join(work, "pipe.yaml")
        with open(hints_path, "w") as f:
            f.write(pipe_model(model))
        bundle = os.path.join(work, f"pipe{ranks}")
        mesh = "pp=2" if ranks == 2 else f"dp={ranks // 2},pp=2"
        say(f"{ranks} ranks, send/recv between pipeline stages: compiling")
        compile_bundle(model, bundle, ["--mesh", mesh, "--shard-hints",
                                       hints_path])
        table = profile(bundle, random_inputs(model, work), runs,
                        os.path.join(work, "out"))
        links += link_fits(table, 2, ["send"], ranks)
    return entries, links, shared


def fit_time_scale(machine_path, ranks, runs, work):
    """Measured over predicted time of one whole program on `ranks` ranks:
    a 2-layer GPT-2-small-shaped stack (batch 2 a rank, sequence 64), data
    parallel so that only compute differs from what the micro-measurements
    price. Absorbs what they miss: GEMMs timed with every rank in the same
    GEMM at once run slower than in a program, and fused loops."""
    from gpt2_stack import make_stack
    model = os.path.join(work, f"stack{ranks}.onnx")
    make_stack(model, layers=2, batch=2 * ranks, seq=64)
    report = os.path.join(work, f"stack{ranks}.json")
    bundle = os.path.join(work, f"stack{ranks}")
    compile_bundle(model, bundle, ["--mesh", "auto", "--devices", str(ranks),
                                   "--machine", machine_path, "--report",
                                   report])
    with open(report) as f:
        ranked = json.load(f)["search"]["ranked"]
    index, plan = next((k, p) for k, p in enumerate(ranked, 1)
                       if p["dp"] == ranks)
    compile_bundle(model, bundle, ["--mesh", "auto", "--devices", str(ranks),
                                   "--machine", machine_path, "--plan-index",
                                   str(index)])
    inputs = random_inputs(model, work)
    # The median of three rounds' p50s: one round on a shared host is off
    # by a tenth now and then.
    rounds = []
    for _ in range(3):
        text = run([os.path.join(BIN, "cleave-run"), bundle, *inputs,
                    "--bench", str(max(runs, 10)), "--output-dir",
                    os.path.join(work, "out")])
        rounds.append(float(re.search(r"p50 ([0-9.]+) ms", text).group(1)))
    measured = float(np.median(rounds)) / 1e3
    return measured / plan["predicted_seconds"]


def main():
    parser = argparse.ArgumentParser(
        prog="cleave-calibrate",
        description="Measures this machine for Cleave's cost model "
        "(GEMM rates, loop bandwidth, MPI collectives) and writes a "
        "machine file for cleave-compile --machine.")
    parser.add_argument("-o", "--output", required=True,
                        help="the machine file to write (JSON)")
    parser.add_argument("--ranks", default="1,2",
                        help="rank counts to measure with, comma-separated "
                        "(default 1,2; plans for more ranks use the "
                        "figures of the largest count measured)")
    parser.add_argument("--precisions", default="f32",
                        help="GEMM operand precisions: f32, bf16, f16 "
                        "(default f32)")
    parser.add_argument("--runs", type=int, default=5,
                        help="timed runs of each program (default 5)")
    parser.add_argument("--name", default=None,
                        help="what the figures describe (default: this "
                        "host's name and CPU)")
    parser.add_argument("--work", default=None,
                        help="keep the programs in this folder")
    args = parser.parse_args()
    try:
        ranks = sorted({int(r) for r in args.ranks.split(",")})
    except ValueError:
        parser.error(f"--ranks must be counts, e.g. 1,2,4, not '{args.ranks}'")
    if not ranks or ranks[0] < 1:
        parser.error("--ranks must be counts of 1 or more")
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in ("f32", "bf16", "f16"):
            parser.error(f"unknown precision '{p}' (f32, bf16, f16)")
    if "f32" not in precisions:
        precisions.insert(0, "f32")
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    work = args.work or tempfile.mkdtemp(prefix="cleave-calibrate-")
    os.makedirs(work, exist_ok=True)
    try:
        gemm, links, shared = [], [], []
        for r in ranks:
            entries, fits, figures = calibrate_ranks(r, precisions, args.runs,
                                                     work)
            gemm += entries
            links += fits
            shared.append(figures)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    with open("/proc/meminfo") as f:
        memory = int(re.search(r"MemTotal:\s+(\d+) kB", f.read()).group(1))
    cpu = "cpu"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            found = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = found.group(1).strip() if found else cpu
    machine = {
        "name": args.name or f"{os.uname().nodename} ({cpu}, "
                             f"{os.cpu_count()} cores), calibrated",
        "peak": shared[0]["peak"],
        "mem-bw": shared[0]["mem-bw"],
        "memory": memory * 1024,
        "memory-shared": True,
        "gemm": gemm,
        "links": links,
        "shared": shared,
    }
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(machine, f, indent=1)
        f.write("\n")
    work = args.work or tempfile.mkdtemp(prefix="cleave-calibrate-")
    try:
        for figures in shared:
            # Ranks with a core each run as the micro-measurements price
            # them; ranks taking turns on cores run slower than those show.
            if figures["ranks"] <= (os.cpu_count() or 1):
                figures["time-scale"] = 1.0
                continue
            say(f"{figures['ranks']} rank(s) on {os.cpu_count()} cores, a "
                "whole program against its prediction")
            figures["time-scale"] = fit_time_scale(tmp, figures["ranks"],
                                                   args.runs, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    with open(tmp, "w") as f:
        json.dump(machine, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.output)
    for figures in shared:
        say(f"{figures['ranks']} rank(s): largest f32 GEMM "
            f"{figures['peak'] / 1e9:.1f} GFLOP/s a rank, loops "
            f"{figures['mem-bw'] / 1e9:.2f} GB/s a rank" +
            (f"; a program took {figures['time-scale']:.2f}x the time "
             "predicted from them" if figures["ranks"] > (os.cpu_count() or 1)
             else "; a core each"))
    for f in links:
        say(f"{f['kind']} among {f['ranks']} of {f['job']} ranks: "
            f"{f['latency'] * 1e6:.1f} us + bytes / "
            f"{f['bandwidth'] / 1e9:.2f} GB/s")
    say(f"wrote {args.output}")


if __name__ == "__main__":
    main()
