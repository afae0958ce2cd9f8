#!/usr/bin/env python3
"""The table of benchmarks/compare --splitc (not meant to be run by hand).

  compare_splitc_report.py OUTDIR

reads OUTDIR/raw/r<round>_<job>.json (splitc_suite --json lines; job one: 1
rank, weak: 2 ranks with per-rank sizes, strong: 2 ranks with the whole
job's sizes, --total), takes each program's median time over the rounds and
writes OUTDIR/splitc_summary.json and OUTDIR/splitc_table.md, and prints the
table.

Speed-ups against the 1-rank run of the same build: weak (scaled) 2*T1/T2,
strong T1/T2; each from the medians and, round by round, the median of the
rounds' own ratios (a round's three jobs ran one after another). The bars of
issue 24: no program slower on 2 ranks than on 1 (both speed-ups >= 1) and
mm's scaled speed-up >= 1.8; a miss is marked with '*'.
"""
import glob
import json
import os
import re
import statistics
import sys

BARS = {"mm": 1.8}


def load(outdir):
    """{job: {program: {round: seconds}}}, and the rounds each job verified."""
    times, unverified = {}, []
    for path in sorted(glob.glob(os.path.join(outdir, "raw", "r*_*.json"))):
        m = re.match(r"r(\d+)_(one|weak|strong)\.json$", os.path.basename(path))
        if not m:
            continue
        rnd, job = int(m.group(1)), m.group(2)
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                rec = json.loads(line)
                if rec.get("bench") != "splitc":
                    continue
                if not rec.get("verified"):
                    unverified.append(f"{rec['name']} ({job}, round {rnd})")
                    continue
                times.setdefault(job, {}).setdefault(rec["name"], {})[rnd] = rec["seconds"]
    return times, unverified


def speedups(t1, t2, factor):
    """(ratio of the medians, median of the per-round ratios)"""
    common = sorted(set(t1) & set(t2))
    if not common:
        return None, None
    of_medians = factor * statistics.median(t1.values()) / statistics.median(t2.values())
    by_round = statistics.median(factor * t1[r] / t2[r] for r in common)
    return of_medians, by_round


def cell(value, bar):
    if value is None:
        return "-"
    return f"{value:.2f}" + ("*" if value < bar else "")


def main():
    outdir = sys.argv[1]
    times, unverified = load(outdir)
    one = times.get("one", {})
    rows, summary = [], {}
    for name in one:
        t1 = one[name]
        weak = times.get("weak", {}).get(name, {})
        strong = times.get("strong", {}).get(name, {})
        w_med, w_round = speedups(t1, weak, 2.0)
        s_med, s_round = speedups(t1, strong, 1.0)
        med = lambda t: f"{statistics.median(t.values()):.4g}" if t else "-"
        weak_bar = BARS.get(name, 1.0)
        rows.append(f"| {name} | {med(t1)} | {med(weak)} | {med(strong)} | {cell(w_med, weak_bar)} | "
                    f"{cell(w_round, weak_bar)} | {cell(s_med, 1.0)} | {cell(s_round, 1.0)} | {len(t1)} |")
        summary[name] = {"t1": list(t1.values()), "t2_weak": list(weak.values()), "t2_strong": list(strong.values()),
                         "weak_of_medians": w_med, "weak_by_round": w_round,
                         "strong_of_medians": s_med, "strong_by_round": s_round, "weak_bar": weak_bar}
    table = ["| program | T1 (s) | T2 weak (s) | T2 strong (s) | 2·T1/T2 of medians | 2·T1/T2 by round "
             "| T1/T2 strong of medians | T1/T2 strong by round | rounds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"] + rows
    misses = sum(r.count("*") for r in rows)
    text = "\n".join(table) + f"\n\n* misses its bar (mm >= 1.8 scaled, every program >= 1): {misses} cells\n"
    if unverified:
        text += "NOT verified (left out): " + ", ".join(unverified) + "\n"
    with open(os.path.join(outdir, "splitc_table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "splitc_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(text, end="")
    return 1 if not rows else 0


if __name__ == "__main__":
    sys.exit(main())
