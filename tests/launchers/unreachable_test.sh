#!/usr/bin/env bash
# A process whose environment names a process manager it cannot reach must
# say so and exit non-zero at once, under every bootstrap: PMI_FD closed or
# not a socket, PMI_PORT refused, PMI-2's PMI_FD closed, PMIx's server gone.
# Needs no launcher.
#   unreachable_test.sh PROBE
set -uo pipefail
probe=$1
failures=0
# In a sanitizer build, libpmix's own leaks (lsan.supp) are not the probe's.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/lsan.supp"

expect_refusal() {  # EXPECTED-MESSAGE VAR=VALUE...
  local expected=$1 start out rc took
  shift
  start=$(date +%s%N)
  # fd 9 is closed and stdin is a file, whatever ctest left open.
  out=$(env -u PMI_FD -u PMI_PORT -u PMIX_NAMESPACE -u PMIX_RANK -u VIASTACK_RANK -u VIASTACK_DIRECTORY "$@" \
          timeout 20 "$probe" </dev/null 9>&- 2>&1)
  rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "== $* -> status $rc in ${took} ms: $out"
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -gt 5000 ] || ! grep -qF -- "$expected" <<<"$out"; then
    echo "FAIL: expected a quick non-zero exit saying '$expected'"
    failures=$((failures + 1))
  fi
}

expect_refusal "bootstrap pmi1: PMI_FD=9 is not an open file descriptor" PMI_FD=9 PMI_RANK=0 PMI_SIZE=1
expect_refusal "bootstrap pmi1: PMI_FD=0 is not a socket" PMI_FD=0 PMI_RANK=0 PMI_SIZE=1
expect_refusal "bootstrap pmi1: cannot reach the process manager at PMI_PORT=127.0.0.1:1" PMI_PORT=127.0.0.1:1 PMI_ID=0
expect_refusal "bootstrap pmi2: PMI_FD=9 is not an open file descriptor" PMI_FD=9 SLURM_MPI_TYPE=pmi2
uri="viastack-nowhere.0;tcp4://127.0.0.1:1"
expect_refusal "bootstrap pmix: PMIx_Init: UNREACHABLE" PMIX_NAMESPACE=viastack-nowhere PMIX_RANK=0 \
  PMIX_SERVER_URI41="$uri" PMIX_SERVER_URI4="$uri" PMIX_SERVER_URI3="$uri" PMIX_SERVER_URI2="$uri" \
  PMIX_SERVER_URI21="$uri"
[ $failures -eq 0 ] && echo "ok: every unreachable process manager was reported at once" || exit 1
