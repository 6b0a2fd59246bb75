#!/usr/bin/env python3
"""The GPU checks' kit: made here, run on a lent GPU machine.

A lent GPU machine has no LLVM/MLIR, ONNX Runtime or Debian's MPICH and
OpenBLAS, so everything that can be done beforehand is done here:

  gpu_kit.py prepare KIT [--target cuda|cpu] [--prefill-layers N] [--bin DIR]
      packs KIT.tar.xz (what the device tool carries) after it compiles the
      check cases (below), the GPT-2-medium-shaped prefill bundles and the
      same shape's attention alone with build/bin/cleave-compile, saves each
      case's inputs, ONNX Runtime's outputs (with GEMM operands rounded for 16-bit cases, and the
      float32 ones) and the CPU single-rank program's outputs, and copies the
      shared libraries the programs need that a CUDA machine may lack
      (OpenBLAS, MPICH, libomp, ...) and MPICH's launcher into KIT/lib and
      KIT/bin. --target cpu makes the same kit of CPU programs, to try the
      check here.

  gpu_kit.py check KIT OUT
      runs every case (one rank directly, several under KIT/bin/mpiexec) and
      judges it as check_model.py does (scripts/numerics.py): against ONNX
      Runtime, and against the CPU program; writes OUT/cases.txt. Exit
      status 1 if any case fails.

scripts/gpu-check.sh unpacks the kit and runs the check;
bench/bench_gpu_prefill.py times the prefill bundles against PyTorch eager;
bench/bench_gpu_attention.py the attention bundles against PyTorch's
scaled_dot_product_attention.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import numerics  # noqa: E402

MODELS = os.path.join(ROOT, "test", "models")

# name, model, input shapes, compile options, --precision (None: float32)
# and, optionally, inputs' values (check_model.py's --input-values: one
# value fills the input); the other inputs are random.
CASES = [
    ("gpt2", "gpt2-opset17.onnx", {"input_ids": [1, 16]}, [], None),
    ("gpt2-tp2", "gpt2-opset17.onnx", {"input_ids": [1, 16]},
     ["--mesh=tp=2", "--shard-preset=megatron"], None),
    ("llama", "llama-opset17.onnx", {"input_ids": [2, 16]}, [], None),
    ("llama-pp2-mb2", "llama-opset17.onnx", {"input_ids": [2, 16]},
     ["--mesh=pp=2", "--microbatches=2"], None),
    ("gpt2-pp2-tp2", "gpt2-opset17.onnx", {"input_ids": [4, 16]},
     ["--mesh=pp=2,tp=2", "--shard-preset=megatron", "--microbatches=2"], None),
    ("gpt2-bf16", "gpt2-opset17.onnx", {"input_ids": [4, 16]}, [], "bf16"),
    ("llama-bf16-tp2", "llama-opset17.onnx", {"input_ids": [4, 16]},
     ["--mesh=tp=2", "--shard-preset=megatron"], "bf16"),
    ("encoder-f16", "encoder-opset17.onnx", {"x": [2, 16, 64]}, [], "f16"),
    # The transformers library's models as PyTorch exports them: SDPA's
    # ops, and ONNX's Attention operator (opset 23).
    ("hf-gpt2", "hf-gpt2.onnx", {"input_ids": [2, 16]}, [], None),
    ("hf-llama-attention", "hf-llama-attention.onnx", {"input_ids": [2, 16]},
     [], None),
    # Attention as one tensor-core kernel (bf16; grouped-query: 4 query
    # heads on 2 key/value heads): mma.sync's fragment layouts on hardware.
    ("hf-llama-bf16", "hf-llama.onnx", {"input_ids": [2, 16]}, [], "bf16"),
    # The same kernel alone, on uneven shapes (70 queries, 5 keys, heads of
    # 48; make_model.py attention-core-uneven, made at prepare): if it
    # fails where the GEMMs path's cases pass, the kernel is at fault.
    ("attention-uneven-bf16", "make_model:attention-core-uneven", {}, [], "bf16"),
    # And on 150 causal queries (3 blocks): the second pass's bound, a
    # block all-reduce of the lanes' last live keys, skips keys.
    ("attention-long-bf16", "make_model:attention-core-long", {}, [], "bf16"),
    # Q and K normalized per head in row kernels that write them transposed;
    # heads split over tp at a batch of 2.
    ("hf-qwen3-tp2", "hf-qwen3.onnx", {"input_ids": [2, 16]},
     ["--mesh=tp=2", "--shard-preset=megatron"], None),
    # One decoding step with a key/value cache, split over tp (the returned
    # cache gathered): static shapes, 2 sequences of one new token.
    ("hf-llama-decode-tp2", "hf-llama-decode.onnx", {},
     ["--mesh=tp=2", "--shard-preset=megatron"], None),
    # LLaMA as Optimum exports it (the TorchScript exporter, the mask written
    # with ScatterND): the prompt, with a cache of 0 tokens, split over tp.
    ("hf-llama-optimum-tp2", "hf-llama-optimum.onnx",
     dict({"input_ids": [2, 16], "attention_mask": [2, 16], "position_ids": [2, 16]},
          **{f"past_key_values.{layer}.{part}": [2, 2, 0, 16]
             for layer in range(2) for part in ("key", "value")}),
     ["--mesh=tp=2", "--shard-preset=megatron"], None),
    # A decoding step with a static cache of 32 positions, written at
    # cache_position (a scatter at run-time indices, its slot map a small
    # reduction kernel), split over tp; the step at position 9.
    ("hf-llama-static-cache-tp2", "hf-llama-static-cache.onnx",
     {"input_ids": [2, 1], "cache_position": [1]},
     ["--mesh=tp=2", "--shard-preset=megatron"], None,
     {"cache_position": [9], "attention_mask": [1]}),
]

# Libraries every Linux machine has; the CUDA ones come with the GPU machine.
SYSTEM = re.compile(r"^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|"
                    r"librt\.|libcuda\.|libcudart|libcublas|libnccl)")


def output_file_name(name):
    return re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()).decode() + ".npy"


# Where cleave-compile is (--bin).
BIN = os.path.join(ROOT, "build", "bin")


def compile_bundle(model, out, shapes, options):
    subprocess.run([os.path.join(BIN, "cleave-compile"), model,
                    "--quiet", "-o", out]
                   + [f"--input-shape={k}={'x'.join(map(str, v))}" for k, v in shapes.items()]
                   + options, check=True)


def program_environment(kit):
    """The environment for the kit's programs: its libraries first. Only
    for them: Python and PyTorch keep the machine's own (newer) ones."""
    env = dict(os.environ)
    if kit:
        lib = os.path.join(kit, "lib")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"]
                                        if env.get("LD_LIBRARY_PATH") else "")
        env["PATH"] = os.path.join(kit, "bin") + ":" + env.get("PATH", "")
    return env


