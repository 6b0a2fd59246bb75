#!/usr/bin/env python3
"""Writes a GPT-2-shaped stack of transformer blocks as ONNX.

GPT-2-small-shaped by default (d_model 768, 12 heads, MLP 3072), or
GPT-2-medium-shaped with --shape medium (1024, 16, 4096); pre-LN, causal mask,
GELU (erf form, as PyTorch exports it), float32, random weights from a fixed
seed. The graph uses the patterns exporters write: LayerNormalization, MatMul +
Add for linear layers, Reshape/Transpose to split heads, Softmax, residual
Adds. Input `hidden` [batch, seq, d_model], output `out` of the same shape.

With --tile N every weight repeats one random block of N values, so that a
bundle's weight file compresses to almost nothing (for carrying a large model
to another machine; speed does not depend on the values). stack_weights()
gives the same arrays without ONNX, for other frameworks to run the same model
(bench/bench_gpu_prefill.py).

With --placeholder the weights are a sparse file of zeros (no disk blocks):
the graph of a model too large to hold, for plan searches (--shape gpt3:
GPT-3-175B's d_model 12288, 96 heads, MLP 49152).

Usage: gpt2_stack.py OUT.onnx [--layers N] [--batch B] [--seq S]
                     [--shape tiny|small|medium|gpt3] [--tile N] [--external]
                     [--placeholder]
"""
import argparse
import math

import numpy as np

SHAPES = {"tiny": (64, 4, 256), "small": (768, 12, 3072),
          "medium": (1024, 16, 4096), "gpt3": (12288, 96, 49152)}
D, HEADS, FFN = SHAPES["small"]


def stack_weights(layers=2, shape="small", seed=0, tile=0):
    """The stack's parameters by name, in the order the graph reads them."""
    d, _, ffn = SHAPES[shape]
    rng = np.random.default_rng(seed)
    block = rng.standard_normal(tile).astype(np.float32) if tile else None
    weights = {}

    def weight(name, dims, scale=0.02):
        values = np.resize(block, dims) if tile else rng.standard_normal(dims)
        weights[name] = (values * scale).astype(np.float32)

    for i in range(layers):
        p = f"h.{i}."
        weight(p + "ln_1.weight", [d], 1.0)
        weight(p + "ln_1.bias", [d])
        for part in ("q", "k", "v"):
            weight(p + f"attn.{part}.weight", [d, d])
            weight(p + f"attn.{part}.bias", [d])
        weight(p + "attn.proj.weight", [d, d])
        weight(p + "attn.proj.bias", [d])
        weight(p + "ln_2.weight", [d], 1.0)
        weight(p + "ln_2.bias", [d])
        weight(p + "mlp.fc.weight", [d, ffn])
        weight(p + "mlp.fc.bias", [ffn])
        weight(p + "mlp.proj.weight", [ffn, d])
        weight(p + "mlp.proj.bias", [d])
    return weights


class GraphBuilder:
    """A graph's initializers and nodes as they are written: const() adds an
    initializer, node() a node named OP_INDEX with one output tINDEX."""

    def __init__(self):
        self.inits, self.nodes = [], []

    def const(self, name, values, dtype=np.int64):
        from onnx import numpy_helper
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def node(self, op, inputs, **attrs):
        from onnx import helper
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out],
                                           name=f"{op}_{len(self.nodes)}", **attrs))
        return out


class Placeholders:
    """Float32 initializers whose data is a sparse file of zeros: the graph
    of a model too large to hold (for plan searches, which read shapes
    only). `tensor(name, dims)` gives the initializer; `close()` sizes the
    file (no disk blocks are written)."""

    def __init__(self, data_path):
        self.path, self.offset = data_path, 0

    def tensor(self, name, dims):
        from onnx import TensorProto
        size = 4 * int(np.prod(dims))
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.path.split("/")[-1]),
                           ("offset", str(self.offset)), ("length", str(size))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.offset += size
        return t

    def close(self):
        with open(self.path, "wb") as f:
            f.truncate(self.offset)


