#!/usr/bin/env python3
"""Compiles an ONNX model with Cleave, runs it, and checks it against ONNX Runtime.

Inputs are random with a fixed seed: floats from a normal distribution, integer
inputs (token ids) uniform in [0, --int-high). Every output must satisfy
|cleave - ort| <= atol + rtol * |ort|. With --bench N both run N times at the
same thread count and the latency ratio Cleave / ONNX Runtime is printed;
with --bench-rounds R that is done R times, alternating which goes first, and
the medians are printed (the ratio's over the rounds' ratios).

With --reference-precision bf16|f16 (for programs compiled with --precision)
the reference is ONNX Runtime on a copy of the model in which every float input
of MatMul, Gemm and Conv is first rounded to that type (Cast to it and back to
float32): the arithmetic of Cleave's 16-bit GEMMs, products of rounded operands
summed in float32. Attention nodes are first expanded into the operator's ONNX
definition, whose two GEMMs are MatMuls. Element-wise tolerances do not fit it:
an activation that differs from ONNX Runtime's by one float32 ulp can round to
the neighbouring 16-bit value, and that difference spreads. So each output must
instead be (1) closer to that reference, in mean |diff|, than half as far as
the plain float32 reference is (a program that did not narrow its GEMMs fails
this), and (2) within the type's rounding unit (2^-8 for bf16, 2^-11 for f16)
of the output's largest magnitude everywhere.

With --compile-arg (repeatable; e.g. --compile-arg=--mesh=tp=2) the model is
compiled with those options, typically a mesh; --compare-single-rank then also
compiles it without them (keeping only --precision, which changes the
arithmetic: a GPU or multi-rank program is compared with the CPU single-rank
program of the same precision) and checks that the two programs agree, and the
plan's collective and weight lines are printed.

Shapes come from --input-shape and from --dim NAME=N, which sizes a named
input dimension wherever it appears (passed to cleave-compile as well).
--input-values NAME=V[,V...] gives an input its values instead (positions
such as a static cache's `cache_position`, masks): one value fills the input,
otherwise there is one per element, in row-major order.

Usage: check_model.py MODEL.onnx --input-shape NAME=DxD ... [--dim NAME=N ...]
                      [--int-high N] [--input-values NAME=V,V,...]
                      [--rtol R] [--atol A] [--bench N] [--bench-rounds R]
                      [--threads T] [--compile-arg ARG]... [--compare-single-rank]
                      [--reference-precision bf16|f16] [--bin DIR] [--work DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numerics  # noqa: E402

NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
            onnx.TensorProto.INT32: np.int32, onnx.TensorProto.FLOAT16: np.float16,
            onnx.TensorProto.BOOL: np.bool_}


def output_file_name(name: str) -> str:
    """The .npy file the runtime writes for output `name` (see cleave-run --help):
    every byte of the UTF-8 name outside [A-Za-z0-9._-] becomes '_'."""
    return re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()).decode() + ".npy"


# A dimension name as cleave-compile reads one (lib/Import/SymbolicDims.cpp).
DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def dim_size(expr, sizes):
    """The size a dimension named `expr` ('past_sequence_length + 1') has."""
    return eval(DIM_NAME.sub(lambda m: str(sizes[m.group(0)]), expr),
                {"__builtins__": {}})


def named_sizes(model, shapes, dims):
    """Sizes of named input dimensions, as cleave-compile sizes them: --dim's,
    then those an --input-shape sets where a dimension is named by a name
    alone."""
    sizes = dict(dims)
    for graph_input in model.graph.input:
        shape = shapes.get(graph_input.name)
        declared = graph_input.type.tensor_type.shape.dim
        if shape is None or len(shape) != len(declared):
            continue
        for size, dim in zip(shape, declared):
            name = dim.dim_param.strip()
            if DIM_NAME.fullmatch(name) and name not in sizes:
                sizes[name] = size
    return sizes


def make_inputs(model, shapes, int_high, dims=None, seed=0, values=None):
    """Random inputs, but for those `values` names (name: list of numbers,
    one to fill the input or one per element)."""
    rng = np.random.default_rng(seed)
    values = values or {}
    initializers = {i.name for i in model.graph.initializer}
    sizes = named_sizes(model, shapes, dims or {})
    inputs = {}
    for graph_input in model.graph.input:
        if graph_input.name in initializers:
            continue
        dtype = NP_TYPES[graph_input.type.tensor_type.elem_type]
        shape = shapes.get(graph_input.name)
        if shape is None:
            # Named dimensions: names and small expressions of them.
            shape = [dim_size(d.dim_param, sizes) if d.dim_param else d.dim_value
                     for d in graph_input.type.tensor_type.shape.dim]
        if graph_input.name in values:
            given = np.array(values[graph_input.name], dtype=dtype)
            if given.size != 1 and given.size != int(np.prod(shape)):
                raise SystemExit(f"--input-values {graph_input.name}: {given.size} "
                                 f"values for an input of shape {list(shape)}")
            inputs[graph_input.name] = (np.full(shape, given[0], dtype) if given.size == 1
                                        else given.reshape(shape))
        elif np.issubdtype(dtype, np.integer):
            inputs[graph_input.name] = rng.integers(0, int_high, shape).astype(dtype)
        elif dtype == np.bool_:
            inputs[graph_input.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            inputs[graph_input.name] = rng.standard_normal(shape).astype(dtype)
    return inputs


def expand_attention(model):
    """A copy of `model` with every ONNX Attention node replaced by the
    operator's own definition as a function of plain ops (ONNX's schema), so
    that its two GEMMs are MatMul nodes like any other."""
    expanded = onnx.ModelProto()
    expanded.CopyFrom(model)
    if not any(node.op_type == "Attention" for node in model.graph.node):
        return expanded
    from onnx.backend.test.case.node import function_testcase_helper
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in list(inferred.graph.value_info) +
             list(inferred.graph.input) + list(inferred.graph.output)}
    for init in model.graph.initializer:
        types[init.name] = onnx.helper.make_tensor_type_proto(
            init.data_type, list(init.dims))
    nodes = []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "Attention":
            nodes.append(node)
            continue
        # Optional inputs left out are empty names; the function sees none.
        unknown = [name for name in node.input if name and name not in types]
        if unknown:
            sys.exit(f"check_model: cannot expand Attention node '{node.name}' "
                     f"for the rounded reference: no type inferred for "
                     f"{', '.join(unknown)}")
        input_types = [types[name] if name else onnx.TypeProto()
                       for name in node.input]
        cases, _ = function_testcase_helper(node, input_types, f"ref{index}",
                                            model.opset_import)
        nodes.extend(cases[0][0])
    del expanded.graph.node[:]
    expanded.graph.node.extend(nodes)
    return expanded


def round_gemm_operands(model, precision):
    """A copy of `model` whose MatMul, Gemm and Conv nodes read their float
    inputs (data and weight; not a bias) rounded to `precision` ('bf16' or
    'f16') and widened back to float32. Cleave computes a Conv as a GEMM of
    the input's patches by the weight, whose operands --precision rounds.
    Attention nodes are expanded first: Cleave rounds their GEMMs' operands
    too."""
    to = {"bf16": onnx.TensorProto.BFLOAT16, "f16": onnx.TensorProto.FLOAT16}[precision]
    rounded = expand_attention(model)
    graph = rounded.graph
    nodes = []
    done = set()
    for node in graph.node:
        if node.op_type in ("MatMul", "Gemm", "Conv"):
            # Gemm's and Conv's bias (input 2) is added in float32, as
            # Cleave adds it.
            for i in range(min(2, len(node.input))):
                name = node.input[i]
                narrow, wide = f"{name}__{precision}", f"{name}__{precision}_f32"
                if name not in done:
                    done.add(name)
                    nodes.append(onnx.helper.make_node("Cast", [name], [narrow], to=to))
                    nodes.append(onnx.helper.make_node("Cast", [narrow], [wide],
                                                       to=onnx.TensorProto.FLOAT))
                node.input[i] = wide
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return rounded


def check_rounded(name, model, work, rounded, float32, precision, compile_s):
    """Checks the outputs against the reference with rounded GEMM operands
    (numerics.rounded_gemms); returns the exit status."""
    ok = True
    for output, reference, wide in zip(model.graph.output, rounded, float32):
        actual = np.load(os.path.join(work, "out", output_file_name(output.name)))
        good, message = numerics.rounded_gemms(actual, reference, wide, precision)
        ok &= good
        print(f"output '{output.name}': {message}")
    print(f"{name}: outputs match ONNX Runtime with {precision} GEMM operands: "
          f"{'yes' if ok else 'NO'}; compile {compile_s:.2f} s")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--input-shape", action="append", default=[])
    parser.add_argument("--dim", action="append", default=[],
                        help="size of a named input dimension, NAME=N")
    parser.add_argument("--int-high", type=int, default=2)
    parser.add_argument("--input-values", action="append", default=[],
                        metavar="NAME=V,V,...")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--bench", type=int, default=0)
    parser.add_argument("--bench-rounds", type=int, default=1,
                        help="time Cleave and ONNX Runtime this many times "
                             "each, alternating, and report the medians")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..",
                                                      "build", "bin"))
    parser.add_argument("--work")
    parser.add_argument("--compile-arg", action="append", default=[])
    parser.add_argument("--compare-single-rank", action="store_true")
    parser.add_argument("--reference-precision", choices=["bf16", "f16"])
    args = parser.parse_args()
    if args.bench_rounds < 1:
        parser.error("--bench-rounds must be at least 1")

    shapes = {}
    for text in args.input_shape:
        name, dims = text.split("=")
        shapes[name] = [int(d) for d in dims.split("x")]
    dims = {}
    for text in args.dim:
        name, size = text.split("=")
        dims[name] = int(size)
    values = {}
    for text in args.input_values:
        name, _, numbers = text.partition("=")
        try:
            values[name] = [float(v) for v in numbers.split(",")]
        except ValueError:
            parser.error(f"--input-values {text}: expected NAME=V[,V...] with numbers")
    model = onnx.load(args.model)
    unknown = set(values) - {i.name for i in model.graph.input}
    if unknown:
        parser.error(f"--input-values names no graph input: {', '.join(sorted(unknown))}")
    inputs = make_inputs(model, shapes, args.int_high, dims, values=values)
    work = args.work or tempfile.mkdtemp(prefix="cleave-check-")
    os.makedirs(work, exist_ok=True)
    bundle = os.path.join(work, "bundle")

    def compile_and_run(bundle, out, extra):
        start = time.monotonic()
        subprocess.run([os.path.join(args.bin, "cleave-compile"), args.model, "--quiet",
                        "-o", bundle] + [f"--input-shape={s}" for s in args.input_shape]
                       + [f"--dim={d}" for d in args.dim]
                       + extra, check=True)
        seconds = time.monotonic() - start
        run = [os.path.join(args.bin, "cleave-run"), bundle, "--output-dir", out,
               "--threads", str(args.threads)]
        for name, value in inputs.items():
            path = os.path.join(work, f"in_{len(run)}.npy")
            np.save(path, value)
            run.append(f"--input={name}={path}")
        subprocess.run(run, check=True)
        return run, seconds

    run, compile_s = compile_and_run(bundle, os.path.join(work, "out"), args.compile_arg)
    if args.compile_arg:
        with open(os.path.join(bundle, "plan.txt")) as plan:
            for line in plan:
                if line.startswith(("mesh:", "Split parameters:", "Collectives per",
                                    "Pipeline:", "Transfers per microbatch:")):
                    print(line.rstrip())
    if args.compare_single_rank:
        same_arithmetic = [a for a in args.compile_arg if a.startswith("--precision")]
        compile_and_run(os.path.join(work, "single"), os.path.join(work, "single-out"),
                        same_arithmetic)
        # What splitting is for: each rank holds its share of the weights.
        weights = []
        for b in (bundle, os.path.join(work, "single")):
            with open(os.path.join(b, "manifest.json")) as f:
                weights.append(json.load(f)["bytes_per_rank"])
        print(f"weights per rank: {max(weights[0]) / 2**20:.3f} MiB at most "
              f"({len(weights[0])} rank(s)); the one-rank program holds "
              f"{weights[1][0] / 2**20:.3f} MiB")
        agree = True
        worst_rank = 0.0
        for output in model.graph.output:
            name = output_file_name(output.name)
            good, worst = numerics.within(np.load(os.path.join(work, "out", name)),
                                          np.load(os.path.join(work, "single-out", name)),
                                          args.rtol, args.atol)
            agree &= good
            worst_rank = max(worst_rank, worst)
        print(f"{os.path.basename(args.model)}: outputs match the single-rank program: "
              f"{'yes' if agree else 'NO'} (max |diff| {worst_rank:.3g})")
        if not agree:
            return 1

    # ONNX Runtime gets as many threads as all of Cleave's ranks together.
    with open(os.path.join(bundle, "manifest.json")) as f:
        ranks = json.load(f)["ranks"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads * ranks
    options.inter_op_num_threads = 1
    reference_model = args.model
    if args.reference_precision:
        reference_model = round_gemm_operands(model, args.reference_precision)
        reference_model = reference_model.SerializeToString()
    session = ort.InferenceSession(reference_model, options,
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    if args.reference_precision:
        float32 = ort.InferenceSession(args.model, options,
                                       providers=["CPUExecutionProvider"])
        return check_rounded(os.path.basename(args.model), model, work, expected,
                             float32.run(None, inputs),
                             args.reference_precision, compile_s)
    def match_reference():
        """Whether the outputs in work/out match ONNX Runtime's; worst |diff|."""
        worst = 0.0
        ok = True
        for output, reference in zip(model.graph.output, expected):
            actual = np.load(os.path.join(work, "out", output_file_name(output.name)))
            if actual.shape != reference.shape:
                print(f"output '{output.name}': shape {actual.shape}, ONNX Runtime "
                      f"{reference.shape}")
                ok = False
                continue
            diff = np.abs(actual.astype(np.float64) - reference.astype(np.float64))
            worst = max(worst, float(diff.max()) if diff.size else 0.0)
            bad = diff > args.atol + args.rtol * np.abs(reference)
            if bad.any():
                print(f"output '{output.name}': {int(bad.sum())} of {bad.size} "
                      f"elements differ from ONNX Runtime (max |diff| {diff.max():.3g})")
                ok = False
        return ok, worst

    ok, worst = match_reference()
    print(f"{os.path.basename(args.model)}: outputs match ONNX Runtime: "
          f"{'yes' if ok else 'NO'} (max |diff| {worst:.3g}, rtol {args.rtol}, "
          f"atol {args.atol}); compile {compile_s:.2f} s")
    if not ok:
        return 1

    if args.bench:
        def cleave_p50():
            result = subprocess.run(run + ["--bench", str(args.bench)],
                                    check=True, capture_output=True, text=True)
            return float(re.search(r"p50 ([0-9.]+) ms", result.stdout).group(1))

        def ort_p50():
            for _ in range(3):
                session.run(None, inputs)
            times = []
            for _ in range(args.bench):
                t = time.perf_counter()
                session.run(None, inputs)
                times.append((time.perf_counter() - t) * 1000)
            return float(np.percentile(times, 50))

        # The one-rank program on the same cores: as many threads as all
        # the ranks together.
        single_run = None
        if args.compare_single_rank:
            single_run = [os.path.join(args.bin, "cleave-run"),
                          os.path.join(work, "single"), "--output-dir",
                          os.path.join(work, "single-out"), "--threads",
                          str(args.threads * ranks)] + run[run.index("--threads") + 2:]

        def single_p50():
            result = subprocess.run(single_run + ["--bench", str(args.bench)],
                                    check=True, capture_output=True, text=True)
            return float(re.search(r"p50 ([0-9.]+) ms", result.stdout).group(1))

        # Rounds alternate which goes first, and each ratio compares
        # measurements taken back to back: on a shared machine whose speed
        # drifts, the median of those ratios is steadier than one of each.
        cleave_ms, ort_ms, single_ms = [], [], []
        for round_ in range(args.bench_rounds):
            if round_ % 2 == 0:
                cleave_ms.append(cleave_p50())
                ort_ms.append(ort_p50())
                if single_run:
                    single_ms.append(single_p50())
            else:
                if single_run:
                    single_ms.append(single_p50())
                ort_ms.append(ort_p50())
                cleave_ms.append(cleave_p50())
        ratios = [c / o for c, o in zip(cleave_ms, ort_ms)]
        rounds = (f", median of {args.bench_rounds} alternating rounds"
                  if args.bench_rounds > 1 else "")
        print(f"latency, p50 over {args.bench} runs{rounds}: Cleave "
              f"{np.median(cleave_ms):.3f} ms ({ranks} rank(s) x {args.threads} "
              f"thread(s)), ONNX Runtime {np.median(ort_ms):.3f} ms "
              f"({args.threads * ranks} thread(s)), ratio "
              f"{np.median(ratios):.2f}x"
              + (f" (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
                 if args.bench_rounds > 1 else ""))
        if single_run:
            single_ratios = [c / o for c, o in zip(cleave_ms, single_ms)]
            print(f"the one-rank program on the same cores: "
                  f"{np.median(single_ms):.3f} ms (1 rank x "
                  f"{args.threads * ranks} thread(s)); {ranks} rank(s) / one "
                  f"rank {np.median(single_ratios):.2f}x")
        cores = len(os.sched_getaffinity(0))
        if args.threads * ranks > cores:
            # The ranks then take turns on the cores, and their collectives
            # wait for a rank that is not running: the figure is of the
            # machine's sharing, not of the program's speed.
            print(f"note: {ranks} rank(s) x {args.threads} thread(s) share "
                  f"{cores} core(s): this latency measures them taking turns, "
                  f"not Cleave's speed (bench/bench_tp.py and bench/bench_pp.py "
                  f"run as many ranks as cores)")
        # The benched program wrote its last run's outputs: a later run can
        # take other paths than the first (weights packed on their second
        # GEMM), so they are checked too.
        ok, worst = match_reference()
        print(f"{os.path.basename(args.model)}: outputs of the benched runs "
              f"match ONNX Runtime: {'yes' if ok else 'NO'} (max |diff| {worst:.3g})")
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
