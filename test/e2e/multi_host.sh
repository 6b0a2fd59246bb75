#!/usr/bin/env bash
# Hosts made of namespaces, for test/e2e/multi-host.test: two network
# namespaces joined by veth pairs to a bridge, each with its own address,
# (through the launcher) its own hostname, and a mount namespace in which
# WORK/private is a folder of its own (a tmpfs), so that MPICH sees two
# hosts, and a folder there is not shared. The ranks talk over TCP
# (UCX_TLS=tcp,self: shared memory, which the namespaces share, would bypass
# the network). The bridge and cleave-run live in a network namespace of
# their own (the launching host), so that nothing of this machine's own
# network changes while other tests run beside it. Everything made is
# removed on exit, whatever happens.
#
# Usage: multi_host.sh BIN WORK
#   WORK holds the bundles tp2 (tp=2) and pp2tp2 (pp=2 x tp=2), their
#   input ids.npy and the one-rank program's outputs in local/. Prints one
#   line per check (see multi-host.test).
set -u
bin=$1 work=$2
tag=$(printf '%04x' $((RANDOM % 65536)))
net=10.$((200 + RANDOM % 50)).$((RANDOM % 250)).
bridge=cb$tag
head=ch${tag}h
hosts=() links=() holders=()
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
mkdir -p "$work/private"
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
  # The host's mount and hostname namespaces, held by a process that sleeps
  # in them (entered through it: a mount namespace bound to a file cannot
  # be entered from inside the launching host's namespace).
  ip netns exec "$ns" unshare --mount --uts --propagation private sh -c \
    "mount -t tmpfs none '$work/private' && hostname $ns && exec sleep 100000" &
  holders+=($!)
  disown $! # its end, at clean-up, is not news
  for _ in $(seq 1 50); do
    [ "$(nsenter -t $! --uts hostname 2>/dev/null)" = "$ns" ] && break; sleep 0.1
  done
  [ "$(nsenter -t $! --uts hostname 2>/dev/null)" = "$ns" ] ||
    { echo "cannot make the mount and hostname namespaces of $ns"; exit 1; }
  echo "${net}1$i $ns $!" >> "$work/hosts.map"
done
# hydra's launcher-exec, called as ssh: [OPTIONS] HOST COMMAND...; cleave-run
# calls it the same way to copy files.
cat > "$work/enter-host.sh" <<SCRIPT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host="\$1"; shift
pid=\$(grep -w "^\$host" "$work/hosts.map" | cut -d' ' -f3)
[ -n "\$pid" ] || { echo "enter-host: no namespace for '\$host'" >&2; exit 255; }
# As sshd does: the command line run by a shell (which execs its last command).
exec nsenter -t "\$pid" --net --mount --uts sh -c "\$*"
SCRIPT
chmod +x "$work/enter-host.sh"
on_host() { "$work/enter-host.sh" -x "${net}1$1" "$2"; }
export UCX_TLS=tcp,self
# run BUNDLE SLOTS [OPTION...]: cleave-run across the two hosts, named by a
# host list, or with SLOTS "file" by a host file (2 slots each).
printf '# hydra host file\n%s:2\n\n%s:2\n' "${net}11" "${net}12" > "$work/hosts.txt"
run() {
  local bundle=$1 slots=$2; shift 2
  local hosts=(--hosts "${net}11:$slots,${net}12:$slots")
  [ "$slots" = file ] && hosts=(--hostfile "$work/hosts.txt")
  in_head "$bin/cleave-run" "$bundle" --input "input_ids=$work/ids.npy" \
    "${hosts[@]}" --launcher ssh \
    --launcher-exec "$work/enter-host.sh" --iface "$bridge" "$@"
}
# same DIR WHAT: whether DIR's outputs equal the one-rank program's.
same() {
  python3 - "$1" "$work/local" "$2" <<'PY'
import glob, os, sys, numpy as np
a = sorted(glob.glob(os.path.join(sys.argv[1], "*.npy")))
diff = max((float(abs(np.load(f) - np.load(os.path.join(
    sys.argv[2], os.path.basename(f)))).max()) for f in a), default=0)
# Within float32 rounding of the split sums (as tensor-parallel.test allows).
ok = a and diff <= 1e-4
print(f"{sys.argv[3]}: {len(a)} outputs, "
      f"{'within 1e-4 of' if ok else 'DIFFERENT from'} the one-rank program's")
PY
}
# placement LOG: the line that says where the ranks ran, hosts by number.
placement() { grep -h 'cleave-run: ranks\|spans hosts' "$1" | sed "s/${net}1/host /g"; }

