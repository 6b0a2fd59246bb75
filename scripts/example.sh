#!/usr/bin/env bash
# The main job on the bundled examples: a small GPT-2-style model
# (test/models/gpt2-opset17.onnx, exported by PyTorch: token and position
# embeddings, pre-LN blocks, causal mask, GELU MLP, tied LM head), a batch of
# 4 sequences of 64 tokens, split across ranks; and a small LLaMA as Optimum
# exports it for generation (test/models/gen-llama).
#
# 1. Tensor parallelism on 2 ranks (--mesh tp=2, the megatron preset), which
#    2 cores run side by side: the logits checked against ONNX Runtime and
#    against the model compiled for one rank, each rank's share of the
#    weights, and the latency of the 2 ranks against ONNX Runtime and against
#    the one-rank program on the same cores (alternating rounds, medians).
# 2. Token generation on 2 ranks (cleave-compile --generate, tp=2): a LLaMA
#    decoder with past, three prompts of different lengths, 32 new tokens
#    each, checked against transformers' generate(); time to first token and
#    tokens per second.
# 3. Pipeline stages and tensor parallelism on 4 ranks (--mesh pp=2,tp=2,
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
echo "== token generation: a prompt, then one token at a time, 2 ranks =="
# Optimum's LLaMA decoder with past (test/models/gen-llama), three prompts of
# 9, 4 and 12 tokens left-padded; 32 new tokens each, checked against
# transformers' generate() on the same weights.
gen=out/example/generate
bin=build/bin
"$bin/cleave-compile" test/models/gen-llama/model.onnx -o "$gen/bundle" \
  --generate --max-seq 48 --max-batch 3 --prompt-length 16 \
  --mesh tp=2 --shard-preset megatron --quiet
"$bin/cleave-run" "$gen/bundle" --generate \
  --prompt test/models/gen-llama/prompt3.npy \
  --attention-mask test/models/gen-llama/mask3.npy \
  --max-new-tokens 32 --threads 1 --output-dir "$gen/out" |
  awk 'NR <= 3 { print } { last[NR % 4] = $0 }
       END { print "  ..."; for (i = NR - 3; i <= NR; ++i) print last[i % 4] }'
python3 - "$gen/out/tokens.npy" test/models/gen-llama/tokens3.npy <<'PY'
import sys, numpy as np
got, expected = np.load(sys.argv[1]), np.load(sys.argv[2])
same = int((got == expected).sum())
print(f"tokens equal to transformers' generate(): {same} of {expected.size}")
sys.exit(0 if same == expected.size else 1)
PY
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
echo "bundles: out/example/tp2/bundle, out/example/pp2-tp2/bundle and"
echo "         out/example/generate/bundle (program;"
echo "         weights/rank<r>.bin, each holding its rank's slices; manifest.json;"
echo "         plan.txt: shardings, stages, transfers and collectives)"
