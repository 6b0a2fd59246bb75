#!/usr/bin/env python3
"""Writes test/models/ort-gpt2-past.onnx: a random-weight GPT-2 as ONNX
Runtime's own GPT-2 tool writes it for serving.

`python -m onnxruntime.transformers.models.gpt2.convert_to_onnx -o -p fp32`
exports the model with past key/values (TorchScript exporter, opset 11,
past_<layer> as [2, batch, heads, past, head size], int32 input_ids,
position_ids and attention_mask) and optimizes it: EmbedLayerNormalization
with position_ids, com.microsoft Attention with its past and present,
unidirectional, the mask over past and new tokens (filter float's lowest),
SkipLayerNormalization, FastGelu. The Hugging Face model (2 layers, width
64, 4 heads, vocabulary 97, 128 positions) is made with random weights
(seed 0) and eager attention (the tool's opset-11 export cannot write
PyTorch's scaled_dot_product_attention).

Needs torch, transformers 4.x (4.46.3 was used: the tool's past tuples) and
onnxruntime; run with the Python that has them:
  /path/to/python scripts/export_ort_gpt2.py [--out DIR]   (test/models)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "test", "models")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=MODELS)
    args = parser.parse_args()
    import torch
    import transformers
    with tempfile.TemporaryDirectory() as work:
        torch.manual_seed(0)
        config = transformers.GPT2Config(vocab_size=97, n_embd=64, n_layer=2,
                                         n_head=4, n_positions=128)
        model = transformers.GPT2LMHeadModel(config).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        hf = os.path.join(work, "hf")
        model.save_pretrained(hf)
        # Eager attention, as the tool loads the model from its config.
        path = os.path.join(hf, "config.json")
        with open(path) as f:
            saved = json.load(f)
        saved["attn_implementation"] = saved["_attn_implementation"] = "eager"
        with open(path, "w") as f:
            json.dump(saved, f)
        built = os.path.join(work, "gpt2.onnx")
        subprocess.run([sys.executable, "-m",
                        "onnxruntime.transformers.models.gpt2.convert_to_onnx",
                        "-m", hf, "--output", built, "-o", "-p", "fp32",
                        "--cache_dir", os.path.join(work, "cache")],
                       check=True, cwd=work, stdout=subprocess.DEVNULL)
        out = os.path.join(args.out, "ort-gpt2-past.onnx")
        shutil.copyfile(built, out)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
