#!/usr/bin/env bash
# expect_failure.sh CHECKER ARGS...: the test of a checker on a skeleton. It
# passes when the checker fails the skeleton the way it fails a student's
# wrong work: status 1 and a line "FAIL: reason". A checker that passes the
# skeleton, or breaks in another way (a usage error, a crash), fails it.
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
reason=$(grep -m1 '^FAIL: ' <<<"$output")
if [ $status -eq 1 ] && [ -n "$reason" ]; then
  echo "expected: the checker rejected the skeleton"
  exit 0
fi
echo "UNEXPECTED: the checker ended with status $status${reason:+ ($reason)} on the skeleton, not a FAIL"
exit 1
