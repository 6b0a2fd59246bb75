#!/usr/bin/env bash
# The main job on the bundled example: compiles a small GPT-2-style model
# (test/models/gpt2-opset17.onnx, exported by PyTorch: token and position
# embeddings, pre-LN blocks, causal mask, GELU MLP, tied LM head) for one
# sequence of 64 tokens, runs the bundle with cleave-run, checks the logits
# against ONNX Runtime and prints the latency of both.
# Runs on one rank; tensor and pipeline parallelism come with the next phases.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
rm -rf out/example
python3 scripts/check_model.py test/models/gpt2-opset17.onnx \
  --input-shape input_ids=1x64 --int-high 97 --work out/example \
  --bench 50 --threads "${CLEAVE_NUM_THREADS:-2}"
echo "bundle: out/example/bundle (program, weights.bin, manifest.json, plan.txt)"
