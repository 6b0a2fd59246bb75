#!/usr/bin/env python3
"""Runs the ONNX conformance cases through Cleave.

For each case folder (model.onnx + test_data_set_0/) it binds the graph inputs
that flow into shape-like operands (Reshape shapes, Slice bounds, axes, Range
scalars...) as compile-time constants from their .pb files, as a user
specialising a model would. With --phase import (or another phase) it compiles
up to that phase; with --phase run it compiles a bundle, runs it with
cleave-run on the case's inputs and compares every output with the expected
one: |actual - expected| <= atol + rtol * |expected| (rtol 1e-3, atol 1e-7),
NaN equal to NaN, infinities equal by sign, integers and bools exactly, shape
and dtype equal.

It prints one line per failure and a closing `N passed, M failed` line.
Failures listed in the exclusion file (one `case-name: reason` per line) are
reported but tolerated.

Usage: conformance.py --compiler BIN [--runner BIN] --cases DIR
                      [--phase import|run] [--jobs N] [--exclusions FILE]
                      [--filter SUBSTRING]
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

from check_model import output_file_name

# Operand positions that must be known at compile time, per op type. An int
# means that operand position; "rest" means every operand from that position.
SHAPE_OPERANDS = {
    "Reshape": [1],
    "Expand": [1],
    "Tile": [1],
    "ConstantOfShape": [0],
    "Slice": ["rest", 1],
    "Squeeze": [1],
    "Unsqueeze": [1],
    "ReduceSum": [1],
    "ReduceMean": [1],
    "ReduceMax": [1],
    "ReduceMin": [1],
    "ReduceProd": [1],
    "ReduceSumSquare": [1],
    "ReduceL1": [1],
    "ReduceL2": [1],
    "Split": [1],
    "Trilu": [1],
    "Range": ["rest", 0],
    "Pad": ["rest", 1],
    "Loop": ["rest", 0],
}


def shape_like_inputs(model: onnx.ModelProto) -> set:
    """Graph inputs that flow, through any ops, into shape-like operands."""
    graph_inputs = {i.name for i in model.graph.input}
    producers = {}
    needed = []

    def visit(graph):
        for node in graph.node:
            for out in node.output:
                producers[out] = node
            spec = SHAPE_OPERANDS.get(node.op_type, [])
            if spec and spec[0] == "rest":
                positions = range(spec[1], len(node.input))
            else:
                positions = spec
            needed.extend(node.input[p] for p in positions
                          if p < len(node.input) and node.input[p])
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)

    visit(model.graph)
    wanted, seen = set(), set()
    while needed:
        name = needed.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in graph_inputs:
            wanted.add(name)
        elif name in producers:
            needed.extend(i for i in producers[name].input if i)
    return wanted


def load_pb(path: str) -> np.ndarray:
    array = numpy_helper.to_array(onnx.load_tensor(path))
    if array.dtype.name == "bfloat16":
        array = array.view(np.uint16)  # Cleave's .npy form of bfloat16
    return array


def as_float(array: np.ndarray, bfloat16: bool) -> np.ndarray:
    if bfloat16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float64)


def compare(actual: np.ndarray, expected: np.ndarray, bfloat16: bool) -> str:
    """An empty string if `actual` matches `expected`, else why not."""
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.dtype.kind in "biu" and not bfloat16:
        bad = actual != expected
        if bad.any():
            return f"{int(bad.sum())} of {actual.size} elements differ"
        return ""
    a, e = as_float(actual, bfloat16), as_float(expected, bfloat16)
    both_nan = np.isnan(a) & np.isnan(e)
    same_inf = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
    with np.errstate(invalid="ignore"):
        close = np.abs(a - e) <= 1e-7 + 1e-3 * np.abs(e)
    bad = ~(close | both_nan | same_inf)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        return (f"{int(bad.sum())} of {a.size} elements differ, e.g. at {i}: "
                f"{a.reshape(-1)[i]} vs expected {e.reshape(-1)[i]}")
    return ""


def run_case(args, case_dir: str) -> tuple:
    model = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    data_dir = os.path.join(case_dir, "test_data_set_0")
    bind = shape_like_inputs(model)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bundle" if args.phase == "run" else "out.mlir")
        # Two LLVM parts where the program has two groups of functions, on
        # any machine: the split must link and compute the same.
        compile_args = [args.compiler, os.path.join(case_dir, "model.onnx"), "--quiet",
                        f"--compile-to={'bundle' if args.phase == 'run' else args.phase}",
                        "--jobs=2", "-o", out]
        run_args = [args.runner, out, "--threads", "1", "--output-dir",
                    os.path.join(tmp, "outputs")]
        for index, graph_input in enumerate(model.graph.input):
            pb = os.path.join(data_dir, f"input_{index}.pb")
            if graph_input.name in bind:
                compile_args.append(f"--bind-input={graph_input.name}={pb}")
            else:
                npy = os.path.join(tmp, f"input_{index}.npy")
                np.save(npy, load_pb(pb))
                run_args.append(f"--input={graph_input.name}={npy}")
        start = time.monotonic()
        result = subprocess.run(compile_args, capture_output=True, text=True,
                                timeout=300)
        if result.returncode != 0 or args.phase != "run":
            elapsed = time.monotonic() - start
            lines = result.stderr.strip().splitlines() or ["(no message)"]
            return result.returncode == 0, lines[0] if result.returncode else "", elapsed
        result = subprocess.run(run_args, capture_output=True, text=True, timeout=300)
        elapsed = time.monotonic() - start
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines() or ["(no message)"]
            return False, "run: " + lines[0], elapsed
        for index, graph_output in enumerate(model.graph.output):
            expected = load_pb(os.path.join(data_dir, f"output_{index}.pb"))
            bfloat16 = (graph_output.type.tensor_type.elem_type ==
                        onnx.TensorProto.BFLOAT16)
            actual = np.load(os.path.join(tmp, "outputs",
                                          output_file_name(graph_output.name)))
            why = compare(actual, expected, bfloat16)
            if why:
                return False, f"output '{graph_output.name}': {why}", elapsed
        return True, "", elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiler", required=True)
    parser.add_argument("--runner", default="cleave-run")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--phase", default="import")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--exclusions")
    parser.add_argument("--filter", default="")
    args = parser.parse_args()

    excluded = {}
    if args.exclusions:
        with open(args.exclusions, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    name, _, reason = line.partition(":")
                    excluded[name.strip()] = reason.strip()

    cases = sorted(d for d in os.listdir(args.cases)
                   if os.path.isfile(os.path.join(args.cases, d, "model.onnx"))
                   and args.filter in d)
    passed, failed, tolerated = 0, [], []
    slowest = (0.0, "")
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_case, args, os.path.join(args.cases, c)): c
                   for c in cases}
        for future in concurrent.futures.as_completed(futures):
            case = futures[future]
            ok, message, elapsed = future.result()
            slowest = max(slowest, (elapsed, case))
            if ok:
                passed += 1
            elif case in excluded:
                tolerated.append((case, message))
            else:
                failed.append((case, message))
    for case, message in sorted(failed):
        print(f"FAIL {case}: {message}")
    for case, message in sorted(tolerated):
        print(f"EXCLUDED {case} ({excluded[case]}): {message}")
    print(f"phase '{args.phase}': {passed} of {len(cases)} cases; "
          f"slowest {slowest[1]} {slowest[0]:.2f} s")
    print(f"{passed} passed, {len(failed)} failed, {len(tolerated)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
