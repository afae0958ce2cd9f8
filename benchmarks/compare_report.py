#!/usr/bin/env python3
"""Parsing and reporting helper for benchmarks/compare (not meant to be run by hand).

  compare_report.py netpipe FILE            NetPIPE output file -> JSON lines
  compare_report.py ucx FILE TEST BYTES     ucx_perftest client output -> one JSON line
  compare_report.py fipingpong FILE         fi_pingpong client output -> one JSON line
  compare_report.py summary OUTDIR [PROV]   raw runs -> OUTDIR/summary.json, table.txt, table.md;
                                            prints the table; PROV: shm (default) or tcp,
                                            as benchmarks/compare --provider; with shm, rows
                                            np_* compare raw/r*_npvia_*.out (NPopenmpi on
                                            viastack) with raw/r*_netpipe_*.out (on Open MPI)
  compare_report.py ratecold OUTDIR [PROV]  (e)'s raw runs -> OUTDIR/ratecold.{json,txt,md}, with
                                            shm also threshold.{txt,md} (CMA against the rings,
                                            warm and cold); prints them
  compare_report.py ucxsweep OUTDIR REP     ucx_perftest tag_bw's N-half sweep of repetition REP
                                            -> JSON lines
  compare_report.py npcold OUTDIR REP       NetPIPE's runs of (e), cold (-I) and warm, of
                                            repetition REP -> JSON lines

Units, everywhere in the JSON this writes:
  lat_us   one-way latency in microseconds (half a round trip)
  bw_MBps  10^6 bytes per second

NetPIPE 3.7.2 writes "bytes  Mbps  t" per line, where t is the best (minimum
over its trials) half round-trip time in seconds, printed with only 8
decimals, and "Mbps" is bits / t / 2^20.  We therefore derive the time from
the more precise Mbps column: t = bytes * 8 / (Mbps * 2^20);
MB/s = bytes / t / 10^6 = Mbps * 2^20 / 8 / 10^6.

ucx_perftest 1.13 prints, for the final line, 8 numbers: iterations,
latency 50th percentile / average / overall (usec; for ping-pong tests such as
tag_lat already divided by 2, i.e. one-way), bandwidth average / overall in
MiB/s (2^20 bytes/s), message rate average / overall.  We take "overall"
(total time / iterations, the same definition via_pingpong uses for each of
its repetitions) and convert bandwidth to 10^6 bytes/s, for both providers;
the summary quotes the 50th percentile beside it.

NPtcp (netpipe-tcp) is the same NetPIPE 3.7.2 driver over a TCP socket:
same output format, and the same 2^20 in its "Mbps".

libfabric's fi_pingpong (util/pingpong.c) prints, for each size, "bytes #sent
#ack total time MB/sec usec/xfer Mxfers/sec".  One iteration is a round trip
(the client sends, then receives), and show_perf is called with
xfers_per_iter = 2: usec/xfer = elapsed / iterations / 2, a one-way time,
like lat_us; MB/sec = iterations * 2 * bytes / elapsed (10^6 bytes/s).
elapsed is whole microseconds, from CLOCK_MONOTONIC around the loop.
"""
import glob
import json
import math
import os
import re
import statistics
import sys

MIB = 1048576.0


