#!/usr/bin/env python3
"""Benchmarks token generation: time to first token and decode tokens/s.

One random LLaMA (seed 0; width 1024, 4 layers, 16 heads with 4 key/value
heads, MLP 2816, vocabulary 2048: about 50 M weights, 188 MiB in float32,
as bench_genai_int4.py), saved locally with an offline tokenizer, run
three ways on a prompt of 64 tokens and 64 new tokens, greedy, batch 1
(and Cleave a fourth: with --precision bf16):

- Cleave: Optimum's decoder with past (text-generation-with-past, opset 14)
  compiled with cleave-compile --generate --max-seq 128 --prompt-length 64,
  run by cleave-run --generate (its own figures: time to first token, p50
  of the decode steps);
- ONNX Runtime GenAI (onnxruntime_genai 0.18, float32): its model builder
  (`-p fp32 -e cpu`) on the same saved model, og.Generator, the session's
  intra-op threads set in genai_config.json;
- ONNX Runtime on the same decoder with past as Cleave, in a loop with IO
  binding (each step's present outputs bound as the next step's past
  inputs, without copies).

Each at 1 and 2 threads, alternating which runs first, --rounds rounds;
medians. Also each Cleave decode step's time against this machine's memory
bandwidth bound: the bytes a step must read (every weight once, and the
cache of the tokens so far, on average over the 64 steps) over the
bandwidth at which the same threads stream as many bytes (a buffer each,
16 streams a thread, AVX-512 loads: a C probe built with clang, best of
3, measured in every round beside the programs; the size matters here,
the host's large last-level cache holding part of it), printed as
step / bound (1.0: at the bound). Each program runs warm: Cleave after its
warm-up runs (reported as its set-up), GenAI after a 3-token generation on
the same og.Model, the ONNX Runtime loop after a prompt and two steps.

Needs (run with the Python that has them): torch, transformers 5,
tokenizers, onnxruntime-genai and onnxruntime, numpy; and for the Optimum
export, a path holding optimum 1.23 and transformers 4.x (--optimum-path,
e.g. `pip install --target DIR optimum==1.23.3 transformers==4.46.3`).

With --layouts, instead: Cleave alone, float32, under 1 rank x 2 threads,
tp=2 and pp=2 (1 thread a rank) at batch 1, and the same at batch 4 with
pp=2 also cutting the batch into 2 and 4 microbatches (sequences in flight
through the stages together): time to first token, decode step and
tokens/s in all.

Usage: bench_generate.py --optimum-path DIR [--rounds R] [--threads 1,2]
                         [--layouts] [--work DIR] [--bin DIR]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from export_genai import save_hf_model  # noqa: E402

SIZE = dict(vocab_size=2048, hidden_size=1024, intermediate_size=2816,
            num_hidden_layers=4, num_attention_heads=16,
            num_key_value_heads=4, max_position_embeddings=256)
PROMPT, NEW = 64, 64
HEAD = SIZE["hidden_size"] // SIZE["num_attention_heads"]

OPTIMUM_EXPORT = """
import functools, sys, torch
torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
from optimum.exporters.onnx import main_export
main_export(sys.argv[1], output=sys.argv[2], task="text-generation-with-past",
            opset=14, do_validation=False)
