#!/usr/bin/env bash
# Debian's iperf3 and sockperf, unmodified, over utcp (two viarun ranks with
# LD_PRELOAD=libviastack-preload.so, 10.0.0.1 and 10.0.0.2) and over the
# kernel's loopback (127.0.0.1), interleaved round by round, both placed
# alike (one process per core: viarun binds its two ranks, the kernel's
# server and client run under taskset). Issue 23's targets: iperf3 (TCP)
# >= 1.0x the kernel's bandwidth; sockperf ping-pong latency <= 0.3x the
# kernel's. Prints a JSON line per run and per test (medians and the ratio
# utcp / kernel), then a table. Exit status: 0 when every run gave its
# figure, 1 when one did not, 2 for a bad command line, 77 when iperf3 or
# sockperf is missing. sockperf's ping-pongs run with --mps 2000000: at its
# default (--mps=max) sockperf sizes its table of send times for 600,000
# messages a second and stops with "_seqN > m_maxSequenceNo" when a stack
# answers faster, as utcp does; the rate is above any round trip either
# stack reaches, so it never paces them.
#
#   benchmarks/preload_tools.sh [--build DIR] [--provider shm|tcp] [--reps N] [--seconds S]
#       [--tests iperf3,iperf3_udp,sockperf_tcp,sockperf_udp] [--out DIR]
set -uo pipefail

build=build provider=shm reps=3 seconds=3 tests=iperf3,iperf3_udp,sockperf_tcp,sockperf_udp out=""
usage() { sed -n '/^#   benchmarks/,/^#.*--out DIR/p' "$0" | sed 's/^# *//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case $1 in
    --build) build=$2 ;; --provider) provider=$2 ;; --reps) reps=$2 ;; --seconds) seconds=$2 ;;
    --tests) tests=$2 ;; --out) out=$2 ;;
    *) usage ;;
  esac
  shift 2
done
case $provider in shm | tcp) ;; *) usage ;; esac
[[ $reps =~ ^[1-9][0-9]*$ && $seconds =~ ^[1-9][0-9]*$ ]] || usage
for tool in iperf3 sockperf; do
  command -v $tool > /dev/null || { echo "preload_tools: skipped: $tool is not installed (apt-get install $tool)" >&2; exit 77; }
done
BIN=$(cd "$build" 2> /dev/null && pwd)/bin
PRELOAD=$(cd "$build" 2> /dev/null && pwd)/lib/libviastack-preload.so
[ -x "$BIN/viarun" ] && [ -e "$PRELOAD" ] || { echo "preload_tools: build viarun and utcp_preload in $build first" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out" || exit 2
port=$((15000 + $$ % 5000))
failures=0

# run_pair STACK TEST OUTFILE: one measurement; the client's output in OUTFILE.
# The server is started first and stopped (sockperf's never ends by itself)
# once the client is done.
run_pair() {
  local stack=$1 test=$2 file=$3 server_ip client server
  port=$((port + 1))
  case $test in
    iperf3) server="iperf3 --server --one-off --port $port" client="iperf3 --client SERVER --port $port --time $seconds --json" ;;
    iperf3_udp) server="iperf3 --server --one-off --port $port"
      client="iperf3 --client SERVER --port $port --udp --bitrate 0 --time $seconds --json" ;;
    sockperf_tcp) server="sockperf server --tcp --port $port" client="sockperf ping-pong --tcp --ip SERVER --port $port --time $seconds --mps 2000000" ;;
    sockperf_udp) server="sockperf server --port $port" client="sockperf ping-pong --ip SERVER --port $port --time $seconds --mps 2000000" ;;
  esac
  if [ "$stack" = kernel ]; then
    server_ip=127.0.0.1
    case $test in iperf3*) server+=" --bind $server_ip" ;; *) server+=" --ip $server_ip" ;; esac
    taskset -c 0 $server > "$file.server" 2>&1 &
    local pid=$!
    sleep 0.3
    timeout $((seconds + 30)) taskset -c 1 ${client//SERVER/$server_ip} > "$file" 2>&1
    kill -KILL $pid 2> /dev/null
    wait $pid 2> /dev/null
  else
    server_ip=10.0.0.1
    case $test in iperf3*) server+=" --bind $server_ip" ;; *) server+=" --ip $server_ip" ;; esac
    # Rank 0 serves; rank 1 waits until the server answers (refused: not yet).
    timeout $((seconds + 60)) "$BIN/viarun" -n 2 --provider "$provider" --timeout $((seconds + 50)) -- \
      env LD_PRELOAD="$PRELOAD" sh -c '
        if [ "$VIASTACK_RANK" = 0 ]; then
          $1 > "$3.server" 2>&1 &
          pid=$!
          while [ ! -e "$3.done" ]; do sleep 0.1; done
          kill -KILL $pid 2> /dev/null
          exit 0
        fi
        for attempt in $(seq 50); do
          $2 > "$3" 2>&1 && break
          grep -q -i refused "$3" || break
          sleep 0.1
        done
        touch "$3.done"' sh "$server" "${client//SERVER/$server_ip}" "$file" > "$file.viarun" 2>&1
    rm -f "$file.done"
  fi
}

