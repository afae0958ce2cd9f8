#!/usr/bin/env bash
# check.sh PROGRAM [VIARUN]: the checker of exercise congestion.
#
#   1. Your controller ("aimd") carries a 4 MiB stream over a lossy link,
#      twice: VIASTACK_FAULTS=drop=0.01 and drop=0.02,reorder=0.01 (1500-byte
#      MTU, so a few thousand segments). Every byte must arrive, and the
#      harness checks each call into the controller against aimd.hpp's rules
#      (slow start, the additive increase over the run, the decrease on loss
#      and timeout, the window after recovery). A run that met no loss, or no
#      congestion avoidance, tests nothing and fails.
#   2. NewReno carries the same stream under the first faults, for the
#      comparison.
#
# Leaves the cwnd traces of rank 0 (NAME.aimd.csv, NAME.newreno.csv, NAME the
# program's file name) in the current folder and, with python3, plots both
# (NAME.cwnd.svg, plot_cwnd.py). Prints PASS or FAIL with the reason
# (checker_lib.sh); see README.md.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../checker_lib.sh
. "$here/../checker_lib.sh"
checker_setup congestion "$@"

traces=$(basename "$program")
# the_reason: the job's first line saying what went wrong (not a rank's summary).
the_reason() {
  grep -E '^congestion( rank -?[0-9]+)?: ' <<<"$job_output" | grep -m1 -v -E ': (received all|[a-z]+ sent [0-9]+ bytes)'
}
# field WORDS: the number before WORDS in the job's "aimd rules:" line.
field() { sed -n "s/^aimd rules:.* \([0-9][0-9]*\) $1.*/\1/p" <<<"$job_output"; }

recoveries=0
for faults in drop=0.01,seed=1 drop=0.02,reorder=0.01,seed=2; do
  run_job 2 30 VIASTACK_UTCP_MTU=1500 VIASTACK_FAULTS=$faults -- --controller aimd --kib 4096 --trace "$traces.aimd.csv"
  [ "$job_status" -eq 0 ] || fail "aimd under VIASTACK_FAULTS=$faults: $(job_failure): $(the_reason)"
  [ "$(field recoveries)" -gt 0 ] || fail "aimd under VIASTACK_FAULTS=$faults met no loss: the rules of a decrease were not tested"
  [ "$(field congestion-avoidance)" -gt 0 ] ||
    fail "aimd under VIASTACK_FAULTS=$faults never reached congestion avoidance: the additive increase was not tested"
  recoveries=$((recoveries + $(field recoveries)))
  [ "$faults" = drop=0.01,seed=1 ] && cp "$traces.aimd.csv" "$traces.aimd.seed1.csv"
done
# The plot compares like with like: both controllers under the same faults.
mv "$traces.aimd.seed1.csv" "$traces.aimd.csv"

faults=drop=0.01,seed=1
run_job 2 30 VIASTACK_UTCP_MTU=1500 VIASTACK_FAULTS=$faults -- --controller newreno --kib 4096 --trace "$traces.newreno.csv"
[ "$job_status" -eq 0 ] || fail "newreno under VIASTACK_FAULTS=$faults: $(job_failure): $(the_reason)"

plotted="python3 not found: no plot"
if command -v python3 >/dev/null; then
  plot=$(python3 "$here/plot_cwnd.py" --svg -o "$traces.cwnd.svg" aimd="$traces.aimd.csv" newreno="$traces.newreno.csv" 2>&1) ||
    fail "plot_cwnd.py failed on the traces: $plot"
  printf '%s\n' "$plot"
  plotted="plotted in $traces.cwnd.svg"
fi
echo "PASS: aimd delivered 4 MiB byte for byte twice on a lossy link and kept its rules" \
     "($recoveries recoveries); traces in $traces.aimd.csv and $traces.newreno.csv, $plotted"
