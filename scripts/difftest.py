#!/usr/bin/env python3
"""Differential testing: seeded random ONNX graphs, compiled by Cleave on one
rank, on two (tp=2, a random valid sharding hint) and on two pipeline stages
with one microbatch per row of the batch, run, and compared with ONNX
Runtime.

Usage: difftest.py --bin DIR [--count N] [--seed S] [--jobs J]
                   [--keep DIR] [--ops OP,...] [-v]

Each graph is a few to a dozen nodes drawn from the ops transformer exports
use: MatMul and Gemm, elementwise ops with broadcasting, Reshape, Transpose,
Squeeze, Unsqueeze, Expand, Concat, Split, Slice, Gather, GatherElements,
Where, ReduceSum/Mean/Max with keepdims either way and negative axes,
Softmax, LayerNormalization, Cast, Shape chains feeding a Reshape, and
quantization: QuantizeLinear/DequantizeLinear pairs (int8, uint8, per
tensor or per axis), DynamicQuantizeLinear into MatMulInteger, and ONNX
Runtime's MatMulNBits (4 and 8 bits, blocks of 16 or 32 along K). Each
operand is chosen at random among a graph input, an initializer, a Constant
node and a value already computed; sizes are odd (1, 3, 37 and now and then
a dimension of 50257) and the batch is more than one. Graph N of seed S is
the same on every machine.

Every graph must either match ONNX Runtime (|cleave - ort| <= 1e-4 +
1e-4 |ort|) in every layout, or be refused by cleave-compile with an
error (counted, with the first words of each reason). A mismatch, a crash,
a hang or a program that fails is a failure: its model, inputs and command
are kept under --keep (default: difftest-failures/) and the exit status is 1.
"""

import argparse
import collections
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
TIMEOUT_S = 120
SIZES = [1, 2, 3, 4, 5, 6, 8, 37]


class NoOperand(Exception):
    """No value fits the op drawn: draw another."""


