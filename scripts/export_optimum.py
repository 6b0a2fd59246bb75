#!/usr/bin/env python3
"""Exports a small random model with Optimum itself (`main_export`).

For checking Cleave against the ONNX files Optimum writes (docs/models.md):
the model (2 layers of width 64, as export_hf_models.py builds them, random
weights) is saved to WORK/NAME-src and exported for TASK at opset 14 into
WORK/NAME-TASK/model.onnx. Needs Optimum 1.23 with transformers 4.x (tried:
optimum 1.23.3, transformers 4.46.3, torch 2.15.0), in a virtual
environment of its own. Optimum 1.23 predates torch.onnx.export's switch to
the dynamo exporter (torch 2.9), so the older exporter it was written for
is made the default here.

Usage: export_optimum.py WORK NAME TASK
  NAME: llama | gpt2 | bert; TASK: e.g. text-generation-with-past,
  feature-extraction
"""
import argparse
import functools
import os

import export_hf_models as hf


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("name", choices=["llama", "gpt2", "bert"])
    parser.add_argument("task")
    args = parser.parse_args()
    import torch
    import transformers
    torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
    from optimum.exporters.onnx import main_export

    torch.manual_seed(0)
    if args.name == "llama":
        config = transformers.LlamaConfig(**dict(hf.SIZES, use_cache=True),
                                          num_key_value_heads=2)
        model = transformers.LlamaForCausalLM(config)
    elif args.name == "gpt2":
        config = transformers.GPT2Config(vocab_size=hf.VOCAB, n_embd=64, n_layer=2,
                                         n_head=4, n_positions=128)
        model = transformers.GPT2LMHeadModel(config)
    else:
        model = transformers.BertModel(transformers.BertConfig(**hf.SIZES))
    hf.randomize(model.eval(), torch)
    source = os.path.join(args.work, f"{args.name}-src")
    model.save_pretrained(source)
    out = os.path.join(args.work, f"{args.name}-{args.task}")
    main_export(source, output=out, task=args.task, opset=14, do_validation=False)
    print(f"wrote {os.path.join(out, 'model.onnx')}")


if __name__ == "__main__":
    main()
