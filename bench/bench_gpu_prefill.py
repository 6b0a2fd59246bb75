#!/usr/bin/env python3
"""GPT-2-medium-shaped prefill on one GPU: Cleave against PyTorch eager.

Runs the kit's prefill bundles (scripts/gpu_kit.py prepare: 24 layers,
d_model 1024, 16 heads, MLP 4096, batch 4 x 1024 tokens, float32 and
--precision bf16) with their program's --bench, and the same stack written in
PyTorch (eager, the same weights from bench/gpt2_stack.py's stack_weights) in
float32 (TF32 off, as Cleave's float32 GEMMs) and in bfloat16, timed the same
way: p50 of per-run latencies, each run synchronized. Prints the ratios
Cleave / eager (the issue's target: at most 0.7), the largest difference
between the float32 outputs, and the rate of GEMM work each program
achieves over its whole layers (every kernel included): the model's GEMM
FLOPs (projections, MLP, and attention's two products over the full
sequence, as both programs compute them) over the latency, and for bf16 the
fraction of the GPU's dense bf16 peak where the GPU is one whose peak is
known here (the issue's target for a GEMM-heavy layer: 60 % or more).
When the kit has it, the bf16 stack compiled with --gpu-attention=gemms
(attention as two cuBLASLt GEMMs around a softmax kernel) runs too: the
attention kernel's speed against it, and the two programs' outputs, which
must agree within 2e-2 of the largest value (one kernel computing the wrong
rows or keys would not).

With --profile-dir DIR, each Cleave program runs again (5 runs, after the
timed ones) with --profile, and PyTorch eager's bf16 stack once under
torch.profiler: where each one's time goes, kernel by kernel, into
DIR/profile-<f32|bf16|bf16-gemms>.txt and DIR/profile-eager-bf16.txt.

Usage: bench_gpu_prefill.py KIT [--runs N] [--device cuda|cpu]
                            [--profile-dir DIR]
"""
import argparse
import json
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
from gpt2_stack import SHAPES, stack_weights  # noqa: E402
from gpu_kit import run_bundle  # noqa: E402


def eager_forward(torch, weights, layers, heads, x, mask):
    """The stack of gpt2_stack.make_stack, op for op."""
    F = torch.nn.functional
    d = x.shape[-1]
    head = d // heads
    batch, seq = x.shape[0], x.shape[1]
    for i in range(layers):
        w = lambda name: weights[f"h.{i}.{name}"]  # noqa: E731
        ln = F.layer_norm(x, (d,), w("ln_1.weight"), w("ln_1.bias"))
        q, k, v = (
            (ln @ w(f"attn.{p}.weight") + w(f"attn.{p}.bias"))
            .reshape(batch, seq, heads, head).transpose(1, 2)
            for p in ("q", "k", "v"))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / head ** 0.5) + mask
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, d)
        x = x + ctx @ w("attn.proj.weight") + w("attn.proj.bias")
        ln2 = F.layer_norm(x, (d,), w("ln_2.weight"), w("ln_2.bias"))
        fc = ln2 @ w("mlp.fc.weight") + w("mlp.fc.bias")
        gelu = fc * (torch.erf(fc / 2.0 ** 0.5) + 1.0) * 0.5
        x = x + gelu @ w("mlp.proj.weight") + w("mlp.proj.bias")
    return x


def time_eager(torch, run, runs, device):
    if device == "cpu":
        import time
        run()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1e3)
        return float(np.percentile(times, 50))
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.percentile(times, 50))


# Dense bf16 tensor-core peaks by NVIDIA's data sheets, TFLOP/s (SXM parts).
BF16_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}


def prefill_flops(layers, batch, seq, d):
    """GEMM FLOPs of the stack: per layer Q, K, V, the output projection and
    the MLP (12 d^2 multiply-adds a token) and attention's scores and
    weighted sum (2 seq d a token each)."""
    tokens = batch * seq
    return layers * (2 * tokens * 12 * d * d + 2 * 2 * tokens * seq * d)


def tflops(flops, ms):
    """TFLOP/s of `flops` done in `ms` milliseconds."""
    return flops / (ms * 1e-3) / 1e12


def time_cleave(kit, bundle, inputs, out, runs):
    """p50 of a bundle's program's --bench, given its inputs' .npy paths by
    name; its outputs are written to `out`."""
    result = run_bundle(bundle, inputs, out, kit, ["--bench", str(runs)])
    if result.returncode != 0:
        raise RuntimeError(f"{bundle}: {result.stderr.strip()}")
    return float(re.search(r"p50 ([0-9.]+) ms", result.stdout).group(1))


def profile_cleave(kit, bundle, hidden, out, path):
    """Where a Cleave program's time goes (its --profile), into `path`."""
    result = run_bundle(bundle, {"hidden": hidden}, out, kit,
                        ["--bench", "5", "--profile"])
    with open(path, "w") as f:
        f.write(result.stdout + result.stderr)
    lines = result.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("profile")),
                 None)
    if start is None:
        print(f"{bundle}: no profile ({result.stderr.strip()[:200]})")
        return
    print("\n".join(lines[start:start + 10]), flush=True)


def profile_eager(torch, run, path):
    """PyTorch eager's kernels for one run (torch.profiler), into `path`."""
    try:
        from torch.profiler import ProfilerActivity, profile
        run()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=30)
    except Exception as e:  # the profile is a help, not a check
        table = f"torch.profiler failed: {e}"
    with open(path, "w") as f:
        f.write(table + "\n")
    print(f"PyTorch eager bf16 profile: {path}", flush=True)


