#!/bin/sh
# Builds a program with Open MPI's own mpicc (linked against Open MPI's
# libmpi.so.40) and runs it under viarun with our library first on
# LD_LIBRARY_PATH: it must run on viastack, without loader warnings.
# Usage: openmpi_binary.sh VIARUN OUR_LIBDIR SOURCE WORKDIR
set -eu
viarun=$1 libdir=$2 source=$3 work=$4
mpicc=$(command -v mpicc.openmpi || command -v mpicc || true)
if [ -z "$mpicc" ]; then
  echo "SKIP: Open MPI's mpicc is not installed (apt-get install libopenmpi-dev openmpi-bin)"
  exit 77
fi
"$mpicc" -o "$work/built_by_mpicc" "$source"
out=$(LD_WARN=1 LD_LIBRARY_PATH="$libdir" "$viarun" -n 2 --timeout 60 -- "$work/built_by_mpicc" 2>&1)
echo "$out"
echo "$out" | grep -q "library: viastack MPI" || { echo "FAIL: the program did not run on viastack's library"; exit 1; }
echo "$out" | grep -q "result: ok" || { echo "FAIL: wrong result"; exit 1; }
if echo "$out" | grep -qi "different size\|symbol lookup error\|undefined symbol"; then
  echo "FAIL: loader warnings"
  exit 1
fi
echo "ok: an Open MPI binary ran on viastack"
