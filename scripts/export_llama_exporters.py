#!/usr/bin/env python3
"""Exports one LLaMA-shaped model with either of PyTorch's ONNX exporters.

For comparing what Cleave makes of the two forms of the same model
(docs/performance.md): width 512, 8 heads (4 key/value heads), 2 layers,
MLP 1408, random weights drawn as export_hf_models.py draws them; inputs
input_ids and attention_mask, 1 x 256 tokens.

- `--exporter dynamo`: torch.onnx.export(dynamo=True), static shapes, as
  export_hf_models.py exports (transformers 5.x).
- `--exporter torchscript`: the older exporter (dynamo=False) with dynamic
  batch and sequence axes, inputs passed by name, as Optimum exports
  (transformers 4.x, e.g. 4.46.3: 5.x's mask code does not trace).
- `--exporter torchscript-static-cache`: the TorchScript exporter, the
  model as a step with a static key/value cache of 512 positions
  (export_hf_models.static_cache_export; transformers 4.x), the new tokens'
  count dynamic (`sequence`).

Usage: export_llama_exporters.py OUT.onnx
         --exporter dynamo|torchscript|torchscript-static-cache
"""
import argparse

import export_hf_models as hf


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--exporter", required=True,
                        choices=["dynamo", "torchscript", "torchscript-static-cache"])
    args = parser.parse_args()
    import torch
    import transformers
    torch.manual_seed(0)
    sizes = dict(hf.SIZES, hidden_size=512, num_attention_heads=8,
                 intermediate_size=1408, max_position_embeddings=512)
    config = transformers.LlamaConfig(**sizes, num_key_value_heads=4)
    model = transformers.LlamaForCausalLM(config).eval()
    hf.randomize(model, torch)
    ids = torch.randint(0, hf.VOCAB, (1, 256))
    mask = torch.ones(1, 256, dtype=torch.long)
    names = ["input_ids", "attention_mask"]
    if args.exporter == "torchscript-static-cache":
        hf.BATCH, hf.CACHE_LENGTH = 1, 512
        model.config.use_cache = True
        step, inputs, names, outputs = hf.static_cache_export(model, torch)
        torch.onnx.export(step, inputs, args.out, input_names=names,
                          output_names=outputs, opset_version=18,
                          dynamic_axes=hf.STATIC_CACHE_AXES, dynamo=False,
                          do_constant_folding=True)
    elif args.exporter == "torchscript":
        axes = {n: {0: "batch", 1: "sequence"} for n in names + ["logits"]}
        torch.onnx.export(hf.by_name(model, names, torch), (ids, mask), args.out,
                          input_names=names, output_names=["logits"],
                          opset_version=18, dynamic_axes=axes, dynamo=False,
                          do_constant_folding=True)
    else:
        torch.onnx.export(model, (ids, mask), args.out, input_names=names,
                          output_names=["logits"], opset_version=18, dynamo=True,
                          external_data=False)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
