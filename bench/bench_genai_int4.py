#!/usr/bin/env python3
"""Benchmarks one decoding step of a LLaMA as ONNX Runtime GenAI's model
builder writes it, in int4 (MatMulNBits, accuracy_level 4) and fp32:
Cleave against ONNX Runtime on the same graph and threads, and Cleave's
int4 program against its fp32 one.

The Hugging Face model is random (seed 0), saved locally with an offline
tokenizer, and built by `python -m onnxruntime_genai.models.builder -p
int4|fp32 -e cpu` (scripts/export_genai.py's save_hf_model), at a size
where a step's weights no longer fit in cache: width 1024, 4 layers, 16
heads (4 key/value heads), MLP 2816, vocabulary 2048 (about 58 M weights:
230 MB in fp32, ~33 MB in int4). The step is the 64th token: batch 1, one
new token, 63 past, every mask entry 1. Each graph is compiled, checked
against ONNX Runtime (both quantize a step's activations to int8 in
blocks, as level 4 allows, the same way: within 1e-3) and timed by
scripts/check_model.py: --runs runs a round, --rounds rounds alternating
which goes first, medians of the per-round p50s.

Needs torch, transformers 5, tokenizers and onnxruntime-genai (for the
builder: run with the Python that has them), onnx and onnxruntime.
Usage: bench_genai_int4.py [--runs N] [--rounds R] [--threads 1,2]
                           [--work DIR] [--bin DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from export_genai import save_hf_model  # noqa: E402
from ort_timing import time_against_ort  # noqa: E402

SIZE = dict(vocab_size=2048, hidden_size=1024, intermediate_size=2816,
            num_hidden_layers=4, num_attention_heads=16,
            num_key_value_heads=4, max_position_embeddings=256)
# The decoding step: one new token after 63.
DIMS = ["batch_size=1", "sequence_length=1", "past_sequence_length=63",
        "total_sequence_length=64"]
ATOL = {"fp32": 1e-3, "int4": 1e-3}


def build(work):
    """model.onnx of each precision, built from one random LLaMA."""
    hf = os.path.join(work, "hf")
    if not os.path.isdir(hf):
        save_hf_model("llama", hf, tied=False, size=SIZE)
    models = {}
    for precision in ["int4", "fp32"]:
        out = os.path.join(work, precision)
        if not os.path.exists(os.path.join(out, "model.onnx")):
            subprocess.run([sys.executable, "-m",
                            "onnxruntime_genai.models.builder", "-i", hf,
                            "-o", out, "-p", precision, "-e", "cpu",
                            "-c", os.path.join(work, "cache")],
                           check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        models[precision] = os.path.join(out, "model.onnx")
    return models


def bench(model, precision, threads, args, work):
    """(Cleave ms, ONNX Runtime ms) for one step of `model`."""
    extra = ["--input-values", "attention_mask=1", "--int-high", "2048"]
    # Head width 64: the cache's last dimension.
    for dim in DIMS + ["kv_cache_dim=64"]:
        extra += ["--dim", dim]
    return time_against_ort(model, ATOL[precision], threads, args.runs,
                            args.rounds, args.bin, work, extra)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--work",
                        default=tempfile.mkdtemp(prefix="cleave-bench-g4-"))
    parser.add_argument("--bin",
                        default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    models = build(args.work)
    print(f"GenAI-built LLaMA, width {SIZE['hidden_size']}, "
          f"{SIZE['num_hidden_layers']} layers: one decoding step (token 64); "
          f"p50, median of {args.rounds} alternating rounds of {args.runs} "
          f"runs")
    print(f"{'graph':6} {'threads':>7} {'Cleave ms':>10} {'ORT ms':>8} "
          f"{'Cleave/ORT':>10} {'int4 speed-up over fp32':>24}")
    for threads in [int(t) for t in args.threads.split(",")]:
        times = {}
        for precision in ["fp32", "int4"]:
            cleave, ort = bench(models[precision], precision, threads, args,
                                os.path.join(args.work,
                                             f"{precision}-{threads}"))
            times[precision] = cleave
            speedup = (f"{times['fp32'] / cleave:>23.2f}x"
                       if precision == "int4" else "")
            print(f"{precision:6} {threads:>7} {cleave:>10.3f} {ort:>8.3f} "
                  f"{cleave / ort:>9.2f}x {speedup}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
