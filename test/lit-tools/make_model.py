#!/usr/bin/env python3
"""Writes small ONNX models that ONNX's text syntax cannot express, for tests.

Usage: make_model.py KIND OUT.onnx

Kinds:
  norm-gather
             LayerNormalization of x[3,5,24], flattened, then Gather by a
             permutation of all its elements (an initializer)
  softmax-gather-elements
             Softmax of x[3,5,24], then GatherElements along axis 1 by
             random initializer indices
  swin-pooler
             Swin's pooler as PyTorch's dynamo exporter writes it, on
             x[2,49,64]: LayerNormalization, Transpose, Unsqueeze,
             ReduceMean over the last two axes (keepdims), Reshape to one
             dimension, Gather by int64 indices of shape 2x64x1x1 stored as
             an initializer, Squeeze, Reshape to [2,64]
  swin-pooler-constant
             the same with the indices as a Constant node
  external   MatMul with a weight stored in OUT.onnx's folder as 'weights.bin',
             plus a small int64 shape initializer and a float scale vector
  unused     a model with an initializer nothing reads
  constant   MatMul with its 64x32 weight written as a Constant node
  mlp        a transformer MLP: x[2,16] -> MatMul+Add (16->64) -> Gelu ->
             MatMul+Add (64->16), random weights with a fixed seed
  attention  self-attention on x[1,8,32] with 4 heads: Q, K, V projections,
             Reshape/Transpose to heads, scaled QK^T, Softmax, PV, back to
             [1,8,32] and an output projection
  attention-fused
             the same with one fused [32,96] QKV projection and a Split
  attention-mqa
             self-attention on x[1,8,32], 4 heads of Q and one key/value head
             (multi-query attention) from one fused projection: a Gemm with
             transB (weight stored [48,32]) and a bias, Split into 32, 8 and
             8 columns; the single K and V broadcast over the heads by MatMul
  attention-mqa-2
             two such layers, each with its own weights, both reading one
             bias initializer (exporters keep one copy of equal ones)
  attention-merged
             the same on x[4,8,32], but with batch and heads merged into one
             dimension for the two products (Reshape to [16,8,8] and 3-D
             MatMuls), as older exporters write attention
  attention-core
             attention alone on inputs q, k [2,3,40,32], v [2,3,40,24]: scaled
             QK^T, a causal mask of -inf, Softmax with its NaNs zeroed
             (IsNaN, Where), times V
  attention-core-uneven
             the same with 70 queries, 5 keys, heads of 48, V of 16
  attention-core-narrow
             the same with heads of 24 (not a multiple of 16), V of 8
  attention-core-long
             the same with 150 queries and keys, the mask's -inf -1e9 (as
             bench/gpt2_stack.py writes it)
  attention-core-medium
             the same at the GPT-2-medium prefill's shape: 4 x 16 heads of
             64, 1024 queries and keys (bench/bench_gpu_attention.py)
  attention-merged-1
             the same on x[1,8,32]: heads alone merged with the batch of one
             ([4,8,8]), and the products' result reshaped to [1,4,8,8], as
             PyTorch's exporter writes attention at a batch of one
  embedding  token ids[2,8] -> Gather from a [32,16] table -> MatMul [16,16]
  gemm-projections
             three Gemms with transB (weights stored [N, K]) and biases
             reading one x[6,16]: N = 16, 8, 8, as Q, K and V of grouped-query
             attention
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def external(out):
    folder = os.path.dirname(os.path.abspath(out))
    weight = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    w = numpy_helper.from_array(weight, "proj.weight")
    with open(os.path.join(folder, "weights.bin"), "wb") as f:
        f.write(b"\0" * 64)  # an offset, as exporters that pack tensors use
        f.write(weight.tobytes())
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "64"),
                       ("length", str(weight.nbytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    shape = numpy_helper.from_array(np.array([2, 4, 8], dtype=np.int64), "shape")
    scale = numpy_helper.from_array(np.full(8, 0.5, dtype=np.float32), "scale")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "proj.weight"], ["h"], name="proj"),
         helper.make_node("Mul", ["h", "scale"], ["s"], name="scale_mul"),
         helper.make_node("Reshape", ["s", "shape"], ["y"], name="reshape")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8])],
        [w, shape, scale])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def unused(out):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "unused",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "stale.weight")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def constant(out):
    weight = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) % 7) - 3
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["proj.weight"], name="weight",
                          value=numpy_helper.from_array(weight)),
         helper.make_node("MatMul", ["x", "proj.weight"], ["y"], name="proj")],
        "constant",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def _weight(rng, name, *shape):
    return numpy_helper.from_array(
        (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)


def mlp(out):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "fc.weight"], ["fc_mm"], name="/mlp/fc/MatMul"),
             helper.make_node("Add", ["fc_mm", "fc.bias"], ["fc_out"], name="/mlp/fc/Add"),
             helper.make_node("Gelu", ["fc_out"], ["act"], name="/mlp/act/Gelu"),
             helper.make_node("MatMul", ["act", "proj.weight"], ["proj_mm"],
                              name="/mlp/proj/MatMul"),
             helper.make_node("Add", ["proj_mm", "proj.bias"], ["y"], name="/mlp/proj/Add")]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [_weight(rng, "fc.weight", 16, 64), _weight(rng, "fc.bias", 64),
         _weight(rng, "proj.weight", 64, 16), _weight(rng, "proj.bias", 16)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]),
              out)


def attention(out, fused=False, merged=False, batch=None, position_bias=False,
              static_cache=False):
    rng = np.random.default_rng(1)
    batch = batch or (4 if merged else 1)
    heads, seq, width = 4, 8, 32
    const = lambda name, values: numpy_helper.from_array(
        np.array(values, dtype=np.int64), name)
    inits = [const("heads_shape", [batch, seq, heads, width // heads]),
             const("model_shape", [batch, seq, width]),
             numpy_helper.from_array(np.array(1 / np.sqrt(width // heads), np.float32),
                                     "scale"),
             _weight(rng, "out.weight", width, width)]
    nodes = []
    if fused:
        inits += [_weight(rng, "qkv.weight", width, 3 * width),
                  _weight(rng, "qkv.bias", 3 * width)]
        nodes += [helper.make_node("MatMul", ["x", "qkv.weight"], ["qkv_mm"],
                                   name="/attn/qkv/MatMul"),
                  helper.make_node("Add", ["qkv_mm", "qkv.bias"], ["qkv"],
                                   name="/attn/qkv/Add"),
                  helper.make_node("Split", ["qkv"], ["q", "k", "v"], axis=-1,
                                   num_outputs=3, name="/attn/Split")]
    else:
        for p in "qkv":
            inits.append(_weight(rng, f"{p}.weight", width, width))
            nodes.append(helper.make_node("MatMul", ["x", f"{p}.weight"], [p],
                                          name=f"/attn/{p}/MatMul"))
    for p, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [p, "heads_shape"], [p + "_heads"],
                                   name=f"/attn/{p}/Reshape"),
                  helper.make_node("Transpose", [p + "_heads"], [p + "_t"], perm=perm,
                                   name=f"/attn/{p}/Transpose")]
    q, k, v, ctx = "q_t", "k_t", "v_t", "ctx"
    inputs, outputs = [], []
    if static_cache:
        # A static key/value cache of `cache` positions, the new tokens' keys
        # and values written at `pos` (ScatterElements at run-time indices,
        # the positions expanded to the keys' shape, as PyTorch exports
        # index_copy_), attention reading the whole cache.
        cache, head = 16, width // heads
        inits += [const("k_index_axes", [0, 1, 2]), const("v_index_axes", [0, 1, 3]),
                  const("k_index_shape", [batch, heads, head, seq]),
                  const("v_index_shape", [batch, heads, seq, head])]
        inputs += [helper.make_tensor_value_info("pos", TensorProto.INT64, [seq]),
                   helper.make_tensor_value_info("past_k", TensorProto.FLOAT,
                                                 [batch, heads, head, cache]),
                   helper.make_tensor_value_info("past_v", TensorProto.FLOAT,
                                                 [batch, heads, cache, head])]
        outputs += [helper.make_tensor_value_info("present_k", TensorProto.FLOAT,
                                                  [batch, heads, head, cache]),
                    helper.make_tensor_value_info("present_v", TensorProto.FLOAT,
                                                  [batch, heads, cache, head])]
        for p, axis in (("k", 3), ("v", 2)):
            nodes += [helper.make_node("Unsqueeze", ["pos", f"{p}_index_axes"],
                                       [f"{p}_pos"], name=f"/attn/{p}/Unsqueeze"),
                      helper.make_node("Expand", [f"{p}_pos", f"{p}_index_shape"],
                                       [f"{p}_index"], name=f"/attn/{p}/Expand"),
                      helper.make_node("ScatterElements",
                                       [f"past_{p}", f"{p}_index", f"{p}_t"],
                                       [f"present_{p}"], axis=axis,
                                       name=f"/attn/{p}/ScatterElements")]
        k, v = "present_k", "present_v"
    if merged:
        head = width // heads
        inits += [const("merged_q", [batch * heads, seq, head]),
                  const("merged_k", [batch * heads, head, seq]),
                  const("split_ctx", [batch, heads, seq, head])]
        for p, shape in (("q", "merged_q"), ("k", "merged_k"), ("v", "merged_q")):
            nodes.append(helper.make_node("Reshape", [p + "_t", shape], [p + "_m"],
                                          name=f"/attn/{p}/Merge"))
        q, k, v, ctx = "q_m", "k_m", "v_m", "ctx_m"
        nodes_after = [helper.make_node("Reshape", ["ctx_m", "split_ctx"], ["ctx"],
                                        name="/attn/ctx/Split")]
    else:
        nodes_after = []
    nodes += [helper.make_node("MatMul", [q, k], ["scores"], name="/attn/QK"),
              helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="/attn/Scale")]
    if position_bias:
        # T5's relative position bias: a learned table of buckets x heads,
        # looked up at each (query, key) pair's bucket and added to every
        # head's scores: [seq, seq, heads] -> [1, heads, seq, seq].
        buckets = 16
        offsets = np.arange(seq)[None, :] - np.arange(seq)[:, None]
        inits += [_weight(rng, "position_bias.weight", buckets, heads),
                  const("buckets", np.clip(offsets + buckets // 2, 0, buckets - 1)),
                  const("bias_axes", [0])]
        nodes += [helper.make_node("Gather", ["position_bias.weight", "buckets"],
                                   ["bias_qkh"], name="/attn/position_bias/Gather"),
                  helper.make_node("Transpose", ["bias_qkh"], ["bias_hqk"],
                                   perm=[2, 0, 1], name="/attn/position_bias/Transpose"),
                  helper.make_node("Unsqueeze", ["bias_hqk", "bias_axes"], ["bias"],
                                   name="/attn/position_bias/Unsqueeze"),
                  helper.make_node("Add", ["scaled", "bias"], ["biased"],
                                   name="/attn/position_bias/Add")]
    nodes += [helper.make_node("Softmax", ["biased" if position_bias else "scaled"],
                               ["probs"], axis=-1, name="/attn/Softmax"),
              helper.make_node("MatMul", ["probs", v], [ctx], name="/attn/PV")]
    nodes += nodes_after
    nodes += [helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3],
                               name="/attn/ctx/Transpose"),
              helper.make_node("Reshape", ["ctx_t", "model_shape"], ["merged"],
                               name="/attn/ctx/Reshape"),
              helper.make_node("MatMul", ["merged", "out.weight"], ["y"],
                               name="/attn/out/MatMul")]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, width])]
        + inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, width])]
        + outputs,
        inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              out)


def attention_mqa(out, layers=1):
    rng = np.random.default_rng(4)
    heads, seq, width, head = 4, 8, 32, 8
    const = lambda name, values: numpy_helper.from_array(
        np.array(values, dtype=np.int64), name)
    inits = [const("rows_shape", [seq, width]),
             const("qkv_shape", [1, seq, width + 2 * head]),
             const("split_sizes", [width, head, head]),
             const("q_shape", [1, seq, heads, head]),
             const("kv_shape", [1, seq, 1, head]),
             const("model_shape", [1, seq, width]),
             numpy_helper.from_array(np.array(1 / np.sqrt(head), np.float32), "scale")]
    nodes = []
    x = "x"
    for layer in range(layers):
        # One layer's names: the first layer's as they were before layers.
        n = (lambda name: name) if layer == 0 else (lambda name, l=layer: f"{name}.{l}")
        inits.append(_weight(rng, n("qkv.weight"), width + 2 * head, width))
        if layer == 0:
            inits.append(_weight(rng, "qkv.bias", width + 2 * head))
        inits.append(_weight(rng, n("out.weight"), width, width))
        y = "y" if layer == layers - 1 else n("y_layer")
        nodes += [helper.make_node("Reshape", [x, "rows_shape"], [n("rows")],
                                   name=n("/attn/rows")),
                  helper.make_node("Gemm", [n("rows"), n("qkv.weight"), "qkv.bias"],
                                   [n("qkv_rows")], transB=1, name=n("/attn/qkv/Gemm")),
                  helper.make_node("Reshape", [n("qkv_rows"), "qkv_shape"], [n("qkv")],
                                   name=n("/attn/qkv/Reshape")),
                  helper.make_node("Split", [n("qkv"), "split_sizes"],
                                   [n("q"), n("k"), n("v")], axis=-1, name=n("/attn/Split"))]
        for p, shape, perm in (("q", "q_shape", [0, 2, 1, 3]),
                               ("k", "kv_shape", [0, 2, 3, 1]),
                               ("v", "kv_shape", [0, 2, 1, 3])):
            nodes += [helper.make_node("Reshape", [n(p), shape], [n(p + "_heads")],
                                       name=n(f"/attn/{p}/Reshape")),
                      helper.make_node("Transpose", [n(p + "_heads")], [n(p + "_t")],
                                       perm=perm, name=n(f"/attn/{p}/Transpose"))]
        nodes += [helper.make_node("MatMul", [n("q_t"), n("k_t")], [n("scores")],
                                   name=n("/attn/QK")),
                  helper.make_node("Mul", [n("scores"), "scale"], [n("scaled")],
                                   name=n("/attn/Scale")),
                  helper.make_node("Softmax", [n("scaled")], [n("probs")], axis=-1,
                                   name=n("/attn/Softmax")),
                  helper.make_node("MatMul", [n("probs"), n("v_t")], [n("ctx")],
                                   name=n("/attn/PV")),
                  helper.make_node("Transpose", [n("ctx")], [n("ctx_t")], perm=[0, 2, 1, 3],
                                   name=n("/attn/ctx/Transpose")),
                  helper.make_node("Reshape", [n("ctx_t"), "model_shape"], [n("merged")],
                                   name=n("/attn/ctx/Reshape")),
                  helper.make_node("MatMul", [n("merged"), n("out.weight")], [y],
                                   name=n("/attn/out/MatMul"))]
        x = y
    graph = helper.make_graph(
        nodes, "attention_mqa",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, width])],
        inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              out)


def attention_core(out, queries=40, keys=40, depth=32, width=24,
                   masked=-np.inf, batch=2, heads=3):
    """Attention alone on inputs q [batch, heads, queries, depth], k [batch,
    heads, keys, depth] and v [batch, heads, keys, width] (by default 2 x
    3): Q K^T / sqrt(depth) plus a mask of
    `masked` above the diagonal (a Constant), Softmax, its NaNs replaced by 0
    (IsNaN and Where, as PyTorch's exporter writes
    scaled_dot_product_attention), times V. By default 40 queries and keys:
    neither a whole number of 64-query blocks nor of 16-key steps."""
    mask = np.triu(np.full((queries, keys), masked, np.float32), 1)[None, None]
    nodes = [
        helper.make_node("Constant", [], ["mask"],
                         value=numpy_helper.from_array(mask, "mask")),
        helper.make_node("Constant", [], ["scale"],
                         value=numpy_helper.from_array(
                             np.array(1 / np.sqrt(depth), np.float32), "scale")),
        helper.make_node("Constant", [], ["zero"],
                         value=numpy_helper.from_array(np.array(0, np.float32),
                                                       "zero")),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"], name="/attn/MatMul"),
        helper.make_node("Mul", ["qk", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "p"], ["pz"]),
        helper.make_node("MatMul", ["pz", "v"], ["o"], name="/attn/MatMul_1"),
    ]
    value = lambda name, rows, cols: helper.make_tensor_value_info(  # noqa: E731
        name, TensorProto.FLOAT, [batch, heads, rows, cols])
    graph = helper.make_graph(
        nodes, "attention_core",
        [value("q", queries, depth), value("k", keys, depth),
         value("v", keys, width)],
        [value("o", queries, width)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def embedding(out):
    rng = np.random.default_rng(2)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["emb"], name="/embed/Gather"),
         helper.make_node("MatMul", ["emb", "proj.weight"], ["y"], name="/proj/MatMul")],
        "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16])],
        [_weight(rng, "table", 32, 16), _weight(rng, "proj.weight", 16, 16)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def gemm_projections(out):
    rng = np.random.default_rng(3)
    nodes, weights, outputs = [], [], []
    for name, width in (("q", 16), ("k", 8), ("v", 8)):
        weights += [_weight(rng, f"{name}.weight", width, 16),
                    _weight(rng, f"{name}.bias", width)]
        nodes.append(helper.make_node(
            "Gemm", ["x", f"{name}.weight", f"{name}.bias"], [name], transB=1,
            name=f"/{name}_proj/Gemm"))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                     [6, width]))
    graph = helper.make_graph(
        nodes, "gemm_projections",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 16])],
        outputs, weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out)


def swin_pooler(out, constant=False):
    """Swin's pooler; see the usage text."""
    batch, tokens, channels = 2, 49, 64
    indices = np.arange(batch * channels, dtype=np.int64).reshape(batch, channels, 1, 1)
    inits = [numpy_helper.from_array(np.linspace(0.5, 1.5, channels, dtype=np.float32), "ln.w"),
             numpy_helper.from_array(np.linspace(-0.1, 0.1, channels, dtype=np.float32), "ln.b"),
             numpy_helper.from_array(np.array([2], np.int64), "unsqueeze_axes"),
             numpy_helper.from_array(np.array([-1, -2], np.int64), "mean_axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "flat_shape"),
             numpy_helper.from_array(np.array([3, 2], np.int64), "squeeze_axes"),
             numpy_helper.from_array(np.array([batch, channels], np.int64), "out_shape")]
    nodes = [helper.make_node("LayerNormalization", ["x", "ln.w", "ln.b"], ["ln"],
                              name="/layernorm/LayerNormalization", axis=-1, epsilon=1e-5),
             helper.make_node("Transpose", ["ln"], ["t"], name="/Transpose", perm=[0, 2, 1]),
             helper.make_node("Unsqueeze", ["t", "unsqueeze_axes"], ["u"], name="/pooler/Unsqueeze"),
             helper.make_node("ReduceMean", ["u", "mean_axes"], ["mean"],
                              name="/pooler/ReduceMean", keepdims=1),
             helper.make_node("Reshape", ["mean", "flat_shape"], ["flat"], name="/Reshape")]
    if constant:
        nodes.append(helper.make_node("Constant", [], ["indices"], name="/Constant",
                                      value=numpy_helper.from_array(indices)))
    else:
        inits.append(numpy_helper.from_array(indices, "indices"))
    nodes += [helper.make_node("Gather", ["flat", "indices"], ["gathered"], name="/Gather", axis=0),
              helper.make_node("Squeeze", ["gathered", "squeeze_axes"], ["squeezed"],
                               name="/Squeeze"),
              helper.make_node("Reshape", ["squeezed", "out_shape"], ["pooler_output"],
                               name="/Reshape_1")]
    graph = helper.make_graph(
        nodes, "swin-pooler",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, tokens, channels])],
        [helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, [batch, channels])],
        inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), out)


