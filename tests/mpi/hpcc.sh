#!/bin/sh
# Runs Debian's hpcc (the HPC Challenge suite: HPL, PTRANS, RandomAccess, FFT,
# DGEMM, STREAM, ring latency and bandwidth; built against Open MPI),
# unmodified, on our libmpi.so.40 first on LD_LIBRARY_PATH, and checks its own
# verdicts: HPL's and PTRANS's residual checks, and the suite's Success line.
# Usage: hpcc.sh VIARUN OUR_LIBDIR RANKS PROVIDER WORKDIR
set -eu
viarun=$1 libdir=$2 ranks=$3 provider=$4 workdir=$5
if ! command -v hpcc >/dev/null 2>&1; then
  echo "SKIP: Debian's hpcc is not installed (apt-get install hpcc)"
  exit 77
fi
example=/usr/share/doc/hpcc/examples/_hpccinf.txt
[ -r "$example" ] || { echo "FAIL: $example (the hpcc package's input template) is missing"; exit 1; }
# The process grid: P x Q = ranks, as square as it goes.
p=1
while [ $(((p + 1) * (p + 1))) -le "$ranks" ]; do p=$((p + 1)); done
while [ $((ranks % p)) -ne 0 ]; do p=$((p - 1)); done
q=$((ranks / p))
rm -rf "$workdir" && mkdir -p "$workdir" && cd "$workdir"
# A problem of 600 (the template's 1000 takes several seconds on 4 ranks sharing 2 cores).
sed -e 's/^1000         Ns/600          Ns/' -e "s/^2            Ps/$p            Ps/" \
    -e "s/^2            Qs/$q            Qs/" "$example" > hpccinf.txt
out=$(LD_WARN=1 LD_LIBRARY_PATH="$libdir" "$viarun" -n "$ranks" --provider "$provider" --timeout 240 -- hpcc 2>&1) ||
  { echo "$out"; echo "FAIL: hpcc failed"; exit 1; }
[ -z "$out" ] || echo "$out"
if echo "$out" | grep -qi "different size\|symbol lookup error\|undefined symbol"; then
  echo "FAIL: loader warnings"
  exit 1
fi
[ -r hpccoutf.txt ] || { echo "FAIL: hpcc wrote no hpccoutf.txt"; exit 1; }
grep -E '^(Success|HPL_N|HPL_nprow|HPL_npcol|HPL_Tflops|PTRANS_GBs|MPIRandomAccess_GUPs|MPIFFT_Gflops|MaxPingPongLatency_usec)=' hpccoutf.txt
fail=0
grep -q '^Success=1$' hpccoutf.txt || { echo "FAIL: the suite did not report Success=1"; fail=1; }
grep -q '^HPL_nprow='"$p"'$' hpccoutf.txt && grep -q '^HPL_npcol='"$q"'$' hpccoutf.txt ||
  { echo "FAIL: HPL did not run on the $p x $q grid"; fail=1; }
grep -q '||Ax-b||.*PASSED' hpccoutf.txt || { echo "FAIL: HPL's residual check did not pass"; fail=1; }
grep -q ' 0 tests completed and failed residual checks\.$' hpccoutf.txt ||
  { echo "FAIL: PTRANS failed a residual check"; fail=1; }
if grep -q 'FAILED' hpccoutf.txt; then
  grep 'FAILED' hpccoutf.txt
  echo "FAIL: a check failed"
  fail=1
fi
[ $fail -eq 0 ] && echo "hpcc on $ranks ranks ($p x $q, $provider): ok"
exit $fail
