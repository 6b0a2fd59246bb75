# Summarises a cleave-calibrate machine file: GEMM entries per rank count,
# the collective fits, the shared figures, and whether every figure is
# positive.
import json
import sys

machine = json.load(open(sys.argv[1]))
ranks = [int(r) for r in sys.argv[2].split(",")]
gemm = [sum(1 for e in machine["gemm"] if e["ranks"] == r) for r in ranks]
links = sorted(f"{f['kind']}/{f['ranks']}" for f in machine["links"])
shared = [f["ranks"] for f in machine["shared"]]
figures = [machine["peak"], machine["mem-bw"], machine["memory"]]
figures += [e["flops"] for e in machine["gemm"]]
figures += [f["bandwidth"] for f in machine["links"]]
figures += [f[k] for f in machine["shared"] for k in ("peak", "mem-bw", "time-scale")]
positive = all(x > 0 for x in figures) and all(f["latency"] >= 0 for f in machine["links"])
print(f"gemm entries for ranks {', '.join(map(str, ranks))}: "
      f"{', '.join(map(str, gemm))}; links: {', '.join(links)}; "
      f"shared: {', '.join(map(str, shared))}; every figure positive: "
      f"{'yes' if positive else 'no'}")
