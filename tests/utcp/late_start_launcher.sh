#!/bin/sh
# viarun --launcher "late_start_launcher.sh {host}": runs the program at once,
# or 1.5 s late on the host named "late" (a rank slow to start under load).
host=$1
shift
[ "$host" = late ] && sleep 1.5
exec "$@"
