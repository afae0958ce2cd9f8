#!/usr/bin/env bash
# Several hosts on one machine: three network namespaces joined by veth pairs
# and a bridge, each its own host with its own address. viarun starts ranks in
# them ("ip netns exec {host}") over the tcp provider and runs a ping-pong, an
# all-to-all exchange and RDMA reads and writes across them; mixed jobs (shm
# within a host, tcp between hosts), started by viarun and by MPICH's Hydra,
# show by their per-VI counters which way their traffic went; then a link is
# cut mid-transfer and the survivors must report the broken connection in
# bounded time. Everything is removed afterwards, also on failure.
#
# usage: netns_test.sh BIN_DIR      (root only; exits 77 = skipped otherwise)
set -uo pipefail
BIN=${1:?usage: netns_test.sh BIN_DIR}
SKIP=77

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: needs root to create network namespaces"
  exit $SKIP
fi
if ! command -v ip >/dev/null; then
  echo "SKIPPED: the ip command (iproute2) is missing"
  exit $SKIP
fi

tag=vs$$                  # short: interface names have at most 15 characters
net=10.$((100 + $$ % 100)).$(( ($$ / 100) % 250 ))
bridge=${tag}br
hosts=()

cleanup() {
  for i in 1 2 3; do
    ip netns del "${tag}h$i" 2>/dev/null
    ip link del "${tag}v$i" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
}
trap cleanup EXIT

fail() {
  echo "FAILED: $*"
  exit 1
}

setup() {
  ip link add "$bridge" type bridge || return 1
  ip addr add "$net.254/24" dev "$bridge" && ip link set "$bridge" up || return 1
  for i in 1 2 3; do
    local ns=${tag}h$i
    ip netns add "$ns" || return 1
    ip link add "${tag}v$i" type veth peer name "${tag}p$i" || return 1
    ip link set "${tag}p$i" netns "$ns" || return 1
    ip link set "${tag}v$i" master "$bridge" up || return 1
    ip netns exec "$ns" ip addr add "$net.$i/24" dev "${tag}p$i" || return 1
    ip netns exec "$ns" ip link set "${tag}p$i" up || return 1
    ip netns exec "$ns" ip link set lo up || return 1
    hosts+=("$ns")
  done
}
if ! setup; then
  echo "SKIPPED: cannot create namespaces, veth pairs and a bridge here"
  exit $SKIP
fi
host_list=$(IFS=,; echo "${hosts[*]}")

run() {  # run RANKS PROGRAM ARGS... : a job across the namespaces, over $PROVIDER (default tcp)
  local ranks=$1; shift
  "$BIN/viarun" --hosts "$host_list" --launcher "ip netns exec {host}" --listen-address "$net.254" \
    --provider "${PROVIDER:-tcp}" --timeout 60 -n "$ranks" -- "$@"
}

echo "== ping-pong between $net.1 and $net.2"
out=$(VIASTACK_LOG=info run 2 "$BIN/via_pingpong" --summary 2>&1) || fail "ping-pong: $out"
echo "$out"
# The namespaces share this machine's kernel, which each end names in its
# connect request or response: each end's link takes the send buffer of a
# connection within one machine, as on loopback.
[ "$(grep -c 'tcp: connection with .*, on this machine: a send buffer of' <<<"$out")" -eq 2 ] ||
  fail "the ranks' links did not see that their peer runs on this machine's kernel"

echo "== all-to-all over 6 ranks, 2 per host"
out=$(run 6 "$BIN/mp_alltoall" 2>&1) || fail "all-to-all: $out"
echo "$out"
[ "$(grep -c 'over tcp: all verified' <<<"$out")" -eq 6 ] || fail "not every rank verified its data"

echo "== a mixed job: 6 ranks, 2 per host, shm within a host and tcp between hosts"
out=$(PROVIDER=auto run 6 "$BIN/mp_alltoall" --provider mixed 2>&1) || fail "mixed all-to-all: $out"
echo "$out"
[ "$(grep -c 'over mixed: all verified' <<<"$out")" -eq 6 ] || fail "not every rank of the mixed job verified its data"
[ "$(grep -cE 'traffic by provider: shm: 1 peers, [1-9][0-9]* frames; tcp: 4 peers, [1-9]' <<<"$out")" -eq 6 ] ||
  fail "the mixed job's traffic did not split between shm and tcp as the hosts say"

echo "== a mixed job started by MPICH's Hydra: 4 ranks, 2 on each of two hosts"
if command -v mpiexec.hydra >/dev/null; then
  # Hydra's ssh launcher runs "EXEC -x HOST COMMAND": here a host is a namespace.
  launch=$(mktemp)
  printf '#!/bin/sh\n[ "$1" = -x ] && shift\nhost=$1\nshift\nexec ip netns exec "$host" sh -c "$*"\n' >"$launch"
  chmod +x "$launch"
  out=$(timeout -k 5 60 mpiexec.hydra -launcher ssh -launcher-exec "$launch" -iface "$bridge" \
    -hosts "${hosts[0]}:2,${hosts[1]}:2" -n 4 "$BIN/mp_alltoall" --provider mixed 2>&1 </dev/null)
  status=$?
  rm -f "$launch"
  echo "$out"
  [ "$status" -eq 0 ] || fail "the Hydra-started mixed job ended with status $status"
  [ "$(grep -c 'over mixed: all verified' <<<"$out")" -eq 4 ] || fail "not every rank of the Hydra job verified its data"
  [ "$(grep -cE 'traffic by provider: shm: 1 peers, [1-9][0-9]* frames; tcp: 2 peers, [1-9]' <<<"$out")" -eq 4 ] ||
    fail "the Hydra job's traffic did not split between shm and tcp as its hosts say"
else
  echo "(skipped: mpiexec.hydra is not installed; apt-get install mpich)"
fi

echo "== send/receive, RDMA write with immediate data and RDMA read between hosts"
out=$(run 2 "$BIN/mp_transfer" 2>&1) || fail "transfer: $out"
echo "$out"

echo "== a link cut mid-transfer"
# Ranks 0 and 1 run on hosts 1 and 2. Host 2's cable is pulled at the bridge
# after two seconds: both hosts keep their addresses and routes, nothing says
# the peer is gone, and both sides must find out by their timeouts.
start=$(date +%s)
VIASTACK_TCP_TIMEOUT_MS=2000 run 2 "$BIN/mp_alltoall" --until-broken 40 >"/tmp/$tag.cut" 2>&1 &
job=$!
sleep 2
ip link set "${tag}v2" down
wait $job
status=$?
took=$(( $(date +%s) - start ))
cat "/tmp/$tag.cut"
grep -q "rank [01]: connection lost" "/tmp/$tag.cut" || { rm -f "/tmp/$tag.cut"; fail "no rank reported the broken connection"; }
rm -f "/tmp/$tag.cut"
[ "$status" -eq 3 ] || fail "the job ended with status $status, expected 3 (connection lost)"
[ "$took" -le 30 ] || fail "noticing the cut took $took s"
echo "the cut was noticed; the job ended after $took s"
echo "PASSED"
