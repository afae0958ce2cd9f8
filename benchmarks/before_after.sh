#!/usr/bin/env bash
# Two builds side by side, interleaved (old, new, old, new, ...), on the
# figures a change must not move: raw VIA latency, AM's round trip against raw
# VIA of the same build, MPI ping-pong (and Open MPI running the same program,
# when mpirun is installed), the Split-C suite's speed-up on 2 ranks (at
# --size large, weak and strong scaling, when both builds have them; at
# paper size and weak scaling only otherwise), and
# utcp's TCP bandwidth against the kernel's loopback. Prints one JSON line per
# measurement and then a table of medians and ratios.
#
#   benchmarks/before_after.sh OLD_BUILD NEW_BUILD [ROUNDS]
#
# Each build needs viarun, via_pingpong, am_bench, mpi_pingpong, splitc_suite
# and utcp_bench in its bin/.
set -euo pipefail
old=${1:?usage: before_after.sh OLD_BUILD NEW_BUILD [ROUNDS]}
new=${2:?usage: before_after.sh OLD_BUILD NEW_BUILD [ROUNDS]}
rounds=${3:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# record BUILD_LABEL METRIC VALUE
record() { printf '{"build":"%s","metric":"%s","value":%.6g}\n' "$1" "$2" "$3" | tee -a "$out"; }

# The Split-C suite's size and scalings: large, weak and strong, unless a
# build is older than splitc_suite's --size large and --total.
splitc_size=large
splitc_strong=yes
for build in "$old" "$new"; do
  if ! grep -q -- --total <<< "$("$build/bin/splitc_suite" --help)"; then
    splitc_size=paper
    splitc_strong=no
  fi
done

# splitc_seconds BIN RANKS [--total]: the suite's seconds for mm, ssort_sm,
# rsort_sm and cg, added up.
splitc_seconds() {
  "$1/viarun" -n "$2" "$1/splitc_suite" --bench mm,ssort_sm,rsort_sm,cg --size "$splitc_size" --json "${@:3}" |
    sed -E 's/.*"seconds":([0-9.]+).*/\1/' | paste -sd+ | bc -l
}

# The value of `field` in the JSON line of a benchmark with "bytes":N.
field_at() { grep "\"bytes\":$2[,}]" | head -n 1 | sed -E "s/.*\"$1\":([0-9.eE+-]+).*/\1/"; }

measure() {
  local label=$1 bin=$2/bin
  local via am mpi
  via=$("$bin/viarun" -n 2 "$bin/via_pingpong" --mode lat --sizes 8,4096 --iters 100000 --json)
  record "$label" via_lat_8 "$(field_at lat_us 8 <<< "$via")"
  record "$label" via_lat_4096 "$(field_at lat_us 4096 <<< "$via")"
  am=$("$bin/viarun" -n 2 "$bin/am_bench" --test rtt --sizes 8,4096 --json)
  record "$label" am_lat_8 "$(field_at lat_us 8 <<< "$am")"
  record "$label" am_lat_4096 "$(field_at lat_us 4096 <<< "$am")"
  mpi=$("$bin/viarun" -n 2 "$bin/mpi_pingpong" --mode lat --sizes 8,65536 --json)
  record "$label" mpi_lat_8 "$(field_at lat_us 8 <<< "$mpi")"
  record "$label" mpi_lat_65536 "$(field_at lat_us 65536 <<< "$mpi")"
  # One rank solves the same problem under both scalings: one baseline.
  local t1 t2
  t1=$(splitc_seconds "$bin" 1)
  t2=$(splitc_seconds "$bin" 2)
  record "$label" splitc_speedup_2 "$(echo "2 * $t1 / $t2" | bc -l)"  # weak: the scaled speed-up
  if [ "$splitc_strong" = yes ]; then
    t2=$(splitc_seconds "$bin" 2 --total)
    record "$label" splitc_strong_speedup_2 "$(echo "$t1 / $t2" | bc -l)"
  fi
  local utcp kernel
  utcp=$("$bin/viarun" -n 2 "$bin/utcp_bench" --proto tcp --mode bw --sizes 65536 --json)
  kernel=$("$bin/viarun" -n 2 "$bin/utcp_bench" --kernel --proto tcp --mode bw --sizes 65536 --json)
  record "$label" utcp_over_kernel_bw "$(echo "$(field_at bw_MBps 65536 <<< "$utcp") / $(field_at bw_MBps 65536 <<< "$kernel")" | bc -l)"
}

measure_openmpi() {
  local bin=$1/bin
  command -v mpirun > /dev/null || return 0
  local line
  line=$(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
         -x LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu "$bin/mpi_pingpong" --mode lat --sizes 8,65536 --json 2>/dev/null) || return 0
  record openmpi mpi_lat_8 "$(field_at lat_us 8 <<< "$line")"
  record openmpi mpi_lat_65536 "$(field_at lat_us 65536 <<< "$line")"
}

for ((r = 0; r < rounds; ++r)); do
  measure old "$old"
  measure new "$new"
  measure_openmpi "$new"
done

python3 - "$out" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for b in {r["build"] for r in rows}:
    for m in {r["metric"] for r in rows}:
        v = [r["value"] for r in rows if r["build"] == b and r["metric"] == m]
        if v: med[b, m] = statistics.median(v)
print()
print(f"{'metric':22} {'old':>10} {'new':>10} {'new/old':>8}  anchor")
for m in sorted({r["metric"] for r in rows}):
    o, n = med.get(("old", m)), med.get(("new", m))
    if o is None or n is None: continue
    extra = ""
    if m.startswith("am_lat_"):
        v = "via_lat_" + m.split("_")[-1]
        extra = f"AM/raw VIA: old {o / med['old', v]:.3f}, new {n / med['new', v]:.3f}"
    if ("openmpi", m) in med:
        extra = f"Open MPI {med['openmpi', m]:.3f}: new/Open MPI {n / med['openmpi', m]:.3f}"
    print(f"{m:22} {o:10.4f} {n:10.4f} {n / o:8.3f}  {extra}")
EOF
