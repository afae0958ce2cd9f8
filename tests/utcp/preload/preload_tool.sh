#!/bin/sh
# One rank of a preload test of an unmodified Debian tool, under viarun -n 2:
#   preload_tool.sh iperf3|sockperf_pingpong|sockperf_throughput LIBVIASTACK-PRELOAD.SO
# Rank 0 runs the server on 10.0.0.1 (utcp's address for rank 0), rank 1 the
# client against it, both with LD_PRELOAD set. The run is short (about a
# second). Exit 77 (skipped) when the tool is not installed.
set -u
tool=$1
preload=$2
rank=${VIASTACK_RANK:?run me under viarun}
server=10.0.0.1
port=5201
case $tool in
  iperf3) program=iperf3 ;;
  sockperf_*) program=sockperf ;;
  *) echo "preload_tool.sh: unknown tool $tool" >&2; exit 2 ;;
esac
if ! command -v "$program" >/dev/null 2>&1; then
  echo "SKIP: $program is not installed (Debian package $program, scripts/common.sh installs it)"
  exit 77
fi
export LD_PRELOAD=$preload

if [ "$rank" -eq 0 ]; then
  case $tool in
    # -1: serve one test, then exit.
    iperf3) exec iperf3 --server --one-off --bind $server --port $port ;;
    # sockperf's server runs until stopped: the client's rank ends the job
    # when it is done (viarun stops the other ranks once one has failed or
    # all have exited; the server stops when its peer's connection closes).
    sockperf_*) exec timeout -s KILL 20 sockperf server --tcp --ip $server --port $port ;;
  esac
fi

# The server may not listen yet: the client tries again while it is refused.
attempt=0
while :; do
  case $tool in
    iperf3) output=$(iperf3 --client $server --port $port --bytes 10M --format m 2>&1) ;;
    sockperf_pingpong) output=$(sockperf ping-pong --tcp --ip $server --port $port --time 1 2>&1) ;;
    sockperf_throughput) output=$(sockperf throughput --tcp --ip $server --port $port --time 1 --msg-size 1400 2>&1) ;;
  esac
  status=$?
  printf '%s\n' "$output" | grep -q -i "refused" || break
  attempt=$((attempt + 1))
  [ $attempt -lt 50 ] || break
  sleep 0.1
done
printf '%s\n' "$output"
exit $status
