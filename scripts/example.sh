#!/usr/bin/env bash
# The main job on the bundled example: a small GPT-2-style model
# (test/models/gpt2-opset17.onnx, exported by PyTorch: token and position
# embeddings, pre-LN blocks, causal mask, GELU MLP, tied LM head), a batch of
# 4 sequences of 64 tokens, split across ranks.
#
# 1. Tensor parallelism on 2 ranks (--mesh tp=2, the megatron preset), which
#    2 cores run side by side: the logits checked against ONNX Runtime and
#    against the model compiled for one rank, each rank's share of the
#    weights, and the latency of the 2 ranks against ONNX Runtime and against
#    the one-rank program on the same cores (alternating rounds, medians).
# 2. Pipeline stages and tensor parallelism on 4 ranks (--mesh pp=2,tp=2,
#    2 microbatches): the same checks of the logits and the plan's summary.
#    It is timed only where the machine has 4 cores or more; on fewer, the
#    ranks would take turns on the cores and the figure would measure that.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
cores=$(nproc)
rm -rf out/example
echo "== tensor parallelism: 2 ranks side by side =="
python3 scripts/check_model.py test/models/gpt2-opset17.onnx \
  --input-shape input_ids=4x64 --int-high 97 --work out/example/tp2 \
  --compile-arg=--mesh=tp=2 --compile-arg=--shard-preset=megatron \
  --compare-single-rank --bench 100 --bench-rounds 3 \
  --threads "$(( cores >= 4 ? cores / 2 : 1 ))"
echo
echo "== pipeline stages x tensor parallelism: 4 ranks, 2 microbatches =="
bench=()
if (( cores >= 4 )); then
  bench=(--bench 100 --bench-rounds 3)
fi
python3 scripts/check_model.py test/models/gpt2-opset17.onnx \
  --input-shape input_ids=4x64 --int-high 97 --work out/example/pp2-tp2 \
  --compile-arg=--mesh=pp=2,tp=2 --compile-arg=--shard-preset=megatron \
  --compile-arg=--microbatches=2 --compare-single-rank "${bench[@]}" --threads 1
if (( cores < 4 )); then
  echo "(not timed: $cores cores for 4 ranks; bench/bench_pp.py times stages on as many ranks as cores)"
fi
echo
echo "bundles: out/example/tp2/bundle and out/example/pp2-tp2/bundle (program;"
echo "         weights/rank<r>.bin, each holding its rank's slices; manifest.json;"
echo "         plan.txt: shardings, stages, transfers and collectives)"