"""


def build(work, args):
    hf = os.path.join(work, "hf")
    if not os.path.isdir(hf):
        save_hf_model("llama", hf, tied=False, size=SIZE)
    genai = os.path.join(work, "genai-fp32")
    if not os.path.exists(os.path.join(genai, "model.onnx")):
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder",
                        "-i", hf, "-o", genai, "-p", "fp32", "-e", "cpu",
                        "-c", os.path.join(work, "cache")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    optimum = os.path.join(work, "optimum")
    if not os.path.exists(os.path.join(optimum, "model.onnx")):
        env = dict(os.environ, PYTHONPATH=args.optimum_path)
        subprocess.run([sys.executable, "-c", OPTIMUM_EXPORT, hf, optimum],
                       check=True, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    bundles = {}
    for precision in ["f32", "bf16"]:
        bundle = os.path.join(work, f"bundle-{precision}")
        if not os.path.isdir(bundle):
            subprocess.run([os.path.join(args.bin, "cleave-compile"),
                            os.path.join(optimum, "model.onnx"), "-o", bundle,
                            "--generate", "--max-seq", str(PROMPT + NEW),
                            "--prompt-length", str(PROMPT),
                            "--precision", precision, "--quiet"], check=True)
        bundles[precision] = bundle
    return genai, os.path.join(optimum, "model.onnx"), bundles


def run_cleave(bundle, prompt_file, threads, args, work):
    out = bundle + "-out"
    result = subprocess.run(
        [os.path.join(args.bin, "cleave-run"), bundle, "--generate",
         "--prompt", prompt_file, "--max-new-tokens", str(NEW),
         "--threads", str(threads), "--output-dir", out],
        check=True, capture_output=True, text=True)
    first = float(re.search(r"time to first token: ([0-9.]+) ms",
                            result.stdout).group(1))
    step = float(re.search(r"per token p50 ([0-9.]+) ms",
                           result.stdout).group(1))
    return first, step, np.load(os.path.join(out, "tokens.npy"))[0]


def genai_generate(model, prompt, new_tokens):
    """(time to first token ms, decode step ms each, tokens) of one
    generation by og.Generator."""
    import onnxruntime_genai as og
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=PROMPT + new_tokens,
                              min_length=PROMPT + new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    # append_tokens runs the prompt (its logits are the first token's);
    # each generate_next_token chooses a token and runs the model on it.
    start = time.perf_counter()
    generator.append_tokens(prompt[None, :])
    first = (time.perf_counter() - start) * 1e3
    steps, tokens = [], []
    while len(tokens) < new_tokens:
        start = time.perf_counter()
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
        steps.append((time.perf_counter() - start) * 1e3)
    return first, steps, np.array(tokens)


def run_genai(genai, prompt, threads):
    import onnxruntime_genai as og
    path = os.path.join(genai, "genai_config.json")
    with open(path) as f:
        config = json.load(f)
    options = config["model"]["decoder"].setdefault("session_options", {})
    if options.get("intra_op_num_threads") != threads:
        options["intra_op_num_threads"] = threads
        options["inter_op_num_threads"] = 1
        with open(path, "w") as f:
            json.dump(config, f, indent=4)
    model = og.Model(genai)
    # A warm-up generation first, as Cleave's warm-up runs: the timed one
    # then runs on a loaded model.
    genai_generate(model, prompt, 3)
    first, steps, tokens = genai_generate(model, prompt, NEW)
    return first, statistics.median(steps), tokens


def run_ort_loop(onnx_path, prompt, threads):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(onnx_path, options,
                                   providers=["CPUExecutionProvider"])
    pasts = [i.name for i in session.get_inputs() if "past" in i.name]
    outputs = [o.name for o in session.get_outputs()]
    kv_heads = SIZE["num_key_value_heads"]

    def step(ids, positions, length, past_values):
        binding = session.io_binding()
        binding.bind_cpu_input("input_ids", ids)
        binding.bind_cpu_input("position_ids", positions)
        binding.bind_cpu_input("attention_mask",
                               np.ones((1, length), dtype=np.int64))
        for name, value in zip(pasts, past_values):
            if isinstance(value, np.ndarray):
                binding.bind_cpu_input(name, value)
            else:
                binding.bind_ortvalue_input(name, value)
        for name in outputs:
            binding.bind_output(name)
        session.run_with_iobinding(binding)
        values = binding.get_outputs()
        token = int(np.argmax(values[0].numpy()[0, -1]))
        return token, values[1:]

    empty = [np.zeros((1, kv_heads, 0, HEAD), dtype=np.float32)] * len(pasts)
    # Warm-up: the prompt and two steps.
    token, cache = step(prompt[None, :], np.arange(PROMPT)[None, :], PROMPT,
                        empty)
    for n in (PROMPT + 1, PROMPT + 2):
        token, cache = step(np.array([[token]]), np.array([[n - 1]]), n, cache)
    start = time.perf_counter()
    token, cache = step(prompt[None, :], np.arange(PROMPT)[None, :], PROMPT,
                        empty)
    first = (time.perf_counter() - start) * 1e3
    tokens, steps = [token], []
    while len(tokens) < NEW:
        n = PROMPT + len(tokens)
        start = time.perf_counter()
        token, cache = step(np.array([[tokens[-1]]]), np.array([[n - 1]]), n,
                            cache)
        steps.append((time.perf_counter() - start) * 1e3)
        tokens.append(token)
    return first, statistics.median(steps), np.array(tokens)


STREAM_C = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <immintrin.h>
/* Threads argv[1] read argv[2] bytes in all (a buffer each, read as 16
   interleaved streams, as a GEMV reads 16 panels: one stream alone leaves
   a core's memory parallelism unused) with 512-bit loads, best of 3:
   bytes/s. */
enum { kStreams = 16 };
int main(int argc, char **argv) {
  int threads = atoi(argv[1]);
  size_t n = (size_t)(atof(argv[2]) / threads / 4 / kStreams) & ~(size_t)15;
  float **bufs = malloc(threads * sizeof(float *));
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num();
    bufs[t] = aligned_alloc(64, n * kStreams * 4);
    for (size_t i = 0; i < n * kStreams; ++i) bufs[t][i] = 1.0f;
  }
  double best = 0, sink = 0;
  for (int round = 0; round < 3; ++round) {
    double start = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      const float *b = bufs[omp_get_thread_num()];
      __m512 acc[kStreams];
      for (int s = 0; s < kStreams; ++s) acc[s] = _mm512_setzero_ps();
      for (size_t i = 0; i < n; i += 16)
        for (int s = 0; s < kStreams; ++s)
          acc[s] = _mm512_add_ps(acc[s], _mm512_load_ps(b + s * n + i));
      __m512 total = acc[0];
      for (int s = 1; s < kStreams; ++s) total = _mm512_add_ps(total, acc[s]);
      sink += _mm512_reduce_add_ps(total);
    }
    double rate = threads * n * kStreams * 4.0 / (omp_get_wtime() - start);
    if (rate > best) best = rate;
  }
  printf("%.0f %g\n", best, sink);
  return 0;
}
"""


