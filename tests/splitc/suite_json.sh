#!/bin/sh
# splitc_suite --json on RANKS ranks at test size, with --total (strong
# scaling) and without (weak): one line per benchmark asked for, each with
# every field of the contract in order, the scaling named, and the answer
# verified; exit status 0.
#   suite_json.sh VIARUN SPLITC_SUITE RANKS
viarun=$1 suite=$2 ranks=$3
benches="mm rsort_sm cg"
failures=0

check() { # SCALING ARGS...
  scaling=$1
  shift
  out=$("$viarun" -n "$ranks" --timeout 120 -- "$suite" --size test --json --bench mm,rsort_sm,cg "$@")
  status=$?
  echo "$out"
  if [ $status -ne 0 ]; then
    echo "FAIL ($scaling): status $status"
    failures=$((failures + 1))
  fi
  lines=$(printf '%s\n' "$out" | grep -c .)
  if [ "$lines" -ne 3 ]; then
    echo "FAIL ($scaling): $lines lines on stdout, expected 3"
    failures=$((failures + 1))
  fi
  for name in $benches; do
    line="{\"bench\":\"splitc\",\"name\":\"$name\",\"ranks\":$ranks,\"size\":\"test\",\"scaling\":\"$scaling\",\"seconds\":[0-9]+\.[0-9]+,\"verified\":true}"
    if ! printf '%s\n' "$out" | grep -Eqx "$line"; then
      echo "FAIL ($scaling): no line matching $line"
      failures=$((failures + 1))
    fi
  done
}

check strong --total
check weak
[ $failures -eq 0 ] && echo "ok" || exit 1
