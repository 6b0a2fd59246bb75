#!/usr/bin/env python3
"""Attention alone at the GPT-2-medium prefill's shape: Cleave's bf16 kernel
against cuBLASLt's GEMMs and PyTorch's scaled_dot_product_attention.

The kit's attention bundles (scripts/gpu_kit.py prepare; the model is
test/lit-tools/make_model.py attention-core-medium: q, k, v [4, 16, 1024, 64]
float32, Q K^T / 8 plus a causal mask of -1e9, Softmax, times V) compiled
with --precision bf16, once with attention as one tensor-core kernel and once
with --gpu-attention=gemms, run with their program's --bench (p50 of
per-run latencies; each program also rounds q, k and v to bf16 and returns
float32). PyTorch, on the same inputs in bfloat16: scaled_dot_product_attention
with is_causal (FlashAttention where PyTorch has it), and the same
arithmetic as eager ops (matmul, mask, softmax, matmul), timed the same way.
Prints each latency, the rate of causal attention work (the two products
over the keys each query sees: 2 x 2 x batch x heads x seq^2 / 2 x 64
FLOPs), the ratios, and the largest differences between the outputs, which
must agree within 2e-2 of the largest value (a kernel computing wrong rows or
keys would not); exit status 1 if they do not.

--skip-torch runs Cleave's two programs only (a dry run where PyTorch is
missing, as in test/Codegen/CUDA/kit.test).

Usage: bench_gpu_attention.py KIT [--runs N] [--device cuda|cpu] [--skip-torch]
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
from bench_gpu_prefill import kit_parser, tflops, time_cleave, time_eager  # noqa: E402

SHAPE = (4, 16, 1024, 64)  # batch, heads, tokens, head size
AGREE = 2e-2               # of the largest |value|


def relative_diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)


def agreement(name, a, b):
    diff = relative_diff(a, b)
    ok = diff <= AGREE
    print(f"outputs, {name}: max |diff| {diff:.3g} of the largest |value| "
          f"(at most {AGREE:g}: {'yes' if ok else 'NO'})", flush=True)
    return ok


def main():
    parser = kit_parser(__doc__)
    parser.add_argument("--skip-torch", action="store_true",
                        help="Cleave's programs only")
    args = parser.parse_args()
    batch, heads, seq, head = SHAPE
    flops = 2 * 2 * batch * heads * seq * seq * head / 2  # causal
    rng = np.random.default_rng(3)
    work = tempfile.mkdtemp(prefix="cleave-attention-")
    inputs = {}
    for name in ("q", "k", "v"):
        inputs[name] = os.path.join(work, f"{name}.npy")
        np.save(inputs[name], rng.standard_normal(SHAPE).astype(np.float32))

    times, outputs = {}, {}
    for name in ("bf16", "bf16-gemms"):
        bundle = os.path.join(args.kit, "attention", name)
        out = os.path.join(work, name)
        times[name] = time_cleave(args.kit, bundle, inputs, out, args.runs)
        outputs[name] = np.load(os.path.join(out, "o.npy"))
        print(f"Cleave {name}: p50 {times[name]:.3f} ms; "
              f"{tflops(flops, times[name]):.3g} TFLOP/s of causal attention "
              f"work", flush=True)
    print(f"Cleave's attention kernel / its GEMMs path: "
          f"{times['bf16'] / times['bf16-gemms']:.2f}x", flush=True)
    ok = agreement("Cleave kernel vs GEMMs", outputs["bf16"], outputs["bf16-gemms"])
    if args.skip_torch:
        return 0 if ok else 1

    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: no PyTorch baseline")
        return 0 if ok else 1
    F = torch.nn.functional
    # bf16 on a GPU; float32 on a CPU, where a dry run only needs to work.
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    q, k, v = (torch.from_numpy(np.load(inputs[n])).to(args.device, dtype)
               for n in ("q", "k", "v"))
    mask = torch.triu(torch.full((seq, seq), -1e9, device=args.device), 1).to(dtype)

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def eager():
        scores = (q @ k.transpose(-1, -2)) * (1.0 / head ** 0.5) + mask
        return scores.softmax(-1) @ v

    with torch.no_grad():
        for name, run in (("scaled_dot_product_attention, causal", sdpa),
                          ("eager ops", eager)):
            ms = time_eager(torch, run, args.runs, args.device)
            print(f"PyTorch {torch.__version__} {name} ({dtype}): p50 {ms:.3f} ms; "
                  f"{tflops(flops, ms):.3g} TFLOP/s; Cleave's kernel / this "
                  f"{times['bf16'] / ms:.2f}x", flush=True)
            ok &= agreement(f"Cleave kernel vs PyTorch {name}", outputs["bf16"],
                            run().float().cpu().numpy())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