def stream_bandwidth(threads, total_bytes, work):
    """Bytes/s of `threads` threads reading `total_bytes` in all (a part
    each, 16 streams a thread) with AVX-512 loads (a C probe built here with
    clang -O2 -mavx512f -fopenmp), best of 3. The working set's size matters: on this machine
    a thread streams 29 GB/s from 64 MiB, 20 from 188 MiB, 16 from 256."""
    source = os.path.join(work, "stream.c")
    probe = os.path.join(work, "stream")
    if not os.path.exists(probe):
        with open(source, "w") as f:
            f.write(STREAM_C)
        clang = next(c for c in ("clang-22", "clang") if shutil.which(c))
        subprocess.run([clang, "-O2", "-mavx512f", "-fopenmp", source, "-o",
                        probe], check=True)
    result = subprocess.run([probe, str(threads), str(total_bytes)],
                            check=True,
                            capture_output=True, text=True)
    return float(result.stdout.split()[0])


# (label, cleave-compile arguments, threads per rank, batch) of the layouts
# --layouts compares, on as many cores as this machine has ranks for (2).
LAYOUTS = [
    ("1 rank x 2 threads", [], 2, 1),
    ("tp=2", ["--mesh", "tp=2", "--shard-preset", "megatron"], 1, 1),
    ("pp=2", ["--mesh", "pp=2"], 1, 1),
    ("1 rank x 2 threads", [], 2, 4),
    ("tp=2", ["--mesh", "tp=2", "--shard-preset", "megatron"], 1, 4),
    ("pp=2", ["--mesh", "pp=2"], 1, 4),
    ("pp=2 x 2 microbatches", ["--mesh", "pp=2", "--microbatches", "2"], 1, 4),
    ("pp=2 x 4 microbatches", ["--mesh", "pp=2", "--microbatches", "4"], 1, 4),
]