def make_stack(path, layers=2, batch=1, seq=128, external=False, seed=0,
               shape="small", tile=0, placeholder=False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    D, HEADS, FFN = SHAPES[shape]
    weights = {} if placeholder else stack_weights(layers, shape, seed, tile)
    holder = Placeholders(path + ".data") if placeholder else None
    graph = GraphBuilder()
    inits, nodes, const, node = graph.inits, graph.nodes, graph.const, graph.node

    def weight(name, dims, scale=None):
        if holder:
            inits.append(holder.tensor(name, dims))
            return name
        assert list(weights[name].shape) == list(dims)
        inits.append(numpy_helper.from_array(weights[name], name))
        return name

    head = D // HEADS
    mask = np.triu(np.full((seq, seq), -1e9, np.float32), 1)[None, None]
    inits.append(numpy_helper.from_array(mask, "causal_mask"))
    # 0 copies the input's dimension, as exporters write for the batch: the
    # same graph then compiles for any batch (and for microbatches).
    split = const("split_shape", [0, 0, HEADS, head])
    merge = const("merge_shape", [0, 0, D])
    scale = const("scale", 1.0 / math.sqrt(head), np.float32)
    sqrt2 = const("sqrt2", math.sqrt(2.0), np.float32)
    one = const("one", 1.0, np.float32)
    half = const("half", 0.5, np.float32)

    x = "hidden"
    for i in range(layers):
        p = f"h.{i}."
        ln = node("LayerNormalization", [x, weight(p + "ln_1.weight", [D], 1.0),
                                         weight(p + "ln_1.bias", [D])], axis=-1)
        heads = []
        for part in ("q", "k", "v"):
            proj = node("Add", [node("MatMul", [ln, weight(p + f"attn.{part}.weight",
                                                           [D, D])]),
                                weight(p + f"attn.{part}.bias", [D])])
            heads.append(node("Transpose", [node("Reshape", [proj, split])],
                              perm=[0, 2, 1, 3]))
        q, k, v = heads
        kt = node("Transpose", [k], perm=[0, 1, 3, 2])
        scores = node("Add", [node("Mul", [node("MatMul", [q, kt]), scale]),
                              "causal_mask"])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])],
                                    perm=[0, 2, 1, 3]), merge])
        attn = node("Add", [node("MatMul", [ctx, weight(p + "attn.proj.weight",
                                                        [D, D])]),
                            weight(p + "attn.proj.bias", [D])])
        x = node("Add", [x, attn])
        ln2 = node("LayerNormalization", [x, weight(p + "ln_2.weight", [D], 1.0),
                                          weight(p + "ln_2.bias", [D])], axis=-1)
        fc = node("Add", [node("MatMul", [ln2, weight(p + "mlp.fc.weight", [D, FFN])]),
                          weight(p + "mlp.fc.bias", [FFN])])
        erf = node("Erf", [node("Div", [fc, sqrt2])])
        gelu = node("Mul", [node("Mul", [fc, node("Add", [erf, one])]), half])
        mlp = node("Add", [node("MatMul", [gelu, weight(p + "mlp.proj.weight",
                                                        [FFN, D])]),
                           weight(p + "mlp.proj.bias", [D])])
        x = node("Add", [x, mlp])
    nodes.append(helper.make_node("Identity", [x], ["out"], name="output"))
    graph = helper.make_graph(
        nodes, "gpt2_stack",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [batch, seq, D])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, seq, D])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if holder:
        holder.close()
        onnx.save(model, path)
    elif external:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=path.split("/")[-1] + ".data", size_threshold=1024)
    else:
        onnx.save(model, path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--external", action="store_true")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--tile", type=int, default=0)
    parser.add_argument("--placeholder", action="store_true",
                        help="weights as a sparse file of zeros (plan searches)")
    args = parser.parse_args()
    make_stack(args.out, args.layers, args.batch, args.seq, args.external,
               shape=args.shape, tile=args.tile, placeholder=args.placeholder)
