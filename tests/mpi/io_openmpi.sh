#!/bin/sh
# The same MPI-IO program (io_interleave.c, built by Open MPI's mpicc) on
# viastack and on Open MPI, on 1, 2 and 4 ranks: the files must be the same
# byte for byte, and each run must read its file back.
# Usage: io_openmpi.sh VIARUN OUR_LIBDIR SOURCE WORKDIR
set -eu
viarun=$1 libdir=$2 source=$3 work=$4
mpicc=$(command -v mpicc.openmpi || command -v mpicc || true)
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -z "$mpicc" ] || [ -z "$mpirun" ]; then
  echo "SKIP: Open MPI is not installed (apt-get install libopenmpi-dev openmpi-bin)"
  exit 77
fi
mkdir -p "$work"
rm -f "$work"/io_interleave.*
"$mpicc" -o "$work/io_interleave" "$source"
for n in 1 2 4; do
  if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
      "$mpirun" --oversubscribe -n $n "$work/io_interleave" "$work/io_interleave.openmpi.$n"; then
    echo "SKIP: Open MPI could not run the program here"
    exit 77
  fi
  LD_LIBRARY_PATH="$libdir" "$viarun" -n $n --timeout 60 -- "$work/io_interleave" "$work/io_interleave.viastack.$n"
  if ! cmp "$work/io_interleave.openmpi.$n" "$work/io_interleave.viastack.$n"; then
    echo "FAIL: on $n ranks viastack's file differs from Open MPI's"
    exit 1
  fi
  echo "ok: $n ranks, $(wc -c < "$work/io_interleave.viastack.$n") bytes, the same as Open MPI's"
done
rm -f "$work"/io_interleave.*
