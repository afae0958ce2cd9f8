#!/usr/bin/env bash
# expect_named_error.sh PATTERN VIARUN RANKS PROGRAM ARGS...: the test that an
# exercise's program, when VIPL fails it, says why by VIPL's names. The job
# must fail, its output must match PATTERN (an extended regular expression:
# the name of the cause) and must not give a VIPL code as a bare number
# ("VIP_RETURN 11", "completed with status 33", "code 2"; a status in hex,
# 0x21, is how a status is shown, and a process's exit status is no VIPL code).
pattern=$1 viarun=$2 ranks=$3
shift 3
output=$("$viarun" -n "$ranks" --timeout 60 -- "$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ $status -eq 0 ]; then
  echo "UNEXPECTED: the job succeeded; it should have failed naming /$pattern/"
  exit 1
fi
if ! grep -qE -- "$pattern" <<<"$output"; then
  echo "UNEXPECTED: the job failed (status $status) without naming the cause /$pattern/"
  exit 1
fi
bare_number='(VIP_RETURN|completed with status|code) [0-9]+([^0-9x]|$)'
if grep -qE -- "$bare_number" <<<"$output"; then
  echo "UNEXPECTED: a VIPL code given as a bare number: $(grep -m1 -oE -- "$bare_number" <<<"$output")"
  exit 1
fi
echo "expected: the failure names its cause ($(grep -m1 -oE -- "$pattern" <<<"$output"))"