# figure TEST FILE: iperf3's received bits/s, or sockperf's average latency in usec.
figure() {
  case $1 in
    iperf3*) python3 -c '
import json, sys
end = json.load(open(sys.argv[1]))["end"]
s = end.get("sum_received") or end.get("sum")
print(s["bits_per_second"])' "$2" 2> /dev/null ;;
    sockperf_*) sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$2" | head -1 ;;
  esac
}

IFS=, read -r -a test_list <<< "$tests"
for ((round = 1; round <= reps; round++)); do
  for test in "${test_list[@]}"; do
    order=(kernel utcp)
    ((round % 2 == 0)) && order=(utcp kernel)
    for stack in "${order[@]}"; do
      file=$out/r${round}_${test}_${stack}.txt
      run_pair "$stack" "$test" "$file"
      value=$(figure "$test" "$file")
      if [ -z "$value" ]; then
        echo "preload_tools: $test over $stack, round $round: no figure (see $file)" >&2
        failures=$((failures + 1))
        continue
      fi
      echo "{\"bench\":\"preload_tools\",\"test\":\"$test\",\"stack\":\"$stack\",\"provider\":\"$provider\",\"round\":$round,\"value\":$value}" |
        tee -a "$out/runs.jsonl"
    done
  done
done

python3 - "$out/runs.jsonl" "$provider" << 'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])] if __import__("os").path.exists(sys.argv[1]) else []
units = {"iperf3": "Gbit/s", "iperf3_udp": "Gbit/s", "sockperf_tcp": "usec", "sockperf_udp": "usec"}
targets = {"iperf3": (">=", 1.0), "sockperf_tcp": ("<=", 0.3), "sockperf_udp": ("<=", 0.3)}
print(f"\n| test | utcp ({sys.argv[2]}) | kernel loopback | utcp / kernel | target |")
print("| --- | ---: | ---: | ---: | --- |")
for test in units:
    values = {stack: [r["value"] for r in runs if r["test"] == test and r["stack"] == stack] for stack in ("utcp", "kernel")}
    if not values["utcp"] or not values["kernel"]:
        continue
    scale = 1e-9 if units[test] == "Gbit/s" else 1.0
    utcp, kernel = statistics.median(values["utcp"]), statistics.median(values["kernel"])
    ratio = utcp / kernel
    sense, bar = targets.get(test, ("", None))
    met = "" if bar is None else ("met" if (ratio >= bar if sense == ">=" else ratio <= bar) else "NOT met")
    goal = "" if bar is None else f"{sense} {bar} ({met})"
    print(json.dumps({"bench": "preload_tools", "test": test, "provider": sys.argv[2], "utcp_median": utcp,
                      "kernel_median": kernel, "ratio": ratio, "rounds": len(values["utcp"])}), file=sys.stderr)
    print(f"| {test} ({units[test]}, median of {len(values['utcp'])}) | {utcp * scale:.3f} | {kernel * scale:.3f} | {ratio:.2f} | {goal} |")
EOF
echo "runs and outputs: $out"
[ $failures -eq 0 ] || exit 1
