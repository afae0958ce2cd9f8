#!/usr/bin/env bash
# The main job: install what is missing, build in Release, then run the demo on
# local ranks over the shm provider: a VIA ping-pong, and the Split-C suite's
# scaling from 1 rank to as many ranks as the machine has cores.
#
#   bash scripts/demo.sh [--ranks N] [--help]
usage() {
  cat <<'EOF'
usage: bash scripts/demo.sh [--ranks N]

Installs the Debian packages the build needs (as root), builds in Release
(build/), then runs on this machine, over shared memory:
  1. via_pingpong between two ranks: latency and bandwidth by message size;
  2. the Split-C suite on 1 rank and on N ranks, every answer verified, and
     the speed-up of N ranks over 1 rank for each program.

  --ranks N  ranks for the Split-C suite (1..1024; default: the number of
             cores, nproc). More ranks than cores share cores, and their
             speed-up then measures that sharing, not the stack.
  --help     this text

Exit status: 0 the demo ran and every benchmark verified its answer; 1 a build
or a benchmark failed; 2 bad usage.
EOF
}

usage_error() {
  echo "demo.sh: $1" >&2
  usage >&2
  exit 2
}

cores=$(nproc)
ranks=$cores
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --ranks)
      [ $# -ge 2 ] || usage_error "--ranks needs a value"
      if ! [[ $2 =~ ^[0-9]{1,4}$ ]] || [ "$2" -lt 1 ] || [ "$2" -gt 1024 ]; then
        usage_error "--ranks takes 1..1024, not '$2'"
      fi
      ranks=$2
      shift 2 ;;
    *) usage_error "unknown option '$1'" ;;
  esac
done

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages "${REQUIRED_PACKAGES[@]}"
configure_and_build "$ROOT/build"
BIN=$ROOT/build/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo
if [ "$ranks" -ge 2 ] || [ "$cores" -ge 2 ]; then
  echo "== VIA ping-pong between 2 ranks over shm (one-way latency = round trip / 2) =="
  "$BIN/viarun" -n 2 --provider shm --timeout 120 -- "$BIN/via_pingpong" --summary
else
  echo "== VIA ping-pong skipped: it needs 2 ranks, and this machine has 1 core (--ranks 2 runs it anyway) =="
fi

# The Split-C suite's programs take milliseconds at its largest size, too
# short to time once: each program runs again and again in one job, as many
# times as make at least a second on 1 rank, and each job's time for it is
# the median of its runs. The count comes from one calibrating run.
echo
echo "== Split-C suite: 1 rank, then $ranks ranks, over shm ($cores cores here) =="
suite() { # RANKS ARGS...: the suite's --json lines, every answer verified
  local n=$1
  shift
  "$BIN/viarun" -n "$n" --provider shm --timeout 600 -- "$BIN/splitc_suite" --size paper --json "$@"
}
suite 1 >"$work/calibration"
# name,name,... with each name as many times as its runs take to fill 1 s.
bench_list=$(awk -F'"' '/"bench":"splitc"/ {
    name = $8; seconds = $0; sub(/.*"seconds":/, "", seconds); seconds += 0
    runs = seconds > 0 ? int(1.0 / seconds) + 1 : 1000
    if (runs > 1000) runs = 1000
    for (i = 0; i < runs; ++i) list = list (list == "" ? "" : ",") name
  } END { print list }' "$work/calibration")
suite 1 --bench "$bench_list" >"$work/one"
if [ "$ranks" -gt 1 ]; then
  suite "$ranks" --bench "$bench_list" >"$work/many"
else
  cp "$work/one" "$work/many"
fi

# Our ranks add at most $ranks to the load; more means other programs ran
# too, taking cores from the ranks.
read -r load _ </proc/loadavg
if awk -v load="$load" -v ranks="$ranks" -v cores="$cores" 'BEGIN { exit !(load > (ranks < cores ? ranks : cores) + 1) }'; then
  echo "Note: the load average is $load on $cores cores: other programs were running, and the"
  echo "times below include waiting for them."
fi
if [ "$ranks" -gt "$cores" ]; then
  echo "Note: $ranks ranks on $cores cores: ranks take turns on the cores, so the speed-up"
  echo "below also measures that sharing, not only the stack."
fi
cat <<EOF
Each rank solves the same share of a problem in both jobs (the suite's "paper" size
per rank), so the $ranks-rank job solves a problem $ranks times as large as the 1-rank job.
speed-up = $ranks x T(1 rank) / T($ranks ranks), T the median time of one run:
$ranks means the ranks added work at no cost; 1 means $ranks ranks took as long as one rank
would for all of it; below 1, longer.
EOF
# One row per benchmark from both jobs' lines: runs, the 1-rank job's total,
# the medians, the speed-up, and whether every run verified its answer.
awk -v ranks="$ranks" -F'"' '
  function median(name, job,    n, i, j, v, a) {
    n = count[job, name]
    for (i = 1; i <= n; ++i) a[i] = seconds[job, name, i]
    for (i = 2; i <= n; ++i) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; --j) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  /"bench":"splitc"/ {
    job = FILENAME ~ /one$/ ? 1 : 2
    name = $8; s = $0; sub(/.*"seconds":/, "", s); s += 0
    if (!((1, name) in count) && job == 1) order[++names] = name
    seconds[job, name, ++count[job, name]] = s
    total[job, name] += s
    if ($0 !~ /"verified":true/) failed[name] = 1
  }
  END {
    printf "%-11s %5s %13s %13s %13s %9s  %s\n", "benchmark", "runs", "1 rank total", "1 rank: T", ranks " ranks: T", "speed-up", "verified"
    for (k = 1; k <= names; ++k) {
      name = order[k]; t1 = median(name, 1); tn = median(name, 2)
      printf "%-11s %5d %11.2f s %11.4f s %11.4f s %9.2f  %s\n", name, count[1, name], total[1, name], t1, tn,
             (tn > 0 ? ranks * t1 / tn : 0), ((name in failed) ? "NO" : "yes")
      if (name in failed) bad = 1
    }
    exit bad
  }' "$work/one" "$work/many"
