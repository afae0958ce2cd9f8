#!/bin/sh
# shm_full_test in a mount namespace of its own whose /dev/shm is a tmpfs of
# SIZE: enough for the shm provider's rings, too small for the shared window
# the test asks for (and, at the smallest sizes, for the communicators' node
# segments). Needs root (unshare -m, mount); skipped otherwise.
# Usage: small_devshm.sh VIARUN PROGRAM RANKS SIZE WINDOW_MIB
set -eu
viarun=$1 program=$2 ranks=$3 size=$4 window_mib=$5
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: a small /dev/shm needs a mount namespace, and that needs root"
  exit 77
fi
if ! unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm' 2> /dev/null; then
  echo "SKIP: a tmpfs cannot be mounted on /dev/shm in a mount namespace here"
  exit 77
fi
exec unshare -m sh -c 'mount -t tmpfs -o size="$1" tmpfs /dev/shm && exec "$2" -n "$3" --timeout 60 -- "$4" "$5"' \
  sh "$size" "$viarun" "$ranks" "$program" "$window_mib"
