#!/bin/sh
# Checks our libmpi.so.40 against Open MPI's: every data object we export has
# Open MPI's size, every object mpi.h declares is exported, every MPI
# function Open MPI exports exists (implemented or a loud stub), and the
# profiling interface matches Open MPI's: the same PMPI_ / PMPIX_ names, each
# at its MPI_ function's address.
# Usage: abi_check.sh OUR_LIBMPI MPI_H
set -eu
ours=$1
header=$2
theirs=/usr/lib/x86_64-linux-gnu/libmpi.so.40
if [ ! -e "$theirs" ]; then
  echo "SKIP: Open MPI's $theirs is not installed (apt-get install libopenmpi3); nothing to compare with"
  exit 77
fi
objects() { readelf -W --dyn-syms "$1" | awk '$4 == "OBJECT" && $7 != "UND" { print $8, $3 }' | sort -u; }
functions() { readelf -W --dyn-syms "$1" | awk '$4 == "FUNC" && $7 != "UND" { print $8 }' | sort -u; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objects "$ours" > "$tmp/ours"
objects "$theirs" > "$tmp/theirs"
failed=0
checked=0
while read -r name size; do
  case $name in _Z*) continue ;; esac  # C++ runtime details (typeinfo), not part of the MPI ABI
  theirs_size=$(awk -v n="$name" '$1 == n { print $2 }' "$tmp/theirs")
  checked=$((checked + 1))
  if [ -z "$theirs_size" ]; then
    echo "FAIL: we export $name ($size B); Open MPI does not"
    failed=1
  elif [ "$theirs_size" != "$size" ]; then
    echo "FAIL: $name is $size B here, $theirs_size B in Open MPI"
    failed=1
  fi
done < "$tmp/ours"
for name in $(sed -n 's/^OMPI_DECLSPEC extern [^;]*[ *]\([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p' "$header"); do
  grep -q "^$name " "$tmp/ours" || { echo "FAIL: mpi.h declares $name; we do not export it"; failed=1; }
done
functions "$ours" > "$tmp/our_functions"
functions "$theirs" > "$tmp/their_functions"
for name in $(grep -E '^(P?MPIX?_|OMPI_C_MPI_)' "$tmp/their_functions"); do
  grep -qx "$name" "$tmp/our_functions" || { echo "FAIL: Open MPI exports function $name; we do not"; failed=1; }
done
profiled=0
addresses() { readelf -W --dyn-syms "$ours" | awk '$4 == "FUNC" && $7 != "UND" { print $8, $2 }'; }
addresses > "$tmp/our_addresses"
for name in $(grep -E '^PMPIX?_' "$tmp/our_functions"); do
  profiled=$((profiled + 1))
  grep -qx "$name" "$tmp/their_functions" || { echo "FAIL: we export $name; Open MPI does not"; failed=1; }
  at=$(awk -v n="$name" '$1 == n { print $2 }' "$tmp/our_addresses")
  mpi_at=$(awk -v n="${name#P}" '$1 == n { print $2 }' "$tmp/our_addresses")
  [ "$at" = "$mpi_at" ] || { echo "FAIL: $name is not ${name#P} (at $at, ${name#P} at ${mpi_at:-nowhere})"; failed=1; }
done
[ $failed = 0 ] && echo "ok: $checked data objects match Open MPI's sizes; all of Open MPI's MPI functions exist;" \
  "$profiled PMPI_ names, Open MPI's, each its MPI_ function"
exit $failed