class Graph:
    """A graph under construction: values with known shapes (all float32
    unless said), and the nodes, inputs and initializers that make them."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inputs, self.inits = [], [], []
        self.feeds = {}
        self.values = []  # (name, shape) of float32 values
        self.operands = []  # (name, shape) of float32 operands made
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.name(op.lower() + "_") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs,
                                           name=self.name("n_" + op), **attrs))
        return outs if n_out > 1 else outs[0]

    def add(self, name, shape):
        self.values.append((name, list(shape)))
        return name, list(shape)

    def operand(self, shape, dtype=np.float32, low=None, high=None,
                array=None):
        """A new operand of `shape` (holding `array` if given): a graph
        input, an initializer or a Constant node, at random."""
        rng = self.rng
        if array is not None:
            pass
        elif low is not None:
            array = np.asarray(rng.integers(low, high, shape), dtype)
        else:
            array = np.asarray(rng.standard_normal(shape) * 0.5, dtype)
        kind = rng.choice(["input", "init", "constant"])
        name = self.name("x" if kind == "input" else "w" if kind == "init" else "c")
        if array.dtype == np.float32:
            self.operands.append((name, list(shape)))
        if kind == "input":
            self.inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(array.dtype), list(shape)))
            self.feeds[name] = array
        else:
            self.constant(name, array, as_initializer=kind == "init")
        return name

    def constant(self, name, array, as_initializer):
        """`array` named `name`: an initializer or a Constant node."""
        if as_initializer:
            self.inits.append(numpy_helper.from_array(array, name))
        else:
            self.nodes.append(helper.make_node(
                "Constant", [], [name], name=self.name("n_Constant"),
                value=numpy_helper.from_array(array, name + "_value")))

    def ints(self, values):
        """An int64 constant (initializer or Constant node)."""
        name = self.name("i")
        self.constant(name, np.array(values, np.int64),
                      as_initializer=self.rng.random() < 0.5)
        return name

    def choose(self, items):
        if not items:
            raise NoOperand()
        return items[int(self.rng.integers(0, len(items)))]

    def pick(self, rank_at_least=0):
        return self.choose([v for v in self.values if len(v[1]) >= rank_at_least])


def broadcast_partner(g, shape):
    """An operand broadcast against `shape`: a suffix of it, some dims 1."""
    rng = g.rng
    keep = rng.integers(0, len(shape) + 1)
    partner = [d if rng.random() < 0.7 else 1 for d in shape[len(shape) - keep:]]
    same = [v for v in g.values if v[1] == partner]
    if same and rng.random() < 0.4:
        return g.choose(same)[0]
    return g.operand(partner)


# --- One function per op family: each adds nodes and returns a new value ---

def op_unary(g):
    x, shape = g.pick()
    op = g.rng.choice(["Relu", "Tanh", "Sigmoid", "Neg", "Abs", "Erf"])
    return g.add(g.node(op, [x]), shape)


def op_binary(g):
    x, shape = g.pick()
    y = broadcast_partner(g, shape)
    op = g.rng.choice(["Add", "Sub", "Mul", "Div"])
    if op == "Div":  # away from zero: 1.5 + sigmoid(y)
        y = g.node("Add", [g.node("Sigmoid", [y]), g.ints_float(1.5)])
    return g.add(g.node(op, [x, y]), shape)


def op_matmul(g):
    rng = g.rng
    x, shape = g.pick(rank_at_least=1)
    k = shape[-1]
    n = int(rng.choice(SIZES + [50257])) if np.prod(shape[:-1]) * k <= 64 else int(rng.choice(SIZES))
    if n == 50257 and np.prod(shape[:-1]) > 8:
        n = 37
    if len(shape) == 2 and rng.random() < 0.4:
        trans_b = int(rng.integers(0, 2))
        w = g.operand([n, k] if trans_b else [k, n])
        inputs = [x, w]
        if rng.random() < 0.6:
            inputs.append(g.operand([n] if rng.random() < 0.7 else [shape[0], n]))
        out = g.node("Gemm", inputs, transB=trans_b,
                     alpha=float(rng.choice([1.0, 0.5])),
                     beta=float(rng.choice([1.0, 2.0])))
    else:
        out = g.node("MatMul", [x, g.operand([k, n])])
    return g.add(out, shape[:-1] + [n])


def factor_shape(rng, count):
    """A random shape with `count` elements."""
    dims, rest = [], count
    for _ in range(int(rng.integers(1, 4))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = int(rng.choice(divisors))
        dims.append(d)
        rest //= d
    dims.append(rest)
    return [d for d in dims if d != 1 or rng.random() < 0.3] or [count]


def op_reshape(g):
    rng = g.rng
    x, shape = g.pick()
    target = factor_shape(rng, int(np.prod(shape)))
    written = list(target)
    if len(written) > 1 and rng.random() < 0.5:
        written[int(rng.integers(0, len(written)))] = -1
    return g.add(g.node("Reshape", [x, g.ints(written)]), target)


def op_shape_chain(g):
    """Shape -> Gather -> Concat -> Reshape: a reshape to [d0, -1]."""
    x, shape = g.pick(rank_at_least=2)
    s = g.node("Shape", [x])
    first = g.node("Gather", [s, g.ints([0])], axis=0)
    target = g.node("Concat", [first, g.ints([-1])], axis=0)
    return g.add(g.node("Reshape", [x, target]),
                 [shape[0], int(np.prod(shape[1:]))])


def op_transpose(g):
    x, shape = g.pick(rank_at_least=2)
    perm = [int(p) for p in g.rng.permutation(len(shape))]
    return g.add(g.node("Transpose", [x], perm=perm), [shape[p] for p in perm])


def op_unsqueeze(g):
    x, shape = g.pick()
    if len(shape) >= 5:
        return None
    axis = int(g.rng.integers(-len(shape) - 1, len(shape) + 1))
    out = list(shape)
    out.insert(axis if axis >= 0 else len(shape) + 1 + axis, 1)
    return g.add(g.node("Unsqueeze", [x, g.ints([axis])]), out)


def op_squeeze(g):
    ones = [(v, s) for v, s in g.values if 1 in s and len(s) > 1]
    if not ones:
        return None
    x, shape = g.choose(ones)
    axis = [i for i, d in enumerate(shape) if d == 1][0]
    if g.rng.random() < 0.5:
        axis -= len(shape)
    out = [d for i, d in enumerate(shape) if i != axis % len(shape)]
    return g.add(g.node("Squeeze", [x, g.ints([axis])]), out)


def op_expand(g):
    ones = [(v, s) for v, s in g.values if 1 in s]
    if not ones:
        return None
    x, shape = g.choose(ones)
    out = [int(g.rng.choice([2, 3])) if d == 1 else d for d in shape]
    return g.add(g.node("Expand", [x, g.ints(out)]), out)


def op_concat(g):
    x, shape = g.pick(rank_at_least=1)
    axis = int(g.rng.integers(-len(shape), len(shape)))
    other = list(shape)
    other[axis] = int(g.rng.choice([1, 2, 3]))
    y = g.operand(other)
    out = list(shape)
    out[axis] += other[axis]
    return g.add(g.node("Concat", [x, y], axis=axis), out)


def op_split(g):
    cand = [(v, s) for v, s in g.values if any(d >= 2 for d in s)]
    if not cand:
        return None
    x, shape = g.choose(cand)
    axis = int(g.rng.choice([i for i, d in enumerate(shape) if d >= 2]))
    first = int(g.rng.integers(1, shape[axis]))
    parts = g.node("Split", [x, g.ints([first, shape[axis] - first])], n_out=2,
                   axis=axis - len(shape) if g.rng.random() < 0.5 else axis)
    which = int(g.rng.integers(0, 2))
    out = list(shape)
    out[axis] = first if which == 0 else shape[axis] - first
    return g.add(parts[which], out)


def op_slice(g):
    rng = g.rng
    x, shape = g.pick(rank_at_least=1)
    axis = int(rng.integers(0, len(shape)))
    size = shape[axis]
    step = int(rng.choice([1, 1, 2, -1]))
    if step > 0:
        start = int(rng.integers(0, size))
        end = int(rng.integers(start + 1, size + 1))
        n = len(range(start, end, step))
        starts, ends = [start - size if rng.random() < 0.3 else start], [end]
    else:
        start = int(rng.integers(0, size))
        end = -size - 1
        n = len(range(start, -1, step))
        starts, ends = [start], [end]
    out = list(shape)
    out[axis] = n
    return g.add(g.node("Slice", [x, g.ints(starts), g.ints(ends),
                                  g.ints([axis - len(shape) if rng.random() < 0.3 else axis]),
                                  g.ints([step])]), out)


def op_gather(g):
    rng = g.rng
    x, shape = g.pick(rank_at_least=1)
    axis = int(rng.integers(0, len(shape)))
    index_shape = [int(rng.choice([1, 2, 3]))
                   for _ in range(int(rng.integers(0, 3)))]
    if rng.random() < 0.5 and len(shape) + len(index_shape) <= 5:
        indices = g.operand(index_shape, np.int64, -shape[axis], shape[axis])
    else:
        values = rng.integers(-shape[axis], shape[axis], index_shape)
        indices = g.ints(values.tolist() if index_shape else int(values))
    out = shape[:axis] + index_shape + shape[axis + 1:]
    return g.add(g.node("Gather", [x, indices],
                        axis=axis - len(shape) if rng.random() < 0.3 else axis), out)


def op_gather_elements(g):
    x, shape = g.pick(rank_at_least=1)
    axis = int(g.rng.integers(0, len(shape)))
    index_shape = [int(g.rng.integers(1, d + 1)) for d in shape]
    indices = g.operand(index_shape, np.int64, -shape[axis], shape[axis])
    return g.add(g.node("GatherElements", [x, indices], axis=axis), index_shape)


def op_where(g):
    x, shape = g.pick()
    y = broadcast_partner(g, shape)
    condition = g.node("Greater", [broadcast_partner(g, shape), g.ints_float(0.0)])
    return g.add(g.node("Where", [condition, x, y]), shape)


def op_reduce(g):
    rng = g.rng
    x, shape = g.pick(rank_at_least=1)
    n = int(rng.integers(1, len(shape) + 1))
    axes = sorted(int(a) for a in rng.choice(len(shape), n, replace=False))
    written = [a - len(shape) if rng.random() < 0.5 else a for a in axes]
    keep = int(rng.integers(0, 2))
    op = rng.choice(["ReduceSum", "ReduceMean", "ReduceMax"])
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in axes]
    return g.add(g.node(op, [x, g.ints(written)], keepdims=keep), out)


def op_softmax(g):
    x, shape = g.pick(rank_at_least=1)
    axis = int(g.rng.integers(-len(shape), len(shape)))
    return g.add(g.node("Softmax", [x], axis=axis), shape)


def op_layernorm(g):
    x, shape = g.pick(rank_at_least=1)
    axis = int(g.rng.integers(-len(shape), 0))
    norm = shape[axis:]
    inputs = [x, g.operand(norm)]
    if g.rng.random() < 0.7:
        inputs.append(g.operand(norm))
    return g.add(g.node("LayerNormalization", inputs, axis=axis,
                        epsilon=1e-5), shape)


def op_cast(g):
    x, shape = g.pick()
    scaled = g.node("Mul", [x, g.ints_float(4.0)])
    as_int = g.node("Cast", [scaled], to=TensorProto.INT64)
    return g.add(g.node("Cast", [as_int], to=TensorProto.FLOAT), shape)


def quant_params(g, count, unsigned):
    """`count` scales (a scalar if count is 0) and zero points of int8 or
    uint8, as initializers or Constant nodes."""
    rng = g.rng
    shape = [count] if count else []
    scale = np.asarray(rng.choice([0.01, 0.05, 0.125], shape), np.float32)
    low, high = (0, 256) if unsigned else (-128, 128)
    zero = np.asarray(rng.integers(low, high, shape),
                      np.uint8 if unsigned else np.int8)
    names = g.name("qs"), g.name("qz")
    g.constant(names[0], scale, as_initializer=rng.random() < 0.5)
    g.constant(names[1], zero, as_initializer=rng.random() < 0.5)
    return names


def op_qdq(g):
    """A fresh operand quantized and dequantized (int8 or uint8, per tensor
    or along an axis): values no other op computed, so that both programs
    divide the same floats, half of them lying on a step's .5 (rounded half
    to even) and some past the type's range (saturated)."""
    rng = g.rng
    _, shape = g.pick(rank_at_least=1)
    rank = len(shape)
    axis = int(rng.integers(-rank, rank))
    per_axis = rng.random() < 0.5
    unsigned = rng.random() < 0.5
    scale, zero = quant_params(g, shape[axis] if per_axis else 0, unsigned)
    steps = rng.integers(-600, 600, shape) * 0.5
    x = g.operand(shape, array=np.asarray(steps * 0.05, np.float32))
    attrs = {"axis": axis} if per_axis else {}
    q = g.node("QuantizeLinear", [x, scale, zero], **attrs)
    return g.add(g.node("DequantizeLinear", [q, scale, zero], **attrs), shape)


