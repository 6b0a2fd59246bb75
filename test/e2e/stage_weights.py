"""Checks the per-stage weight files of a pipeline-only bundle written by
check_model.py (WORK/bundle; rank r runs stage r). From plan.txt, each
parameter's bytes and the stages that read it: every rank's file must hold
exactly its stage's parameters (their bytes plus at most 63 bytes of
alignment padding each, after the 64-byte header), and every parameter of
the model must be held by some stage. A parameter several stages read (the
GPT-2 export shares one LayerNorm weight between layers) is in each of
their files."""
import json
import os
import re
import sys

HEADER = 64     # CLEAVE_WEIGHTS_HEADER_BYTES
ALIGNMENT = 64  # CLEAVE_WEIGHTS_ALIGNMENT

bundle = os.path.join(sys.argv[1], "bundle")
manifest = json.load(open(os.path.join(bundle, "manifest.json")))
ranks = manifest["ranks"]
plan = open(os.path.join(bundle, "plan.txt")).read()
model_bytes = int(re.search(r"^Parameters: \d+ \(\d+ split\), (\d+)", plan, re.M).group(1))
per_stage = [[] for _ in range(ranks)]
params = {}
for m in re.finditer(r"^  (\S+)\s+\S+\s+\S+\s+whole\s+(\d+) bytes/rank  stages? ([\d,]+)", plan, re.M):
    params[m.group(1)] = int(m.group(2))
    for stage in m.group(3).split(","):
        per_stage[int(stage)].append(int(m.group(2)))
ok = True
for rank, path in enumerate(manifest["weights"]):
    payload = os.path.getsize(os.path.join(bundle, path)) - HEADER
    held = sum(per_stage[rank])
    if not held <= payload < held + ALIGNMENT * max(1, len(per_stage[rank])):
        ok = False
        print(f"rank {rank}: file holds {payload} bytes, its stage's parameters {held}")
print(f"ranks {ranks}, each file holds exactly its stage's parameters: {'yes' if ok else 'no'}")
total = sum(params.values())
print(f"every parameter is held by a stage: "
      f"{'yes' if total == model_bytes else 'no'} ({total} vs {model_bytes} bytes)")
