#!/usr/bin/env python3
"""Benchmarks Cleave on quantized graphs against ONNX Runtime on the same
graphs, and against Cleave's own float32 program of the same model.

The model is the GPT-2-small-shaped stack of bench/gpt2_stack.py (d_model
768, 12 heads, sequence 128, batch 1, float32 weights), quantized by ONNX
Runtime's own tools as a user would:

  int8   quantize_dynamic, int8 weights (DynamicQuantizeLinear +
         MatMulInteger on uint8 activations)
  int4   MatMulNBitsQuantizer, 4-bit weights in blocks of 32 along K with
         zero points (com.microsoft MatMulNBits, accuracy_level 0)

Each graph (float32, int8, int4) is compiled, checked against ONNX Runtime
(the int8 graph within 0.02: it quantizes every activation again, and where
an activation lands within an ulp of a step's .5, Cleave's and ONNX
Runtime's float rounding pick neighbouring steps; one such flip in 4e5
GELU outputs moves the output by ~0.01) and timed against it at each thread count by scripts/check_model.py: --runs
runs a round, --rounds rounds alternating which goes first, medians of the
per-round p50s. Printed per format and thread count: Cleave's latency,
ONNX Runtime's, the ratio Cleave / ONNX Runtime (below 1 means Cleave is
faster) and Cleave's quantized program over its float32 one (below 1 means
quantization made Cleave faster).

Needs onnx, onnxruntime and onnx_ir (for MatMulNBitsQuantizer).
Usage: bench_quantized.py [--runs N] [--rounds R] [--threads 1,2]
                          [--layers L] [--work DIR] [--bin DIR]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt2_stack import make_stack  # noqa: E402
from ort_timing import time_against_ort  # noqa: E402


def quantize(source, work):
    """The int8 and int4 graphs of `source`, as ONNX Runtime's tools write
    them."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer)
    int8 = os.path.join(work, "stack-int8.onnx")
    quantize_dynamic(source, int8, weight_type=QuantType.QInt8)
    config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=False)
    quantizer = MatMulNBitsQuantizer(onnx.load(source), algo_config=config)
    quantizer.process()
    int4 = os.path.join(work, "stack-int4.onnx")
    quantizer.model.save_model_to_file(int4)
    return {"int8": int8, "int4": int4}


# Absolute tolerance against ONNX Runtime by format (see above).
ATOL = {"float32": 1e-5, "int8": 0.02, "int4": 1e-5}


def bench(model, atol, threads, args, work):
    """(Cleave ms, ONNX Runtime ms) for `model` at `threads` threads."""
    return time_against_ort(model, atol, threads, args.runs, args.rounds,
                            args.bin, work)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--work",
                        default=tempfile.mkdtemp(prefix="cleave-bench-q-"))
    parser.add_argument("--bin",
                        default=os.path.join(HERE, "..", "build", "bin"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    source = os.path.join(args.work, "stack.onnx")
    make_stack(source, layers=args.layers)
    models = {"float32": source, **quantize(source, args.work)}
    print(f"GPT-2-small-shaped stack, {args.layers} layers, batch 1 x 128 "
          f"tokens; p50 latency, median of {args.rounds} alternating rounds "
          f"of {args.runs} runs")
    print(f"{'format':8} {'threads':>7} {'Cleave ms':>10} {'ORT ms':>8} "
          f"{'Cleave/ORT':>10} {'vs float32':>10}")
    for threads in [int(t) for t in args.threads.split(",")]:
        float_ms = None
        for name, model in models.items():
            cleave, ort = bench(model, ATOL[name], threads, args,
                                os.path.join(args.work, f"{name}-{threads}"))
            if name == "float32":
                float_ms = cleave
            print(f"{name:8} {threads:>7} {cleave:>10.3f} {ort:>8.3f} "
                  f"{cleave / ort:>9.2f}x {cleave / float_ms:>9.2f}x",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
