#!/usr/bin/env bash
# The main job on the bundled example: imports a small GPT-2-style model
# (test/models/gpt2-opset17.onnx, exported by PyTorch with dynamic batch and
# sequence) for a batch of 1 and 64 tokens, and prints what came out.
# Code generation and running on ranks come with the next phases.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
mkdir -p out
./build/bin/cleave-compile test/models/gpt2-opset17.onnx \
  --input-shape input_ids=1x64 --compile-to=import -o out/gpt2.mlir --summary
echo "imported IR written to out/gpt2.mlir"
