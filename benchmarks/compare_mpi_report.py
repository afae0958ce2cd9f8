#!/usr/bin/env python3
"""The ratio table of benchmarks/compare --mpi (not meant to be run by hand).

  compare_mpi_report.py OUTDIR [shm|tcp|hog]

reads OUTDIR/raw/r<round>_<library>_<ranks>.json (mpi_bench --json lines, one
file per run), takes for each rank count, test and size the ratio of the two
libraries in each round and the median of those ratios, and writes
OUTDIR/mpi_summary.json and OUTDIR/mpi_table.md, and prints the table.

A round's two runs follow each other, so its ratio is taken in one machine
state; the median of the rounds' ratios, not the ratio of the two libraries'
medians, which a machine that switches between a fast and a slow state
between rounds (0.10 against 0.36 us for both libraries' 8 B latency on
2026-11-27) can make 3x off when the states fall unevenly on the two.

compare measures the core-to-core handoff before and after each run (in
raw/<run>.json.handoff) and runs a round again when its runs disagree; a
round whose runs still saw the machine in different states (handoffs more
than 1.4x apart) is left out of a cell's median where at least 3 rounds
were not (a median of one or two rounds would let one round decide);
otherwise every round counts.

Each cell is viastack / Open MPI of the same measurement in the same rounds,
oriented so that the targets of issue 25 read the same way everywhere:
  lat and every collective: time ratio (lower is better; target <= 1.1 for
  lat, <= 1.2 for collectives on 2 ranks, <= 1.5 on 4 ranks on 2 cores);
  bw, bibw, rate: throughput ratio (higher is better; target >= 0.9).
Over tcp (against Open MPI's tcp BTL) the targets are <= 1.2 and >= 0.8; beside
a CPU hog (Open MPI with mpi_yield_when_idle=1), lat's is <= 1.5.
A cell misses its target when marked with '*'.
"""
import glob
import json
import os
import re
import statistics
import sys

THROUGHPUT_TESTS = {"bw", "bibw", "rate"}


def load(outdir):
    """{(library, ranks, test, bytes): {round: lat_us}}"""
    runs = {}
    for path in sorted(glob.glob(os.path.join(outdir, "raw", "r*_*_*.json"))):
        if not re.match(r"r\d+_(openmpi|viastack)_\d+\.json$", os.path.basename(path)):
            continue
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("bench") != "mpi_bench":
                    continue
                key = (row["library"], row["ranks"], row["test"], row["bytes"])
                runs.setdefault(key, {})[int(os.path.basename(path)[1:].split("_")[0])] = row["lat_us"]
    return runs


SAME_STATE_SPREAD = 1.4  # as in benchmarks/compare
MIN_SAME_STATE_ROUNDS = 3  # as in compare_report.py: the issues' medians of >= 3 interleaved runs


def mixed_rounds(outdir):
    """{(ranks, round)}: the rounds whose two runs saw different states of the machine."""
    handoffs = {}
    for path in glob.glob(os.path.join(outdir, "raw", "r*_*_*.json.handoff")):
        m = re.match(r"r(\d+)_(openmpi|viastack)_(\d+)\.json\.handoff$", os.path.basename(path))
        if not m:
            continue
        try:
            with open(path) as f:
                values = [float(v) for v in f.read().split()]
        except (OSError, ValueError):
            continue
        handoffs.setdefault((int(m.group(3)), int(m.group(1))), {})[m.group(2)] = values
    mixed = set()
    for key, by_library in handoffs.items():
        values = [v for vs in by_library.values() for v in vs]
        if len(by_library) == 2 and values and min(values) > 0 and max(values) > SAME_STATE_SPREAD * min(values):
            mixed.add(key)
    return mixed


def target(test, ranks, setting):
    if setting == "tcp":
        return 0.8 if test in THROUGHPUT_TESTS else 1.2
    if test in THROUGHPUT_TESTS:
        return 0.9
    if test == "lat":
        return 1.5 if setting == "hog" else 1.1
    return 1.2 if ranks <= 2 else 1.5


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}k"
    return str(n)


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["shm"], ["tcp"], ["hog"]):
        sys.exit(__doc__)
    outdir = sys.argv[1]
    setting = sys.argv[2] if len(sys.argv) == 3 else "shm"
    runs = load(outdir)
    mixed = mixed_rounds(outdir)
    medians = {k: statistics.median(v.values()) for k, v in runs.items()}
    summary = []
    tables = []
    for ranks in sorted({k[1] for k in medians}):
        tests = []
        for k in medians:
            if k[1] == ranks and k[2] not in tests:
                tests.append(k[2])
        order = {"lat": 0, "bw": 1, "bibw": 2, "rate": 3}
        tests.sort(key=lambda t: (order.get(t, 4), t.lstrip("i"), t.startswith("i")))
        sizes = sorted({k[3] for k in medians if k[1] == ranks})
        header = ["test"] + [size_label(s) for s in sizes]
        rows = []
        misses = cells = 0
        for test in tests:
            row = [test]
            for size in sizes:
                ours_runs = runs.get(("viastack", ranks, test, size), {})
                theirs_runs = runs.get(("openmpi", ranks, test, size), {})
                rounds = [r for r in ours_runs if r in theirs_runs and ours_runs[r] > 0 and theirs_runs[r] > 0]
                if not rounds:
                    row.append("-")
                    continue
                same_state = [r for r in rounds if (ranks, r) not in mixed]
                if len(same_state) >= MIN_SAME_STATE_ROUNDS:
                    rounds = same_state
                ours, theirs = medians[("viastack", ranks, test, size)], medians[("openmpi", ranks, test, size)]
                # lat_us is time per message or per call: throughput is its inverse.
                ratio = statistics.median(theirs_runs[r] / ours_runs[r] if test in THROUGHPUT_TESTS
                                          else ours_runs[r] / theirs_runs[r] for r in rounds)
                goal = target(test, ranks, setting)
                miss = ratio < goal if test in THROUGHPUT_TESTS else ratio > goal
                cells += 1
                misses += miss
                row.append(f"{ratio:.2f}{'*' if miss else ''}")
                summary.append({"ranks": ranks, "test": test, "bytes": size, "viastack_us": ours,
                                "openmpi_us": theirs, "ratio": ratio, "target": goal, "meets": not miss,
                                "rounds": len(rounds)})
            rows.append(row)
        title = (f"{ranks} ranks: viastack / Open MPI, median of the rounds' ratios; time ratio for lat and "
                 f"collectives, throughput ratio for bw, bibw, rate; * misses its target "
                 f"({misses} of {cells} cells)")
        tables.append((title, header, rows))
    with open(os.path.join(outdir, "mpi_summary.json"), "w") as f:
        for row in summary:
            f.write(json.dumps(row) + "\n")
    md = []
    for title, header, rows in tables:
        md.append(f"**{title}**\n")
        md.append("| " + " | ".join(header) + " |")
        md.append("|" + "---|" * len(header))
        for row in rows:
            md.append("| " + " | ".join(row) + " |")
        md.append("")
    with open(os.path.join(outdir, "mpi_table.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    for title, header, rows in tables:
        print(title)
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
        for row in [header] + rows:
            print("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))))
        print()
    if not tables:
        print("no results: see the raw/ folder")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
