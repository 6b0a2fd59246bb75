# Checks a --mesh auto report: feasible layouts sorted by predicted time,
# each a mesh of the device count, and which one was compiled.
import json
import sys

search = json.load(open(sys.argv[1]))["search"]
devices = int(sys.argv[2])
ranked = search["ranked"]
times = [p["predicted_seconds"] for p in ranked]
in_order = all(a <= b for a, b in zip(times, times[1:]))
sizes = all(p["dp"] * p["tp"] * p["pp"] == devices for p in ranked)
print(f"ranked {len(ranked)}, sorted by predicted time: "
      f"{'yes' if in_order else 'no'}, every mesh has {devices} ranks: "
      f"{'yes' if sizes else 'no'}, compiled {search['compiled']}")
