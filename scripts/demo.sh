#!/usr/bin/env bash
# The main job: install what is missing, build in Release, then run the demo on
# local ranks over the shm provider: a VIA ping-pong, and the Split-C suite's
# scaling from 1 rank to as many ranks as the machine has cores, at its large
# size, weak and strong.
#
#   bash scripts/demo.sh [--ranks N] [--help]
usage() {
  cat <<'EOF'
usage: bash scripts/demo.sh [--ranks N]

Installs the Debian packages the build needs (as root), builds in Release
(build/), then runs on this machine, over shared memory:
  1. via_pingpong between two ranks: latency and bandwidth by message size;
  2. the Split-C suite at its large size (each program 0.5 s or more on one
     rank) on 1 rank and on N ranks, every answer verified, and each
     program's speed-up of N ranks over 1 rank: weak scaling (each rank
     solves one rank's problem: N x T1 / TN) and strong scaling (the N ranks
     share the 1-rank problem: T1 / TN).

  --ranks N  ranks for the Split-C suite (1..1024; default: the number of
             cores, nproc). More ranks than cores share cores, and their
             speed-up then measures that sharing, not the stack. Each rank
             takes up to about 1 GiB of memory at the large size.
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

# At --size large each program runs 0.5 s or more on one rank, long enough
# to time in one run. The 1-rank job is the baseline of both scalings: one
# rank solves the same problem in both.
echo
echo "== Split-C suite at its large size: 1 rank, then $ranks ranks (weak and strong scaling), over shm ($cores cores here) =="
suite() { # RANKS ARGS...: the suite's --json lines, every answer verified
  local n=$1
  shift
  "$BIN/viarun" -n "$n" --provider shm --timeout 600 -- "$BIN/splitc_suite" --size large --json "$@"
}
suite 1 >"$work/one"
if [ "$ranks" -gt 1 ]; then
  suite "$ranks" >"$work/weak"
  suite "$ranks" --total >"$work/strong"
else
  cp "$work/one" "$work/weak"
  cp "$work/one" "$work/strong"
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
Weak scaling: each of the $ranks ranks solves a problem as large as the 1-rank job's, so
the $ranks-rank job solves $ranks times as much; speed-up = $ranks x T1 / T$ranks (the scaled
speed-up): $ranks means the ranks added work at no cost.
Strong scaling (--total): the $ranks ranks share the 1-rank job's problem; speed-up = T1 / T$ranks:
$ranks means the work divided by $ranks at no cost.
Either way, 1 means $ranks ranks took as long as one rank would for the same work; below 1, longer.
T: seconds of one run, the slowest rank's.
EOF
# One row per benchmark from the three jobs' lines.
awk -v ranks="$ranks" -F'"' '
  /"bench":"splitc"/ {
    job = FILENAME ~ /one$/ ? 1 : FILENAME ~ /weak$/ ? 2 : 3
    name = $8; s = $0; sub(/.*"seconds":/, "", s)
    if (job == 1) order[++names] = name
    seconds[job, name] = s + 0
    if ($0 !~ /"verified":true/) failed[name] = 1
  }
  END {
    printf "%-11s %10s  %10s %8s  %10s %8s  %s\n", "benchmark", "1 rank: T", "weak: T", "speed-up", "strong: T", "speed-up", "verified"
    for (k = 1; k <= names; ++k) {
      name = order[k]; t1 = seconds[1, name]; weak = seconds[2, name]; strong = seconds[3, name]
      printf "%-11s %8.3f s  %8.3f s %8.2f  %8.3f s %8.2f  %s\n", name, t1, weak, (weak > 0 ? ranks * t1 / weak : 0),
             strong, (strong > 0 ? t1 / strong : 0), ((name in failed) ? "NO" : "yes")
      if (name in failed) bad = 1
    }
    exit bad
  }' "$work/one" "$work/weak" "$work/strong"
