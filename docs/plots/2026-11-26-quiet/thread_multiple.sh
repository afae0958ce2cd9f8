#!/usr/bin/env bash
# What MPI_THREAD_MULTIPLE costs one thread: mpi_bench lat/rate at 8 B and 1 KiB and
# allreduce, single vs multiple, on viastack (viarun) and Open MPI (mpirun, ob1+vader),
# interleaved, 3 rounds.
set -u
B=${B:-build}
out=${1:-thread_multiple.jsonl}
: > "$out"
for round in 1 2 3; do
  for level in single multiple; do
    LD_LIBRARY_PATH=$B/lib $B/bin/viarun -n 2 -- $B/bin/mpi_bench --thread $level --test lat,rate,allreduce --sizes 8,1k --json >> "$out"
    mpirun --allow-run-as-root -np 2 --mca pml ob1 --mca btl self,vader --bind-to core $B/bin/mpi_bench --thread $level --test lat,rate,allreduce --sizes 8,1k --json >> "$out" 2>/dev/null
  done
done
python3 - "$out" <<'PY'
import json, sys, statistics, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
d = collections.defaultdict(list)
for r in rows:
    d[(r['library'], r['test'], r['bytes'], r.get('thread', 'single'))].append(r['lat_us'])
print('| library | test | bytes | single (us) | multiple (us) | multiple / single |')
print('| --- | --- | ---: | ---: | ---: | ---: |')
for lib in ('viastack', 'openmpi'):
    for test in ('lat', 'rate', 'allreduce'):
        for b in (8, 1024):
            s, m = d.get((lib, test, b, 'single')), d.get((lib, test, b, 'multiple'))
            if s and m:
                ms, mm = statistics.median(s), statistics.median(m)
                print(f'| {lib} | {test} | {b} | {ms:.3f} | {mm:.3f} | {mm/ms:.2f} |')
PY
