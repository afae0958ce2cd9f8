#!/bin/sh
# Runs Debian's NPopenmpi (package netpipe-openmpi, built for Open MPI) on
# viastack's libmpi.so.40, found through LD_LIBRARY_PATH, on one provider:
# an integrity check, then a short measurement from 1 B to 4 MiB. Both must
# run to completion without loader warnings, the measurement must reach the
# upper bound, and the dynamic loader's own log (LD_DEBUG=libs) must show
# that every rank initialised libmpi.so.40 from our library directory.
# Usage: netpipe_openmpi.sh VIARUN OUR_LIBDIR PROVIDER WORKDIR
set -eu
viarun=$1 libdir=$(cd "$2" && pwd -P) provider=$3 work=$4
np=$(command -v NPopenmpi || true)
if [ -z "$np" ]; then
  echo "SKIP: NPopenmpi is not installed (apt-get install netpipe-openmpi)"
  exit 77
fi
upper=4194304
mkdir -p "$work"
out=$work/netpipe_$provider.out log=$work/netpipe_$provider.log
rm -f "$out" "$log"

check_warnings() {  # LOGFILE
  if grep -qi "different size\|symbol lookup error\|undefined symbol\|symbol size" "$1"; then
    grep -i "different size\|symbol lookup error\|undefined symbol\|symbol size" "$1" | head -5
    echo "FAIL: loader warnings"
    exit 1
  fi
}

# 1. Integrity: NetPIPE checks the bytes it receives (3 repeats per size).
echo "== NPopenmpi -i on viastack ($provider)"
rc=0
LD_WARN=1 LD_LIBRARY_PATH="$libdir" "$viarun" -n 2 --provider "$provider" --timeout 120 -- \
  "$np" -i -u "$upper" -n 3 -o "$work/netpipe_${provider}_integrity.out" >"$log.i" 2>&1 || rc=$?
tail -3 "$log.i"
[ "$rc" -eq 0 ] || { cat "$log.i" | tail -20; echo "FAIL: NPopenmpi -i exited with status $rc"; exit 1; }
check_warnings "$log.i"
if grep -qi "fail" "$log.i" || ! grep -q "Integrity check passed" "$log.i"; then
  echo "FAIL: NetPIPE's integrity check did not pass"
  exit 1
fi

# 2. Measurement, 1 B .. 4 MiB, no perturbations, 20 repeats per size.
echo "== NPopenmpi -u $upper on viastack ($provider)"
rc=0
LD_DEBUG=libs LD_WARN=1 LD_LIBRARY_PATH="$libdir" "$viarun" -n 2 --provider "$provider" --timeout 120 -- \
  "$np" -u "$upper" -p 0 -n 20 -o "$out" >"$log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { grep -v '^ *[0-9]*:	' "$log" | tail -20; echo "FAIL: NPopenmpi exited with status $rc"; exit 1; }
check_warnings "$log"
[ -s "$out" ] || { echo "FAIL: NPopenmpi wrote no results to $out"; exit 1; }
tail -3 "$out"
max=$(awk 'NF >= 3 && $1 + 0 > m { m = $1 + 0 } END { print m + 0 }' "$out")
[ "$max" -ge "$upper" ] || { echo "FAIL: the results stop at $max bytes, not $upper"; exit 1; }

# Which libmpi.so.40 each process initialised (the loader's log, one line per
# process that loaded it): two ranks, both ours, none of Open MPI's.
inits=$(grep 'calling init: .*/libmpi\.so\.40$' "$log" || true)
echo "$inits"
ours=$(echo "$inits" | awk -v d="$libdir/libmpi.so.40" '$NF == d { print $1 }' | sort -u | wc -l)
others=$(echo "$inits" | awk -v d="$libdir/libmpi.so.40" 'NF && $NF != d' | wc -l)
if [ "$ours" -ne 2 ] || [ "$others" -ne 0 ]; then
  echo "FAIL: expected both ranks to load $libdir/libmpi.so.40 ($ours did; $others loaded another libmpi.so.40)"
  exit 1
fi
echo "ok: NPopenmpi ran on viastack's libmpi.so.40 ($provider), up to $max bytes"
