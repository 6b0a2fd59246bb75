#!/usr/bin/env python3
"""Exports the sweep's architectures with Optimum itself and checks each.

The configurations of sweep_hf_models.py (2 layers of width 64, random
weights), exported by Optimum's `main_export` at opset 14 as
export_optimum.py does: decoders for `text-generation-with-past` (one model
for the prompt and the decoding steps), encoders for `feature-extraction`.
Each export is then checked by check_model.py against ONNX Runtime: a
decoder for the prompt (2 x 16 tokens, a cache of 0, the attention mask
over the 16), the prompt at tp=2 (megatron preset, also against the
one-rank program) and a decoding step after 8 cached tokens; an encoder on
one rank and at tp=2. Shapes are given by the export's dimension names
(check_model.py --dim), the prompt's attention mask by its shape. It measures coverage; it asserts
nothing (the committed exports' checks are in test/e2e/models.test).

Needs optimum 1.23 with transformers 4.x (tried: optimum 1.23.3,
transformers 4.46.3, torch 2.15.0), in a virtual environment of its own.
Usage: sweep_optimum.py WORK_DIR [--only NAME ...] [--bin DIR]
"""
import argparse
import functools
import os
import re
import subprocess
import sys

import check_model
import export_hf_models as hf
import sweep_hf_models as sweep

ENCODERS = ["bert", "roberta", "distilbert", "electra", "albert", "mobilebert",
            "deberta-v2", "vit", "t5-encoder"]
DECODERS = ["llama", "qwen2", "phi", "gemma", "gptj", "falcon", "phi3", "gpt-neox",
            "mistral", "gemma2", "opt", "gpt-bigcode", "stablelm", "starcoder2",
            "bloom", "mpt", "olmo", "codegen", "biogpt", "granite"]
# Named dimensions of Optimum's exports, for the prompt and for a step.
PROMPT = dict(batch_size=2, sequence_length=16, past_sequence_length=0,
              encoder_sequence_length=16, decoder_sequence_length=8,
              num_channels=3, height=32, width=32)
STEP = dict(PROMPT, sequence_length=1, past_sequence_length=8)
TP2 = ["--compile-arg=--mesh=tp=2", "--compile-arg=--shard-preset=megatron",
       "--compare-single-rank"]


def build(name, transformers, torch):
    """The model with its cache on, as Optimum exports it."""
    if name in sweep.ARCHITECTURES:
        config, model, kwargs = sweep.ARCHITECTURES[name]
        kwargs = dict(kwargs)
        if "use_cache" in kwargs:
            kwargs["use_cache"] = True
        return getattr(transformers, model)(getattr(transformers, config)(**kwargs))
    model = sweep.build(name, transformers, torch)[0]
    model.config.use_cache = True
    return model


def sizing(path, sizes, prompt):
    """check_model.py arguments sizing the model's inputs: --dim for each name
    its dimensions use; for a prompt, the attention mask pinned to the whole
    sequence, since Optimum names it for a step ('past_sequence_length + 1',
    1 for a prompt after an empty cache)."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    names, mask = set(), None
    for graph_input in model.graph.input:
        for d in graph_input.type.tensor_type.shape.dim:
            names.update(check_model.DIM_NAME.findall(d.dim_param))
            if (graph_input.name == "attention_mask" and d.dim_param and
                    not check_model.DIM_NAME.fullmatch(d.dim_param)):
                mask = d.dim_param
    arguments = [f"--dim={name}={sizes[name]}" for name in sorted(names)]
    if prompt and mask:
        tokens = sizes["past_sequence_length"] + sizes["sequence_length"]
        arguments.append(f"--input-shape=attention_mask={sizes['batch_size']}x{tokens}")
    return arguments


def check(path, sizing, work, bin_dir, extra):
    command = [sys.executable, os.path.join(os.path.dirname(__file__), "check_model.py"),
               path, "--int-high", "2", "--work", work, "--bin", bin_dir] + sizing + extra
    text = subprocess.run(command, capture_output=True, text=True)
    text = text.stdout + text.stderr
    ok = "outputs match ONNX Runtime: yes" in text and (
        not extra or "outputs match the single-rank program: yes" in text)
    if ok:
        collectives = re.search(r"Collectives per run: ([^;]*);", text)
        return "yes" + (f" ({collectives.group(1)})" if extra and collectives else "")
    error = re.search(r"error: (.*)", text)
    return "NO: " + (error.group(1) if error else text.strip().splitlines()[-1])[:90]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("--only", nargs="+")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..",
                                                      "build", "bin"))
    args = parser.parse_args()
    import torch
    import transformers
    # Optimum 1.23 predates torch.onnx.export's switch to dynamo (torch 2.9).
    torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
    from optimum.exporters.onnx import main_export

    os.makedirs(args.work, exist_ok=True)
    for name in args.only or (DECODERS + ENCODERS):
        decoder = name not in ENCODERS
        task = "text-generation-with-past" if decoder else "feature-extraction"
        torch.manual_seed(0)
        out = os.path.join(args.work, name)
        try:
            model = build(name, transformers, torch).eval()
            hf.randomize(model, torch)
            source = os.path.join(args.work, name + "-src")
            model.save_pretrained(source)
            main_export(source, output=out, task=task, opset=14, do_validation=False)
        except Exception as e:  # Optimum's refusals are findings too
            first = str(e).splitlines()[0] if str(e) else ""
            print(f"{name:12} export FAILED: {type(e).__name__}: {first[:90]}", flush=True)
            continue
        path = os.path.join(out, "model.onnx")
        work = os.path.join(args.work, name + "-check")
        prompt = sizing(path, PROMPT, prompt=True)
        results = [f"prompt {check(path, prompt, work + '-1', args.bin, [])}",
                   f"tp=2 {check(path, prompt, work + '-tp2', args.bin, TP2)}"]
        if decoder:
            step = sizing(path, STEP, prompt=False)
            results.append(f"step {check(path, step, work + '-step', args.bin, [])}")
        print(f"{name:12} " + "; ".join(results), flush=True)


if __name__ == "__main__":
    main()