def row_gather(out, elements):
    """A row chain's result read by a gather at initializer indices that
    cross rows; see the usage text (norm-gather, softmax-gather-elements)."""
    rng = np.random.default_rng(3)
    batch, tokens, channels = 3, 5, 24
    if elements:
        inits = [numpy_helper.from_array(
            rng.integers(0, tokens, (batch, tokens, channels)).astype(np.int64), "idx")]
        nodes = [helper.make_node("Softmax", ["x"], ["rows"], name="/Softmax", axis=-1),
                 helper.make_node("GatherElements", ["rows", "idx"], ["y"],
                                  name="/GatherElements", axis=1)]
    else:
        inits = [numpy_helper.from_array(np.linspace(0.5, 1.5, channels, dtype=np.float32), "w"),
                 numpy_helper.from_array(np.linspace(-0.2, 0.2, channels, dtype=np.float32), "b"),
                 numpy_helper.from_array(np.array([-1], np.int64), "flat_shape"),
                 numpy_helper.from_array(rng.permutation(batch * tokens * channels)
                                         .reshape(batch, tokens, channels).astype(np.int64), "idx")]
        nodes = [helper.make_node("LayerNormalization", ["x", "w", "b"], ["rows"],
                                  name="/LayerNormalization", axis=-1),
                 helper.make_node("Reshape", ["rows", "flat_shape"], ["flat"], name="/Reshape"),
                 helper.make_node("Gather", ["flat", "idx"], ["y"], name="/Gather", axis=0)]
    shape = [batch, tokens, channels]
    graph = helper.make_graph(nodes, "row-gather",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), out)


