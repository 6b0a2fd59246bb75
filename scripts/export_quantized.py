#!/usr/bin/env python3
"""Writes the quantized and ONNX-Runtime-optimized models in test/models.

Each is made by ONNX Runtime's own tools, as a user would, from an export of a
random-weight Hugging Face model already in test/models (hf-gpt2.onnx,
hf-bert.onnx; scripts/export_hf_models.py):

  *-dynamic-int8.onnx  onnxruntime.quantization.quantize_dynamic, int8 weights
                       (DynamicQuantizeLinear + MatMulInteger, uint8 zero
                       points on the activations)
  *-qdq.onnx           quantize_static in QDQ format, per-channel int8
                       weights, uint8 activations, calibrated on 4 batches
                       of random token ids
  hf-gpt2-qdq-int4.onnx
                       the same with per-channel int4 weights: ONNX
                       Runtime's com.microsoft QuantizeLinear and
                       DequantizeLinear (the export is opset 18), INT4
                       initializers
  *-ort-fused.onnx     onnxruntime.transformers.optimizer.optimize_model
                       (SkipLayerNormalization, BiasGelu / FastGelu)
  hf-bert-torchscript-ort-fused.onnx
                       the same optimizer on the TorchScript export
                       (hf-bert-torchscript.onnx), whose patterns it knows
                       best: EmbedLayerNormalization, Attention (one packed
                       QKV weight, the mask as key counts)
  hf-llama-int4.onnx   onnxruntime.quantization's MatMulNBitsQuantizer on
                       hf-llama.onnx: int4 weights in blocks of 32 along K
                       with uint8 zero points (com.microsoft MatMulNBits;
                       needs the onnx_ir package)

Usage: export_quantized.py [--out DIR]   (default: test/models)
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                      QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.transformers.optimizer import optimize_model

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "test", "models")
# The exports' vocabulary, heads and width (scripts/export_hf_models.py).
VOCAB, HEADS, HIDDEN = 97, 4, 64


class Batches(CalibrationDataReader):
    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def calibration(model, count=4):
    """Random inputs of the model's (static) shapes: token ids below the
    vocabulary, 0/1 for masks and token types."""
    rng = np.random.default_rng(0)
    inputs = onnx.load(model).graph.input
    feeds = []
    for _ in range(count):
        feed = {}
        for i in inputs:
            shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
            high = VOCAB if i.name == "input_ids" else 2
            feed[i.name] = rng.integers(0, high, shape).astype(np.int64)
        feeds.append(feed)
    return feeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=MODELS)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, kind in [("hf-gpt2", "gpt2"), ("hf-bert", "bert")]:
        source = os.path.join(MODELS, name + ".onnx")
        out = lambda suffix: os.path.join(args.out, f"{name}-{suffix}.onnx")
        quantize_dynamic(source, out("dynamic-int8"),
                         weight_type=QuantType.QInt8)
        quantize_static(source, out("qdq"), Batches(calibration(source)),
                        quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8)
        if kind == "gpt2":
            # 4-bit weights: below opset 21 the tool writes ONNX Runtime's
            # own com.microsoft Q/DQ for them.
            quantize_static(source, out("qdq-int4"),
                            Batches(calibration(source)),
                            quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt4,
                            op_types_to_quantize=["MatMul", "Gemm"])
            print(f"wrote {out('qdq-int4')}")
        fused = optimize_model(source, model_type=kind, num_heads=HEADS,
                               hidden_size=HIDDEN, opt_level=0)
        fused.save_model_to_file(out("ort-fused"))
        for suffix in ["dynamic-int8", "qdq", "ort-fused"]:
            print(f"wrote {out(suffix)}")
    fused = optimize_model(os.path.join(MODELS, "hf-bert-torchscript.onnx"),
                           model_type="bert", num_heads=HEADS,
                           hidden_size=HIDDEN, opt_level=0)
    path = os.path.join(args.out, "hf-bert-torchscript-ort-fused.onnx")
    fused.save_model_to_file(path)
    print(f"wrote {path}")
    # Imported here: it needs onnx_ir, which the other tools do not.
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer)
    config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=False)
    quantizer = MatMulNBitsQuantizer(
        onnx.load(os.path.join(MODELS, "hf-llama.onnx")), algo_config=config)
    quantizer.process()
    int4 = os.path.join(args.out, "hf-llama-int4.onnx")
    quantizer.model.save_model_to_file(int4)
    print(f"wrote {int4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
