#!/usr/bin/env bash
# The scale report of docs/PERFORMANCE.md: jobs of N ranks on this machine,
# their set-up time, resident memory per rank and /dev/shm, beside Open MPI
# running the very same MPI program (mpirun --oversubscribe) in the same run.
#   benchmarks/scale.sh [build dir] [rank counts...]
# Prints one JSON line per job on stdout; the progress of each on stderr.
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd); shift || true
COUNTS=("${@:-64 256 1024}")
[ $# -eq 0 ] && COUNTS=(64 256 1024)
VIARUN=$BUILD/bin/viarun

# Samples /dev/shm and used memory once a second; prints the peaks when stopped.
watch_memory() {
  local peak_shm=0 peak_used=0 base
  base=$(free -k | awk '/Mem/{print $3}')
  trap 'echo "$peak_shm $((peak_used - base))"; exit 0' TERM
  while :; do
    local shm used
    shm=$(du -sk /dev/shm 2>/dev/null | awk '{print $1}')
    used=$(free -k | awk '/Mem/{print $3}')
    [ "$shm" -gt "$peak_shm" ] && peak_shm=$shm
    [ "$used" -gt "$peak_used" ] && peak_used=$used
    sleep 0.5
  done
}

# run NAME RANKS COMMAND...: one JSON line with the wall time and the peaks.
run() {
  local name=$1 ranks=$2; shift 2
  local out; out=$(mktemp)
  watch_memory > "$out.mem" & local watcher=$!
  local start end status
  start=$(date +%s.%N)
  "$@" > "$out" 2> "$out.err"; status=$?
  end=$(date +%s.%N)
  kill -TERM $watcher; wait $watcher 2>/dev/null
  read -r shm used < "$out.mem"
  local summary; summary=$(grep -h '^scale_test:' "$out" | sed 's/^scale_test: //' | paste -sd'|')
  printf '{"bench":"scale","job":"%s","ranks":%d,"status":%d,"wall_s":%.2f,"peak_shm_kB":%d,"peak_used_kB":%d,"summary":"%s"}\n' \
    "$name" "$ranks" "$status" "$(echo "$end - $start" | bc)" "$shm" "$used" "${summary//\"/}"
  grep -h '"bench":"mp_mesh"' "$out" || true
  echo "scale: $name on $ranks ranks: status $status" >&2
  rm -f "$out" "$out.err" "$out.mem"
}

for n in "${COUNTS[@]}"; do
  run viastack_mpi_basic "$n" "$VIARUN" -n "$n" --timeout 900 -- "$BUILD/bin/mpi_scale_test" basic
  if command -v mpirun > /dev/null; then
    # Open MPI's own library under the same program: the binary is built by
    # our wrapper against Open MPI's mpi.h, so it loads either libmpi.so.40.
    run openmpi_basic "$n" mpirun --allow-run-as-root --oversubscribe -np "$n" --mca btl self,vader \
      -x LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu "$BUILD/bin/mpi_scale_test" basic
  fi
  if [ "$n" -le 256 ]; then
    run viastack_mesh_shm "$n" "$VIARUN" -n "$n" --provider shm --timeout 900 -- "$BUILD/bin/mp_mesh" --json
    run viastack_mesh_tcp "$n" "$VIARUN" -n "$n" --provider tcp --timeout 900 -- "$BUILD/bin/mp_mesh" --json
  fi
done
