#!/bin/sh
# Runs mpi4py_test.py with Debian's mpi4py (python3-mpi4py, built against
# Open MPI), unmodified, on our libmpi.so.40 first on LD_LIBRARY_PATH.
# Usage: mpi4py.sh VIARUN OUR_LIBDIR RANKS PROVIDER
set -eu
viarun=$1 libdir=$2 ranks=$3 provider=$4
# Debian's module is built for Debian's interpreter, not whichever python3 is first on PATH.
python=/usr/bin/python3
if ! "$python" -c 'import mpi4py' 2>/dev/null; then
  echo "SKIP: Debian's mpi4py is not installed for $python (apt-get install python3-mpi4py)"
  exit 77
fi
out=$(LD_WARN=1 LD_LIBRARY_PATH="$libdir" "$viarun" -n "$ranks" --provider "$provider" --timeout 90 -- \
      "$python" "$(dirname "$0")/mpi4py_test.py" 2>&1) || { echo "$out"; echo "FAIL: the script failed"; exit 1; }
echo "$out"
if echo "$out" | grep -qi "different size\|symbol lookup error\|undefined symbol"; then
  echo "FAIL: loader warnings"
  exit 1
fi
echo "$out" | grep -q "mpi4py on $ranks ranks: ok" || { echo "FAIL: no verdict from rank 0"; exit 1; }
