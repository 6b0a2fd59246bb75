#!/usr/bin/env bash
# Every GPU check Cleave has so far, on a machine with one NVIDIA GPU, with
# results written to a folder (default out/gpu-check; the device tool passes
# $OUT). Builds nothing: run scripts/build.sh first where the CUDA toolkit is
# installed and bring build/bin along.
#
# So far (issue 6 has only begun): the runtime's cuBLASLt GEMMs, checked in
# float32, float16 and bfloat16 against a float64 reference and timed in
# bfloat16 (one GPT-2-medium-shaped layer's GEMMs over 8 x 1024 tokens, and
# 8192^3), next to PyTorch's torch.matmul on the same shapes in the same run.
#
# Usage: scripts/gpu-check.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-out/gpu-check}}"
mkdir -p "$out"
bin=build/bin
# cuBLASLt and cudart: the CUDA toolkit's, else the pip wheels PyTorch uses.
for dir in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in ("cublas", "cuda_runtime")))' 2>/dev/null); do
  [ -d "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%MZ)"
  cat "$out/gpu.txt"
  grep -E "TFLOP/s|passed|FAILED|WRONG" "$out/gemm.txt" "$out/torch.txt"
} > "$out/summary.txt"
cat "$out/summary.txt"
exit $status
