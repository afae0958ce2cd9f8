#!/bin/bash
# Runs a program with one VIASTACK_* variable set and checks what the
# configuration table makes of it.
#   expect_config_error.sh stops NAME=VALUE EXPECTED program args...
#     the program stops at start-up: a non-zero status and, on stderr, only
#     the log's line "viastack[via pid P] error: NAME=VALUE: expected EXPECTED..."
#     (EXPECTED a prefix; "rank R" for "pid P" once the bootstrap knows the rank)
#   expect_config_error.sh warns NAME=VALUE TEXT program args...
#     the program runs to a zero status and warns once, on one line of stderr
#     containing "NAME" and TEXT
set -u
mode=$1 assignment=$2 expected=$3
shift 3
name=${assignment%%=*}
err=$(mktemp)
trap 'rm -f "$err"' EXIT
env "$assignment" "$@" >/dev/null 2>"$err"
status=$?
lines=$(grep -c '' "$err")
fail() {
  echo "FAIL ($assignment): $1"
  echo "status $status, stderr:"
  cat "$err"
  exit 1
}
case $mode in
  stops)
    [ "$status" -ne 0 ] || fail "the program ran to status 0"
    [ "$lines" -eq 1 ] || fail "expected exactly one line on stderr, got $lines"
    grep -F -- "] error: $assignment: expected $expected" "$err" | grep -qE '^viastack\[via (pid|rank) [0-9]+\] ' ||
      fail "not the line naming $name"
    ;;
  warns)
    [ "$status" -eq 0 ] || fail "the program failed"
    [ "$lines" -eq 1 ] || fail "expected exactly one line on stderr, got $lines"
    grep -F -- "$name" "$err" | grep -qF -- "$expected" || fail "no warning naming $name"
    ;;
  *) echo "unknown mode '$mode'"; exit 2 ;;
esac
echo "ok ($mode): $(cat "$err")"