def kit_parser(description):
    """The arguments the kit's benchmarks share: the unpacked kit, runs per
    timing, and PyTorch's device."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("kit")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--device", default="cuda",
                        help="PyTorch's device; cpu tries a CPU kit here")
    return parser


def main():
    parser = kit_parser(__doc__)
    parser.add_argument("--profile-dir",
                        help="also profile each program and eager bf16 into DIR")
    args = parser.parse_args()
    with open(os.path.join(args.kit, "prefill.json")) as f:
        spec = json.load(f)
    d, heads, _ = SHAPES[spec["shape"]]
    batch, seq, layers = spec["batch"], spec["seq"], spec["layers"]
    rng = np.random.default_rng(1)
    hidden = rng.standard_normal((batch, seq, d)).astype(np.float32)
    work = tempfile.mkdtemp(prefix="cleave-prefill-")
    np.save(os.path.join(work, "hidden.npy"), hidden)
    tokens = f"{batch} x {seq} tokens, {layers} layers"
    flops = prefill_flops(layers, batch, seq, d)

    results = {}
    # bf16-gemms: attention as two cuBLASLt GEMMs around a softmax kernel
    # (--gpu-attention=gemms), the bf16 program's attention kernel's peer.
    programs = [p for p in ("f32", "bf16", "bf16-gemms")
                if os.path.isdir(os.path.join(args.kit, f"prefill-{p}"))]
    for precision in programs:
        out = os.path.join(work, precision)
        results[precision] = time_cleave(args.kit,
                                         os.path.join(args.kit, f"prefill-{precision}"),
                                         {"hidden": os.path.join(work, "hidden.npy")},
                                         out, args.runs)
        print(f"Cleave {precision}: p50 {results[precision]:.3f} ms ({tokens}); "
              f"{tflops(flops, results[precision]):.3g} TFLOP/s of GEMM work",
              flush=True)
    status = 0
    if "bf16-gemms" in results:
        # The attention kernel against cuBLASLt's GEMMs: speed, and outputs
        # that must agree to bf16's rounding (a wrong fragment layout gives
        # values of the wrong rows and keys, far outside it).
        fused = np.load(os.path.join(work, "bf16", "out.npy")).astype(np.float64)
        gemms = np.load(os.path.join(work, "bf16-gemms", "out.npy")).astype(np.float64)
        diff = np.abs(fused - gemms).max() / max(np.abs(gemms).max(), 1e-30)
        print(f"bf16 attention as one kernel: {results['bf16']:.3f} ms, as two "
              f"GEMMs: {results['bf16-gemms']:.3f} ms "
              f"({results['bf16'] / results['bf16-gemms']:.2f}x); outputs max "
              f"|diff| {diff:.3g} of the largest |value| (at most 2e-2: "
              f"{'yes' if diff <= 2e-2 else 'NO'})", flush=True)
        if not diff <= 2e-2:
            status = 1
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
        for precision in programs:
            profile_cleave(args.kit, os.path.join(args.kit, f"prefill-{precision}"),
                           os.path.join(work, "hidden.npy"),
                           os.path.join(work, precision + "-profiled"),
                           os.path.join(args.profile_dir, f"profile-{precision}.txt"))

    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: no eager baseline")
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    weights = stack_weights(layers, spec["shape"], spec["seed"], spec["tile"])
    mask = np.triu(np.full((seq, seq), -1e9, np.float32), 1)[None, None]
    peak = None
    if args.device == "cuda" and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
        peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if k in gpu), None)
        print(f"GPU: {gpu}; dense bf16 peak "
              f"{f'{peak:.0f} TFLOP/s' if peak else 'not known here'}")
        if peak:
            print(f"Cleave bf16: {100 * tflops(flops, results['bf16']) / peak:.0f}% "
                  f"of the bf16 peak over whole layers (target for a GEMM-heavy "
                  f"layer: 60%)")
    with torch.no_grad():
        for precision, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            w = {k: torch.from_numpy(v).to(args.device, dtype) for k, v in weights.items()}
            x = torch.from_numpy(hidden).to(args.device, dtype)
            m = torch.from_numpy(mask).to(args.device, dtype)
            eager = time_eager(torch, lambda: eager_forward(torch, w, layers, heads, x, m),
                               args.runs, args.device)
            ratio = results[precision] / eager
            print(f"PyTorch eager {precision}: {tflops(flops, eager):.3g} TFLOP/s "
                  f"of GEMM work")
            print(f"PyTorch {torch.__version__} eager {precision}: p50 {eager:.3f} ms; "
                  f"Cleave / eager {ratio:.2f}x (target <= 0.7: "
                  f"{'met' if ratio <= 0.7 else 'not met'})", flush=True)
            if precision == "bf16" and args.profile_dir and args.device == "cuda":
                profile_eager(torch,
                              lambda: eager_forward(torch, w, layers, heads, x, m),
                              os.path.join(args.profile_dir, "profile-eager-bf16.txt"))
            if precision == "f32":
                expected = eager_forward(torch, w, layers, heads, x, m).cpu().numpy()
                expected = expected.astype(np.float64)
                actual = np.load(os.path.join(work, "f32", "out.npy"))
                diff = np.abs(actual.astype(np.float64) - expected)
                scale = np.abs(expected).max()
                print(f"float32 outputs, Cleave vs eager: max |diff| {diff.max():.3g} "
                      f"({diff.max() / scale:.3g} of the largest |value|)")
                if not diff.max() <= 1e-3 * scale:
                    status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
