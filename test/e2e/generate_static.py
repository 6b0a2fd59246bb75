#!/usr/bin/env python3
"""Checks --generate on a static-cache export against ONNX Runtime.

The graph (transformers' StaticCache exported: input_ids, attention_mask
over the whole cache, cache_position, the cache in and the updated cache
out) is run greedily by ONNX Runtime in a loop as transformers' generate()
drives such a cache: the prompt at cache_position 0..L-1, then each new
token at the next position, the mask's ones covering the positions
written, each step's cache the last one's output. Cleave's bundle, compiled
with --generate at each mesh asked for, must give the same tokens. One line
per check; exits 1 at the first difference.

Usage: generate_static.py MODEL --bin BIN --work DIR [--mesh SPEC]...
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnxruntime as ort

NEW_TOKENS = 20


def ort_tokens(model, prompt):
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in session.get_inputs()}
    pasts = [n for n in inputs if "past" in n]
    length = inputs["attention_mask"].shape[1]
    batch, count = prompt.shape
    cache = {n: np.zeros(inputs[n].shape, dtype=np.float32) for n in pasts}
    names = [o.name for o in session.get_outputs()]
    tokens, ids, position = [], prompt, np.arange(count)
    while len(tokens) < NEW_TOKENS:
        mask = np.zeros((batch, length), dtype=np.int64)
        mask[:, :position[-1] + 1] = 1
        out = dict(zip(names, session.run(None, dict(
            input_ids=ids, attention_mask=mask, cache_position=position,
            **cache))))
        token = out["logits"][:, -1].argmax(-1)
        tokens.append(token)
        for n in pasts:
            cache[n] = out[n.replace("past_key_values", "present")]
        ids, position = token[:, None], position[-1:] + 1
    return np.stack(tokens, axis=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mesh", action="append", default=[])
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    prompt = np.random.default_rng(3).integers(3, 97, (2, 5)).astype(np.int64)
    prompt_file = os.path.join(args.work, "prompt.npy")
    np.save(prompt_file, prompt)
    expected = ort_tokens(args.model, prompt)
    name = os.path.basename(args.model)
    for mesh in args.mesh or ["1"]:
        bundle = os.path.join(args.work, mesh.replace(",", "_").replace("=", ""))
        command = [os.path.join(args.bin, "cleave-compile"), args.model, "-o",
                   bundle, "--generate", "--max-batch", "2", "--prompt-length",
                   "8", "--quiet"]
        if mesh != "1":
            command += ["--mesh", mesh]
            if "tp" in mesh:
                command += ["--shard-preset", "megatron"]
        subprocess.run(command, check=True)
        out = os.path.join(bundle + "-out")
        subprocess.run([os.path.join(args.bin, "cleave-run"), bundle,
                        "--generate", "--prompt", prompt_file,
                        "--max-new-tokens", str(NEW_TOKENS), "--output-dir", out],
                       check=True, capture_output=True)
        got = np.load(os.path.join(out, "tokens.npy"))
        same = got.shape == expected.shape and (got == expected).all()
        print(f"{name} {'1 rank' if mesh == '1' else mesh}: batch 2 greedy: "
              f"{'tokens as' if same else 'DIFFERS from'} ONNX Runtime's loop "
              f"({int((got == expected).sum())} of {expected.size})")
        if not same:
            print(f"  got      {got.tolist()}\n  expected {expected.tolist()}")
            sys.exit(1)


if __name__ == "__main__":
    main()
