#!/usr/bin/env bash
# check.sh PLUGIN ENGINE_TEST PINGPONG [VIARUN]: the checker of exercise
# provider. PLUGIN is the built provider (libprovider_unix.so), ENGINE_TEST
# and PINGPONG viastack's build/bin/engine_test and build/bin/vipl_pingpong.
#
#   1. The engine's provider suite, every Providers/Engine test of
#      tests/via/engine/engine_test.cpp (34 tests, about 4 s), on two NICs
#      "unix:0" and "unix:1" in one process: sends of every size, gathers
#      and scatters, RDMA, error cases, connection set-up, disconnection,
#      sleeping and waking.
#   2. vipl_pingpong on 2 ranks under viarun with VIASTACK_PROVIDER=unix:
#      1000 round trips of 8 bytes, then 50 of 1 MiB, every byte checked.
#
# Prints PASS or FAIL with the reason (checker_lib.sh); see README.md.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../checker_lib.sh
. "$here/../checker_lib.sh"
if [ $# -lt 3 ] || [ $# -gt 4 ] || [ "$1" = --help ]; then
  echo "usage: check.sh PLUGIN ENGINE_TEST PINGPONG [VIARUN]   (the checker of exercise provider)" >&2
  exit 2
fi
plugin=$(realpath "$1") engine_test=$2 program=$3
viarun=${4:-${VIARUN:-$(dirname "$program")/viarun}}
[ -f "$plugin" ] || { echo "check.sh: no plugin '$1' (build it first)" >&2; exit 2; }
for tool in "$engine_test" "$program" "$viarun"; do
  [ -x "$tool" ] || { echo "check.sh: no program '$tool' (build it first)" >&2; exit 2; }
done

# It stops at the first failing test: a link that loses a frame makes the
# later tests wait out their timeouts, a minute in all. Without
# --gtest_fail_fast the same command runs them all.
suite=(env ENGINE_TEST_PROVIDER=unix VIASTACK_PROVIDER_PLUGIN="$plugin" "$engine_test"
       --gtest_filter='Providers/Engine.*' --gtest_fail_fast)
echo "--- ${suite[*]}"
suite_output=$(timeout 60 "${suite[@]}" 2>&1)
suite_status=$?
passed=$(grep -c '^\[       OK \]' <<<"$suite_output")
first_failed=$(sed -n 's/^\[  FAILED  \] \(Providers\/Engine\.[A-Za-z]*\/Named\).*/\1/p' <<<"$suite_output" | head -n 1)
# What went wrong, as the suite said it: the failure, else its last lines.
if [ -n "$first_failed" ]; then
  grep -E -m 10 'error:|unix:' <<<"$suite_output"
  grep -m 1 -A 5 'Failure' <<<"$suite_output"
else
  tail -n 10 <<<"$suite_output"
fi
[ "$suite_status" -eq 124 ] && fail "the engine's provider suite did not end within 60 s (a wait that never ends)"
if [ "$suite_status" -ne 0 ]; then
  [ -n "$first_failed" ] ||
    fail "the engine's provider suite ended with status $suite_status: $(grep -m1 -iE 'error|unknown' <<<"$suite_output")"
  fail "the engine's provider suite: $first_failed failed ($passed passed before it)"
fi
[ "$passed" -gt 0 ] || fail "the engine's provider suite ran no test"

for run in "1000 8" "50 1048576"; do
  # shellcheck disable=SC2086  # the iterations and the size, two arguments
  run_job 2 30 VIASTACK_PROVIDER_PLUGIN="$plugin" VIASTACK_PROVIDER=unix -- $run
  [ "$job_status" -eq 0 ] ||
    fail "vipl_pingpong $run over unix: $(job_failure): $(grep -m1 -E 'rank [01]|error' <<<"$job_output")"
done
echo "PASS: the engine's provider suite ($passed tests) and vipl_pingpong on 2 ranks (1000 x 8 B, 50 x 1 MiB) over unix"
