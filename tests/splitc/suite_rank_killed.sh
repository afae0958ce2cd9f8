#!/bin/sh
# splitc_suite on 3 ranks while rank 2 is killed in the middle of a run of cg:
# the others find it unreachable and must end with a message and status 1,
# not abort (an uncaught splitc::error, status 134).
#   suite_rank_killed.sh VIARUN SPLITC_SUITE PROVIDER
viarun=$1 suite=$2 provider=$3
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# Each rank runs the suite in the background of a shell; rank 2's shell kills
# its suite after 1.5 s and then exits 0, so that viarun lets the others run on.
"$viarun" -n 3 --provider "$provider" --timeout 60 -- sh -c '
  "$0" --bench cg,cg,cg,cg,cg,cg,cg,cg,cg,cg --size paper & suite=$!
  if [ "$VIASTACK_RANK" = 2 ]; then sleep 1.5; kill -KILL $suite; wait $suite; exit 0; fi
  wait $suite' "$suite" 2>"$err"
status=$?
cat "$err" >&2
echo "viarun exited with status $status"
if [ "$status" -eq 0 ] || [ "$status" -ge 128 ] || [ "$status" -eq 124 ]; then
  echo "FAIL: expected status 1 from the ranks that lost rank 2"
  exit 1
fi
grep -q '^splitc_suite: splitc: .*unreachable' "$err" || { echo "FAIL: no message saying a rank is unreachable"; exit 1; }
echo "ok"
