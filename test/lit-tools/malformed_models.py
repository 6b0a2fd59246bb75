#!/usr/bin/env python3
"""Writes malformed ONNX models and checks that the importer refuses each one
with one clear error, never a signal, a hang or a crash.

Usage:
  malformed_models.py --compile BIN --out DIR [--seed S] [--count N]
                      [--write-only] BASE.onnx...

Two sets are written under DIR and compiled with `--compile-to=import`:
  named    one model per known class of malformation, built from scratch
           (operands missing, zero results, dangling names, cycles, negative
           and overflowing dims, raw data shorter than its shape, huge Range
           and ConstantOfShape, wrong element types, truncated files); each
           must be refused (exit 1) with an error line;
  mutants  N seeded mutations of the BASE models (the same classes applied
           at random places, plus truncation and byte flips); each must
           either compile (a mutation can leave a valid model) or be refused
           with an error line.

Exit status 0 when every model behaved, 1 otherwise, listing each model that
did not with its mutation, so a failure can be reproduced from its file.
"""

import argparse
import copy
import os
import random
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TIMEOUT_S = 60


# --- Named malformations, each a small model built to show one class ---

def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _raw(name, dtype, dims, raw):
    """An initializer whose dims and bytes need not agree (make_tensor checks)."""
    t = TensorProto(name=name, data_type=dtype, raw_data=raw)
    t.dims.extend(dims)
    return t


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def named_models():
    x = _f("x", [2, 3])
    y = _f("y", [2, 3])
    out = {}
    out["equal-one-operand"] = _model(
        [helper.make_node("Equal", ["x"], ["y"])], [x],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [2, 3])])
    out["add-three-operands"] = _model(
        [helper.make_node("Add", ["x", "x", "x"], ["y"])], [x], [y])
    out["matmul-no-operands"] = _model(
        [helper.make_node("MatMul", [], ["y"])], [x], [y])
    out["gemm-empty-required"] = _model(
        [helper.make_node("Gemm", ["x", ""], ["y"])], [x], [y])
    out["split-no-results"] = _model(
        [helper.make_node("Split", ["x"], [], axis=0, num_outputs=2),
         helper.make_node("Identity", ["x"], ["y"])], [x], [y])
    out["relu-two-results"] = _model(
        [helper.make_node("Relu", ["x"], ["y", "z"])], [x], [y])
    out["concat-empty-operand"] = _model(
        [helper.make_node("Concat", ["x", ""], ["y"], axis=0)], [x],
        [_f("y", [2, 3])])
    out["duplicate-result"] = _model(
        [helper.make_node("Relu", ["x"], ["a"]),
         helper.make_node("Neg", ["x"], ["a"]),
         helper.make_node("Identity", ["a"], ["y"])], [x], [y])
    out["result-redefines-input"] = _model(
        [helper.make_node("Relu", ["x"], ["x"]),
         helper.make_node("Identity", ["x"], ["y"])], [x], [y])
    out["gather-scalar-data"] = _model(
        [helper.make_node("Size", ["x"], ["n"]),
         helper.make_node("Gather", ["n", "i"], ["g"], axis=0),
         helper.make_node("Cast", ["g"], ["gf"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["x", "gf"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array(0, np.int64), "i")])
    out["attention-batch-mismatch"] = _model(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"])],
        [_f("q", [2, 2, 4, 8]), _f("k", [3, 2, 4, 8]), _f("v", [3, 2, 4, 8])],
        [_f("y", [2, 2, 4, 8])], opset=23)
    out["opset-99"] = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [x], [y], opset=99)
    out["dangling-operand"] = _model(
        [helper.make_node("Relu", ["nowhere"], ["y"])], [x], [y])
    out["cycle"] = _model(
        [helper.make_node("Add", ["x", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["b"]),
         helper.make_node("Identity", ["b"], ["y"])], [x], [y])
    out["self-loop"] = _model(
        [helper.make_node("Add", ["x", "y"], ["y"])], [x], [y])
    out["negative-input-dim"] = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [_f("x", [2, -3])],
        [_f("y", [2, -3])])
    out["overflowing-input-dims"] = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [_f("x", [2**40, 2**40])], [_f("y", [2**40, 2**40])])
    out["overflowing-initializer-dims"] = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [x], [y],
        [_raw("w", TensorProto.FLOAT, [2**33, 2**33], b"\0" * 8)])
    out["negative-initializer-dim"] = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [x], [y],
        [_raw("w", TensorProto.FLOAT, [-2, 3], b"\0" * 24)])
    out["short-raw-data"] = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [x], [y],
        [_raw("w", TensorProto.FLOAT, [2, 3], b"\0" * 10)])
    out["short-float-data"] = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [x], [y],
        [TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3],
                     float_data=[1.0, 2.0])])
    out["unknown-element-type"] = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [x], [y],
        [_raw("w", 77, [2, 3], b"\0" * 24)])
    out["huge-range"] = _model(
        [helper.make_node("Range", ["s", "l", "d"], ["r"]),
         helper.make_node("Shape", ["r"], ["n"]),
         helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["x", "nf"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array(0, np.int64), "s"),
         numpy_helper.from_array(np.array(2**62, np.int64), "l"),
         numpy_helper.from_array(np.array(1, np.int64), "d")])
    out["huge-constant-of-shape"] = _model(
        [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                          value=helper.make_tensor("v", TensorProto.FLOAT, [1],
                                                   [1.0])),
         helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
         helper.make_node("Add", ["x", "s"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([2**31, 2**31], np.int64), "shape")])
    out["overflowing-constant-of-shape"] = _model(
        [helper.make_node("ConstantOfShape", ["shape"], ["c"]),
         helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
         helper.make_node("Add", ["x", "s"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([2**62, 8], np.int64), "shape")])
    out["huge-expand"] = _model(
        [helper.make_node("Expand", ["x", "shape"], ["e"]),
         helper.make_node("ReduceSum", ["e", "axes"], ["y"], keepdims=0)],
        [x], [y],
        [numpy_helper.from_array(np.array([2**62, 2, 3], np.int64), "shape"),
         numpy_helper.from_array(np.array([0], np.int64), "axes")])
    out["huge-tile"] = _model(
        [helper.make_node("Tile", ["x", "reps"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([2**40, 2**40], np.int64), "reps")])
    out["negative-tile"] = _model(
        [helper.make_node("Tile", ["x", "reps"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([-3, 1], np.int64), "reps")])
    out["negative-expand"] = _model(
        [helper.make_node("Expand", ["x", "shape"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([-2, 3], np.int64), "shape")])
    out["split-zero-outputs-attribute"] = _model(
        [helper.make_node("Split", ["x"], ["a"], axis=0, num_outputs=0),
         helper.make_node("Identity", ["x"], ["y"])], [x], [y])
    out["split-negative-size"] = _model(
        [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
         helper.make_node("Identity", ["x"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([5, -2], np.int64), "sizes")])
    out["reshape-wrong-count"] = _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], [x], [y],
        [numpy_helper.from_array(np.array([7], np.int64), "shape")])
    out["no-graph"] = helper.make_model(
        helper.make_graph([], "g", [], []),
        opset_imports=[helper.make_opsetid("", 18)])
    out["no-opset"] = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                          [y]), opset_imports=[])
    return out


NAMED_BYTES = {
    "empty-file": b"",
    "not-protobuf": b"this is not an ONNX model\n" * 10,
    "truncated-varint": b"\x08\xff\xff\xff",
}


# --- Seeded mutations of real models ---

def _names(graph):
    produced = [o for n in graph.node for o in n.output if o]
    return produced + [i.name for i in graph.input] + [t.name for t in graph.initializer]


def mutate(model, rng):
    """A copy of `model` with one seeded malformation; returns (model, what)."""
    m = copy.deepcopy(model)
    g = m.graph
    kinds = ["drop-operand", "empty-operand", "dangling", "cycle",
             "drop-results", "extra-operand", "initializer-type",
             "initializer-dims", "initializer-short", "input-dims",
             "attribute-type", "attribute-value", "swap-op", "drop-node",
             "duplicate-output", "opset"]
    kind = rng.choice(kinds)
    nodes = list(g.node)
    if not nodes:
        return m, "no nodes"
    i = rng.randrange(len(nodes))
    node = g.node[i]
    where = f"node {i} ({node.op_type} '{node.name}')"
    if kind == "drop-operand" and node.input:
        del node.input[rng.randrange(len(node.input))]
    elif kind == "empty-operand" and node.input:
        node.input[rng.randrange(len(node.input))] = ""
    elif kind == "dangling" and node.input:
        node.input[rng.randrange(len(node.input))] = "no_such_value"
    elif kind == "cycle" and node.input and i + 1 < len(nodes):
        later = g.node[rng.randrange(i, len(nodes))]
        if later.output:
            node.input[rng.randrange(len(node.input))] = later.output[0]
    elif kind == "drop-results":
        del node.output[:]
    elif kind == "extra-operand":
        node.input.append(rng.choice(_names(g) or ["x"]))
    elif kind == "initializer-type" and g.initializer:
        t = rng.choice(g.initializer)
        t.data_type = rng.choice([0, 2, 3, 5, 7, 8, 9, 11, 14, 16, 17, 40])
        where = f"initializer '{t.name}'"
    elif kind == "initializer-dims" and g.initializer:
        t = rng.choice(g.initializer)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(
                [0, -1, 3, 2**31, 2**62])
        else:
            t.dims.append(rng.choice([0, 5, 2**40]))
        where = f"initializer '{t.name}'"
    elif kind == "initializer-short" and g.initializer:
        t = rng.choice(g.initializer)
        if t.raw_data:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data))]
        else:
            for field in ("float_data", "int64_data", "int32_data",
                          "double_data"):
                data = getattr(t, field)
                if len(data):
                    del data[rng.randrange(len(data)):]
        where = f"initializer '{t.name}'"
    elif kind == "input-dims" and g.input:
        v = rng.choice(g.input)
        dims = v.type.tensor_type.shape.dim
        if len(dims):
            d = dims[rng.randrange(len(dims))]
            d.dim_value = rng.choice([0, -4, 2**40, 2**62])
        where = f"input '{v.name}'"
    elif kind == "attribute-type" and node.attribute:
        a = rng.choice(node.attribute)
        a.type = rng.choice([1, 2, 3, 4, 6, 7, 8])
    elif kind == "attribute-value" and node.attribute:
        a = rng.choice(node.attribute)
        if a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice([-100, 2**40, 0])
        else:
            a.i = rng.choice([-100, 2**40, 0, 99])
            a.f = rng.choice([float("nan"), -1e30, 0.0])
    elif kind == "swap-op":
        node.op_type = rng.choice(["Add", "MatMul", "Split", "Concat",
                                   "Reshape", "Gather", "Softmax", "Where"])
    elif kind == "drop-node":
        del g.node[i]
    elif kind == "duplicate-output" and node.output and i > 0:
        node.output[0] = g.node[rng.randrange(i)].output[0]
    elif kind == "opset":
        m.opset_import[0].version = rng.choice([0, 1, 6, 99, -3])
        where = "opset"
    else:
        return mutate(model, rng)
    return m, f"{kind} at {where}"


