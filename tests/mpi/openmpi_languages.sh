#!/bin/sh
# Programs built by Open MPI's own compiler wrappers against its language
# bindings, run under viarun on our libmpi.so.40 (first on LD_LIBRARY_PATH):
#   fortran: fortran_bindings.F90 through mpif.h and through `use mpi`,
#            fortran_f08.f90 through `use mpi_f08` (mpifort: libmpi_mpifh,
#            libmpi_usempi_ignore_tkr, libmpi_usempif08);
#   cxx:     cxx_bindings.cpp through the MPI-2 C++ bindings (mpicxx: libmpi_cxx).
# Each on 1, 2 and 4 ranks over shm and tcp; every rank must print "ok <rank>"
# (the programs check their results and call MPI_Abort on a wrong one), with no
# loader warning.
# Usage: openmpi_languages.sh fortran|cxx VIARUN OUR_LIBDIR SOURCE_DIR WORKDIR
set -eu
language=$1 viarun=$2 libdir=$3 sources=$4 work=$5
bindings=/usr/lib/x86_64-linux-gnu
mkdir -p "$work"
case $language in
  fortran)
    compiler=$(command -v mpifort.openmpi || command -v mpifort || true)
    if [ -z "$compiler" ] || ! command -v gfortran >/dev/null; then
      echo "SKIP: Open MPI's mpifort or gfortran is not installed (apt-get install libopenmpi-dev gfortran)"
      exit 77
    fi
    [ -e "$bindings/libmpi_mpifh.so.40" ] || { echo "SKIP: Open MPI's Fortran bindings are not installed"; exit 77; }
    # mpif.h declares no interfaces: gfortran 10 and later then need to be told that
    # buffers of different types are passed to the same routine.
    "$compiler" -fallow-argument-mismatch -w -o "$work/mpif_h" "$sources/fortran_bindings.F90"
    "$compiler" -DUSE_MPI_MODULE -o "$work/use_mpi" "$sources/fortran_bindings.F90"
    "$compiler" -o "$work/use_mpi_f08" "$sources/fortran_f08.f90"
    programs="mpif_h use_mpi use_mpi_f08"
    ;;
  cxx)
    compiler=$(command -v mpicxx.openmpi || command -v mpicxx || true)
    if [ -z "$compiler" ]; then
      echo "SKIP: Open MPI's mpicxx is not installed (apt-get install libopenmpi-dev)"
      exit 77
    fi
    [ -e "$bindings/libmpi_cxx.so.40" ] || { echo "SKIP: Open MPI's C++ bindings are not installed"; exit 77; }
    "$compiler" -o "$work/cxx_bindings" "$sources/cxx_bindings.cpp"
    programs=cxx_bindings
    ;;
  *)
    echo "usage: openmpi_languages.sh fortran|cxx VIARUN OUR_LIBDIR SOURCE_DIR WORKDIR" >&2
    exit 2
    ;;
esac
failed=0
for program in $programs; do
  if ! LD_LIBRARY_PATH="$libdir" ldd "$work/$program" | grep -q "libmpi.so.40 => $libdir/libmpi.so.40"; then
    echo "FAIL: $program does not load our $libdir/libmpi.so.40"
    failed=1
    continue
  fi
  for provider in shm tcp; do
    for ranks in 1 2 4; do
      status=0
      out=$(LD_WARN=1 LD_LIBRARY_PATH="$libdir" "$viarun" -n "$ranks" --provider "$provider" --timeout 60 -- \
        "$work/$program" 2>&1) || status=$?
      expected=$(seq 0 $((ranks - 1)) | sed 's/^/ok /')
      if [ $status != 0 ] || [ "$(printf '%s\n' "$out" | grep '^ok ' | sort -k2n)" != "$expected" ] ||
        printf '%s\n' "$out" | grep -qi "different size\|symbol lookup error\|undefined symbol"; then
        echo "FAIL: $program on $ranks ranks over $provider (exit status $status):"
        printf '%s\n' "$out"
        failed=1
      else
        echo "ok: $program on $ranks ranks over $provider"
      fi
    done
  done
done
exit $failed