def run_bundle(bundle, inputs, out, kit=None, extra=()):
    """Runs a bundle's program without cleave-run (which needs LLVM): one
    rank directly, several under MPICH's mpiexec (the kit's, if given)."""
    with open(os.path.join(bundle, "manifest.json")) as f:
        ranks = json.load(f)["ranks"]
    command = [os.path.join(bundle, "program"), "--bundle", bundle,
               "--output-dir", out] + [f"--input={k}={v}" for k, v in inputs.items()]
    if ranks > 1:
        # Every rank on this machine: no ssh needed.
        command = ["mpiexec", "-launcher", "fork", "-n", str(ranks)] + command
    return subprocess.run(command + list(extra), capture_output=True, text=True,
                          env=program_environment(kit))


def copy_libraries(program, lib):
    """The shared libraries `program` loads, minus the system's and CUDA's."""
    os.makedirs(lib, exist_ok=True)
    listing = subprocess.run(["ldd", program], capture_output=True, text=True,
                             check=True).stdout
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and not SYSTEM.match(parts[0]):
            shutil.copy(os.path.realpath(parts[2]), os.path.join(lib, parts[0]))


# A bf16 program's two ways of computing attention: one tensor-core kernel,
# and two cuBLASLt GEMMs around a softmax kernel (the same run compares
# them).
BF16_ATTENTION = (("bf16", ["--precision=bf16"]),
                  ("bf16-gemms", ["--precision=bf16", "--gpu-attention=gemms"]))


def make_model(kind, path):
    """Writes the lit tests' make_model.py model `kind` to `path`."""
    subprocess.run([sys.executable,
                    os.path.join(ROOT, "test", "lit-tools", "make_model.py"),
                    kind, path], check=True)


