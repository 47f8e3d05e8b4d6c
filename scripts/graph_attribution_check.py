#!/usr/bin/env python3
"""Check CUDA graph attribution (profiler/trace/graphs.py) against an eager run of the same step.

The same kernel names should carry the same operator in both; each operator's kernel time per
step should agree within the kernels' own run-to-run spread (a graph removes launch gaps, which
kernel time does not count). Compares the kernels launched inside one phase's spans ("decode" by
default) of an eager trace and of a graph run's trace with its graph_captures.json.

    python scripts/graph_attribution_check.py EAGER_TRACE GRAPH_RUN [--phase decode] [--top 20]

GRAPH_RUN: a run folder with graph_captures.json (its trace is the one summarize takes), or a
trace file with --captures FILE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiler.analysis.run_analysis import RunAnalysis  # noqa: E402
from profiler.trace import graphs  # noqa: E402
from profiler.trace.kernels import kernel_rows  # noqa: E402
from profiler.trace.load import Trace, load_trace  # noqa: E402
from profiler.trace.phase_kernels import attribute, launch_times, phase_spans  # noqa: E402


def phase_rows(trace: Trace, phase: str) -> tuple[Trace, pd.DataFrame, int]:
    """The kernel rows launched inside ``phase``'s spans, and how many spans."""
    spans = phase_spans(trace, [phase])
    rows = kernel_rows(trace)
    owner = attribute(spans, launch_times(trace, rows))
    return trace, rows[owner >= 0], len(spans)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eager", type=Path)
    parser.add_argument("graph", type=Path)
    parser.add_argument("--captures", type=Path, help="graph_captures.json for a bare trace")
    parser.add_argument("--phase", default="decode")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    if args.captures is not None:
        graphed = load_trace(args.graph)
        graphs.attach(graphed, graphs.read_captures(args.captures))
    else:
        graphed = RunAnalysis(args.graph).trace  # attaches the run's graph_captures.json
    found = graphs.agreement(
        phase_rows(load_trace(args.eager), args.phase), phase_rows(graphed, args.phase)
    )
    summary = graphs.graph_summary(graphed)
    if summary is not None:
        print(graphs.graph_note(summary))
    print(
        f"{args.phase}: {found.eager_steps} eager steps, {found.graph_steps} replayed steps; "
        f"{100 * found.agreeing_share:.2f} % of the replayed kernel time carries the operator "
        "that the same kernel name has in the eager run"
    )
    disagree = found.kernels[~found.kernels["agrees"]]
    if len(disagree):
        print("kernels whose operator differs (graph vs eager):")
        for r in disagree.itertuples():
            print(
                f"  {r.graph_us_per_step:9.2f} µs/step  {r.graph_operator} vs "
                f"{r.eager_operator}  {r.kernel[:90]}"
            )
    print(f"kernel time per {args.phase} step, by operator (µs; ratio graph / eager):")
    print(f"  {'operator':40s} {'eager':>10s} {'graph':>10s} {'ratio':>7s}")
    for r in found.operators.head(args.top).itertuples():
        print(
            f"  {r.operator[:40]:40s} {r.eager_us_per_step:10.2f} {r.graph_us_per_step:10.2f} "
            f"{r.ratio:7.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
