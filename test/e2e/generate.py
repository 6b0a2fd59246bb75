#!/usr/bin/env python3
"""Checks cleave-compile --generate and cleave-run --generate on one model.

MODEL_DIR holds model.onnx and the reference's tokens for the prompts
(scripts/export_generate.py: transformers' generate(), or with
--reference onnxruntime-genai, og.Generator's). For each mesh asked for, the model is
compiled for generation and run greedily on the one-prompt and the
three-prompt (left-padded) batches, and with an end-of-sequence token; each
run's tokens.npy must equal transformers' generate() tokens exactly. A
seeded sampled run at each mesh must give the tokens of the first mesh's.
One line per check; exits 1 at the first difference.

Usage: generate.py MODEL_DIR --bin BIN --work DIR [--mesh SPEC[+mb=M]]...
  (+mb=M: M microbatches of the batch through the pipeline stages)
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

NEW_TOKENS = 32


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mesh", action="append", default=[])
    parser.add_argument("--max-seq", type=int, default=48)
    parser.add_argument("--prompts",
                        help="the folder of prompt1.npy, prompt3.npy and "
                        "mask3.npy (default MODEL_DIR)")
    parser.add_argument("--reference", default="transformers",
                        help="who computed the expected tokens, for the "
                        "report")
    parser.add_argument("--tokens-prefix", default="",
                        help="the expected tokens are MODEL_DIR/"
                        "PREFIXtokens1.npy and PREFIXtokens3.npy")
    parser.add_argument("--compile-arg", action="append", default=[])
    parser.add_argument("--shard-hints",
                        help="a hints file for the meshes with a pp axis "
                        "(fixed stage cuts)")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    ref = lambda name: os.path.join(args.model_dir, name)
    prompts = lambda name: os.path.join(args.prompts or args.model_dir, name)
    name = os.path.basename(os.path.normpath(args.model_dir))
    expected3 = np.load(ref(args.tokens_prefix + "tokens3.npy"))
    if os.path.exists(ref("eos.npy")):
        eos = int(np.load(ref("eos.npy"))[0])
        expected_eos = np.load(ref("tokens3-eos.npy"))
    else:
        # The first sequence's 6th token as the end token: each sequence's
        # tokens after its first end token become that token.
        eos = int(expected3[0, 5])
        expected_eos = expected3.copy()
        for row in expected_eos:
            hits = np.flatnonzero(row == eos)
            if hits.size:
                row[hits[0]:] = eos
    first_sampled = None
    for mesh in args.mesh or ["1"]:
        label = "1 rank" if mesh == "1" else mesh.replace("+mb=", " x ") + \
            (" microbatches" if "+mb=" in mesh else "")
        bundle = os.path.join(args.work, mesh.replace(",", "_").replace("=", "")
                              .replace("+", "_"))
        compile_args = [os.path.join(args.bin, "cleave-compile"), ref("model.onnx"),
                        "-o", bundle, "--generate", "--max-seq", str(args.max_seq),
                        "--max-batch", "3", "--prompt-length", "16",
                        "--quiet"] + args.compile_arg
        # MESH+mb=M: M microbatches of sequences through the stages.
        mesh_spec, _, microbatches = mesh.partition("+mb=")
        if mesh_spec != "1":
            compile_args += ["--mesh", mesh_spec]
            if "tp" in mesh_spec:
                compile_args += ["--shard-preset", "megatron"]
        if microbatches:
            compile_args += ["--microbatches", microbatches]
        if args.shard_hints and "pp" in mesh_spec:
            compile_args += ["--shard-hints", args.shard_hints]
        run(compile_args)
        runs = {
            "batch 1 greedy": (["--prompt", prompts("prompt1.npy")],
                               np.load(ref(args.tokens_prefix + "tokens1.npy"))),
            "batch 3 greedy": (["--prompt", prompts("prompt3.npy"),
                                "--attention-mask", prompts("mask3.npy")],
                               expected3),
            "batch 3 greedy with --eos": (
                ["--prompt", prompts("prompt3.npy"), "--attention-mask",
                 prompts("mask3.npy"), "--eos", str(eos)], expected_eos),
        }
        for what, (extra, expected) in runs.items():
            out = os.path.join(bundle + "-out", what.replace(" ", "-"))
            stdout = run([os.path.join(args.bin, "cleave-run"), bundle, "--generate",
                          "--max-new-tokens", str(NEW_TOKENS), "--output-dir", out]
                         + extra)
            got = np.load(os.path.join(out, "tokens.npy"))
            streamed = [line for line in stdout.splitlines()
                        if line and all(p.lstrip("-").isdigit() for p in line.split())]
            same = got.shape == expected.shape and (got == expected).all()
            print(f"{name} {label}: {what}: "
                  f"{'tokens as ' if same else 'DIFFERS from '}{args.reference}"
                  f" ({int((got == expected).sum()) if got.shape == expected.shape else 0}"
                  f" of {expected.size})")
            if not same:
                print(f"  got      {got.tolist()}\n  expected {expected.tolist()}")
                sys.exit(1)
            # Each step's tokens printed as they come: the same tokens.
            printed = np.array([[int(t) for t in line.split()] for line in streamed]).T
            if printed.shape[1] < NEW_TOKENS:
                printed = np.pad(printed, ((0, 0), (0, NEW_TOKENS - printed.shape[1])),
                                 mode="edge")
            if printed.shape != got.shape or not (printed == got).all():
                print(f"{name} {label}: {what}: printed tokens DIFFER from tokens.npy")
                sys.exit(1)
        out = os.path.join(bundle + "-out", "sampled")
        run([os.path.join(args.bin, "cleave-run"), bundle, "--generate",
             "--max-new-tokens", str(NEW_TOKENS), "--output-dir", out,
             "--prompt", prompts("prompt3.npy"), "--attention-mask",
             prompts("mask3.npy"),
             "--temperature", "0.8", "--top-k", "20", "--top-p", "0.9",
             "--seed", "7"])
        sampled = np.load(os.path.join(out, "tokens.npy"))
        if (sampled == expected3).all():
            print(f"{name} {label}: sampled tokens are the greedy ones: the draw "
                  "did not sample")
            sys.exit(1)
        if first_sampled is None:
            first_sampled = (label, sampled)
            print(f"{name} {label}: sampled (seed 7): {len(np.unique(sampled))} "
                  "distinct tokens")
        else:
            same = (sampled == first_sampled[1]).all()
            print(f"{name} {label}: sampled (seed 7): "
                  f"{'same tokens as' if same else 'DIFFERS from'} {first_sampled[0]}")
            if not same:
                sys.exit(1)


if __name__ == "__main__":
    main()
