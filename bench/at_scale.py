#!/usr/bin/env python3
"""Plans at scale, on paper: the layout `cleave-compile --mesh auto` chooses
for GPT-3-175B-shaped and LLaMA-70B-shaped models on 8 to 1024 GPUs of the
shipped cluster specs, and its predicted throughput and MFU.

The models are graphs only: bench/gpt2_stack.py (--shape gpt3: 96 layers of
d_model 12288, 96 heads, MLP 49152; no embedding or LM head) and
bench/llama_stack.py (80 layers, d_model 8192, 64 heads, 8 key/value heads,
MLP 28672, vocabulary 32000), their weights a sparse file of zeros: the
search reads shapes only. Each search is `--search-only --precision bf16`,
one prefill of `--batch` sequences (default: one per GPU, at least 8) of
2048 (GPT-3) or 4096 (LLaMA) tokens.

Prints one row per model, machine and GPU count: the chosen layout, its
predicted time per run, tokens a second per GPU, MFU, memory per GPU, and
the search time; then, for each published configuration given in
PUBLISHED (tensor and pipeline sizes at a GPU count), the best layout of
the search with those tp and pp.

Usage: at_scale.py [--devices 8,64,512,1024] [--machines h100-nvlink-ib,a100-nvlink-ib]
                   [--models gpt3,llama70b] [--work DIR] [--bin DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import make_stack  # noqa: E402
from llama_stack import make_llama  # noqa: E402

SEQ = {"gpt3": 2048, "llama70b": 4096}
# Published training configurations (tensor, pipeline sizes at a GPU count)
# whose inference layouts the table prices too: Megatron-LM's GPT-3 175B
# (Narayanan et al., SC'21: t=8, p=16 on 1536 A100s, scaled to the counts
# here by data parallelism) and the Llama-2 70B pre-training layout that
# Megatron-style trainers commonly use (t=8, p=4).
PUBLISHED = {"gpt3": (8, 16), "llama70b": (8, 4)}


def build(model, batch, work):
    path = os.path.join(work, f"{model}-b{batch}.onnx")
    if os.path.exists(path):
        return path
    if model == "gpt3":
        make_stack(path, layers=96, batch=batch, seq=SEQ[model], shape="gpt3",
                   placeholder=True)
    else:
        make_llama(path, layers=80, batch=batch, seq=SEQ[model], d=8192,
                   heads=64, kv_heads=8, ffn=28672, vocab=32000,
                   placeholder=True)
    return path


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="8,64,512,1024")
    parser.add_argument("--machines", default="h100-nvlink-ib,a100-nvlink-ib")
    parser.add_argument("--models", default="gpt3,llama70b")
    parser.add_argument("--batch", type=int, default=0,
                        help="sequences a run (default: one per GPU, at least 8)")
    parser.add_argument("--work", default=tempfile.mkdtemp(prefix="cleave-scale-"))
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    print(f"{'model':<9} {'machine':<15} {'GPUs':>5} {'layout':<26} "
          f"{'run':>9} {'tok/s/GPU':>10} {'MFU':>6} {'mem/GPU':>9} "
          f"{'search':>7}  published layout (tp, pp): run, MFU")
    for model in args.models.split(","):
        for machine in args.machines.split(","):
            for n in [int(d) for d in args.devices.split(",")]:
                batch = args.batch or max(8, n)
                path = build(model, batch, args.work)
                report = os.path.join(args.work, f"{model}-{machine}-{n}.json")
                start = time.time()
                subprocess.run(
                    [os.path.join(args.bin, "cleave-compile"), path, "--mesh",
                     "auto", "--devices", str(n), "--machine", machine,
                     "--precision", "bf16", "--search-only", "--quiet",
                     "--report", report],
                    check=True, stdout=subprocess.DEVNULL)
                took = time.time() - start
                with open(report) as f:
                    search = json.load(f)["search"]
                tokens = batch * SEQ[model]
                if not search["ranked"]:
                    print(f"{model:<9} {machine:<15} {n:>5} no layout fits")
                    continue
                best = search["ranked"][0]
                tp, pp = PUBLISHED[model]
                published = next((p for p in search["ranked"]
                                  if p["tp"] == tp and p["pp"] == pp), None)
                memory = sum(best["memory_per_device"].values())
                layout = (f"dp={best['dp']} tp={best['tp']} pp={best['pp']} "
                          f"mb={best['microbatches']}")
                line = (f"{model:<9} {machine:<15} {n:>5} {layout:<26} "
                        f"{best['predicted_seconds']:>8.3f}s "
                        f"{tokens / best['predicted_seconds'] / n:>10.0f} "
                        f"{100 * best['mfu']:>5.1f}% "
                        f"{memory / 2**30:>7.1f}Gi {took:>6.1f}s")
                if published:
                    line += (f"  tp={tp} pp={pp} mb={published['microbatches']}: "
                             f"{published['predicted_seconds']:.3f}s, "
                             f"{100 * published['mfu']:.1f}%")
                else:
                    line += f"  tp={tp} pp={pp}: not feasible here"
                print(line, flush=True)
                rows.append((model, machine, n, best, published, took))
    with open(os.path.join(args.work, "at_scale.json"), "w") as f:
        json.dump([{"model": m, "machine": mc, "devices": n, "best": b,
                    "published_layout": p, "search_seconds": t}
                   for m, mc, n, b, p, t in rows], f, indent=1)


if __name__ == "__main__":
    main()
