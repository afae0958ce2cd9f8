#!/bin/bash
# Split-C paper size: ROUNDS rounds of shm 1 rank, shm 2 ranks, two independent
# 1-rank jobs at once (what two busy processes get from the machine), then in
# the first TCP_ROUNDS rounds tcp 2 ranks. $R holds a Release build's bin/ and
# lib/ (copied from build/); JSON lines and log.txt are written there.
#   R=/tmp/sc2 ROUNDS=5 TCP_ROUNDS=3 docs/plots/splitc-2026-11-24/run.sh
R=${R:-/tmp/sc2}
cd $R
ROUNDS=${ROUNDS:-5}
run() {  # N PROVIDER OUT
  for w in $(seq 60); do l=$(cut -d' ' -f1 /proc/loadavg); awk -v l=$l 'BEGIN{exit !(l<0.5)}' && break; sleep 1; done
  b0=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
  s=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o $R/time.tmp env LD_LIBRARY_PATH=$R/lib $R/bin/viarun -n $1 --provider $2 --timeout 600 -- $R/bin/splitc_suite --size paper --json >> $R/$3 2>>$R/err.txt
  e=$(date +%s.%N)
  b1=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
  read u sy < $R/time.tmp
  echo "$(date -u +%H:%M:%S) N=$1 $2 wall=$(echo "$e - $s" | bc) load=$(cut -d' ' -f1 /proc/loadavg) others_cpu_ticks=$(echo "$b1 - $b0 - ($u + $sy)*100" | bc)" >> $R/log.txt
}
for round in $(seq $ROUNDS); do
  run 1 shm shm1.jsonl
  run 2 shm shm2.jsonl
  # two independent 1-rank jobs at once: what two busy processes get from this machine
  (env LD_LIBRARY_PATH=$R/lib $R/bin/viarun -n 1 -- $R/bin/splitc_suite --size paper --json >> $R/pair_a.jsonl 2>>$R/err.txt) &
  env LD_LIBRARY_PATH=$R/lib $R/bin/viarun -n 1 -- $R/bin/splitc_suite --size paper --json >> $R/pair_b.jsonl 2>>$R/err.txt
  wait
  if [ $round -le ${TCP_ROUNDS:-3} ]; then run 2 tcp tcp2.jsonl; fi
done
echo done >> $R/log.txt
