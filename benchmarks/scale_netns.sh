#!/usr/bin/env bash
# The multi-host half of the scale report: 4 network namespaces joined by a
# bridge, each a host with its own address; viarun places N ranks of
# mpi_scale_test (hello, barriers, allreduces, a ring; every answer checked)
# round-robin on them, over each provider given (tcp, mixed).
#   benchmarks/scale_netns.sh [build dir] [ranks] [providers...]   (root only)
set -uo pipefail
BIN=$(cd "${1:-build}" && pwd)/bin
RANKS=${2:-256}
shift 2 2>/dev/null || shift $#
PROVIDERS=("${@:-tcp mixed}")
[ $# -eq 0 ] && PROVIDERS=(tcp mixed)
[ "$(id -u)" -eq 0 ] || { echo "scale_netns: needs root to make network namespaces" >&2; exit 77; }

tag=vsc$$ net=10.$((100 + $$ % 100)).$(( ($$ / 100) % 250 ))
bridge=${tag}br hosts=()
cleanup() {
  for i in 1 2 3 4; do ip netns del "${tag}h$i" 2>/dev/null; ip link del "${tag}v$i" 2>/dev/null; done
  ip link del "$bridge" 2>/dev/null
}
trap cleanup EXIT
ip link add "$bridge" type bridge && ip addr add "$net.254/24" dev "$bridge" && ip link set "$bridge" up || exit 1
for i in 1 2 3 4; do
  ns=${tag}h$i
  ip netns add "$ns" && ip link add "${tag}v$i" type veth peer name "${tag}p$i" && ip link set "${tag}p$i" netns "$ns" &&
    ip link set "${tag}v$i" master "$bridge" up && ip netns exec "$ns" ip addr add "$net.$i/24" dev "${tag}p$i" &&
    ip netns exec "$ns" ip link set "${tag}p$i" up && ip netns exec "$ns" ip link set lo up || exit 1
  hosts+=("$ns")
done
list=$(IFS=,; echo "${hosts[*]}")
for provider in "${PROVIDERS[@]}"; do
  option=(); [ "$provider" != mixed ] && option=(--provider "$provider")
  log=$(mktemp)
  start=$(date +%s.%N)
  "$BIN/viarun" "${option[@]}" --hosts "$list" --launcher "ip netns exec {host}" --listen-address "$net.254" \
    --timeout 600 -n "$RANKS" -- "$BIN/mpi_scale_test" basic > "$log" 2>&1
  status=$?
  summary=$(grep -h '^scale_test:' "$log" | sed 's/^scale_test: //' | paste -sd'|')
  printf '{"bench":"scale_netns","provider":"%s","hosts":4,"ranks":%d,"status":%d,"wall_s":%.2f,"summary":"%s"}\n' \
    "$provider" "$RANKS" "$status" "$(echo "$(date +%s.%N) - $start" | bc)" "${summary//\"/}"
  rm -f "$log"
done