def compare_layouts(onnx_path, args):
    """Time to first token, decode step and tokens/s of each layout in
    LAYOUTS, float32, alternating rounds, medians."""
    rng = np.random.default_rng(0)
    rows = []
    for label, extra, threads, batch in LAYOUTS:
        bundle = os.path.join(args.work, "layout-" + re.sub(r"\W+", "-", label)
                              + f"-b{batch}")
        if not os.path.isdir(bundle):
            subprocess.run([os.path.join(args.bin, "cleave-compile"), onnx_path,
                            "-o", bundle, "--generate", "--max-seq",
                            str(PROMPT + NEW), "--prompt-length", str(PROMPT),
                            "--max-batch", str(batch), "--quiet"] + extra,
                           check=True)
        prompt_file = os.path.join(args.work, f"prompt-b{batch}.npy")
        if not os.path.exists(prompt_file):
            np.save(prompt_file, rng.integers(3, SIZE["vocab_size"],
                                              (batch, PROMPT)).astype(np.int64))
        rows.append((label, batch, bundle, prompt_file, threads))
    results = {i: [] for i in range(len(rows))}
    for r in range(args.rounds):
        order = list(range(len(rows)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            label, batch, bundle, prompt_file, threads = rows[i]
            results[i].append(run_cleave(bundle, prompt_file, threads, args,
                                         args.work)[:2])
    print(f"Layouts on this machine's 2 cores (float32, prompt {PROMPT}, "
          f"{NEW} new tokens, medians of {args.rounds} alternating rounds)")
    print(f"{'layout':>24} {'batch':>5} {'TTFT ms':>8} {'step ms':>8} "
          f"{'tokens/s in all':>16}")
    for i, (label, batch, _, _, _) in enumerate(rows):
        first = statistics.median(x[0] for x in results[i])
        step = statistics.median(x[1] for x in results[i])
        print(f"{label:>24} {batch:>5} {first:>8.2f} {step:>8.3f} "
              f"{1e3 * batch / step:>16.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimum-path", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--layouts", action="store_true",
                        help="instead: time Cleave alone under 1 rank, tp=2 "
                        "and pp=2 (with microbatches) at batch 1 and 4")
    parser.add_argument("--work",
                        default=tempfile.mkdtemp(prefix="cleave-bench-gen-"))
    parser.add_argument("--bin",
                        default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    genai, onnx_path, bundles = build(args.work, args)
    if args.layouts:
        compare_layouts(onnx_path, args)
        return 0
    prompt = np.random.default_rng(0).integers(
        3, SIZE["vocab_size"], PROMPT).astype(np.int64)
    prompt_file = os.path.join(args.work, "prompt.npy")
    np.save(prompt_file, prompt[None, :])
    # A step reads every weight once and the keys and values of every layer
    # for the tokens so far, averaged over the decode steps.
    per_token = 2 * SIZE["num_hidden_layers"] * SIZE["num_key_value_heads"] * \
        HEAD * 4
    cache_bytes = per_token * (PROMPT + NEW / 2)
    step_bytes = {p: os.path.getsize(os.path.join(b, "weights.bin")) + cache_bytes
                  for p, b in bundles.items()}
    print(f"LLaMA width {SIZE['hidden_size']}, {SIZE['num_hidden_layers']} "
          f"layers ({step_bytes['f32'] / 2**20:.0f} MiB read a float32 step); "
          f"prompt {PROMPT}, {NEW} new tokens, greedy, batch 1; medians of "
          f"{args.rounds} alternating rounds. Cleave bf16: --precision bf16 "
          f"(GEMM operands and weights in bfloat16, float32 sums), against "
          f"float32 elsewhere")
    print(f"{'threads':>7} {'program':>11} {'TTFT ms':>8} {'step ms':>8} "
          f"{'tokens/s':>9} {'TTFT / GenAI':>13} {'tokens/s / GenAI':>17} "
          f"{'tokens as Cleave f32':>21}")
    for threads in [int(t) for t in args.threads.split(",")]:
        runs = {"Cleave f32": lambda: run_cleave(bundles["f32"], prompt_file,
                                                 threads, args, args.work),
                "Cleave bf16": lambda: run_cleave(bundles["bf16"], prompt_file,
                                                  threads, args, args.work),
                "GenAI": lambda: run_genai(genai, prompt, threads),
                "ORT loop": lambda: run_ort_loop(onnx_path, prompt, threads)}
        results = {name: [] for name in runs}
        # The machine's bandwidth drifts with what else runs on it: measured
        # in every round, beside the programs.
        bandwidths = {p: [] for p in step_bytes}
        for r in range(args.rounds):
            order = list(runs)
            order = order[r % len(order):] + order[:r % len(order)]
            for name in order:
                results[name].append(runs[name]())
            for p in step_bytes:
                bandwidths[p].append(
                    stream_bandwidth(threads, step_bytes[p], args.work))
        medians = {name: (statistics.median(x[0] for x in rows),
                          statistics.median(x[1] for x in rows), rows[-1][2])
                   for name, rows in results.items()}
        genai_first, genai_step, _ = medians["GenAI"]
        reference = medians["Cleave f32"][2]
        for name, (first, step, tokens) in medians.items():
            same = int((tokens == reference).sum())
            print(f"{threads:>7} {name:>11} {first:>8.2f} {step:>8.3f} "
                  f"{1e3 / step:>9.1f} {first / genai_first:>12.2f}x "
                  f"{genai_step / step:>16.2f}x {same:>15} of {NEW}")
        for precision, name in [("f32", "Cleave f32"), ("bf16", "Cleave bf16")]:
            bandwidth = statistics.median(bandwidths[precision])
            bound = step_bytes[precision] / bandwidth * 1e3
            step = medians[name][1]
            print(f"{threads:>7} {name}: {step_bytes[precision] / 2**20:.0f} "
                  f"MiB a step, streamed at {bandwidth / 1e9:.1f} GB/s: bound "
                  f"{bound:.3f} ms; step / bound {step / bound:.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
