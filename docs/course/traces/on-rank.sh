#!/bin/sh
# on-rank.sh RANK COMMAND... PROGRAM ARGS...: under viarun, rank RANK runs
# COMMAND (a tracer such as gdb or strace, ending in the program), every other
# rank the program alone, found after the tracer's "--args" or "--".
#   viarun -n 2 -- docs/course/traces/on-rank.sh 1 strace -f -e trace=futex -- build/bin/vipl_pingpong 10
set -eu
if [ $# -lt 3 ]; then
  echo "usage: on-rank.sh RANK TRACER [TRACER ARGS...] (--args|--) PROGRAM [ARGS...]" >&2
  exit 2
fi
rank=$1
shift
if [ "${VIASTACK_RANK:-0}" = "$rank" ]; then exec "$@"; fi
# Not the traced rank: drop the tracer and its options.
while [ $# -gt 0 ] && [ "$1" != "--args" ] && [ "$1" != "--" ]; do shift; done
if [ $# -eq 0 ]; then
  echo "on-rank.sh: no --args or -- before the program" >&2
  exit 2
fi
shift
exec "$@"
