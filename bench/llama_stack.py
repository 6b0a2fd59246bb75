#!/usr/bin/env python3
"""Writes a LLaMA-style decoder as ONNX, built from plain ONNX ops.

Token embedding (Gather), then per layer: RMSNorm (Pow, ReduceMean, Add,
Sqrt, Div, Mul), Q, K and V projections without bias, rotary position
embeddings (rotate-half: Slice, Neg, Concat; cos and sin tables as
initializers), grouped-query attention (the key/value heads repeated with
Expand and Reshape), a causal mask, softmax, the output projection and a
residual; a SwiGLU MLP (Sigmoid times the gate, times up, then down) and a
residual; a final RMSNorm and an LM head. float32, random weights from a
fixed seed. Input `input_ids` [batch, seq] (int64), output `logits`
[batch, seq, vocab].

Default dimensions: d_model 1024, 16 heads, 4 key/value heads, MLP 2816,
vocabulary 8000, 8 layers.

With --placeholder the weights are a sparse file of zeros (no disk blocks):
the graph of a model too large to hold, for plan searches (LLaMA-70B's shape:
--layers 80 --d-model 8192 --heads 64 --kv-heads 8 --ffn 28672 --vocab 32000).

Usage: llama_stack.py OUT.onnx [--layers N] [--batch B] [--seq S]
                      [--d-model D] [--heads H] [--kv-heads K] [--ffn F]
                      [--vocab V] [--placeholder]
"""
import argparse
import math

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make_llama(path, layers=8, batch=1, seq=128, d=1024, heads=16, kv_heads=4,
               ffn=2816, vocab=8000, seed=0, placeholder=False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from gpt2_stack import GraphBuilder, Placeholders

    rng = np.random.default_rng(seed)
    holder = Placeholders(path + ".data") if placeholder else None
    graph = GraphBuilder()
    inits, nodes, const, node = graph.inits, graph.nodes, graph.const, graph.node
    head = d // heads

    def weight(name, dims, scale=0.02, offset=0.0):
        if holder:
            inits.append(holder.tensor(name, dims))
            return name
        values = (rng.standard_normal(dims) * scale + offset).astype(np.float32)
        inits.append(numpy_helper.from_array(values, name))
        return name

    two = const("two", 2.0, np.float32)
    eps = const("eps", 1e-6, np.float32)

    def rms_norm(x, name):
        variance = node("ReduceMean", [node("Pow", [x, two])], axes=[-1],
                        keepdims=1)
        normed = node("Div", [x, node("Sqrt", [node("Add", [variance, eps])])])
        return node("Mul", [normed, weight(name, [d], 0.1, 1.0)])

    # Rotary tables for positions 0 .. seq-1, [1, 1, seq, head].
    inv_freq = 1.0 / (10000 ** (np.arange(0, head, 2, dtype=np.float64) / head))
    freqs = np.outer(np.arange(seq, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)[None, None]
    const("rope_cos", np.cos(emb), np.float32)
    const("rope_sin", np.sin(emb), np.float32)
    mask = np.triu(np.full((seq, seq), -1e9, np.float32), 1)[None, None]
    const("causal_mask", mask, np.float32)
    split_q = const("split_q", [0, 0, heads, head])
    split_kv = const("split_kv", [0, 0, kv_heads, head])
    expand_kv = const("expand_kv", [batch, kv_heads, heads // kv_heads, seq, head])
    merge_kv = const("merge_kv", [batch, heads, seq, head])
    unsqueeze_axis = const("unsqueeze_axis", [2])
    merge = const("merge", [0, 0, d])
    scale = const("scale", 1.0 / math.sqrt(head), np.float32)
    half_starts, half_ends = const("half0", [0]), const("half1", [head // 2])
    end, last_axis = const("half2", [head]), const("last_axis", [-1])

    def rope(x):
        x1 = node("Slice", [x, half_starts, half_ends, last_axis])
        x2 = node("Slice", [x, half_ends, end, last_axis])
        rotated = node("Concat", [node("Neg", [x2]), x1], axis=-1)
        return node("Add", [node("Mul", [x, "rope_cos"]),
                            node("Mul", [rotated, "rope_sin"])])

    def heads_of(x, shape):
        return node("Transpose", [node("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def repeat_kv(x):
        expanded = node("Expand", [node("Unsqueeze", [x, unsqueeze_axis]),
                                   expand_kv])
        return node("Reshape", [expanded, merge_kv])

    x = node("Gather", [weight("embed_tokens", [vocab, d]), "input_ids"], axis=0)
    for i in range(layers):
        p = f"layers.{i}."
        h = rms_norm(x, p + "input_layernorm")
        q = rope(heads_of(node("MatMul", [h, weight(p + "q_proj", [d, d])]), split_q))
        k = rope(heads_of(node("MatMul", [h, weight(p + "k_proj", [d, kv_heads * head])]),
                          split_kv))
        v = heads_of(node("MatMul", [h, weight(p + "v_proj", [d, kv_heads * head])]),
                     split_kv)
        k, v = repeat_kv(k), repeat_kv(v)
        kt = node("Transpose", [k], perm=[0, 1, 3, 2])
        scores = node("Add", [node("Mul", [node("MatMul", [q, kt]), scale]),
                              "causal_mask"])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])],
                                    perm=[0, 2, 1, 3]), merge])
        x = node("Add", [x, node("MatMul", [ctx, weight(p + "o_proj", [d, d])])])
        h = rms_norm(x, p + "post_attention_layernorm")
        gate = node("MatMul", [h, weight(p + "gate_proj", [d, ffn])])
        up = node("MatMul", [h, weight(p + "up_proj", [d, ffn])])
        silu = node("Mul", [gate, node("Sigmoid", [gate])])
        x = node("Add", [x, node("MatMul", [node("Mul", [silu, up]),
                                            weight(p + "down_proj", [ffn, d])])])
    logits = node("MatMul", [rms_norm(x, "norm"), weight("lm_head", [d, vocab])])
    nodes.append(helper.make_node("Identity", [logits], ["logits"], name="output"))
    graph = helper.make_graph(
        nodes, "llama_stack",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [batch, seq, vocab])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if holder:
        holder.close()
    onnx.save(model, path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=2816)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--placeholder", action="store_true",
                        help="weights as a sparse file of zeros (plan searches)")
    args = parser.parse_args()
    make_llama(args.out, args.layers, args.batch, args.seq, args.d_model,
               args.heads, args.kv_heads, args.ffn, args.vocab,
               placeholder=args.placeholder)