def prepare(kit, target, prefill_layers):
    import onnx
    import onnxruntime as ort
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from check_model import make_inputs, round_gemm_operands
    from gpt2_stack import make_stack

    # A kit is rebuilt whole: a folder an earlier prepare made (it has the
    # marker, or the finished kit's cases.json) goes, even one it left half
    # done; any other non-empty folder is not ours to delete.
    marker = os.path.join(kit, ".gpu-kit")
    if os.path.isdir(kit) and os.listdir(kit):
        if not (os.path.exists(marker) or
                os.path.exists(os.path.join(kit, "cases.json"))):
            sys.exit(f"gpu_kit: '{kit}' exists and is not a kit; give an empty "
                     "or new folder")
        shutil.rmtree(kit)
    os.makedirs(kit, exist_ok=True)
    open(marker, "w").close()
    cases = []
    for name, model_file, shapes, options, precision, *values in CASES:
        print(f"gpu_kit: {name}", flush=True)
        model_path = os.path.join(MODELS, model_file)
        case = os.path.join(kit, "cases", name)
        if model_file.startswith("make_model:"):
            # A model the lit tests' make_model.py writes, kept in the case.
            os.makedirs(case)
            model_path = os.path.join(case, "model.onnx")
            make_model(model_file.split(":", 1)[1], model_path)
        model = onnx.load(model_path)
        arithmetic = [f"--precision={precision}"] if precision else []
        compile_bundle(model_path, os.path.join(case, "bundle"), shapes,
                       [f"--target={target}"] + options + arithmetic)
        # References: ONNX Runtime (rounded GEMM operands for 16-bit cases,
        # and float32), and Cleave's CPU single-rank program.
        inputs = make_inputs(model, shapes, 97, values=values[0] if values else None)
        os.makedirs(os.path.join(case, "inputs"))
        paths = {}
        for key, value in inputs.items():
            paths[key] = os.path.join("inputs", f"{len(paths)}.npy")
            np.save(os.path.join(case, paths[key]), value)
        sessions = {"float32": model.SerializeToString()}
        if precision:
            sessions["rounded"] = round_gemm_operands(model, precision).SerializeToString()
        for kind, serialized in sessions.items():
            session = ort.InferenceSession(serialized, providers=["CPUExecutionProvider"])
            os.makedirs(os.path.join(case, kind))
            for output, value in zip(model.graph.output, session.run(None, inputs)):
                np.save(os.path.join(case, kind, output_file_name(output.name)), value)
        with tempfile.TemporaryDirectory() as tmp:
            compile_bundle(model_path, os.path.join(tmp, "cpu"), shapes, arithmetic)
            result = run_bundle(os.path.join(tmp, "cpu"),
                                {k: os.path.join(case, v) for k, v in paths.items()},
                                os.path.join(case, "cpu"))
            if result.returncode != 0:
                sys.exit(f"gpu_kit: the CPU program of {name} failed:\n{result.stderr}")
        cases.append({"name": name, "inputs": paths, "precision": precision,
                      "outputs": [output_file_name(o.name) for o in model.graph.output]})
    with open(os.path.join(kit, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)

    # The prefill benchmark: GPT-2-medium-shaped, batch 4 x 1024 tokens,
    # weights tiled so that the kit stays small.
    prefill = {"layers": prefill_layers, "batch": 4, "seq": 1024, "shape": "medium",
               "tile": 4096, "seed": 0}
    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "prefill.onnx")
        print(f"gpu_kit: prefill model ({prefill_layers} layers)", flush=True)
        make_stack(model_path, prefill["layers"], prefill["batch"], prefill["seq"],
                   external=True, seed=prefill["seed"], shape="medium",
                   tile=prefill["tile"])
        for name, flags in (("f32", ["--precision=f32"]),) + BF16_ATTENTION:
            print(f"gpu_kit: prefill bundle, {name}", flush=True)
            compile_bundle(model_path, os.path.join(kit, f"prefill-{name}"), {},
                           [f"--target={target}"] + flags)
    with open(os.path.join(kit, "prefill.json"), "w") as f:
        json.dump(prefill, f, indent=1)

    # Attention alone at the prefill's shape (bench/bench_gpu_attention.py).
    attention = os.path.join(kit, "attention")
    os.makedirs(attention)
    model_path = os.path.join(attention, "model.onnx")
    make_model("attention-core-medium", model_path)
    for name, flags in BF16_ATTENTION:
        print(f"gpu_kit: attention bundle, {name}", flush=True)
        compile_bundle(model_path, os.path.join(attention, name), {},
                       [f"--target={target}"] + flags)

    copy_libraries(os.path.join(kit, "cases", CASES[0][0], "bundle", "program"),
                   os.path.join(kit, "lib"))
    os.makedirs(os.path.join(kit, "bin"), exist_ok=True)
    for tool in ("mpiexec.hydra", "hydra_pmi_proxy"):
        path = shutil.which(tool)
        if not path:
            sys.exit(f"gpu_kit: MPICH's {tool} is not installed")
        shutil.copy(path, os.path.join(kit, "bin", tool))
        copy_libraries(path, os.path.join(kit, "lib"))
    os.symlink("mpiexec.hydra", os.path.join(kit, "bin", "mpiexec"))
    archive = kit.rstrip("/") + ".tar.xz"
    print(f"gpu_kit: packing {archive}", flush=True)
    import tarfile
    with tarfile.open(archive, "w:xz", preset=1) as tar:
        tar.add(kit, arcname="gpu-kit")
    print(f"gpu_kit: {archive}: {os.path.getsize(archive) / 2**20:.1f} MiB")


