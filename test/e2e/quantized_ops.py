#!/usr/bin/env python3
"""Checks Cleave's quantization and ONNX Runtime contrib operators against
ONNX Runtime, one small graph per case.

Each case is a graph of one or a few nodes, built here with onnx.helper, run by
ONNX Runtime (by numpy for BiasAdd, which ONNX Runtime runs on CUDA only) and
by a Cleave program (cleave-compile, cleave-run, one rank).
Integer results must equal ONNX Runtime's exactly. Float results of a graph
that ends in a dequantization must equal them exactly too: both compute
(q - zero_point) * scale from the same integers in float32. Other float
results (the normalisations, activations) must lie within rtol 1e-5,
atol 1e-5.

The values are chosen to hit what differs between implementations: x / scale
landing exactly on .5 (rounding half to even), values past the type's range
(saturation), an all-zero input to DynamicQuantizeLinear (scale 1, as ONNX
Runtime has it), a last block shorter than block_size.

Usage: quantized_ops.py --bin DIR --work DIR [--case NAME]
Prints one line per case and "N of N cases match"; exits 1 on a mismatch.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(1234)
ONNX_OF = {np.float32: T.FLOAT, np.float16: T.FLOAT16, np.int8: T.INT8,
           np.uint8: T.UINT8, np.int16: T.INT16, np.uint16: T.UINT16,
           np.int32: T.INT32, np.int64: T.INT64}


def tensor_info(name, array):
    return h.make_tensor_value_info(name, ONNX_OF[array.dtype.type],
                                    list(array.shape))


def with_ties(shape, scale):
    """Floats that are mostly k * scale / 2 for integers k (half of them land
    exactly on .5 after dividing by scale), some far out of range."""
    k = RNG.integers(-700, 700, size=shape)
    x = (k * (scale / 2)).astype(np.float32)
    noise = RNG.standard_normal(shape).astype(np.float32) * scale
    return np.where(RNG.random(shape) < 0.7, x, noise).astype(np.float32)


class Case:
    def __init__(self, name, nodes, inputs, weights, outputs, opset=21,
                 ms_opset=False, exact=True, reference=None, types=None):
        self.name, self.nodes, self.inputs = name, nodes, inputs
        self.weights, self.outputs, self.opset = weights, outputs, opset
        self.ms_opset, self.exact = ms_opset, exact
        self.reference = reference
        # Output element types where they are not the first input's.
        self.types = types or {}

    def model(self):
        # A weight is an array, or a TensorProto (4-bit types, which numpy
        # does not have) named by its key.
        inits = [v if isinstance(v, onnx.TensorProto) else nh.from_array(v, k)
                 for k, v in self.weights.items()]
        inputs = [tensor_info(k, v) for k, v in self.inputs.items()]
        opsets = [h.make_opsetid("", self.opset)]
        if self.ms_opset:
            opsets.append(h.make_opsetid("com.microsoft", 1))
        # Output types from ONNX's shape inference; the contrib ops', which
        # it does not know, are the case's `types` or else their first
        # operand's.
        probe = h.make_model(h.make_graph(self.nodes, self.name, inputs, [],
                                          inits), opset_imports=opsets)
        inferred = onnx.shape_inference.infer_shapes(probe).graph.value_info
        types = {v.name: v.type.tensor_type.elem_type for v in inferred}
        first = self.inputs[next(iter(self.inputs))]
        types.update({k: ONNX_OF[v] for k, v in self.types.items()})
        outputs = [h.make_tensor_value_info(
            name, types.get(name, ONNX_OF[first.dtype.type]), None)
            for name in self.outputs]
        model = h.make_model(h.make_graph(self.nodes, self.name, inputs,
                                          outputs, inits),
                             opset_imports=opsets)
        model.ir_version = 10
        return model


def node(op, inputs, outputs, domain="", **attrs):
    return h.make_node(op, inputs, outputs, domain=domain, **attrs)


def arr(values, dtype):
    return np.array(values, dtype=dtype)


def pack_codes(codes, bits):
    """Codes (integers below 2^bits) packed low-first into bytes along the
    last dimension, which must hold a whole number of bytes."""
    per = 8 // bits
    grouped = codes.reshape(codes.shape[:-1] + (-1, per)).astype(np.uint8)
    packed = np.zeros(grouped.shape[:-1], np.uint8)
    for j in range(per):
        packed |= grouped[..., j] << (bits * j)
    return packed


def nbits_weight(bits, k, n, block, zero):
    """MatMulNBits' B ([n, blocks, bytes a block]), scales ([n * blocks])
    and zero points: 'packed' (uint8, two 4-bit ones a byte, rows padded to
    a byte), 'float' or None."""
    blocks = (k + block - 1) // block
    codes = RNG.integers(0, 1 << bits, (n, blocks, block))
    b = pack_codes(codes, bits)
    scales = RNG.uniform(0.01, 0.1, n * blocks).astype(np.float32)
    if zero == "packed":
        per = 8 // bits
        row = (blocks + per - 1) // per * per
        z = np.zeros((n, row), np.int64)
        z[:, :blocks] = RNG.integers(0, 1 << bits, (n, blocks))
        zeros = pack_codes(z, bits).reshape(-1)
    elif zero == "float":
        zeros = RNG.uniform(0, 1 << bits, n * blocks).astype(np.float32)
    else:
        zeros = None
    return b, scales, zeros


def four_bit(name, values, signed, raw):
    """A 4-bit tensor of integer `values` (INT4 when `signed`, else UINT4),
    packed two a byte by onnx: as raw bytes, or in int32_data."""
    flat = np.asarray(values).reshape(-1)
    if raw:
        nibbles = np.append(flat, [0] * (flat.size % 2)).astype(np.int64) & 15
        data = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)
        data = data.tobytes()
    else:
        data = flat.tolist()
    return h.make_tensor(name, T.INT4 if signed else T.UINT4,
                         list(np.shape(values)), data, raw=raw)


def cases():
    f32 = np.float32
    x345 = with_ties((3, 4, 5), 0.25)
    yield Case("quantize-uint8-per-tensor",
               [node("QuantizeLinear", ["x", "s"], ["q"])],
               {"x": with_ties((4, 33), 0.5)}, {"s": arr(0.5, f32)}, ["q"],
               opset=13)
    yield Case("quantize-int8-per-axis",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1)],
               {"x": x345},
               {"s": arr([0.25, 0.5, 0.125, 1.0], f32),
                "z": arr([0, -3, 7, 120], np.int8)}, ["q"], opset=13)
    yield Case("quantize-int8-negative-axis",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=-1)],
               {"x": x345},
               {"s": arr([0.25, 0.5, 0.125, 1.0, 2.0], f32),
                "z": arr([0, -3, 7, 120, -128], np.int8)}, ["q"], opset=19)
    yield Case("quantize-blocked-short-last-block",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1,
                     block_size=4)],
               {"x": with_ties((2, 10, 3), 0.25)},
               {"s": RNG.uniform(0.1, 1.0, (2, 3, 3)).astype(f32),
                "z": RNG.integers(0, 255, (2, 3, 3)).astype(np.uint8)},
               ["q"])
    yield Case("quantize-int16-output-dtype",
               [node("QuantizeLinear", ["x", "s"], ["q"],
                     output_dtype=T.INT16)],
               {"x": with_ties((5, 7), 0.001)}, {"s": arr(0.001, f32)},
               ["q"])
    yield Case("quantize-float16",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"])],
               {"x": with_ties((6, 8), 0.25).astype(np.float16)},
               {"s": arr(0.25, np.float16), "z": arr(-5, np.int8)}, ["q"],
               opset=19)
    yield Case("dequantize-uint8-per-tensor",
               [node("DequantizeLinear", ["q", "s", "z"], ["y"])],
               {"q": RNG.integers(0, 256, (4, 9)).astype(np.uint8)},
               {"s": arr(0.37, f32), "z": arr(200, np.uint8)}, ["y"],
               opset=13)
    yield Case("dequantize-int8-per-axis-weight",
               [node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0),
                node("MatMul", ["x", "wf"], ["y"])],
               {"x": RNG.standard_normal((3, 16)).astype(f32)},
               {"w": RNG.integers(-128, 128, (16, 8)).astype(np.int8),
                "s": RNG.uniform(0.01, 0.1, 16).astype(f32),
                "z": RNG.integers(-10, 10, 16).astype(np.int8)},
               ["wf", "y"], opset=13, exact=False)
    yield Case("dequantize-int32-no-zero-point",
               [node("DequantizeLinear", ["q", "s"], ["y"])],
               {"q": RNG.integers(-2**30, 2**30, (17,)).astype(np.int32)},
               {"s": arr(1e-4, f32)}, ["y"], opset=13)
    yield Case("dequantize-blocked-uint8",
               [node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0,
                     block_size=3)],
               {"q": RNG.integers(0, 256, (8, 5)).astype(np.uint8)},
               {"s": RNG.uniform(0.01, 1.0, (3, 5)).astype(f32),
                "z": RNG.integers(0, 256, (3, 5)).astype(np.uint8)}, ["y"])
    yield Case("dequantize-int16-float16-scale",
               [node("DequantizeLinear", ["q", "s", "z"], ["y"])],
               {"q": RNG.integers(-32768, 32768, (4, 6)).astype(np.int16)},
               {"s": arr(0.0078125, np.float16), "z": arr(-300, np.int16)},
               ["y"])
    # 4-bit tensors (opset 21): held one a byte, their ranges [-8, 7] and
    # [0, 15]; odd element counts leave a half-used last byte.
    yield Case("dequantize-int4-per-axis-weight",
               [node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0),
                node("MatMul", ["x", "wf"], ["y"])],
               {"x": RNG.standard_normal((3, 15)).astype(f32)},
               {"w": four_bit("w", RNG.integers(-8, 8, (15, 7)), True, True),
                "s": RNG.uniform(0.01, 0.1, 15).astype(f32),
                "z": four_bit("z", RNG.integers(-8, 8, 15), True, False)},
               ["wf", "y"], exact=False)
    yield Case("dequantize-uint4-blocked-typed-fields",
               [node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0,
                     block_size=4)],
               {"x": arr([0.0], f32)},
               {"q": four_bit("q", RNG.integers(0, 16, (9, 5)), False, False),
                "s": RNG.uniform(0.01, 1.0, (3, 5)).astype(f32),
                "z": four_bit("z", RNG.integers(0, 16, (3, 5)), False, True)},
               ["y"])
    yield Case("quantize-int4-round-trip",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                node("DequantizeLinear", ["q", "s", "z"], ["y"])],
               {"x": with_ties((7, 9), 0.5)},
               {"s": arr(0.5, f32), "z": four_bit("z", -3, True, True)},
               ["y"])
    yield Case("quantize-uint4-per-axis-output-dtype",
               [node("QuantizeLinear", ["x", "s"], ["q"], axis=1,
                     output_dtype=T.UINT4),
                node("DequantizeLinear", ["q", "s"], ["y"], axis=1)],
               {"x": np.abs(with_ties((5, 3), 0.25))},
               {"s": arr([0.25, 0.5, 1.0], f32)}, ["y"])
    # ONNX Runtime's own Q/DQ (com.microsoft, opset 1), which its tools
    # write for 4- and 16-bit types below opset 21.
    yield Case("ms-quantize-dequantize-uint4-per-axis",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0,
                     domain="com.microsoft"),
                node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0,
                     domain="com.microsoft")],
               {"x": with_ties((3, 11), 0.25)},
               {"s": arr([0.25, 0.5, 1.0], f32),
                "z": four_bit("z", [8, 0, 15], False, True)},
               ["y"], opset=18, ms_opset=True)
    yield Case("ms-dequantize-int16",
               [node("DequantizeLinear", ["q", "s", "z"], ["y"],
                     domain="com.microsoft")],
               {"q": RNG.integers(-32768, 32768, (4, 6)).astype(np.int16)},
               {"s": arr(0.01, f32), "z": arr(-300, np.int16)}, ["y"],
               opset=18, ms_opset=True, types={"y": f32})
    yield Case("quantize-dequantize-round-trip",
               [node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                node("DequantizeLinear", ["q", "s", "z"], ["y"])],
               {"x": with_ties((8, 8), 0.05)},
               {"s": arr(0.05, f32), "z": arr(128, np.uint8)}, ["q", "y"],
               opset=13)
    yield Case("dynamic-quantize",
               [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])],
               {"x": RNG.standard_normal((5, 12)).astype(f32) * 3},
               {}, ["q", "s", "z"], opset=11)
    yield Case("dynamic-quantize-positive",
               [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])],
               {"x": RNG.uniform(0.5, 4.0, (7, 3)).astype(f32)},
               {}, ["q", "s", "z"], opset=11)
    yield Case("dynamic-quantize-zeros",
               [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])],
               {"x": np.zeros((2, 5), f32)}, {}, ["q", "s", "z"], opset=11)
    yield Case("matmul-integer-dynamic",
               [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                node("MatMulInteger", ["q", "w", "z", "wz"], ["acc"]),
                node("Cast", ["acc"], ["accf"], to=T.FLOAT),
                node("Mul", ["accf", "s"], ["y"])],
               {"x": RNG.standard_normal((2, 5, 64)).astype(f32)},
               {"w": RNG.integers(-128, 128, (64, 24)).astype(np.int8),
                "wz": arr(3, np.int8)}, ["acc", "y"], opset=13)
    yield Case("matmul-integer-per-column-zero-point",
               [node("MatMulInteger", ["a", "b", "az", "bz"], ["acc"])],
               {"a": RNG.integers(0, 256, (6, 40)).astype(np.uint8)},
               {"b": RNG.integers(0, 256, (40, 10)).astype(np.uint8),
                "az": arr(17, np.uint8),
                "bz": RNG.integers(0, 256, 10).astype(np.uint8)},
               ["acc"], opset=13)
    # K past 258: one float32 GEMM would no longer be exact, so K is cut in
    # chunks of at most 258 summed in int32. Row 0 x column 0 is the
    # extreme: -255 x 255 299 times and -255 x 254 once, -19507245, odd and
    # past 2^24 (which float32 cannot hold).
    a = RNG.integers(0, 256, (3, 300)).astype(np.uint8)
    b = RNG.integers(-128, 128, (300, 5)).astype(np.int8)
    a[0, :] = 0
    b[:, 0] = 127
    b[5, 0] = 126
    yield Case("matmul-integer-long-k",
               [node("MatMulInteger", ["a", "b", "az", "bz"], ["acc"])],
               {"a": a}, {"b": b, "az": arr(255, np.uint8),
                          "bz": arr(-128, np.int8)},
               ["acc"], opset=13)
    yield Case("qlinear-matmul-uint8",
               [node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz",
                                       "ys", "yz"], ["y"])],
               {"a": RNG.integers(0, 256, (2, 3, 32)).astype(np.uint8)},
               {"as": arr(0.02, f32), "az": arr(128, np.uint8),
                "b": RNG.integers(0, 256, (32, 9)).astype(np.uint8),
                "bs": arr(0.01, f32), "bz": arr(120, np.uint8),
                "ys": arr(0.05, f32), "yz": arr(100, np.uint8)},
               ["y"], opset=13)
    yield Case("qlinear-matmul-int8-per-column",
               [node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz",
                                       "ys", "yz"], ["y"])],
               {"a": RNG.integers(-128, 128, (5, 48)).astype(np.int8)},
               {"as": arr(0.03, f32), "az": arr(-2, np.int8),
                "b": RNG.integers(-128, 128, (48, 7)).astype(np.int8),
                "bs": RNG.uniform(0.005, 0.02, 7).astype(f32),
                "bz": np.zeros(7, np.int8),
                "ys": arr(0.4, f32), "yz": arr(5, np.int8)},
               ["y"], opset=13)
    yield Case("cast-unsigned",
               [node("Cast", ["q"], ["f"], to=T.FLOAT),
                node("Cast", ["q"], ["i"], to=T.INT32),
                node("Cast", ["q"], ["s"], to=T.INT8),
                node("Cast", ["x"], ["u"], to=T.UINT8),
                node("Transpose", ["q"], ["t"], perm=[1, 0]),
                node("Reshape", ["t", "shape"], ["r"]),
                node("Gather", ["r", "idx"], ["g"], axis=0)],
               {"q": RNG.integers(0, 256, (4, 6)).astype(np.uint8),
                "x": RNG.uniform(0, 255, (3, 3)).astype(f32)},
               {"shape": arr([12, 2], np.int64), "idx": arr([3, 0, 11],
                                                             np.int64)},
               ["f", "i", "s", "u", "g"], opset=13)
    # MatMulNBits: 4-bit codes with packed uint8 zero points and a bias, K
    # not a multiple of the block (the last block padded); 8-bit codes with
    # packed zero points; 4-bit with float ones (ONNX Runtime takes them
    # for 4 bits only); 2-bit codes with none (2 the default).
    for bits, k, n, block, zero, bias in [(4, 80, 24, 32, "packed", True),
                                          (8, 64, 10, 16, "packed", False),
                                          (4, 48, 6, 16, "float", False),
                                          (2, 48, 6, 16, None, False)]:
        b, scales, zeros = nbits_weight(bits, k, n, block, zero)
        weights = {"b": b, "scales": scales}
        inputs = ["a", "b", "scales"]
        if zeros is not None:
            weights["zeros"] = zeros
            inputs.append("zeros")
        if bias:
            inputs += ["", "bias"] if zeros is not None else ["", "", "bias"]
            weights["bias"] = RNG.standard_normal(n).astype(f32)
        yield Case(f"matmul-nbits-{bits}-bit-{zero}-zeros",
                   [node("MatMulNBits", inputs, ["y"], domain="com.microsoft",
                         K=k, N=n, bits=bits, block_size=block)],
                   {"a": RNG.standard_normal((2, 3, k)).astype(f32)}, weights,
                   ["y"], opset=17, ms_opset=True, exact=False)
    # GroupQueryAttention as ONNX Runtime GenAI's model builder writes it:
    # Q, K and V packed, rotary inside (cos/sin tables), past and present
    # caches (BNSH), seqlens_k per batch. The first prompt (a batch of 2,
    # the second padded: its padded queries attend its valid keys only); a
    # decoding step whose batches have different past lengths (the shorter
    # one's new key lands inside the past buffer); 3 new tokens after 4.
    q_heads, kv_heads, head = 4, 2, 16
    tables = {"cos": RNG.standard_normal((32, head // 2)).astype(f32),
              "sin": RNG.standard_normal((32, head // 2)).astype(f32)}
    for batch, new, past, seqlens in [(2, 5, 0, [4, 2]), (2, 1, 5, [5, 3]),
                                      (1, 3, 4, [6])]:
        inputs = {"qkv": RNG.standard_normal(
                      (batch, new, (q_heads + 2 * kv_heads) * head)).astype(f32),
                  "seqlens": np.array(seqlens, np.int32)}
        operands = ["qkv", "", "", "", "", "seqlens", "total", "cos", "sin"]
        if past:
            for name in ["past_key", "past_value"]:
                inputs[name] = RNG.standard_normal(
                    (batch, kv_heads, past, head)).astype(f32)
            operands[3:5] = ["past_key", "past_value"]
        weights = dict(tables, total=np.array(past + new, np.int32))
        yield Case(f"group-query-attention-{batch}x{new}-after-{past}",
                   [node("GroupQueryAttention", operands,
                         ["y", "present_key", "present_value"],
                         domain="com.microsoft", num_heads=q_heads,
                         kv_num_heads=kv_heads, do_rotary=1,
                         scale=float(1 / np.sqrt(head)))],
                   inputs, weights, ["y", "present_key", "present_value"],
                   opset=17, ms_opset=True, exact=False)
    # ... and with rotary pairs interleaved.
    yield Case("group-query-attention-interleaved",
               [node("GroupQueryAttention", operands,
                     ["y", "present_key", "present_value"],
                     domain="com.microsoft", num_heads=q_heads,
                     kv_num_heads=kv_heads, do_rotary=1,
                     rotary_interleaved=1)],
               inputs, weights, ["y", "present_key", "present_value"],
               opset=17, ms_opset=True, exact=False)
    yield from attention_cases()
    yield from embedding_cases()
    hidden = 32
    x = RNG.standard_normal((2, 5, hidden)).astype(f32)
    skip = RNG.standard_normal((2, 5, hidden)).astype(f32)
    gamma = RNG.uniform(0.5, 1.5, hidden).astype(f32)
    beta = RNG.standard_normal(hidden).astype(f32)
    bias = RNG.standard_normal(hidden).astype(f32)
    yield Case("skip-layer-norm",
               [node("SkipLayerNormalization",
                     ["x", "skip", "gamma", "beta", "bias"],
                     ["y", "mean", "inv", "sum"], domain="com.microsoft",
                     epsilon=1e-5)],
               {"x": x, "skip": skip},
               {"gamma": gamma, "beta": beta, "bias": bias},
               ["y", "sum"], opset=17, ms_opset=True, exact=False)
    yield Case("skip-simplified-layer-norm",
               [node("SkipSimplifiedLayerNormalization",
                     ["x", "skip", "gamma"], ["y", "", "", "sum"],
                     domain="com.microsoft", epsilon=1e-6)],
               {"x": x, "skip": skip}, {"gamma": gamma}, ["y", "sum"],
               opset=17, ms_opset=True, exact=False)
    yield Case("simplified-layer-norm",
               [node("SimplifiedLayerNormalization", ["x", "gamma"], ["y"],
                     axis=-1, epsilon=1e-6, stash_type=1)],
               {"x": x}, {"gamma": gamma}, ["y"], opset=17, exact=False)
    yield Case("fused-activations",
               [node("FastGelu", ["x", "bias"], ["fast"],
                     domain="com.microsoft"),
                node("BiasGelu", ["x", "bias"], ["biasgelu"],
                     domain="com.microsoft"),
                node("Gelu", ["x"], ["gelu"], domain="com.microsoft"),
                node("QuickGelu", ["x"], ["quick"], domain="com.microsoft",
                     alpha=1.5)],
               {"x": x}, {"bias": bias},
               ["fast", "biasgelu", "gelu", "quick"], opset=17,
               ms_opset=True, exact=False)
    # ONNX Runtime has BiasAdd on CUDA only: its definition is the reference.
    yield Case("bias-add",
               [node("BiasAdd", ["x", "bias", "skip"], ["y"],
                     domain="com.microsoft")],
               {"x": x, "skip": skip}, {"bias": bias}, ["y"], opset=17,
               ms_opset=True, exact=False,
               reference=lambda: {"y": x + bias + skip})


def attention_cases():
    """com.microsoft Attention and MultiHeadAttention in the mask forms ONNX
    Runtime's CPU kernels take (key lengths, ends and starts, 0/1 of the
    keys or of each query's keys), unidirectional with a past, Q/K/V of
    different sizes, attention_bias; and RotaryEmbedding."""
    f32, i32 = np.float32, np.int32
    batch, seq, hidden, heads = 2, 5, 32, 4
    x = RNG.standard_normal((batch, seq, hidden)).astype(f32)
    weights = {"w": (RNG.standard_normal((hidden, 3 * hidden)) * 0.3)
               .astype(f32),
               "b": RNG.standard_normal(3 * hidden).astype(f32)}
    raw = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], i32)
    per_query = RNG.integers(0, 2, (batch, seq, seq)).astype(i32)
    per_query[:, :, 0] = 1
    masks = {"lengths": np.array([3, 5], i32),
             "ends-starts": np.array([5, 4, 1, 0], i32),
             "keys": raw, "queries-keys": per_query}
    for name, mask in masks.items():
        yield Case(f"ort-attention-mask-{name}",
                   [node("Attention", ["x", "w", "b", "mask"], ["y"],
                         domain="com.microsoft", num_heads=heads)],
                   {"x": x, "mask": mask}, weights, ["y"], opset=17,
                   ms_opset=True, exact=False)
    # BERT's fusion: the mask filter at float's lowest, a fully masked
    # batch (every score filtered alike: ONNX Runtime averages the values).
    yield Case("ort-attention-lowest-filter",
               [node("Attention", ["x", "w", "b", "mask"], ["y"],
                     domain="com.microsoft", num_heads=heads,
                     mask_filter_value=float(np.finfo(f32).min))],
               {"x": x, "mask": np.array([2, 0], i32)}, weights, ["y"],
               opset=17, ms_opset=True, exact=False)
    past = RNG.standard_normal((2, batch, heads, 3, hidden // heads)).astype(f32)
    yield Case("ort-attention-unidirectional-past",
               [node("Attention", ["x", "w", "b", "mask", "past"],
                     ["y", "present"], domain="com.microsoft",
                     num_heads=heads, unidirectional=1)],
               {"x": x, "past": past,
                "mask": np.ones((batch, 3 + seq), i32)},
               weights, ["y", "present"], opset=17, ms_opset=True,
               exact=False)
    sizes = [16, 16, 24]
    yield Case("ort-attention-qkv-sizes-bias",
               [node("Attention", ["x", "w", "b", "", "", "bias"], ["y"],
                     domain="com.microsoft", num_heads=heads,
                     qkv_hidden_sizes=sizes, scale=0.3)],
               {"x": x, "bias": RNG.standard_normal(
                   (1, heads, seq, seq)).astype(f32)},
               {"w": (RNG.standard_normal((hidden, sum(sizes))) * 0.3)
                .astype(f32),
                "b": RNG.standard_normal(sum(sizes)).astype(f32)},
               ["y"], opset=17, ms_opset=True, exact=False)
    kv_len = 7
    key = RNG.standard_normal((batch, kv_len, hidden)).astype(f32)
    value = RNG.standard_normal((batch, kv_len, hidden)).astype(f32)
    yield Case("multi-head-attention-cross-padding",
               [node("MultiHeadAttention",
                     ["x", "key", "value", "b", "mask"], ["y"],
                     domain="com.microsoft", num_heads=heads)],
               {"x": x, "key": key, "value": value,
                "mask": np.array([[1] * 7, [1] * 4 + [0] * 3], i32)},
               {"b": weights["b"]}, ["y"], opset=17, ms_opset=True,
               exact=False)
    head = hidden // heads
    yield Case("multi-head-attention-past-unidirectional",
               [node("MultiHeadAttention",
                     ["x", "k", "v", "", "lengths", "", "pk", "pv"],
                     ["y", "present_key", "present_value"],
                     domain="com.microsoft", num_heads=heads,
                     unidirectional=1)],
               {"x": x, "k": x * 0.5, "v": x * 2,
                "lengths": np.array([8, 6], i32),
                "pk": RNG.standard_normal((batch, heads, 3, head)).astype(f32),
                "pv": RNG.standard_normal((batch, heads, 3, head)).astype(f32)},
               {}, ["y", "present_key", "present_value"], opset=17,
               ms_opset=True, exact=False)
    tables = {"cos": RNG.standard_normal((16, 4)).astype(f32),
              "sin": RNG.standard_normal((16, 4)).astype(f32)}
    yield Case("rotary-embedding-partial-3d",
               [node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"],
                     domain="com.microsoft", num_heads=heads,
                     rotary_embedding_dim=8)],
               {"x": x, "pos": RNG.integers(0, 16, (batch, seq))},
               tables, ["y"], opset=17, ms_opset=True, exact=False)
    yield Case("rotary-embedding-interleaved-4d-offset",
               [node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"],
                     domain="com.microsoft", interleaved=1)],
               {"x": RNG.standard_normal((batch, heads, seq, 8)).astype(f32)},
               dict(tables, pos=np.array([6], np.int64)), ["y"], opset=17,
               ms_opset=True, exact=False)


def embedding_cases():
    """com.microsoft EmbedLayerNormalization (segments, a mask, position
    ids or none) and GatherBlockQuantized (4 and 8 bits, packed zero points
    over an odd number of blocks, default zero points, negative and out of
    range indices)."""
    f32, i32 = np.float32, np.int32
    batch, seq, hidden, vocab = 2, 6, 32, 50
    tables = {"word": RNG.standard_normal((vocab, hidden)).astype(f32),
              "position": RNG.standard_normal((16, hidden)).astype(f32),
              "segment": RNG.standard_normal((2, hidden)).astype(f32),
              "gamma": RNG.uniform(0.5, 1.5, hidden).astype(f32),
              "beta": RNG.standard_normal(hidden).astype(f32)}
    ids = RNG.integers(0, vocab, (batch, seq)).astype(i32)
    segments = RNG.integers(0, 2, (batch, seq)).astype(i32)
    # mask_index counts the entries equal to 1 (a 2 is not counted).
    mask = np.array([[1, 1, 2, 1, 0, 0], [1, 0, 1, 1, 1, 1]], i32)
    yield Case("embed-layer-norm-segments-mask",
               [node("EmbedLayerNormalization",
                     ["ids", "segments", "word", "position", "segment",
                      "gamma", "beta", "mask"],
                     ["y", "mask_index", "sum"], domain="com.microsoft",
                     epsilon=1e-12)],
               {"ids": ids, "segments": segments, "mask": mask}, tables,
               ["y", "mask_index", "sum"], opset=17, ms_opset=True,
               exact=False,
               types={"y": f32, "mask_index": i32, "sum": f32})
    yield Case("embed-layer-norm-position-ids",
               [node("EmbedLayerNormalization",
                     ["ids", "", "word", "position", "", "gamma", "beta",
                      "", "pos"], ["y", "mask_index"],
                     domain="com.microsoft", epsilon=1e-5)],
               {"ids": ids, "pos": RNG.integers(0, 16, (1, seq)).astype(i32)},
               {k: v for k, v in tables.items() if k != "segment"},
               ["y", "mask_index"], opset=17, ms_opset=True, exact=False,
               types={"y": f32, "mask_index": i32})
    rows = 6
    indices = np.array([[1, 5], [0, -1], [-6, 2]], np.int64)
    for bits, width, zero in [(4, 48, True), (4, 64, False), (8, 32, True)]:
        blocks = width // 16
        per = 8 // bits
        weights = {
            "data": RNG.integers(0, 256, (rows, width // per)).astype(np.uint8),
            "scales": RNG.uniform(0.1, 1, (rows, blocks)).astype(f32)}
        inputs = ["data", "idx", "scales"]
        if zero:
            weights["zeros"] = RNG.integers(
                0, 256, (rows, (blocks + per - 1) // per)).astype(np.uint8)
            inputs.append("zeros")
        yield Case(f"gather-block-quantized-{bits}-bit-"
                   + ("zeros" if zero else "default-zeros"),
                   [node("GatherBlockQuantized", inputs, ["y"],
                         domain="com.microsoft", bits=bits, block_size=16)],
                   {"idx": indices}, weights, ["y"], opset=17,
                   ms_opset=True, types={"y": f32})
    yield Case("gather-block-quantized-out-of-range",
               [node("GatherBlockQuantized", ["data", "idx", "scales"], ["y"],
                     domain="com.microsoft", bits=4, block_size=16)],
               {"idx": np.array([2, 7, -7], np.int64)},
               {"data": RNG.integers(0, 256, (rows, 8)).astype(np.uint8),
                "scales": RNG.uniform(0.1, 1, (rows, 1)).astype(f32)},
               ["y"], opset=17, ms_opset=True, types={"y": f32})


def save_npy(path, array):
    np.save(path, np.ascontiguousarray(array))


def run_case(case, bin_dir, work):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(case.model(), path)
    if case.reference:
        expected = case.reference()
    else:
        session = ort.InferenceSession(path,
                                       providers=["CPUExecutionProvider"])
        expected = dict(zip(case.outputs,
                            session.run(case.outputs, case.inputs)))
    # The graph's outputs typed as ONNX Runtime computed them, so that the
    # model Cleave reads declares them.
    model = onnx.load(path)
    for out in model.graph.output:
        value = expected[out.name]
        out.CopyFrom(tensor_info(out.name, value))
    onnx.save(model, path)
    bundle = os.path.join(work, "bundle")
    subprocess.run([os.path.join(bin_dir, "cleave-compile"), path, "-o",
                    bundle, "--quiet"], check=True)
    args = [os.path.join(bin_dir, "cleave-run"), bundle, "--output-dir",
            os.path.join(work, "out")]
    for name, value in case.inputs.items():
        file = os.path.join(work, name + ".npy")
        save_npy(file, value)
        args += ["--input", f"{name}={file}"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    problems = []
    for name in case.outputs:
        want = expected[name]
        got = np.load(os.path.join(work, "out", name + ".npy"))
        if got.dtype != want.dtype or got.shape != want.shape:
            problems.append(f"{name}: {got.dtype}{list(got.shape)}, ONNX "
                            f"Runtime {want.dtype}{list(want.shape)}")
            continue
        if np.issubdtype(want.dtype, np.integer) or case.exact:
            bad = np.count_nonzero(got != want)
            if bad:
                problems.append(f"{name}: {bad} of {want.size} elements "
                                "differ")
        elif not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            err = np.max(np.abs(got.astype(np.float64) - want))
            problems.append(f"{name}: max |diff| {err:.3g}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--case")
    args = parser.parse_args()
    selected = [c for c in cases() if not args.case or c.name == args.case]
    failed = 0
    for case in selected:
        problems = run_case(case, args.bin, os.path.join(args.work, case.name))
        peer = "numpy" if case.reference else "ONNX Runtime"
        print(f"{case.name}: " + (f"matches {peer}" if not problems
                                  else "DIFFERS: " + "; ".join(problems)))
        failed += bool(problems)
    print(f"{len(selected) - failed} of {len(selected)} cases match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
