#!/bin/sh
# Runs its arguments bound to the first CPU this process may use (taskset), so
# that viarun sees a one-CPU host: more ranks than that are oversubscribed.
set -eu
cpu=$(awk '/^Cpus_allowed_list:/ { split($2, first, /[-,]/); print first[1] }' /proc/self/status)
exec taskset -c "$cpu" "$@"
