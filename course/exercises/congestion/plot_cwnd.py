#!/usr/bin/env python3
"""plot_cwnd.py: cwnd over time from utcp's cwnd traces, one line per trace.

    plot_cwnd.py [-o cwnd.svg] TRACE.csv [TRACE.csv ...]

Each TRACE is what csv_congestion_trace writes (the harness's --trace):
time_us,cwnd,ssthresh,state. Draws cwnd (in segments of --mss bytes, 1448 by
default) against time in ms, a step at each sample, and prints a summary of
each trace (mean cwnd over time, largest cwnd, reductions). With matplotlib
the plot is drawn by it (PNG or SVG after -o's suffix); without, an SVG is
written by hand, so that nothing beyond Python 3 is needed. The label of a
trace is its file name without ".csv" (or LABEL=FILE).
"""
import argparse
import csv
import os
import sys

STATES = ("slow_start", "congestion_avoidance", "fast_recovery", "timeout_recovery")
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def read_trace(path):
    """[(time_ms, cwnd_bytes, ssthresh_bytes, state)], or SystemExit naming the fault."""
    samples = []
    try:
        with open(path, newline="") as f:
            rows = csv.reader(f)
            header = next(rows, None)
            if header != ["time_us", "cwnd", "ssthresh", "state"]:
                sys.exit(f"plot_cwnd.py: {path}: not a cwnd trace (the header is {header}, "
                         "not time_us,cwnd,ssthresh,state)")
            for line, row in enumerate(rows, start=2):
                if len(row) != 4 or row[3] not in STATES:
                    sys.exit(f"plot_cwnd.py: {path}:{line}: not a sample: {','.join(row)}")
                samples.append((int(row[0]) / 1000.0, int(row[1]), int(row[2]), row[3]))
    except OSError as e:
        sys.exit(f"plot_cwnd.py: {e}")
    except ValueError as e:
        sys.exit(f"plot_cwnd.py: {path}: {e}")
    if not samples:
        sys.exit(f"plot_cwnd.py: {path}: no samples")
    return samples


def summary(label, samples, mss):
    """Mean cwnd weighted by time, the largest, and how often it entered recovery."""
    weighted = 0.0
    for (t0, cwnd, _, _), (t1, _, _, _) in zip(samples, samples[1:]):
        weighted += cwnd * (t1 - t0)
    duration = samples[-1][0] - samples[0][0]
    mean = weighted / duration if duration > 0 else samples[0][1]
    entered = {state: sum(1 for a, b in zip(samples, samples[1:]) if b[3] == state != a[3])
               for state in ("fast_recovery", "timeout_recovery")}
    return (f"{label}: {duration:.1f} ms, mean cwnd {mean / mss:.1f} segments, largest "
            f"{max(s[1] for s in samples) / mss:.1f}, {entered['fast_recovery']} fast recoveries, "
            f"{entered['timeout_recovery']} timeouts")


def steps(samples, mss):
    """The points of a step plot: cwnd holds until the next sample."""
    points = []
    for i, (t, cwnd, _, _) in enumerate(samples):
        if i:
            points.append((t, points[-1][1]))
        points.append((t, cwnd / mss))
    return points


def plot_matplotlib(traces, mss, output):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for (label, samples), colour in zip(traces, COLOURS):
        xs, ys = zip(*steps(samples, mss))
        ax.plot(xs, ys, label=label, color=colour, linewidth=1)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel(f"cwnd (segments of {mss} bytes)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(output)


def nice_step(span):
    """A tick spacing of 1, 2 or 5 times a power of ten giving 4 to 10 ticks."""
    step = 1.0
    while span / step > 10:
        for factor in (2, 2.5, 2):
            step *= factor
            if span / step <= 10:
                break
    while span / step < 4 and step > 1e-6:
        step /= 2
    return step


def plot_svg(traces, mss, output):
    width, height, left, right, top, bottom = 900, 420, 70, 20, 20, 50
    all_points = [steps(samples, mss) for _, samples in traces]
    x_max = max(p[0] for points in all_points for p in points) or 1.0
    y_max = max(p[1] for points in all_points for p in points) * 1.05 or 1.0

    def x(t):
        return left + t / x_max * (width - left - right)

    def y(v):
        return height - bottom - v / y_max * (height - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for axis_max, position, vertical in ((x_max, x, False), (y_max, y, True)):
        step = nice_step(axis_max)
        value = 0.0
        while value <= axis_max:
            p = position(value)
            if vertical:
                out.append(f'<line x1="{left}" y1="{p:.1f}" x2="{width - right}" y2="{p:.1f}" stroke="#ddd"/>')
                out.append(f'<text x="{left - 6}" y="{p + 4:.1f}" text-anchor="end">{value:g}</text>')
            else:
                out.append(f'<line x1="{p:.1f}" y1="{top}" x2="{p:.1f}" y2="{height - bottom}" stroke="#ddd"/>')
                out.append(f'<text x="{p:.1f}" y="{height - bottom + 16}" text-anchor="middle">{value:g}</text>')
            value += step
    out.append(f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
               'fill="none" stroke="black"/>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">time (ms)</text>')
    out.append(f'<text x="16" y="{(top + height - bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(top + height - bottom) / 2})">cwnd (segments of {mss} bytes)</text>')
    for i, ((label, _), points, colour) in enumerate(zip(traces, all_points, COLOURS)):
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1"/>')
        out.append(f'<line x1="{left + 12}" y1="{top + 16 + 16 * i}" x2="{left + 36}" y2="{top + 16 + 16 * i}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + 42}" y="{top + 20 + 16 * i}">{label}</text>')
    out.append("</svg>")
    with open(output, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+", metavar="[LABEL=]TRACE.csv")
    parser.add_argument("-o", "--output", default="cwnd.svg", help="the plot (default cwnd.svg)")
    parser.add_argument("--mss", type=int, default=1448, help="bytes in a segment (default 1448)")
    parser.add_argument("--svg", action="store_true", help="write the SVG by hand even if matplotlib is there")
    args = parser.parse_args()
    if args.mss <= 0:
        parser.error("--mss must be positive")
    if len(args.traces) > len(COLOURS):
        parser.error(f"at most {len(COLOURS)} traces")
    traces = []
    for argument in args.traces:
        label, _, path = argument.rpartition("=")
        traces.append((label or os.path.basename(path).removesuffix(".csv"), read_trace(path)))
    for label, samples in traces:
        print(summary(label, samples, args.mss))
    try:
        if args.svg:
            raise ImportError
        plot_matplotlib(traces, args.mss, args.output)
        how = "matplotlib"
    except ImportError:
        if not args.output.endswith(".svg"):
            sys.exit("plot_cwnd.py: without matplotlib only an SVG can be written (-o FILE.svg)")
        plot_svg(traces, args.mss, args.output)
        how = "an SVG written by hand (no matplotlib)"
    print(f"plot_cwnd.py: wrote {args.output} with {how}")


if __name__ == "__main__":
    main()