if __name__ == "__main__":
    kinds = {"embedding": embedding, "external": external, "unused": unused,
             "constant": constant, "mlp": mlp,
             "swin-pooler": swin_pooler,
             "norm-gather": lambda out: row_gather(out, elements=False),
             "softmax-gather-elements": lambda out: row_gather(out, elements=True),
             "swin-pooler-constant": lambda out: swin_pooler(out, constant=True),
             "attention": attention, "gemm-projections": gemm_projections,
             "attention-fused": lambda out: attention(out, fused=True),
             "attention-mqa": attention_mqa,
             "attention-mqa-2": lambda out: attention_mqa(out, layers=2),
             "attention-merged": lambda out: attention(out, merged=True),
             "attention-merged-1": lambda out: attention(out, merged=True, batch=1),
             "attention-position-bias": lambda out: attention(out, position_bias=True),
             "attention-static-cache": lambda out: attention(out, static_cache=True),
             "attention-core": attention_core,
             "attention-core-uneven": lambda out: attention_core(
                 out, queries=70, keys=5, depth=48, width=16),
             "attention-core-narrow": lambda out: attention_core(
                 out, depth=24, width=8),
             "attention-core-long": lambda out: attention_core(
                 out, queries=150, keys=150, masked=-1e9),
             "attention-core-medium": lambda out: attention_core(
                 out, queries=1024, keys=1024, depth=64, width=64, masked=-1e9,
                 batch=4, heads=16)}
    if len(sys.argv) != 3 or sys.argv[1] not in kinds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    kinds[sys.argv[1]](sys.argv[2])