def parse_netpipe(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            try:
                nbytes = int(parts[0])
                mbps = float(parts[1])
                t_coarse = float(parts[2])
            except ValueError:
                continue
            if mbps > 0:
                t = nbytes * 8.0 / (mbps * MIB)
            else:
                t = t_coarse
            if t <= 0:
                continue
            rows.append({
                "bench": "NPopenmpi",
                "mode": "pingpong",
                "bytes": nbytes,
                "lat_us": round(t * 1e6, 5),
                "bw_MBps": round(nbytes / t / 1e6, 2),
                "netpipe_Mbps": mbps,
            })
    return rows


def parse_ucx(path, test, nbytes):
    final = None
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s.startswith("Final:"):
                s = s[len("Final:"):]
            toks = s.split()
            if len(toks) != 8:
                continue
            try:
                nums = [float(t) for t in toks]
            except ValueError:
                continue
            final = nums
    if final is None:
        return None
    iters, lat_p50, lat_avg, lat_overall, bw_avg, bw_overall, mr_avg, mr_overall = final
    return {
        "bench": "ucx_perftest",
        "mode": test,
        "bytes": int(nbytes),
        "iters": int(iters),
        "lat_us": lat_overall,
        "lat_us_p50": lat_p50,
        "bw_MBps": round(bw_overall * MIB / 1e6, 2),
        "ucx_bw_MiBps": bw_overall,
        "msg_rate": mr_overall,
    }


def parse_fipingpong(path):
    """The result line of fi_pingpong's output (the last one, if several)."""
    res, header = None, False
    with open(path) as f:
        for line in f:
            toks = line.split()
            if toks[:1] == ["bytes"] and "usec/xfer" in toks:
                header = True
                continue
            if not header or len(toks) != 8 or not toks[4].endswith("s"):
                continue
            try:
                t_s, mbs, usec, mxfers = float(toks[4][:-1]), float(toks[5]), float(toks[6]), float(toks[7])
            except ValueError:
                continue
            res = {"bench": "fi_pingpong", "mode": "pingpong", "size": toks[0], "sent": toks[1],
                   "time_s": t_s, "lat_us": usec, "bw_MBps": mbs, "mxfers_per_s": mxfers}
    return res


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except OSError:
        pass
    return out


DISTURBED_PCT, DISTURBED_CS = 10, 5  # as in benchmarks/compare


def others_pct(path):
    """Share of both CPUs (percent) that other processes used while this run ran, or None;
    negative when that was too little CPU time to count (under 0.05 s).  Written by compare."""
    try:
        with open(path + ".others_pct") as f:
            parts = f.read().split()
        pct = int(parts[0])
        cs = int(parts[1]) if len(parts) > 1 else DISTURBED_CS
        return pct if cs >= DISTURBED_CS else -1
    except (OSError, ValueError, IndexError):
        return None


# Two runs whose core-to-core handoffs (benchmarks/machine_state, measured by
# compare before and after each run) lie further apart than this ran in
# different states of the machine.
SAME_STATE_SPREAD = 1.4  # as in benchmarks/compare
# Fewer rounds than this in one state, and every round's ratio counts (the
# issues ask for medians of >= 3 interleaved runs); compare_mpi_report.py too.
MIN_SAME_STATE_ROUNDS = 3


def handoffs(path):
    """The core-to-core handoffs (GB/s) measured just before and just after this run, or None.  Written by compare."""
    try:
        with open(path + ".handoff") as f:
            values = [float(v) for v in f.read().split()]
        return values if values and min(values) > 0 else None
    except (OSError, ValueError):
        return None


class Runs(tuple):
    """(values, others' shares of the CPUs) of one measurement, a round each;
    .handoffs: each round's run's handoffs (None where not measured)."""
    def __new__(cls, vals, others, handoff_list):
        runs_ = super().__new__(cls, (vals, others))
        runs_.handoffs = handoff_list
        return runs_


def rounds(outdir):
    """1 .. the last round any raw file of OUTDIR belongs to."""
    found = [int(m.group(1)) for p in glob.glob(os.path.join(outdir, "raw", "r*_*"))
             if (m := re.search(r"/r(\d+)_", p))]
    return range(1, max(found, default=0) + 1)


def runs(outdir, pattern, extract):
    """Values of one measurement in every round r1, r2, ... of the run (None
    where a round left no file: a failed program), and for each the share of
    the CPUs other processes used meanwhile. Position k is round k+1 in every
    list, so that rounds pair with the anchor's."""
    by_round = {}
    for path in glob.glob(os.path.join(outdir, "raw", pattern)):
        by_round[int(re.search(r"/r(\d+)_", path).group(1))] = path
    vals, others, states = [], [], []
    for k in rounds(outdir):
        path = by_round.get(k)
        vals.append(extract(path) if path else None)
        others.append(others_pct(path) if path else None)
        states.append(handoffs(path) if path else None)
    return Runs(vals, others, states)


def ours(field):
    def extract(path):
        recs = read_jsonl(path)
        return recs[-1][field] if recs else None
    return extract


def netpipe_at(nbytes, field):
    def extract(path):
        for r in parse_netpipe(path) if os.path.exists(path) else []:
            if r["bytes"] == nbytes:
                return r[field]
        return None
    return extract


def fi_field(field):
    def extract(path):
        r = parse_fipingpong(path) if os.path.exists(path) else None
        return r[field] if r else None
    return extract


def ucx_field(test, nbytes, field):
    def extract(path):
        r = parse_ucx(path, test, nbytes) if os.path.exists(path) else None
        return r[field] if r else None
    return extract


def med(vals):
    good = [v for v in vals if v is not None]
    return statistics.median(good) if good else None


def round_ratios(ours_vals, anchor_vals):
    """ours / anchor of each round that has both (rounds pair by position)."""
    return [o / a for o, a in zip(ours_vals, anchor_vals) if o is not None and a]


def mixed_states(ours_vals, anchor_vals, ours_handoffs, anchor_handoffs):
    """For each round that has both (as round_ratios): whether its two runs ran
    in different states of the machine (their handoffs more than
    SAME_STATE_SPREAD apart). Unknown (not measured) counts as the same."""
    out = []
    for k, (o, a) in enumerate(zip(ours_vals, anchor_vals)):
        if o is None or not a:
            continue
        both = [h for hs in (ours_handoffs, anchor_handoffs) if hs and k < len(hs) and hs[k] for h in hs[k]]
        out.append(bool(ours_handoffs and anchor_handoffs and ours_handoffs[k] and anchor_handoffs[k]) and
                   max(both) > SAME_STATE_SPREAD * min(both))
    return out


def fmt(v, digits=3):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def mixed_flags(row):
    return row.get("rounds_mixed_states") or [False] * len(row["round_ratios"])


def ratio_mark(v, mixed):
    return fmt(v, 2) + ("~" if mixed else "")


def mark(v, pct):
    return fmt(v) + ("*" if pct is not None and pct >= DISTURBED_PCT else "")


def row_adder(rows):
    """A function that appends one row (ours against an anchor, over the runs) to rows."""
    def row(key, metric, unit, ours_runs, anchor, anchor_runs, better, target=None):
        (ours_vals, ours_others), (anchor_vals, anchor_others) = ours_runs, anchor_runs
        o, a = med(ours_vals), med(anchor_vals)
        # Round k of ours ran beside round k of the anchor (interleaved), in
        # the same state of this machine, which changes between rounds: the
        # ratio is the median of the rounds' ratios, over the rounds whose two
        # runs kept one state where at least MIN_SAME_STATE_ROUNDS did (else
        # over every round: one or two rounds would decide alone). Where no
        # round has both, the ratio of the medians.
        per_round = round_ratios(ours_vals, anchor_vals)
        mixed = mixed_states(ours_vals, anchor_vals, getattr(ours_runs, "handoffs", None),
                             getattr(anchor_runs, "handoffs", None))
        same = [v for v, m in zip(per_round, mixed) if not m]
        kept = same if len(same) >= MIN_SAME_STATE_ROUNDS else per_round
        ratio = med(kept) if per_round else (o / a) if (o is not None and a) else None
        rows.append({
            "key": key, "metric": metric, "unit": unit,
            "ours_runs": ours_vals, "ours_median": o, "ours_others_pct": ours_others,
            "anchor": anchor, "anchor_runs": anchor_vals, "anchor_median": a,
            "anchor_others_pct": anchor_others, "round_ratios": per_round, "rounds_mixed_states": mixed,
            "ratio_ours_over_anchor": ratio, "better": better, "target": target,
        })
        return rows[-1]
    return row


def summary(outdir, provider="shm"):
    rows = []
    row = row_adder(rows)

    targets = {}
    if provider == "tcp":
        summary_tcp(outdir, row, rows, targets)
        ucx_p50 = med(runs(outdir, "r*_ucx_tag_lat_8.txt", ucx_field("tag_lat", 8, "lat_us_p50"))[0])
    else:
        lat = row("lat8_ucx", "8 B one-way latency", "us",
                  runs(outdir, "r*_viastack_lat_8.json", ours("lat_us")),
                  "ucx_perftest tag_lat, UCX_TLS=posix,self (overall)",
                  runs(outdir, "r*_ucx_tag_lat_8.txt", ucx_field("tag_lat", 8, "lat_us")),
                  "lower", "ours <= 1.2 x anchor and ours < 0.3 us")
        row("lat8_np", "8 B one-way latency", "us",
            (lat["ours_runs"], lat["ours_others_pct"]),
            "NetPIPE NPopenmpi, Open MPI ob1 + vader",
            runs(outdir, "r*_netpipe_8.out", netpipe_at(8, "lat_us")), "lower")
        bw = row("bw1m_np", "1 MiB streaming bandwidth (ours) vs NetPIPE ping-pong", "MB/s",
                 runs(outdir, "r*_viastack_bw_1M.json", ours("bw_MBps")),
                 "NetPIPE NPopenmpi, Open MPI ob1 + vader",
                 runs(outdir, "r*_netpipe_1M.out", netpipe_at(1048576, "bw_MBps")),
                 "higher", "ours >= anchor")
        row("bw1m_ucx", "1 MiB streaming bandwidth", "MB/s",
            (bw["ours_runs"], bw["ours_others_pct"]),
            "ucx_perftest tag_bw, UCX_TLS=posix,self,cma (overall)",
            runs(outdir, "r*_ucx_tag_bw_1M.txt", ucx_field("tag_bw", 1048576, "bw_MBps")), "higher")
        row("pp1m_np", "1 MiB ping-pong bandwidth (bytes / one-way time)", "MB/s",
            runs(outdir, "r*_viastack_pingpong_1M.json", ours("bw_MBps")),
            "NetPIPE NPopenmpi, Open MPI ob1 + vader",
            runs(outdir, "r*_netpipe_1M.out", netpipe_at(1048576, "bw_MBps")), "higher")

        # Targets of the project's issue.
        r = rows[0]
        if r["ours_median"] is not None and r["ratio_ours_over_anchor"] is not None:
            targets["lat8"] = {
                "text": "8 B one-way latency <= 1.2 x ucx_perftest tag_lat (posix,self) and < 0.3 us",
                "met": r["ratio_ours_over_anchor"] <= 1.2 and r["ours_median"] < 0.3,
            }
        else:
            targets["lat8"] = {"text": "8 B one-way latency target", "met": None}
        r = rows[2]
        if r["ratio_ours_over_anchor"] is not None:
            targets["bw1m"] = {
                "text": "1 MiB streaming bandwidth >= NPopenmpi over vader",
                "met": r["ratio_ours_over_anchor"] >= 1.0,
            }
        else:
            targets["bw1m"] = {"text": "1 MiB streaming bandwidth target", "met": None}

        # (d) The same NPopenmpi binary on viastack's libmpi.so.40 and on Open MPI (issue 6).
        if glob.glob(os.path.join(outdir, "raw", "r*_npvia_*.out")):
            summary_npvia(outdir, row, targets)

        ucx_p50 = med(runs(outdir, "r*_ucx_tag_lat_8.txt", ucx_field("tag_lat", 8, "lat_us_p50"))[0])

    machine = {}
    mpath = os.path.join(outdir, "machine.txt")
    if os.path.exists(mpath):
        with open(mpath) as f:
            for line in f:
                if ":" in line and not line.startswith(" "):
                    k, v = line.split(":", 1)
                    machine.setdefault(k.strip(), v.strip())

    result = {"outdir": os.path.abspath(outdir), "rows": rows, "targets": targets,
              "ucx_tag_lat_8_p50_median_us": ucx_p50, "machine": machine}
    if provider != "shm":
        result["provider"] = provider
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(result, f, indent=2)
    notes = []
    if ucx_p50 is not None:
        notes.append(f"  (ucx_perftest tag_lat 8 B, 50th percentile column, median of runs: {fmt(ucx_p50)} us)")
    write_tables(outdir, "table", rows, targets, notes)


def write_tables(outdir, name, rows, targets, notes=(), metric_width=52):
    """Prints the rows as a table, and writes it to OUTDIR/NAME.txt and, for
    docs/PERFORMANCE.md, NAME.md; notes go under the runs."""
    lines = []
    # The ratio column is the median of the rounds' ratios (listed under "runs").
    head = f"{'metric':<{metric_width}} {'unit':<5} {'viastack':>9}  {'anchor':>9}  {'ours/anchor':>11}  anchor"
    lines.append(head)
    lines.append("-" * len(head) + "-" * 40)
    for r in rows:
        lines.append(f"{r['metric']:<{metric_width}} {r['unit']:<5} {fmt(r['ours_median']):>9}  "
                     f"{fmt(r['anchor_median']):>9}  {fmt(r['ratio_ours_over_anchor'], 2):>11}  {r['anchor']}")
    lines.append("")
    lines.append("runs (in order; the medians above are over these, ours/anchor is the median of the rounds' ratios;")
    lines.append(f" * = other processes used >= {DISTURBED_PCT}% of the CPUs, and >= 0.05 s, while that run ran;")
    lines.append(" ~ = the round's two runs saw the machine in different states (core-to-core handoffs more than"
                 f" {SAME_STATE_SPREAD}x apart): left out of the ratio where another round was not):")
    key_width = max([9] + [len(r["key"]) for r in rows])
    for r in rows:
        o = " ".join(mark(v, p) for v, p in zip(r["ours_runs"], r["ours_others_pct"]))
        a = " ".join(mark(v, p) for v, p in zip(r["anchor_runs"], r["anchor_others_pct"]))
        ratios = " ".join(ratio_mark(v, m) for v, m in zip(r["round_ratios"], mixed_flags(r)))
        lines.append(f"  {r['key']:<{key_width}} viastack [{o}]   anchor [{a}]   ratios [{ratios}]")
    lines += notes
    if targets:
        lines += ["", "targets:"]
    for t in targets.values():
        met = {True: "MET", False: "NOT MET", None: "UNKNOWN (a measurement is missing)"}[t["met"]]
        lines.append(f"  {t['text']}: {met}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, name + ".txt"), "w") as f:
        f.write(text)

    # Markdown table (for docs/PERFORMANCE.md).
    md = ["| metric | unit | viastack (median) | anchor (median) | ours / anchor (median of rounds) | anchor | "
          "viastack runs | anchor runs | rounds' ratios |",
          "| --- | --- | ---: | ---: | ---: | --- | --- | --- | --- |"]
    for r in rows:
        md.append(f"| {r['metric']} | {r['unit']} | {fmt(r['ours_median'])} | {fmt(r['anchor_median'])} | "
                  f"{fmt(r['ratio_ours_over_anchor'], 2)} | {r['anchor']} | "
                  f"{', '.join(mark(v, p) for v, p in zip(r['ours_runs'], r['ours_others_pct']))} | "
                  f"{', '.join(mark(v, p) for v, p in zip(r['anchor_runs'], r['anchor_others_pct']))} | "
                  f"{', '.join(ratio_mark(v, m) for v, m in zip(r['round_ratios'], mixed_flags(r)))} |")
    with open(os.path.join(outdir, name + ".md"), "w") as f:
        f.write("\n".join(md) + "\n")
    sys.stdout.write(text)


def summary_npvia(outdir, row, targets):
    """The rows and targets of (d): NPopenmpi on viastack vs NPopenmpi on Open MPI (shm)."""
    anchor = "NetPIPE NPopenmpi, Open MPI ob1 + vader (same binary)"
    for key, metric, unit, tag, nbytes, field, better, text, ok in (
            ("np_lat8", "NPopenmpi on viastack: 8 B one-way latency", "us", "8", 8, "lat_us", "lower",
             "NPopenmpi on viastack: 8 B latency <= 1.2 x on Open MPI", lambda x: x <= 1.2),
            ("np_bw1m", "NPopenmpi on viastack: 1 MiB ping-pong bandwidth", "MB/s", "1M", 1048576, "bw_MBps",
             "higher", "NPopenmpi on viastack: 1 MiB bandwidth >= 0.9 x on Open MPI", lambda x: x >= 0.9),
            ("np_bw4m", "NPopenmpi on viastack: 4 MiB ping-pong bandwidth", "MB/s", "4M", 4194304, "bw_MBps",
             "higher", "NPopenmpi on viastack: 4 MiB bandwidth >= 0.9 x on Open MPI", lambda x: x >= 0.9)):
        target_text = ("ours <= 1.2 x anchor" if better == "lower" else "ours >= 0.9 x anchor")
        r = row(key, metric, unit,
                runs(outdir, f"r*_npvia_{tag}.out", netpipe_at(nbytes, field)),
                anchor, runs(outdir, f"r*_netpipe_{tag}.out", netpipe_at(nbytes, field)),
                better, target_text)
        ratio = r["ratio_ours_over_anchor"]
        targets[key] = {"text": text, "met": None if ratio is None else ok(ratio)}


def summary_tcp(outdir, row, rows, targets):
    """The rows and targets of benchmarks/compare --provider tcp (issue 3)."""
    # compare --veth writes the path into machine.txt's provider line
    with open(os.path.join(outdir, "machine.txt"), errors="replace") as f:
        across_veth = any(line.startswith("provider: tcp") and "veth" in line for line in f)
    nptcp = "NetPIPE NPtcp, kernel TCP " + ("across veth" if across_veth else "over 127.0.0.1")
    lat = row("lat8_ucx", "8 B one-way latency", "us",
              runs(outdir, "r*_viastack_lat_8.json", ours("lat_us")),
              "ucx_perftest tag_lat, UCX_TLS=tcp,self (overall)",
              runs(outdir, "r*_ucx_tag_lat_8.txt", ucx_field("tag_lat", 8, "lat_us")),
              "lower", "ours <= 1.0 x anchor")
    row("lat8_fi", "8 B one-way latency", "us",
        (lat["ours_runs"], lat["ours_others_pct"]),
        "fi_pingpong -p tcp -e msg (usec/xfer, one-way)",
        runs(outdir, "r*_fi_pingpong_8.txt", fi_field("lat_us")), "lower", "ours <= 1.0 x anchor")
    row("lat8_np", "8 B one-way latency", "us",
        (lat["ours_runs"], lat["ours_others_pct"]),
        nptcp,
        runs(outdir, "r*_nptcp_8.out", netpipe_at(8, "lat_us")), "lower")
    row("bw1m_np", "1 MiB streaming (ours) vs NPtcp ping-pong", "MB/s",
        runs(outdir, "r*_viastack_bw_1M.json", ours("bw_MBps")),
        nptcp,
        runs(outdir, "r*_nptcp_1M.out", netpipe_at(1048576, "bw_MBps")),
        "higher", "ours >= 1.0 x anchor")
    row("pp1m_np", "1 MiB ping-pong bandwidth (bytes / one-way time)", "MB/s",
        runs(outdir, "r*_viastack_pingpong_1M.json", ours("bw_MBps")),
        nptcp,
        runs(outdir, "r*_nptcp_1M.out", netpipe_at(1048576, "bw_MBps")), "higher")
    for tag, nbytes in (("64K", 65536), ("4M", 4194304)):
        row(f"bw{tag.lower()}_np", f"{tag[:-1]} {tag[-1]}iB streaming (ours) vs NPtcp ping-pong", "MB/s",
            runs(outdir, f"r*_viastack_bw_{tag}.json", ours("bw_MBps")),
            nptcp,
            runs(outdir, f"r*_nptcp_{tag}.out", netpipe_at(nbytes, "bw_MBps")),
            "higher", "ours >= 1.0 x anchor")

    def target(key, text, r, ok):
        ratio = r["ratio_ours_over_anchor"]
        targets[key] = {"text": text, "met": None if ratio is None else ok(ratio)}

    target("lat8_ucx", "8 B one-way latency <= 1.0 x ucx_perftest tag_lat (tcp,self), overall",
           rows[0], lambda x: x <= 1.0)
    target("lat8_fi", "8 B one-way latency <= 1.0 x fi_pingpong -p tcp -e msg", rows[1], lambda x: x <= 1.0)
    target("bw1m", "1 MiB bandwidth (streaming) >= 1.0 x NPtcp", rows[3], lambda x: x >= 1.0)
    target("bw64k", "64 KiB bandwidth (streaming) >= 1.0 x NPtcp", rows[5], lambda x: x >= 1.0)
    target("bw4m", "4 MiB bandwidth (streaming) >= 1.0 x NPtcp", rows[6], lambda x: x >= 1.0)
    target("pp1m", "1 MiB bandwidth (ping-pong, same method as NPtcp) >= 0.8 x NPtcp",
           rows[4], lambda x: x >= 0.8)


def n_half(points, half=None):
    """As bench::n_half (benchmarks/bench_util.hpp): the size at which a sweep
    [(bytes, bw_MBps)] first reaches half of its peak (or the bandwidth `half`),
    interpolated linearly in log2(size); the smallest size if that already
    does; None without points or if it never does."""
    pts = sorted((b, w) for b, w in points if b > 0 and w is not None)
    if not pts:
        return None
    if half is None:
        half = max(w for _, w in pts) / 2
    for i, (b1, w1) in enumerate(pts):
        if w1 < half:
            continue
        if i == 0:
            return float(b1)
        b0, w0 = pts[i - 1]
        t = (half - w0) / (w1 - w0)
        return 2 ** (math.log2(b0) + t * (math.log2(b1) - math.log2(b0)))
    return None


def ucx_sweep(outdir, rep):
    """ucx_perftest tag_bw's N-half sweep of one repetition: [(bytes, record)], and the
    largest share of the CPUs other processes used during one of its runs."""
    points, worst = [], None
    for path in glob.glob(os.path.join(outdir, "raw", f"r{rep}_ucxnhalf_*.txt")):
        nbytes = int(re.search(r"_(\d+)\.txt$", path).group(1))
        rec = parse_ucx(path, "tag_bw", nbytes)
        if rec:
            points.append((nbytes, rec))
        pct = others_pct(path)
        if pct is not None:
            worst = pct if worst is None else max(worst, pct)
    return sorted(points, key=lambda p: p[0]), worst


def ucx_nhalf_runs(outdir):
    vals, others = [], []
    for rep in rounds(outdir):
        points, worst = ucx_sweep(outdir, rep)
        vals.append(n_half([(b, r["bw_MBps"]) for b, r in points]))
        others.append(worst)
    return vals, others


def bw_sweep(path):
    """[(bytes, bw_MBps)] of a --nhalf sweep's records (mpi_pingpong, via_pingpong, am_bench)."""
    return [(r["bytes"], r["bw_MBps"]) for r in read_jsonl(path) if "bytes" in r and "bw_MBps" in r]


def sweep_runs(outdir, pattern):
    """The bandwidth sweeps of every round (None for a missing one), and the others' share of the CPUs in each."""
    return runs(outdir, pattern, bw_sweep)


def ucx_sweep_runs(outdir):
    return [[(b, r["bw_MBps"]) for b, r in ucx_sweep(outdir, rep)[0]]
            for rep in rounds(outdir)]


def n_at_anchor_half(ours_sweeps, anchor_sweeps):
    """Round by round, the size at which our sweep reaches half of the anchor's
    peak: N-half taken against each library's own peak penalises the one with
    the higher peak, this does not."""
    vals = []
    for mine, theirs in zip(ours_sweeps, anchor_sweeps):
        peak = max((w for _, w in theirs or [] if w is not None), default=None)
        vals.append(n_half(mine, peak / 2) if mine and peak else None)
    return vals


def ours_at(nbytes, field):
    """A field of the line for one size in a file of our JSON lines."""
    def extract(path):
        for rec in read_jsonl(path):
            if rec.get("bytes") == nbytes and field in rec:
                return rec[field]
        return None
    return extract


def scaled(values_others, factor):
    vals, others = values_others
    return [None if v is None else v * factor for v in vals], others


def size_text(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def ratecold(outdir, provider="shm"):
    """(e): message rate, N-half and cold buffers -> OUTDIR/ratecold.{txt,md,json} and,
    with shm, OUTDIR/threshold.{txt,md}: CMA against the rings, warm and cold."""
    rows, targets = [], {}
    row = row_adder(rows)
    ucx_tls = "tcp,self" if provider == "tcp" else "posix,self"
    ompi_btl = "tcp" if provider == "tcp" else "vader"
    ompi = f"mpi_pingpong --mode rate on Open MPI (ob1 + {ompi_btl}), window 64"
    via_rate = runs(outdir, "r*_via_rate_8.json", ours("msg_rate_Mps"))
    ucx_rate = scaled(runs(outdir, "r*_ucx_tag_bw_8.txt", ucx_field("tag_bw", 8, "msg_rate")), 1e-6)
    ompi_rate = runs(outdir, "r*_ompi_rate_8.json", ours("msg_rate_Mps"))
    rate_rows = [
        row("rate_via_ucx", "8 B message rate: raw VIA (window 64)", "M/s", via_rate,
            f"ucx_perftest tag_bw, UCX_TLS={ucx_tls} (overall)", ucx_rate, "higher", "ours >= anchor"),
        row("rate_via_ompi", "8 B message rate: raw VIA (window 64)", "M/s", via_rate, ompi, ompi_rate,
            "higher", "ours >= anchor"),
        row("rate_am_ucx", "8 B message rate: AM (one-way requests, depth 32)", "M/s",
            runs(outdir, "r*_am_rate_8.json", ours("msg_rate_Mps")),
            f"ucx_perftest ucp_am_bw, UCX_TLS={ucx_tls} (overall)",
            scaled(runs(outdir, "r*_ucx_ucp_am_bw_8.txt", ucx_field("ucp_am_bw", 8, "msg_rate")), 1e-6),
            "higher", "ours >= anchor"),
        row("rate_mpi_ompi", "8 B message rate: MPI (mpi_pingpong, window 64)", "M/s",
            runs(outdir, "r*_mpivia_rate_8.json", ours("msg_rate_Mps")), ompi, ompi_rate, "higher", "ours >= anchor"),
    ]
    via_nhalf = runs(outdir, "r*_via_nhalf.json", ours("nhalf_bytes"))
    ompi_nhalf = runs(outdir, "r*_ompi_nhalf.json", ours("nhalf_bytes"))
    ompi_bw = f"mpi_pingpong --mode bw --nhalf on Open MPI (ob1 + {ompi_btl})"
    ucx_bw = f"ucx_perftest tag_bw sweep, UCX_TLS={'tcp,self' if provider == 'tcp' else 'posix,self,cma'}"
    nhalf_rows = [
        row("nhalf_via_ucx", "N-half: raw VIA streaming (window 64)", "B", via_nhalf, ucx_bw, ucx_nhalf_runs(outdir),
            "lower", "ours <= anchor"),
        row("nhalf_via_ompi", "N-half: raw VIA streaming (window 64)", "B", via_nhalf, ompi_bw, ompi_nhalf,
            "lower", "ours <= anchor"),
        row("nhalf_am_ucx", "N-half: AM stores (32 in flight)", "B",
            runs(outdir, "r*_am_nhalf.json", ours("nhalf_bytes")), ucx_bw, ucx_nhalf_runs(outdir), "lower"),
        row("nhalf_mpi_ompi", "N-half: MPI streaming (window 64)", "B",
            runs(outdir, "r*_mpivia_nhalf.json", ours("nhalf_bytes")), ompi_bw, ompi_nhalf,
            "lower", "ours <= anchor"),
    ]
    # The same sweeps, judged at the anchor's half peak (no target: the N-half is against each one's own peak).
    ompi_sweeps, ucx_sweeps = sweep_runs(outdir, "r*_ompi_nhalf.json")[0], ucx_sweep_runs(outdir)
    for key, metric, pattern, anchor, anchor_runs, anchor_sweeps in (
            ("nhalfat_via_ucx", "raw VIA streaming", "r*_via_nhalf.json", ucx_bw, ucx_nhalf_runs(outdir), ucx_sweeps),
            ("nhalfat_am_ucx", "AM stores", "r*_am_nhalf.json", ucx_bw, ucx_nhalf_runs(outdir), ucx_sweeps),
            ("nhalfat_mpi_ompi", "MPI streaming", "r*_mpivia_nhalf.json", ompi_bw, ompi_nhalf, ompi_sweeps)):
        sweeps, others = sweep_runs(outdir, pattern)
        row(key, f"size reaching the anchor's half peak: {metric}", "B", (n_at_anchor_half(sweeps, anchor_sweeps), others),
            anchor + " (its N-half)", anchor_runs, "lower")
    peaks = [f"  peak bandwidth of the N-half sweeps (MB/s, median of runs): "
             f"raw VIA {fmt(med(runs(outdir, 'r*_via_nhalf.json', ours('peak_bw_MBps'))[0]))}, "
             f"AM {fmt(med(runs(outdir, 'r*_am_nhalf.json', ours('peak_bw_MBps'))[0]))}, "
             f"MPI {fmt(med(runs(outdir, 'r*_mpivia_nhalf.json', ours('peak_bw_MBps'))[0]))}, "
             f"Open MPI {fmt(med(runs(outdir, 'r*_ompi_nhalf.json', ours('peak_bw_MBps'))[0]))}"]
    for r in rate_rows + nhalf_rows:
        if r["target"]:
            ratio = r["ratio_ours_over_anchor"]
            met = None if ratio is None else ratio >= 1.0 if r["better"] == "higher" else ratio <= 1.0
            targets[r["key"]] = {"text": f"{r['metric']} {'>=' if r['better'] == 'higher' else '<='} "
                                         f"{r['anchor']}", "met": met}

    cold_sizes = sorted({int(m.group(1)) for p in glob.glob(os.path.join(outdir, "raw", "r*_npwarm_*.out"))
                         if (m := re.search(r"_(\d+)\.out$", p))} |
                        {rec["bytes"] for p in glob.glob(os.path.join(outdir, "raw", "r*_via_lat_cma_cold.json"))
                         for rec in read_jsonl(p)})
    for s in cold_sizes:
        for temp, np_file, np_text in (("cold", "npcold", "NetPIPE NPopenmpi -I (cache invalidation)"),
                                       ("warm", "npwarm", "NetPIPE NPopenmpi")):
            anchor_runs = runs(outdir, f"r*_{np_file}_{s}.out", netpipe_at(s, "bw_MBps"))
            best = []  # the faster of CMA and the rings, run by run
            cma = runs(outdir, f"r*_via_lat_cma_{temp}.json", ours_at(s, "bw_MBps"))
            ring = runs(outdir, f"r*_via_lat_ring_{temp}.json", ours_at(s, "bw_MBps"))
            for c, g in zip(cma[0], ring[0]):
                best.append(max(v for v in (c, g, -1) if v is not None) if (c, g) != (None, None) else None)
            row(f"pp_{temp}_{s >> 10}k", f"{size_text(s)} ping-pong, {temp}: faster of CMA and rings", "MB/s",
                (best, [max((p for p in pq if p is not None), default=None) for pq in zip(cma[1], ring[1])]),
                np_text if anchor_runs[0] else np_text + " (none: -I stops at 8 MiB)", anchor_runs, "higher")
    write_tables(outdir, "ratecold", rows, targets, peaks, metric_width=56)

    if cold_sizes:
        # The single-copy threshold: CMA (at every size) against the rings.
        trows = []
        trow = row_adder(trows)
        for s in cold_sizes:
            for mode, mode_text in (("bw", "streaming"), ("lat", "ping-pong")):
                for temp in ("warm", "cold"):
                    trow(f"{mode}_{temp}_{s >> 10}k", f"{size_text(s)} {mode_text}, {temp}: CMA", "MB/s",
                         runs(outdir, f"r*_via_{mode}_cma_{temp}.json", ours_at(s, "bw_MBps")),
                         "viastack, rings only (VIASTACK_SHM_CMA=0)",
                         runs(outdir, f"r*_via_{mode}_ring_{temp}.json", ours_at(s, "bw_MBps")), "higher")
        pays = [s for s in cold_sizes
                if all(r["ratio_ours_over_anchor"] is not None and r["ratio_ours_over_anchor"] >= 1.0
                       for r in trows if r["key"].endswith(f"_{s >> 10}k"))]
        from_size = next((s for s in cold_sizes if all(t in pays for t in cold_sizes if t >= s)), None)
        print()
        note = ("  CMA at least as fast as the rings warm and cold, streaming and ping-pong, from "
                f"{size_text(from_size)} up" if from_size else
                "  CMA is not at least as fast as the rings in all four conditions at any size up to the largest")
        write_tables(outdir, "threshold", trows, {}, [note], metric_width=40)
    with open(os.path.join(outdir, "ratecold.json"), "w") as f:
        json.dump({"outdir": os.path.abspath(outdir), "rows": rows, "targets": targets}, f, indent=2)


def sweep_jsonl(outdir, rep, kind):
    """JSON lines for plot_pingpong: ucx_perftest tag_bw's N-half sweep, or NetPIPE's
    cold and warm runs of (e), of one repetition."""
    if kind == "ucxsweep":
        points, _ = ucx_sweep(outdir, rep)
        return [rec for _, rec in points]
    out = []
    for np_file, label in (("npcold", "netpipe_cold"), ("npwarm", "netpipe_warm")):
        for path in glob.glob(os.path.join(outdir, "raw", f"r{rep}_{np_file}_*.out")):
            out += [dict(rec, label=label) for rec in parse_netpipe(path)]
    return sorted(out, key=lambda r: (r["label"], r["bytes"]))


def main(argv):
    if len(argv) >= 3 and argv[1] == "netpipe":
        for r in parse_netpipe(argv[2]):
            print(json.dumps(r))
    elif len(argv) >= 5 and argv[1] == "ucx":
        r = parse_ucx(argv[2], argv[3], argv[4])
        if r is None:
            return 1
        print(json.dumps(r))
    elif len(argv) >= 3 and argv[1] == "fipingpong":
        r = parse_fipingpong(argv[2])
        if r is None:
            return 1
        print(json.dumps(r))
    elif len(argv) >= 3 and argv[1] == "summary":
        summary(argv[2], argv[3] if len(argv) >= 4 else "shm")
    elif len(argv) >= 3 and argv[1] == "ratecold":
        ratecold(argv[2], argv[3] if len(argv) >= 4 else "shm")
    elif len(argv) >= 4 and argv[1] in ("ucxsweep", "npcold"):
        recs = sweep_jsonl(argv[2], int(argv[3]), argv[1])
        for r in recs:
            print(json.dumps(r))
        return 0 if recs else 1
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
