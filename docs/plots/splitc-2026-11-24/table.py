#!/usr/bin/env python3
"""The Markdown table of one run.sh directory: per benchmark the medians of
the 1-rank and 2-rank shm runs and their scaled speed-up 2*T1/T2, the same
ratio taken round by round (each round's 1-rank run against the 2-rank run
made just after it: this machine changes speed over minutes, and a pair of
runs a second apart sees the same state), the two concurrent 1-rank jobs,
and 2 ranks over tcp; then small-message over bulk time.
    docs/plots/splitc-2026-11-24/table.py DIR"""
import collections
import json
import statistics as st
import sys

BENCHES = ['mm', 'ssort_sm', 'ssort_bulk', 'rsort_sm', 'rsort_bulk', 'cc', 'cg']


def rounds(path):
    """Each job's results (one dict per job: name -> (seconds, verified)), in order."""
    jobs, job = [], {}
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        if not line.startswith('{'):
            continue
        r = json.loads(line)
        if 'seconds' not in r:
            continue
        if r['name'] in job:
            jobs.append(job)
            job = {}
        job[r['name']] = (r['seconds'], r.get('verified', False))
    return jobs + ([job] if job else [])


def fmt(v):
    return f"{v:.4f}" if v < 0.1 else f"{v:.3f}"


def main(d):
    shm1, shm2, tcp2, pa, pb = (rounds(f"{d}/{f}.jsonl") for f in ('shm1', 'shm2', 'tcp2', 'pair_a', 'pair_b'))
    times = lambda jobs, b: [j[b][0] for j in jobs if b in j]
    print("| benchmark | 1 rank | 2 ranks shm | 2·T1/T2 of the medians | 2·T1/T2 round by round: median (range) "
          "| pair (each job) | 2 ranks tcp |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for b in BENCHES:
        t1, t2 = times(shm1, b), times(shm2, b)
        paired = [2 * a / c for a, c in zip(t1, t2)]
        verified = all(j[b][1] for jobs in (shm1, shm2, tcp2, pa, pb) for j in jobs if b in j)
        pair = [st.median(times(pa, b)), st.median(times(pb, b))]
        print(f"| {b} | {fmt(st.median(t1))} | {fmt(st.median(t2))} | {2 * st.median(t1) / st.median(t2):.2f} "
              f"| {st.median(paired):.2f} ({min(paired):.2f}–{max(paired):.2f}) | {fmt(min(pair))}–{fmt(max(pair))} "
              f"| {fmt(st.median(times(tcp2, b)))} |" + ("" if verified else " NOT VERIFIED"))
    print()
    for sm, bulk in (('ssort_sm', 'ssort_bulk'), ('rsort_sm', 'rsort_bulk')):
        ratio = lambda jobs: st.median(times(jobs, sm)) / st.median(times(jobs, bulk))
        print(f"{sm} / {bulk}: 1 rank {ratio(shm1):.2f}, 2 ranks shm {ratio(shm2):.2f}, 2 ranks tcp {ratio(tcp2):.2f}")


if __name__ == '__main__':
    main(sys.argv[1])
