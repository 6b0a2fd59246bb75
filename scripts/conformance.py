#!/usr/bin/env python3
"""Runs cleave-compile over the ONNX conformance cases.

For each case folder (model.onnx + test_data_set_0/) it binds the graph inputs
that feed shape-like operands (Reshape shapes, Slice bounds, axes, Range
scalars...) as compile-time constants from their .pb files, as a user
specialising a model would, and imports the model. It prints one line per
failure and a closing `N passed, M failed` line. Failures listed in the
exclusion file (one `case-name: reason` per line) are reported but tolerated.

Usage: conformance.py --compiler BIN --cases DIR [--phase import] [--jobs N]
                      [--exclusions FILE] [--filter SUBSTRING]
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time

import onnx

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


def run_case(compiler: str, case_dir: str, phase: str) -> tuple:
    model = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    data_dir = os.path.join(case_dir, "test_data_set_0")
    bind = shape_like_inputs(model)
    args = [compiler, os.path.join(case_dir, "model.onnx"), "--quiet",
            f"--compile-to={phase}"]
    for index, graph_input in enumerate(model.graph.input):
        if graph_input.name in bind:
            args.append(f"--bind-input={graph_input.name}="
                        f"{os.path.join(data_dir, f'input_{index}.pb')}")
    with tempfile.TemporaryDirectory() as tmp:
        args += ["-o", os.path.join(tmp, "out.mlir")]
        start = time.monotonic()
        result = subprocess.run(args, capture_output=True, text=True, timeout=300)
        elapsed = time.monotonic() - start
    message = (result.stderr.strip().splitlines() or ["(no message)"])
    return result.returncode == 0, message[0] if result.returncode else "", elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiler", required=True)
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
        futures = {pool.submit(run_case, args.compiler,
                               os.path.join(args.cases, c), args.phase): c
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
