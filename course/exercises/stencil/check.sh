#!/usr/bin/env bash
# check.sh PROGRAM [VIARUN]: the checker of exercise stencil.
#
#   1. Right on every shape of neighbourhood: a small grid on 3 ranks (the
#      middle rank has neighbours on both sides) and one on 2 ranks with an
#      odd number of sweeps. Rank 0 compares every point with a serial
#      computation.
#   2. The speed-up: one larger problem on 1 rank and on 2, both checked
#      again; T(1 rank) / T(2 ranks) is printed. It is not judged: on a machine
#      with other work, or fewer than 2 free cores, it says little.
#
# Prints PASS or FAIL with the reason (checker_lib.sh); see README.md.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../checker_lib.sh
. "$here/../checker_lib.sh"
checker_setup stencil "$@"

the_reason() { grep -m1 -E '^stencil: [^0-9]|rank [0-9]+:' <<<"$job_output"; }

# check_run RANKS ARGS...: the job must end well; sets $parallel_ms.
check_run() {
  local ranks=$1
  shift
  run_job "$ranks" 60 -- "$@"
  [ "$job_status" -eq 0 ] || fail "$ranks ranks, $*: $(job_failure): $(the_reason)"
  parallel_ms=$(sed -n 's/.*parallel_ms=\([0-9.]*\).*/\1/p' <<<"$job_output")
  [ -n "$parallel_ms" ] || fail "$ranks ranks, $*: rank 0 did not say how long the sweeps took"
}

check_run 3 --rows 48 --cols 40 --sweeps 16
check_run 2 --rows 30 --cols 7 --sweeps 9

large=(--rows 1024 --cols 512 --sweeps 60)
check_run 1 "${large[@]}"
one_rank_ms=$parallel_ms
check_run 2 "${large[@]}"
two_ranks_ms=$parallel_ms
speedup=$(awk -v t1="$one_rank_ms" -v t2="$two_ranks_ms" 'BEGIN { printf "%.2f", (t2 > 0 ? t1 / t2 : 0) }')
echo "speed-up on 2 ranks: ${speedup}x (${large[*]}: $one_rank_ms ms on 1 rank, $two_ranks_ms ms on 2;" \
     "2.00 is perfect; other work on the machine lowers it)"
echo "PASS: every point right on 3 ranks (48 x 40, 16 sweeps), 2 ranks (30 x 7, 9 sweeps) and in the timed runs;" \
     "speed-up ${speedup}x on 2 ranks"
