#!/usr/bin/env python3
"""compare_report.py's ratios are the median of the rounds' ratios: round k
of viastack ran beside round k of the anchor, in the same state of a machine
that changes state between rounds. The ratio of the medians made two equal
programs look 3x apart when the slow state fell on more of one's rounds."""
import json
import os
import subprocess
import sys
import tempfile

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare_report.py")


def report_with_states(outdir, rates, handoffs):
    """Writes each round's (ours, theirs) 8 B rates and (ours, theirs)
    handoffs; runs the report; returns the Open MPI rate row and what it printed."""
    for k, ((ours, theirs), (ours_h, theirs_h)) in enumerate(zip(rates, handoffs), 1):
        for name, rate, h in (("via_rate_8", ours, ours_h), ("ompi_rate_8", theirs, theirs_h)):
            path = os.path.join(outdir, "raw", f"r{k}_{name}.json")
            with open(path, "w") as f:
                f.write(json.dumps({"bench": "x", "msg_rate_Mps": rate}) + "\n")
            with open(path + ".handoff", "w") as f:
                f.write(h + "\n")
    out = subprocess.run([sys.executable, REPORT, "ratecold", outdir], check=True, capture_output=True,
                         text=True).stdout
    with open(os.path.join(outdir, "ratecold.json")) as f:
        return {r["key"]: r for r in json.load(f)["rows"]}["rate_via_ompi"], out


def main():
    with tempfile.TemporaryDirectory() as outdir:
        raw = os.path.join(outdir, "raw")
        os.mkdir(raw)
        # 8 B message rates (M/s): equal in every round but the first, where
        # viastack ran in the slow state and Open MPI in the fast one.
        rounds = [(10.0, 30.0), (30.0, 30.0), (10.0, 10.0), (10.0, 10.0), (30.0, 30.0)]
        for k, (ours, theirs) in enumerate(rounds, 1):
            for name, rate in (("via_rate_8", ours), ("ompi_rate_8", theirs)):
                with open(os.path.join(raw, f"r{k}_{name}.json"), "w") as f:
                    f.write(json.dumps({"bench": "x", "msg_rate_Mps": rate}) + "\n")
        subprocess.run([sys.executable, REPORT, "ratecold", outdir], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(outdir, "ratecold.json")) as f:
            rows = {r["key"]: r for r in json.load(f)["rows"]}
        row = rows["rate_via_ompi"]
        failures = []
        if row["round_ratios"] != [1 / 3, 1.0, 1.0, 1.0, 1.0]:
            failures.append(f"rounds' ratios {row['round_ratios']}")
        if row["ratio_ours_over_anchor"] != 1.0:  # the medians, 10 against 30, would say 0.33
            failures.append(f"ratio {row['ratio_ours_over_anchor']}, not the median of the rounds' ratios (1.0)")
        if row["ours_median"] != 10.0 or row["anchor_median"] != 30.0:
            failures.append(f"medians {row['ours_median']} / {row['anchor_median']}")
        if rows["rate_via_ucx"]["ratio_ours_over_anchor"] is not None:
            failures.append("a ratio for an anchor with no runs")

        # A round whose anchor left no file (a failed program) pairs with nothing:
        # the later rounds still pair with their own.
        os.remove(os.path.join(raw, "r1_ompi_rate_8.json"))
        subprocess.run([sys.executable, REPORT, "ratecold", outdir], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(outdir, "ratecold.json")) as f:
            row = {r["key"]: r for r in json.load(f)["rows"]}["rate_via_ompi"]
        if row["anchor_runs"] != [None, 30.0, 10.0, 10.0, 30.0] or row["round_ratios"] != [1.0] * 4:
            failures.append(f"with round 1's anchor missing: anchor runs {row['anchor_runs']}, "
                            f"rounds' ratios {row['round_ratios']}")

        # Rounds whose two runs saw different states of the machine (the
        # handoffs compare measured before and after each run more than 1.4x
        # apart) are left out of the ratio: here rounds 1 and 5, where
        # viastack ran slow and Open MPI fast. Round 3 kept one state.
        row, out = report_with_states(
            outdir, [(10.0, 30.0), (30.0, 30.0), (10.0, 30.0), (10.0, 10.0), (10.0, 30.0)],
            [("19 20", "40 39"), ("39 40", "40 41"), ("19 19", "20 19"), ("40 40", "39 40"), ("20 19", "38 40")])
        if row["rounds_mixed_states"] != [True, False, False, False, True]:
            failures.append(f"rounds in mixed states {row['rounds_mixed_states']}")
        if row["ratio_ours_over_anchor"] != 1.0:  # all five rounds' median would say 0.33
            failures.append(f"ratio {row['ratio_ours_over_anchor']} with rounds 1 and 5 in mixed states, not 1.0")
        if "0.33~" not in out:
            failures.append("the rounds in mixed states are not marked in the printed runs")

        # Only two rounds (2 and 4) kept one state: two rounds would decide
        # alone (3.0), so every round's ratio counts (median 1.0).
        row, _ = report_with_states(
            outdir, [(10.0, 30.0), (30.0, 10.0), (10.0, 10.0), (30.0, 10.0), (10.0, 10.0)],
            [("19 20", "40 39"), ("39 40", "40 41"), ("19 19", "40 39"), ("40 40", "39 40"), ("20 19", "38 40")])
        if row["rounds_mixed_states"] != [True, False, True, False, True]:
            failures.append(f"rounds in mixed states {row['rounds_mixed_states']}")
        if row["ratio_ours_over_anchor"] != 1.0:  # rounds 2 and 4 alone would say 3.0
            failures.append(f"ratio {row['ratio_ours_over_anchor']} with two rounds in one state, not 1.0 (all five)")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
