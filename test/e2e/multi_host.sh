#!/usr/bin/env bash
# Hosts made of network namespaces, for test/e2e/multi-host.test: two
# namespaces joined by veth pairs to a bridge, each with its own address and
# (through the launcher) its own hostname, so that MPICH sees two hosts; the
# ranks talk over TCP (UCX_TLS=tcp,self: shared memory, which the namespaces
# share, would bypass the network). The bridge and cleave-run live in a
# namespace of their own (the launching host), so that nothing of this
# machine's own network changes while other tests run beside it.
# Everything made is removed on exit, whatever happens.
#
# Usage: multi_host.sh BIN BUNDLE INPUT WORK
#   prints one line per check: a tp=2 run across the two hosts against the
#   one-rank run, then a rank killed on one host, then one host's link taken
#   down, each with how long the job took to end and its last message.
set -u
bin=$1 bundle=$2 input=$3 work=$4
tag=$(printf '%04x' $((RANDOM % 65536)))
net=10.$((200 + RANDOM % 50)).$((RANDOM % 250)).
bridge=cb$tag
head=ch${tag}h
hosts=() links=()
cleanup() {
  for ns in "${hosts[@]}" "$head"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}
trap cleanup EXIT
in_head() { ip netns exec "$head" "$@"; }
ip netns add "$head" || { echo "cannot make namespace $head"; exit 1; }
in_head ip link set lo up
in_head ip link add "$bridge" type bridge &&
  in_head ip addr add "${net}1/24" dev "$bridge" &&
  in_head ip link set "$bridge" up || { echo "cannot make a bridge"; exit 1; }
: > "$work/hosts.map"
for i in 1 2; do
  ns=ch$tag$i
  ip netns add "$ns" || { echo "cannot make namespace $ns"; exit 1; }
  hosts+=("$ns")
  in_head ip link add cv$tag$i type veth peer name eth0 netns "$ns"
  links+=(cv$tag$i)
  in_head ip link set cv$tag$i master "$bridge" up
  ip netns exec "$ns" ip addr add "${net}1$i/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
  echo "${net}1$i $ns" >> "$work/hosts.map"
done
# hydra's launcher-exec, called as ssh: [OPTIONS] HOST COMMAND...
cat > "$work/enter-host.sh" <<SCRIPT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host="\$1"; shift
ns=\$(grep -w "^\$host" "$work/hosts.map" | cut -d' ' -f2)
[ -n "\$ns" ] || { echo "enter-host: no namespace for '\$host'" >&2; exit 255; }
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns; exec \$*"
SCRIPT
chmod +x "$work/enter-host.sh"
export UCX_TLS=tcp,self
run() {
  in_head "$bin/cleave-run" "$bundle" --input "$input" \
    --hosts "${net}11:1,${net}12:1" --launcher ssh \
    --launcher-exec "$work/enter-host.sh" --iface "$bridge" "$@"
}
# 1. Across the hosts, against one rank on this host.
run --output-dir "$work/across" > "$work/across.log" 2>&1 ||
  { echo "the run across hosts failed:"; cat "$work/across.log"; exit 1; }
python3 - "$work/across" "$work/local" <<'PY'
import glob, os, sys, numpy as np
a = sorted(glob.glob(os.path.join(sys.argv[1], "*.npy")))
diff = max(float(abs(np.load(f) - np.load(os.path.join(sys.argv[2],
                                                   os.path.basename(f)))).max())
           for f in a)
# Within float32 rounding of the split sums (as tensor-parallel.test allows).
same = a and diff <= 1e-4
print(f"tp=2 across 2 hosts: {len(a)} outputs, "
      f"{'within 1e-4 of' if same else 'DIFFERENT from'} the one-rank "
      f"program's")
PY
# 2 and 3. Faults during a long run: the job must end, with a message.
fault() {
  local what=$1; shift
  run --output-dir "$work/fault" --bench 1000000 --timeout 10 \
    > "$work/$what.log" 2>&1 &
  local job=$!
  for _ in $(seq 1 200); do
    [ "$(ip netns pids "${hosts[1]}" | wc -l)" -ge 2 ] && break; sleep 0.1
  done
  sleep 2
  local start=$SECONDS
  "$@"
  local waited=0
  while kill -0 $job 2>/dev/null && [ $waited -lt 60 ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 $job 2>/dev/null; then
    echo "$what: the job did NOT end within 60 s"; kill -9 $job; return
  fi
  wait $job; local code=$?
  local ended=$((SECONDS - start))
  # Every rank on every host gone within 30 s of the fault (a host cut off
  # ends its own ranks: their collectives time out, then they exit).
  local left=0
  while :; do
    left=0
    for ns in "${hosts[@]}"; do left=$((left + $(ip netns pids "$ns" | wc -l))); done
    [ $left -eq 0 ] || [ $((SECONDS - start)) -ge 30 ] && break
    sleep 0.2
  done
  echo "$what: the job ended in $ended s (exit $code), the hosts emptied in $((SECONDS - start)) s, $left processes left: $(grep 'cleave-run: error' "$work/$what.log" | tail -1)"
}
kill_rank() { ip netns pids "${hosts[1]}" | while read -r p; do
  case "$(tr '\0' ' ' < /proc/$p/cmdline)" in *"$bundle/program"*) kill -9 "$p";; esac; done; }
link_down() { in_head ip link set "${links[1]}" down; }
fault "rank killed on host 2" kill_rank
fault "host 2's link down" link_down