# 1 and 2. Across the hosts, the bundle at the same path on both.
for b in tp2:1 pp2tp2:file; do
  bundle=${b%:*} slots=${b#*:}
  run "$work/$bundle" "$slots" --output-dir "$work/out-$bundle" \
    > "$work/$bundle.log" 2>&1 ||
    { echo "$bundle across hosts failed:"; cat "$work/$bundle.log"; exit 1; }
  same "$work/out-$bundle" "$bundle across 2 hosts"
  placement "$work/$bundle.log"
done

# 3. A host lacking the weights (hidden there by an empty folder): refused
# before anything starts, naming the host, the ranks and the files.
on_host 2 "mount -t tmpfs none $work/pp2tp2/weights"
run "$work/pp2tp2" 2 --output-dir "$work/out-missing" > "$work/missing.log" 2>&1
echo "weights missing on host 2: exit $?, outputs $(ls "$work/out-missing" 2>/dev/null | wc -l)"
sed "s/${net}1/host /g; s/ch$tag/ns/g; s|$work/||g" "$work/missing.log" | grep -v '^CPU'
on_host 2 "umount $work/pp2tp2/weights"

# 4. Hosts without a shared folder: --stage-weights copies each host its own
# ranks' files, the inputs too, and brings the outputs back.
stage=$work/private/stage
staged() {
  run "$work/pp2tp2" 2 --output-dir "$work/out-$1" --stage-weights "$stage" \
    > "$work/$1.log" 2>&1 || { echo "staged run $1 failed:"; cat "$work/$1.log"; exit 1; }
  grep -h 'copying' "$work/$1.log" | sed "s/${net}1/host /g; s|$work/||g; s/([0-9.]* [KM]iB)/(SIZE)/"
  same "$work/out-$1" "staged run $1"
}
staged first
for i in 1 2; do
  echo "host $i holds: $(on_host $i "cd $stage && ls weights inputs" | grep . | tr '\n' ' ')"
done
echo "this host holds: $(ls "$stage" 2>/dev/null | wc -l) files in $stage"
staged again
# A weight file damaged on one host: found and copied again, alone.
on_host 2 "printf x | dd of=$stage/weights/rank3.bin bs=1 seek=100 conv=notrunc 2>/dev/null"
staged repaired

# The processes on host N other than the one holding its namespaces.
host_pids() { ip netns pids "${hosts[$1]}" | grep -vx "${holders[$1]}"; }

# 5, 6 and 7. Faults during a long run, with the default timeouts: the job
# must end, with a message, and leave no process on either host.
fault() {
  local what=$1; shift
  run "$work/tp2" 1 --output-dir "$work/fault" --bench 1000000 \
    > "$work/$what.log" 2>&1 &
  local job=$!
  for _ in $(seq 1 200); do
    [ "$(host_pids 1 | wc -l)" -ge 2 ] && break; sleep 0.1
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
  # ends its own ranks: their heartbeats stop, then they exit).
  local left=0
  while :; do
    left=0
    for i in 0 1; do left=$((left + $(host_pids $i | wc -l))); done
    [ $left -eq 0 ] || [ $((SECONDS - start)) -ge 30 ] && break
    sleep 0.2
  done
  echo "$what: the job ended in $ended s (exit $code), the hosts emptied in $((SECONDS - start)) s, $left processes left: $(grep 'cleave-run: error' "$work/$what.log" | head -1 | sed "s/ch$tag/ns/g")"
}
signal_rank() { host_pids 1 | while read -r p; do
  case "$(tr '\0' ' ' < /proc/$p/cmdline)" in *"tp2/program"*) kill "-$1" "$p";; esac; done; }
link_down() { in_head ip link set "${links[1]}" down; }
fault "rank killed on host 2" signal_rank KILL
fault "rank stopped on host 2" signal_rank STOP
fault "host 2's link down" link_down
