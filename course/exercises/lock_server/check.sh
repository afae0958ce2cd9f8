#!/usr/bin/env bash
# check.sh PROGRAM [VIARUN]: the checker of exercise lock_server.
#
#   1. Over reliable VIs: 3 ranks take the lock 200 times each.
#   2. Over lossy ones: AM on unreliable VIs (VIASTACK_AM_RELIABILITY=unreliable,
#      where AM retransmits and drops copies itself) under
#      VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1: 3 ranks, 20 times each
#      (slow: a frame held back to be reordered waits up to 20 ms when no
#      other follows it, and the critical sections take turns).
#      The run must have met the faults: some message retransmitted.
#
# Each time the harness checks the final state at rank 0: the counter the
# lock protects is ranks x rounds, and no two ranks were inside at once.
# Prints PASS or FAIL with the reason (checker_lib.sh); see README.md.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../checker_lib.sh
. "$here/../checker_lib.sh"
checker_setup lock_server "$@"

# the_reason: the job's first line saying what went wrong.
the_reason() { grep -m1 -E 'lock_server rank [0-9]+: [^r]|^lock:' <<<"$job_output"; }

run_job 3 30 -- --rounds 200
[ "$job_status" -eq 0 ] || fail "over reliable VIs: $(job_failure): $(the_reason)"

faults=drop=0.1,dup=0.05,reorder=0.1,seed=1
run_job 3 60 VIASTACK_AM_RELIABILITY=unreliable VIASTACK_FAULTS=$faults -- --rounds 20
[ "$job_status" -eq 0 ] || fail "over unreliable VIs under VIASTACK_FAULTS=$faults: $(job_failure): $(the_reason)"
retransmitted=$(sed -n 's/.*retransmitted=\([0-9]*\).*/\1/p' <<<"$job_output" | awk '{ sum += $1 } END { print sum + 0 }')
[ "${retransmitted:-0}" -gt 0 ] || fail "the lossy run retransmitted nothing: it did not meet the faults"
echo "PASS: the lock kept 3 ranks apart and lost no update, over reliable VIs (200 rounds each) and over" \
     "unreliable ones under $faults (20 rounds each, $retransmitted AM messages retransmitted)"
