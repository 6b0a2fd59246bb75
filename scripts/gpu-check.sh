#!/usr/bin/env bash
# Every GPU check Cleave has, on a machine with one NVIDIA GPU, with results
# written to a folder (default out/gpu-check; the device tool passes $OUT).
# Builds nothing there; prepare beforehand where the toolchain is:
#   scripts/build.sh && python3 scripts/gpu_kit.py prepare build/gpu-kit
# and bring build/bin/cleave-gpu-gemm-check and build/gpu-kit.tar.xz along
# (the device tool's carry). The kit holds the compiled CUDA bundles, their
# inputs and reference outputs, and the Debian libraries and MPICH launcher a
# GPU machine lacks.
#
# 1. The runtime's cuBLASLt GEMMs (cleave-gpu-gemm-check): float32, float16
#    and bfloat16 against a float64 reference; bf16 TFLOP/s of one
#    GPT-2-medium layer's GEMMs (8 x 1024 tokens) and of 8192^3, next to
#    torch.matmul on the same shapes in the same run.
# 2. The kit's cases (scripts/gpu_kit.py check): the GPT-2- and LLaMA-style
#    exports on one rank, tp=2, pp=2 with microbatches, pp=2 x tp=2, and with
#    --precision bf16/f16, against ONNX Runtime and the CPU program. Ranks
#    share the one GPU, so their collectives go through host memory and MPI
#    (NCCL needs one GPU per rank).
# 3. The GPT-2-medium-shaped prefill (bench/bench_gpu_prefill.py): Cleave
#    float32 and bf16 against PyTorch eager on the same GPU; then where each
#    one's time goes (cleave-run --profile, torch.profiler) in profile-*.txt.
# 4. Attention alone at that shape (bench/bench_gpu_attention.py): Cleave's
#    bf16 kernel against its cuBLASLt GEMMs path and PyTorch's
#    scaled_dot_product_attention (causal) and eager ops, outputs compared.
#
# Usage: scripts/gpu-check.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-out/gpu-check}}"
mkdir -p "$out"
bin=build/bin
# cuBLASLt, cudart and NCCL of CUDA 13: the toolkit's, else the pip wheels
# PyTorch uses (nvidia-cublas, nvidia-cuda-runtime, nvidia-nccl-cu13).
wheels=$(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null)
for lib in libcublasLt.so.13 libcudart.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib $wheels -name "$lib" 2>/dev/null | head -n 1)
  [ -n "$found" ] && export LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
if ! nvidia-smi -L > "$out/gpu.txt" 2>&1; then
  echo "gpu-check: no NVIDIA GPU answers nvidia-smi: nothing to check" | tee "$out/summary.txt"
  exit 0
fi
status=0
echo "== cuBLASLt GEMMs (cleave-gpu-gemm-check)"
"$bin/cleave-gpu-gemm-check" --require-gpu --runs 20 2>&1 | tee "$out/gemm.txt" || status=1
echo "== PyTorch torch.matmul, same shapes, same GPU"
python3 - <<'PY' 2>&1 | tee "$out/torch.txt" || status=1
import torch
tokens, d, ffn = 8 * 1024, 1024, 4096
def tflops(shapes, runs=20):
    mats = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
             torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for m, n, k in shapes]
    flops = sum(2.0 * m * n * k for m, n, k in shapes)
    for _ in range(3):
        for a, b in mats:
            a @ b
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(runs):
        for a, b in mats:
            a @ b
    stop.record()
    torch.cuda.synchronize()
    return flops * runs / (start.elapsed_time(stop) * 1e-3) / 1e12
layer = tflops([(tokens, 3 * d, d), (tokens, d, d), (tokens, ffn, d), (tokens, d, ffn)])
square = tflops([(8192, 8192, 8192)])
print(f"torch {torch.__version__}: bf16 GPT-2-medium layer GEMMs (8x1024 tokens): {layer:.1f} TFLOP/s")
print(f"torch {torch.__version__}: bf16 8192x8192x8192: {square:.1f} TFLOP/s")
PY
kit_archive=build/gpu-kit.tar.xz
if [ -f "$kit_archive" ]; then
  unpacked=$(mktemp -d)
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$kit_archive" "$unpacked"
  kit="$unpacked/gpu-kit"
  echo "== The kit's cases against ONNX Runtime and the CPU program"
  python3 scripts/gpu_kit.py check "$kit" "$out/cases" 2>&1 | tee "$out/cases.log" || status=1
  echo "== GPT-2-medium-shaped prefill against PyTorch eager"
  python3 bench/bench_gpu_prefill.py "$kit" --runs 20 --profile-dir "$out" 2>&1 | tee "$out/prefill.txt" || status=1
  echo "== Attention alone at the prefill's shape against PyTorch"
  python3 bench/bench_gpu_attention.py "$kit" --runs 20 2>&1 | tee "$out/attention.txt" || status=1
else
  echo "gpu-check: no $kit_archive (python3 scripts/gpu_kit.py prepare build/gpu-kit): kit checks skipped" | tee "$out/cases.log"
fi
{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%MZ)"
  cat "$out/gpu.txt"
  grep -hE "TFLOP/s|bf16 peak|passed|FAILED|WRONG|p50|max \|diff\||skipped|error" \
    "$out/gemm.txt" "$out/torch.txt" "$out/cases.log" "$out/prefill.txt" \
    "$out/attention.txt" 2>/dev/null
} > "$out/summary.txt"
cat "$out/summary.txt"
exit $status
