#!/bin/sh
# The speed-up column of splitc_suite on RANKS ranks against a 1-rank run's
# --json lines: P * T1 / TP under weak scaling (the scaled speed-up), T1 / TP
# under strong scaling (--total), for every benchmark, each verified, and the
# header naming the scaling and its formula. The table prints seconds to 4
# decimals and speed-ups to 2: the check allows exactly that rounding.
#   suite_speedup.sh VIARUN SPLITC_SUITE BASELINE RANKS [--total]
viarun=$1 suite=$2 baseline=$3 ranks=$4 total=$5
if [ "$total" = --total ]; then
  scaling=strong work=1 formula="T1 / TP"
else
  scaling=weak work=$ranks formula="P \* T1 / TP"
fi
out=$("$viarun" -n "$ranks" --timeout 120 -- "$suite" --size test $total --baseline "$baseline")
status=$?
echo "$out"
[ $status -eq 0 ] || { echo "FAIL: status $status"; exit 1; }
printf '%s\n' "$out" | head -n 1 | grep -q "$ranks ranks, .* $scaling scaling .*speed-up = $formula" ||
  { echo "FAIL: the header does not say $scaling scaling and speed-up = $formula"; exit 1; }
printf '%s\n' "$out" | awk -v work="$work" -v baseline="$baseline" '
  BEGIN {
    FS = "\""
    while ((getline line < baseline) > 0) {
      split(line, f, "\"")
      s = line; sub(/.*"seconds":/, "", s)
      t1[f[8]] = s + 0
    }
    FS = " "
  }
  $1 in t1 && NF >= 5 {
    ++rows
    seconds = $2; speedup = $3
    low = work * t1[$1] / (seconds + 0.00005) - 0.005
    high = seconds > 0.00005 ? work * t1[$1] / (seconds - 0.00005) + 0.005 : 1e300
    if (speedup !~ /^[0-9]+\.[0-9][0-9]$/ || speedup < low || speedup > high) {
      printf "FAIL: %s: speed-up %s, expected %d x %.6f / %s (%.3f .. %.3f)\n", $1, speedup, work, t1[$1], seconds, low, high
      bad = 1
    }
    if ($4 != "yes") { printf "FAIL: %s not verified\n", $1; bad = 1 }
  }
  END {
    if (rows != 7) { printf "FAIL: %d rows of benchmarks, expected 7\n", rows; bad = 1 }
    exit bad
  }' || exit 1
echo "ok"
