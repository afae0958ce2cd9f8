#!/bin/sh
# Open MPI's own language bindings (libmpi_mpifh: Fortran mpif.h / use mpi;
# libmpi_usempif08: use mpi_f08; libmpi_usempi_ignore_tkr: use mpi's
# choice buffers; libmpi_cxx: the MPI-2 C++ bindings) on our libmpi.so.40:
# every symbol they need from libmpi resolves against ours (ldd -r), both the
# MPI functions they call by their MPI_, PMPI_ or PMPIX_ names and the Open
# MPI internals they reference (ompi_attr_*, the Fortran sentinels
# mpi_fortran_*_, ...: mpi/src/ompi_internals.cpp), and each loads with
# dlopen(RTLD_NOW) in front of ours (issue 18).
# Usage: openmpi_bindings_symbols.sh OUR_LIBDIR
set -eu
ours=$1
libdir=/usr/lib/x86_64-linux-gnu
found=0
failed=0
for binding in libmpi_mpifh.so.40 libmpi_usempif08.so.40 libmpi_usempi_ignore_tkr.so.40 libmpi_cxx.so.40; do
  [ -e "$libdir/$binding" ] || continue
  found=$((found + 1))
  report=$(LD_LIBRARY_PATH=$ours ldd -r "$libdir/$binding" 2>&1 || true)
  # libmpi_usempi_ignore_tkr needs no libmpi of its own (its callers bring it).
  if readelf -d "$libdir/$binding" | grep -q 'NEEDED.*libmpi\.so\.40' &&
    ! printf '%s\n' "$report" | grep -q "libmpi.so.40 => $ours/libmpi.so.40"; then
    echo "FAIL: $binding did not load our $ours/libmpi.so.40:"
    printf '%s\n' "$report" | grep libmpi.so
    failed=1
    continue
  fi
  # Undefined symbols of the binding itself, and of libmpi_mpifh under mpi_f08.
  missing=$(printf '%s\n' "$report" | sed -n 's/^undefined symbol: \([^ 	]*\).*/\1/p' | sort -u)
  interface=$(printf '%s\n' "$missing" | grep -E '^P?MPIX?_' || true)
  internals=$(printf '%s\n' "$missing" | grep -vE '^P?MPIX?_' | grep . || true)
  if [ -n "$interface" ]; then
    echo "FAIL: $binding needs MPI functions we do not export:" $interface
    failed=1
  elif [ -n "$internals" ]; then
    echo "FAIL: $binding needs $(printf '%s\n' "$internals" | wc -l) Open MPI internals we do not provide:" $internals
    failed=1
  else
    echo "ok: $binding finds every MPI function and Open MPI internal it uses in our library"
  fi
  if command -v python3 >/dev/null; then
    if LD_LIBRARY_PATH=$ours python3 -c 'import ctypes, os, sys; ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)' \
        "$libdir/$binding"; then
      echo "ok: dlopen($binding, RTLD_NOW) on our library"
    else
      echo "FAIL: dlopen($binding, RTLD_NOW) on our library"
      failed=1
    fi
  fi
done
if [ $found = 0 ]; then
  echo "SKIP: Open MPI's language bindings are not installed in $libdir (apt-get install libopenmpi-dev)"
  exit 77
fi
exit $failed