def check(kit, out):
    with open(os.path.join(kit, "cases.json")) as f:
        cases = json.load(f)
    os.makedirs(out, exist_ok=True)
    failed = 0
    lines = []
    for case in cases:
        root = os.path.join(kit, "cases", case["name"])
        result_dir = os.path.join(out, case["name"])
        inputs = {k: os.path.join(root, v) for k, v in case["inputs"].items()}
        result = run_bundle(os.path.join(root, "bundle"), inputs, result_dir, kit)
        if result.returncode != 0:
            lines.append(f"{case['name']}: FAILED to run (exit {result.returncode}): "
                         f"{result.stderr.strip()[-2000:]}")
            failed += 1
            continue
        verdicts = []
        ok = True
        for output in case["outputs"]:
            written = os.path.join(result_dir, output)
            if not os.path.exists(written):
                verdicts.append(f"the program wrote no {output}")
                ok = False
                continue
            actual = np.load(written)
            float32 = np.load(os.path.join(root, "float32", output))
            cpu = np.load(os.path.join(root, "cpu", output))
            if case["precision"]:
                rounded = np.load(os.path.join(root, "rounded", output))
                good, message = numerics.rounded_gemms(actual, rounded, float32,
                                                       case["precision"])
                verdicts.append(f"ONNX Runtime ({case['precision']} GEMM operands) "
                                f"{'yes' if good else 'NO'}: {message}")
            else:
                good, worst = numerics.within(actual, float32)
                verdicts.append(f"ONNX Runtime {'yes' if good else 'NO'} "
                                f"(max |diff| {worst:.3g})")
            ok &= good
            # The GPU program against the CPU one of the same precision:
            # reported; judged only in float32 (16-bit roundings may differ).
            agree, worst = numerics.within(actual, cpu)
            verdicts.append(f"CPU program {'yes' if agree else 'no'} "
                            f"(max |diff| {worst:.3g})")
            if not case["precision"]:
                ok &= agree
        failed += not ok
        lines.append(f"{case['name']}: {'passed' if ok else 'FAILED'}; "
                     + "; ".join(verdicts)
                     + (f"; note: {result.stderr.strip()}" if result.stderr.strip() else ""))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"gpu_kit: {len(cases) - failed} of {len(cases)} cases passed")
    return 1 if failed else 0


def main():
    global BIN
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("kit")
    p.add_argument("--target", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--prefill-layers", type=int, default=24)
    p.add_argument("--bin", default=BIN, help="where cleave-compile is")
    c = sub.add_parser("check")
    c.add_argument("kit")
    c.add_argument("out")
    args = parser.parse_args()
    if args.command == "prepare":
        BIN = args.bin
        prepare(args.kit, args.target, args.prefill_layers)
        return 0
    return check(args.kit, args.out)


if __name__ == "__main__":
    sys.exit(main())