def byte_mutant(data, rng):
    if rng.random() < 0.5:
        cut = rng.randrange(len(data))
        return data[:cut], f"truncated to {cut} of {len(data)} bytes"
    buf = bytearray(data)
    n = rng.randrange(1, 9)
    for _ in range(n):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf), f"{n} random bytes"


# --- Running the compiler ---

def _base_name(path):
    """A conformance case by its folder, a model by its file name."""
    name = os.path.basename(path)
    return os.path.basename(os.path.dirname(path)) if name == "model.onnx" else name


def compile_one(binary, path):
    """(ok, why): ok when the compiler exited 0, or 1 with an error line."""
    try:
        result = subprocess.run(
            [binary, path, "--quiet", "--compile-to=import", "-o", os.devnull],
            capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {TIMEOUT_S} s"
    if result.returncode < 0:
        return None, f"killed by signal {-result.returncode}: " + result.stderr[-400:]
    if result.returncode == 0:
        return True, ""
    if result.returncode != 1:
        return None, f"exit {result.returncode}: " + result.stderr[-400:]
    if "error:" not in result.stderr:
        return None, "exit 1 without an error line: " + result.stderr[-400:]
    if "Stack dump" in result.stderr or "PLEASE submit" in result.stderr:
        return None, "crash report: " + result.stderr[-400:]
    return False, result.stderr.strip().splitlines()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bases", nargs="*", help="models to mutate")
    parser.add_argument("--compile", required=True, help="cleave-compile")
    parser.add_argument("--out", required=True, help="folder for the models")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--write-only", action="store_true",
                        help="write the named models, compile nothing")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    bad = []

    named = {k: m.SerializeToString() for k, m in named_models().items()}
    named.update(NAMED_BYTES)
    for name, data in named.items():
        path = os.path.join(args.out, f"named-{name}.onnx")
        with open(path, "wb") as f:
            f.write(data)
        if args.write_only:
            continue
        ok, why = compile_one(args.compile, path)
        if ok is None or ok:
            bad.append((path, name, why or "compiled, but it is malformed"))
        elif args.verbose:
            print(f"{name}: {why}")

    if args.write_only:
        return 0
    bases = []
    for base in args.bases:
        bases.append((base, onnx.load(base, load_external_data=False)))
    refused = compiled = 0
    for k in range(args.count if bases else 0):
        base, model = bases[rng.randrange(len(bases))]
        if rng.random() < 0.15:
            data, what = byte_mutant(model.SerializeToString(), rng)
        else:
            mutant, what = mutate(model, rng)
            data = mutant.SerializeToString()
        path = os.path.join(args.out, f"mutant-{k}.onnx")
        with open(path, "wb") as f:
            f.write(data)
        ok, why = compile_one(args.compile, path)
        if ok is None:
            bad.append((path, f"{_base_name(base)}: {what}", why))
        elif ok:
            compiled += 1
        else:
            refused += 1
        if args.verbose:
            print(f"mutant-{k} ({_base_name(base)}: {what}): "
                  f"{'compiled' if ok else why}")

    for path, what, why in bad:
        print(f"FAIL {path} ({what}): {why}")
    print(f"malformed_models: {len(named)} named, {args.count if bases else 0} "
          f"mutants ({refused} refused, {compiled} compiled); "
          f"{len(bad)} misbehaved")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
