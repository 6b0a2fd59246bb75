#!/usr/bin/env bash
# The main job on the bundled example: compiles a small GPT-2-style model
# (test/models/gpt2-opset17.onnx, exported by PyTorch: token and position
# embeddings, pre-LN blocks, causal mask, GELU MLP, tied LM head) for a batch
# of 4 sequences of 64 tokens on 4 ranks: 2 pipeline stages, each on 2
# tensor-parallel ranks (--mesh pp=2,tp=2, the megatron preset), with the
# batch cut into 2 microbatches. Runs the bundle with cleave-run (MPICH, one
# process per rank), checks the logits against ONNX Runtime and against the
# same model compiled for one rank, prints the plan's summary and the latency
# of Cleave and of ONNX Runtime on the same number of cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
rm -rf out/example
python3 scripts/check_model.py test/models/gpt2-opset17.onnx \
  --input-shape input_ids=4x64 --int-high 97 --work out/example \
  --compile-arg=--mesh=pp=2,tp=2 --compile-arg=--shard-preset=megatron \
  --compile-arg=--microbatches=2 \
  --compare-single-rank --bench 50 --threads "${CLEAVE_NUM_THREADS:-1}"
echo "bundle: out/example/bundle (program, weights/rank0.bin .. rank3.bin, each"
echo "        holding its stage's slices; manifest.json; plan.txt: shardings,"
echo "        stages, transfers and collectives)"