def op_matmul_integer(g):
    """DynamicQuantizeLinear of a fresh operand, MatMulInteger by an int8
    weight (its zero point a scalar or one per column) and the int32 sums
    scaled back to float: integer arithmetic, exact in both programs."""
    rng = g.rng
    _, shape = g.pick(rank_at_least=1)
    x = g.operand(shape)
    k, n = shape[-1], int(rng.choice(SIZES))
    q, scale, zero = g.node("DynamicQuantizeLinear", [x], n_out=3)
    w = g.name("qw")
    g.constant(w, np.asarray(rng.integers(-128, 128, [k, n]), np.int8),
               as_initializer=rng.random() < 0.7)
    wz = g.name("qwz")
    g.constant(wz, np.asarray(rng.integers(-128, 128, [n] if rng.random() < 0.5
                                           else []), np.int8),
               as_initializer=rng.random() < 0.5)
    acc = g.node("MatMulInteger", [q, w, zero, wz])
    wide = g.node("Cast", [acc], to=TensorProto.FLOAT)
    return g.add(g.node("Mul", [wide, scale]), shape[:-1] + [n])


def op_matmul_nbits(g):
    """com.microsoft MatMulNBits: the picked value by N rows of 4- or 8-bit
    codes in blocks along K (the last block padded), with uint8 zero points
    packed like the codes or none, and a bias now and then."""
    rng = g.rng
    x, shape = g.pick(rank_at_least=2)
    k, n = shape[-1], int(rng.choice(SIZES))
    bits, block = int(rng.choice([4, 8])), int(rng.choice([16, 32]))
    blocks, per = (k + block - 1) // block, 8 // bits
    codes = rng.integers(0, 1 << bits, (n, blocks, block // per, per))
    packed = np.zeros(codes.shape[:-1], np.uint8)
    for j in range(per):
        packed |= (codes[..., j] << (bits * j)).astype(np.uint8)
    inputs = [x, g.name("nb"), g.name("ns")]
    g.constant(inputs[1], packed, as_initializer=True)
    g.constant(inputs[2], rng.uniform(0.01, 0.1, n * blocks).astype(np.float32),
               as_initializer=rng.random() < 0.7)
    if rng.random() < 0.6:
        row = (blocks + per - 1) // per
        zeros = rng.integers(0, 1 << bits, (n, row, per))
        packed_zeros = np.zeros((n, row), np.uint8)
        for j in range(per):
            packed_zeros |= (zeros[..., j] << (bits * j)).astype(np.uint8)
        inputs.append(g.name("nz"))
        g.constant(inputs[-1], packed_zeros.reshape(-1), as_initializer=True)
    if rng.random() < 0.4:
        inputs += [""] * (5 - len(inputs)) + [g.operand([n])]
    g.nodes.append(helper.make_node(
        "MatMulNBits", inputs, [g.name("matmulnbits_")], domain="com.microsoft",
        name=g.name("n_MatMulNBits"), K=k, N=n, bits=bits, block_size=block))
    return g.add(g.nodes[-1].output[0], shape[:-1] + [n])


def _ints_float(self, value):
    name = self.name("f")
    self.inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
    return name


Graph.ints_float = _ints_float

OPS = {
    "unary": op_unary, "binary": op_binary, "matmul": op_matmul,
    "reshape": op_reshape, "shape": op_shape_chain, "transpose": op_transpose,
    "unsqueeze": op_unsqueeze, "squeeze": op_squeeze, "expand": op_expand,
    "concat": op_concat, "split": op_split, "slice": op_slice,
    "gather": op_gather, "gather_elements": op_gather_elements,
    "where": op_where, "reduce": op_reduce, "softmax": op_softmax,
    "layernorm": op_layernorm, "cast": op_cast, "qdq": op_qdq,
    "matmul_integer": op_matmul_integer, "matmul_nbits": op_matmul_nbits,
}


def make_graph(seed, index, ops):
    """Graph `index` of `seed`: (model, feeds, hints YAML for tp=2 or None,
    batch)."""
    rng = np.random.default_rng([seed, index])
    g = Graph(rng)
    batch = int(rng.choice([2, 3]))
    rank = int(rng.integers(2, 5))
    first = [batch] + [int(rng.choice(SIZES)) for _ in range(rank - 1)]
    name = g.name("x")
    g.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, first))
    g.feeds[name] = rng.standard_normal(first).astype(np.float32)
    g.add(name, first)
    for _ in range(int(rng.integers(3, 13))):
        made = None
        for _attempt in range(5):
            try:
                made = OPS[ops[int(rng.integers(0, len(ops)))]](g)
            except NoOperand:
                continue
            if made is not None:
                break
        if made and int(np.prod(made[1])) > 1 << 16:
            return make_graph(seed, index + 1_000_000, ops)
    outputs = [g.values[-1]]
    if len(g.values) > 2 and rng.random() < 0.5:
        extra = g.values[int(rng.integers(1, len(g.values) - 1))]
        if extra[0] != outputs[0][0]:
            outputs.append(extra)
    graph = helper.make_graph(
        g.nodes, f"difftest_{seed}_{index}", g.inputs,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        g.inits)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    # tp=2: one operand (an input, initializer or Constant of rank 1 or
    # more) split on a dimension of even size; propagation does the rest.
    hints = None
    splittable = [(n, d) for n, d in g.operands if any(x % 2 == 0 for x in d)]
    if splittable:
        w, dims = splittable[int(rng.integers(0, len(splittable)))]
        split = int(rng.choice([d for d in range(len(dims)) if dims[d] % 2 == 0]))
        spec = ["tp" if d == split else "null" for d in range(len(dims))]
        hints = f"shardings:\n  '{w}': [{', '.join(spec)}]\n"
    return model, g.feeds, hints, batch


