#!/usr/bin/env bash
# check.sh PROGRAM [VIARUN]: the checker of exercise reliable_stream.
#
#   1. Exactly once, in order: 1000 messages under
#      VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1, for two seeds. The
#      harness checks every message on arrival.
#   2. A window: the same faults and every frame 5 ms late (delay_us=5000, a
#      10 ms round trip). 300 messages must take less than 300 round trips
#      (3 s), the least stop-and-wait needs even with nothing lost.
#
# Prints PASS or FAIL with the reason (checker_lib.sh); see README.md.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../checker_lib.sh
. "$here/../checker_lib.sh"
checker_setup reliable_stream "$@"

faults=drop=0.1,dup=0.05,reorder=0.1
for seed in 1 2; do
  run_job 2 30 VIASTACK_FAULTS=$faults,seed=$seed -- --messages 1000
  [ "$job_status" -eq 0 ] ||
    fail "under VIASTACK_FAULTS=$faults,seed=$seed: $(job_failure): $(grep -m1 'rank [01]:' <<<"$job_output")"
done

messages=300 delay_us=5000
bound_ms=$((messages * 2 * delay_us / 1000))
run_job 2 30 VIASTACK_FAULTS=$faults,delay_us=$delay_us,seed=3 -- --messages $messages
[ "$job_status" -eq 124 ] &&
  fail "$messages messages over a 10 ms round trip took more than 30 s, not less than the $bound_ms ms of" \
       "stop-and-wait: keep several messages in flight (a window), or look for a stall"
[ "$job_status" -eq 0 ] ||
  fail "under VIASTACK_FAULTS=$faults,delay_us=$delay_us: $(job_failure): $(grep -m1 'rank [01]:' <<<"$job_output")"
took_ms=$(sed -n 's/.*acknowledged in \([0-9]*\) ms.*/\1/p' <<<"$job_output")
[ -n "$took_ms" ] || fail "the sender did not say how long the transfer took"
[ "$took_ms" -lt $bound_ms ] ||
  fail "$messages messages over a 10 ms round trip took $took_ms ms, not less than the $bound_ms ms of" \
       "stop-and-wait: keep several messages in flight (a window)"
echo "PASS: exactly once and in order under $faults (2 seeds, 1000 messages each);" \
     "$messages messages over a 10 ms round trip in $took_ms ms (stop-and-wait: at least $bound_ms ms)"
