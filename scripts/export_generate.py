#!/usr/bin/env python3
"""Exports decoders for generation tests, with transformers' own tokens.

For test/e2e/generate.test: LLaMA (4 heads, 2 key/value heads), GPT-2 and
Qwen2 (LLaMA's shape with biases on Q, K and V), each 2 layers of width 64
with random weights as export_hf_models.py draws them, exported by Optimum
for text-generation-with-past (the decoder with past: input_ids,
attention_mask, position_ids and past_key_values.<layer>.key/.value in;
logits and present.<layer>.key/.value out; opset 14) into
OUT/gen-<name>/model.onnx. Beside each, the reference the test compares
with, from transformers' generate() on the same weights, greedy, 32 new
tokens:

- prompt1.npy, tokens1.npy: one prompt of 7 tokens;
- prompt3.npy, mask3.npy, tokens3.npy: 3 prompts of 9, 4 and 12 tokens,
  left-padded to 12 with the attention mask, as generate() pads them;
- eos.npy, tokens3-eos.npy: the same with an end-of-sequence token (the
  6th token generate() chose for the first prompt), the tokens after it
  padded with it.

Needs Optimum 1.23 with transformers 4.x and torch (tried: optimum 1.23.3,
transformers 4.46.3, torch 2.10), as export_optimum.py; not in the README's
test command (the files are committed).

With --genai, instead: the reference for ONNX Runtime GenAI's LLaMA
(OUT/genai-llama-fp32, scripts/export_genai.py), from onnxruntime-genai's
own og.Generator on that committed graph (the model builder run again on
the same random model for its genai_config.json and tokenizer), greedy, 32
new tokens, each of gen-llama's prompts alone: OUT/genai-llama-fp32/
gen-tokens1.npy and gen-tokens3.npy (the three prompts' rows). Needs
onnxruntime-genai 0.18 with transformers 5 (export_genai.py's Python).

Usage: export_generate.py OUT [--names llama,gpt2,qwen2] [--genai]
"""
import argparse
import functools
import os
import shutil
import tempfile

import numpy as np

import export_hf_models as hf

NEW_TOKENS = 32
LENGTHS = (9, 4, 12)


def build(name, transformers):
    if name == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            **dict(hf.SIZES, use_cache=True), num_key_value_heads=2))
    if name == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
            **dict(hf.SIZES, use_cache=True), num_key_value_heads=2))
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=hf.VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128))


def references(model, out, torch):
    """transformers' greedy tokens for the prompts, saved beside the model."""
    config = model.generation_config
    config.pad_token_id = 0
    config.eos_token_id = None
    draw = torch.Generator().manual_seed(1)

    def generate(ids, mask, **kwargs):
        with torch.no_grad():
            tokens = model.generate(ids, attention_mask=mask,
                                    max_new_tokens=NEW_TOKENS, do_sample=False,
                                    **kwargs)
        return tokens[:, ids.shape[1]:].numpy()

    one = torch.randint(0, hf.VOCAB, (1, 7), generator=draw)
    np.save(os.path.join(out, "prompt1.npy"), one.numpy())
    np.save(os.path.join(out, "tokens1.npy"),
            generate(one, torch.ones_like(one)))
    width = max(LENGTHS)
    ids = torch.zeros(len(LENGTHS), width, dtype=torch.long)
    mask = torch.zeros(len(LENGTHS), width, dtype=torch.long)
    for row, length in enumerate(LENGTHS):
        ids[row, width - length:] = torch.randint(0, hf.VOCAB, (length,),
                                                  generator=draw)
        mask[row, width - length:] = 1
    np.save(os.path.join(out, "prompt3.npy"), ids.numpy())
    np.save(os.path.join(out, "mask3.npy"), mask.numpy())
    tokens = generate(ids, mask)
    np.save(os.path.join(out, "tokens3.npy"), tokens)
    # generate() stops when every sequence has ended: the rest is padding,
    # here the end token itself.
    eos = int(tokens[0, 5])
    ended = generate(ids, mask, eos_token_id=eos, pad_token_id=eos)
    ended = np.pad(ended, ((0, 0), (0, NEW_TOKENS - ended.shape[1])),
                   constant_values=eos)
    np.save(os.path.join(out, "eos.npy"), np.array([eos], dtype=np.int64))
    np.save(os.path.join(out, "tokens3-eos.npy"), ended)


def genai_reference(out):
    """og.Generator's greedy tokens on the committed GenAI LLaMA."""
    import subprocess
    import sys
    import onnxruntime_genai as og
    from export_genai import save_hf_model
    model_dir = os.path.join(out, "genai-llama-fp32")
    prompts = os.path.join(out, "gen-llama")
    with tempfile.TemporaryDirectory() as work:
        hf_dir, built = os.path.join(work, "hf"), os.path.join(work, "built")
        save_hf_model("llama", hf_dir, tied=False)
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder",
                        "-i", hf_dir, "-o", built, "-p", "fp32", "-e", "cpu",
                        "-c", os.path.join(work, "cache")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for file in ["model.onnx", "model.onnx.data"]:
            shutil.copyfile(os.path.join(model_dir, file), os.path.join(built, file))
        model = og.Model(built)

        def generate(prompt):
            params = og.GeneratorParams(model)
            length = len(prompt) + NEW_TOKENS
            params.set_search_options(max_length=length, min_length=length,
                                      do_sample=False)
            generator = og.Generator(model, params)
            # append_tokens runs the prompt; each generate_next_token then
            # chooses a token (and runs the model on it).
            generator.append_tokens(np.array([prompt], dtype=np.int64))
            tokens = []
            while len(tokens) < NEW_TOKENS:
                generator.generate_next_token()
                tokens.append(int(generator.get_next_tokens()[0]))
            return tokens

        one = np.load(os.path.join(prompts, "prompt1.npy"))[0]
        np.save(os.path.join(model_dir, "gen-tokens1.npy"),
                np.array([generate(list(one))], dtype=np.int64))
        ids = np.load(os.path.join(prompts, "prompt3.npy"))
        mask = np.load(os.path.join(prompts, "mask3.npy"))
        rows = [generate([int(t) for t, m in zip(row, keep) if m])
                for row, keep in zip(ids, mask)]
        np.save(os.path.join(model_dir, "gen-tokens3.npy"),
                np.array(rows, dtype=np.int64))
    print(f"wrote {model_dir}/gen-tokens1.npy, gen-tokens3.npy")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--names", default="llama,gpt2,qwen2")
    parser.add_argument("--genai", action="store_true")
    args = parser.parse_args()
    if args.genai:
        genai_reference(args.out)
        return
    import torch
    import transformers
    # Optimum 1.23 predates torch.onnx.export's switch to the dynamo
    # exporter (torch 2.9): the exporter it was written for.
    torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
    from optimum.exporters.onnx import main_export

    for name in args.names.split(","):
        torch.manual_seed(0)
        model = build(name, transformers).eval()
        hf.randomize(model, torch)
        out = os.path.join(args.out, f"gen-{name}")
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryDirectory() as work:
            model.save_pretrained(os.path.join(work, "src"))
            main_export(os.path.join(work, "src"), output=os.path.join(work, "onnx"),
                        task="text-generation-with-past", opset=14,
                        do_validation=False)
            shutil.copy(os.path.join(work, "onnx", "model.onnx"),
                        os.path.join(out, "model.onnx"))
        references(model, out, torch)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