def run(command, timeout=TIMEOUT_S):
    try:
        r = subprocess.run(command, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout} s"
    return r.returncode, r.stderr


def output_file(name):
    return re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()).decode() + ".npy"


def check_one(args, index):
    """(status, detail, work folder, {layout: 'match' or 'refused'}):
    status 'ok', 'refused' (by some layout), 'invalid' or 'FAIL'."""
    layouts = {}
    model, feeds, hints, batch = make_graph(args.seed, index, args.ops)
    work = tempfile.mkdtemp(prefix=f"difftest-{index}-")
    try:
        path = os.path.join(work, "model.onnx")
        onnx.save(model, path)
        try:
            onnx.checker.check_model(model, full_check=True)
            expected = ort.InferenceSession(
                path, providers=["CPUExecutionProvider"]).run(None, feeds)
        except Exception as e:  # the generator's own mistake, not Cleave's
            return "invalid", f"{type(e).__name__}: {str(e)[:200]}", work, layouts
        for name, array in feeds.items():
            np.save(os.path.join(work, name + ".npy"), array)
        configs = [("1 rank", [])]
        if hints:
            with open(os.path.join(work, "hints.yaml"), "w") as f:
                f.write(hints)
            configs.append(("tp=2", ["--mesh", "tp=2", "--shard-hints",
                                     os.path.join(work, "hints.yaml")]))
        # The batch cut inside the compiler, a row a microbatch (a graph
        # whose rows meet is refused).
        configs.append(("pp=2 x microbatches",
                        ["--mesh", "pp=2", "--microbatches", str(batch)]))
        refused = ""
        for n, (label, flags) in enumerate(configs):
            bundle = os.path.join(work, f"b{n}")
            code, err = run([os.path.join(args.bin, "cleave-compile"), path,
                             "--quiet", "-o", bundle, *flags])
            if code is None or code < 0 or (code != 0 and "error:" not in err):
                return "FAIL", f"{label}: cleave-compile crashed or hung: {err[-300:]}", work, layouts
            if code != 0:
                reason = err.strip().splitlines()[0]
                reason = re.sub(r"'[^']*'", "'…'", reason.split("error:", 1)[-1])
                refused = refused or f"{label}: {reason.strip()[:90]}"
                layouts[label] = "refused"
                continue  # the other layouts are still checked
            out = bundle + "-out"
            inputs = [a for n in feeds for a in
                      ("--input", f"{n}={os.path.join(work, n + '.npy')}")]
            code, err = run([os.path.join(args.bin, "cleave-run"), bundle,
                             *inputs, "--output-dir", out, "--threads", "1"])
            if code != 0:
                return "FAIL", f"{label}: the program failed: {err[-300:]}", work, layouts
            for o, want in zip(model.graph.output, expected):
                got = np.load(os.path.join(out, output_file(o.name)))
                if got.shape != want.shape or not np.allclose(
                        got, want, rtol=1e-4, atol=1e-4, equal_nan=True):
                    diff = (np.abs(got - want).max() if got.shape == want.shape
                            else f"shape {got.shape} vs {want.shape}")
                    return "FAIL", f"{label}: output '{o.name}' differs: max |diff| {diff}", work, layouts
            layouts[label] = "match"
        return ("refused" if refused else "ok"), refused, work, layouts
    finally:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="folder of cleave-compile")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="first graph index")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", default="difftest-failures")
    parser.add_argument("--ops", default=",".join(OPS),
                        help="op families to draw from (default: all)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    args.ops = args.ops.split(",")
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        parser.error(f"unknown op families {unknown}; known: {', '.join(OPS)}")
    tally = collections.Counter()
    by_layout = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    failures = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(check_one, args, i): i
                   for i in range(args.first, args.first + args.count)}
        for future in concurrent.futures.as_completed(futures):
            index = futures[future]
            status, detail, work, layouts = future.result()
            tally[status] += 1
            for label, outcome in layouts.items():
                by_layout[label][outcome] += 1
            if status == "refused":
                reasons[detail.split(": ", 1)[-1]] += 1
            if status in ("FAIL", "invalid"):
                kept = os.path.join(args.keep, f"seed{args.seed}-graph{index}")
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(work, kept)
                failures.append((index, status, detail, kept))
            shutil.rmtree(work, ignore_errors=True)
            if args.verbose:
                print(f"graph {index}: {status} {detail}", flush=True)
    for index, status, detail, kept in sorted(failures):
        print(f"{status} graph {index} (seed {args.seed}): {detail}\n  kept in {kept}")
    for reason, n in reasons.most_common():
        print(f"refused {n}: {reason}")
    for label, counts in by_layout.items():
        print(f"{label}: {counts['match']} match, {counts['refused']} refused")
    print(f"difftest: seed {args.seed}, graphs {args.first}..{args.first + args.count - 1}: "
          f"{tally['ok']} match in every layout, {tally['refused']} refused in some, "
          f"{tally['FAIL']} failed, {tally['invalid']} invalid")
    return 1 if tally["FAIL"] or tally["invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
