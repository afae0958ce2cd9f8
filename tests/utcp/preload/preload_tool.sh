#!/bin/sh
# One rank of a preload test of an unmodified Debian tool, under viarun -n 2:
#   preload_tool.sh TOOL LIBVIASTACK-PRELOAD.SO DIRECTORY
# TOOL: iperf3, sockperf_pingpong, sockperf_throughput (TCP), or
# iperf3_udp, sockperf_udp_pingpong, sockperf_udp_throughput (UDP; iperf3's
# control connection is TCP, its data UDP).
# Rank 0 runs the server on 10.0.0.1 (utcp's address for rank 0), rank 1 the
# client against it, both with LD_PRELOAD set. The runs are short (one or
# two seconds). Exit 77 (skipped) when the tool is not installed. DIRECTORY (the
# same for both ranks) is where rank 0 leaves the sockperf server's pid for
# rank 1 to stop it: sockperf's server runs until stopped.
set -u
tool=$1
preload=$2
directory=$3
rank=${VIASTACK_RANK:?run me under viarun}
server=10.0.0.1
port=5201
case $tool in
  iperf3*) program=iperf3 ;;
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
    iperf3*) exec iperf3 --server --one-off --bind $server --port $port ;;
    # Stopped by rank 1 once its client is done (SIGKILL: a signal does not
    # interrupt a blocking wait on utcp, README.md), or by viarun --timeout.
    sockperf_*)
      mkdir -p "$directory" && rm -f "$directory/server.pid" "$directory/client.done"
      case $tool in
        sockperf_udp_*) protocol= ;;
        *) protocol=--tcp ;;
      esac
      sockperf server $protocol --ip $server --port $port &
      echo $! > "$directory/server.pid"
      wait $!
      status=$?
      if [ -e "$directory/client.done" ]; then exit 0; fi
      echo "sockperf server: exit status $status before the client was done" >&2
      exit 1 ;;
  esac
fi

# sockperf's ping-pong at its default --mps=max sizes its table of send times
# for 600,000 messages a second (its MPS_MAX) and stops with "_seqN >
# m_maxSequenceNo" when a stack answers faster than that, as utcp does in
# this machine's fast state; an explicit rate above any round trip utcp
# reaches (one message per 0.5 us) sizes the table for it and never paces.
pingpong_rate="--mps 2000000"

# The server may not listen yet: the client tries again while it is refused.
attempt=0
while :; do
  case $tool in
    iperf3) output=$(iperf3 --client $server --port $port --bytes 10M --format m 2>&1) ;;
    sockperf_pingpong) output=$(sockperf ping-pong --tcp --ip $server --port $port --time 2 $pingpong_rate 2>&1) ;;
    sockperf_throughput) output=$(sockperf throughput --tcp --ip $server --port $port --time 1 --msg-size 1400 2>&1) ;;
    iperf3_udp) output=$(iperf3 --client $server --port $port --udp --bitrate 100M --time 1 --format m 2>&1) ;;
    sockperf_udp_pingpong) output=$(sockperf ping-pong --ip $server --port $port --time 2 $pingpong_rate 2>&1) ;;
    sockperf_udp_throughput) output=$(sockperf throughput --ip $server --port $port --time 1 --msg-size 1400 2>&1) ;;
  esac
  status=$?
  printf '%s\n' "$output" | grep -q -i "refused" || break
  attempt=$((attempt + 1))
  [ $attempt -lt 50 ] || break
  sleep 0.1
done
printf '%s\n' "$output"
# A run that ended without its summary did not measure anything.
case $tool in
  iperf3) summary='sender$' ;;
  iperf3_udp) summary='receiver$' ;;
  sockperf_pingpong | sockperf_udp_pingpong) summary='Summary: Latency is' ;;
  sockperf_throughput | sockperf_udp_throughput) summary='Summary: Message Rate is' ;;
esac
if [ $status -eq 0 ] && ! printf '%s\n' "$output" | grep -q "$summary"; then
  echo "$tool: no line matching '$summary' in the client's output" >&2
  status=1
fi
if [ "$program" = sockperf ]; then
  touch "$directory/client.done"
  kill -KILL "$(cat "$directory/server.pid")"
fi
exit $status
