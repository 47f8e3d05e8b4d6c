"""Terminal lines for a run's roofline and advice (`summarize`, `compare`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from profiler.analysis.insight import Insight
from profiler.analysis.records import plain
from profiler.analysis.roofline import MIN_BYTES_LABEL, Roofline
from profiler.report.advice_view import advice_record, line
from profiler.report.console import print_prose
from profiler.report.fmt import (
    count,
    number,
    percent,
    rate,
    size,
    time,
)


def roofline_line(r: Roofline | None, missing: str | None = None) -> str:
    if r is None:
        return missing or "no roofline (result.json has no roofline_inputs)"
    if r.peak_tflops is None and r.peak_gbs is None:  # no roof to draw it against
        return (
            f"none drawn (no compute or bandwidth ceilings for this device; "
            f"`profile.py peaks` measures them): {number(r.flops / 1e9)} GFLOP and "
            f"{size(r.min_bytes, unit='MB')} {MIN_BYTES_LABEL} per batch, "
            f"{rate(r.achieved_tflops, 'TFLOP/s', 2)} in "
            f"{time(r.seconds, 's', 'ms', thousands=False)} (timed p50)"
        )

    return (
        f"{number(r.flops / 1e9)} GFLOP and {size(r.min_bytes, unit='MB')} {MIN_BYTES_LABEL} "
        f"per batch in {time(r.seconds, 's', 'ms', thousands=False)} (timed p50): "
        f"{rate(r.achieved_tflops, 'TFLOP/s', 2)}"
        f" = {percent(r.pct_of_compute, blank='n/a')} of {r.matmul_key} peak, at least "
        f"{rate(r.achieved_gbs, 'GB/s')} = at least {percent(r.pct_of_bandwidth, blank='n/a')} "
        "of bandwidth, "
        f"intensity {count(r.intensity, 0)} FLOP per minimum byte ({r.bound}-bound by the "
        "roofline)"
    )


def to_dict(found: Insight) -> dict[str, Any]:
    """The insight as --json's summarize document holds it (JSON values)."""
    return {
        "roofline": found.roofline.to_dict() if found.roofline else None,
        "ceilings": found.ceilings_source,
        "advice": plain([advice_record(a) for a in found.advice]),
    }


def print_insight(found: Insight, console: Console, label: str = "") -> None:
    prefix = f"{label}: " if label else ""
    roof = roofline_line(found.roofline, found.roofline_missing)
    print_prose(
        console,
        f"[b]{escape(prefix)}Roofline[/b] ({escape(found.ceilings_source)}): {escape(roof)}",
    )
    for a in found.advice:
        print_prose(console, f"[b]{escape(prefix)}Advice[/b] {escape(line(a))}")
    if not found.advice:
        console.print(f"[b]{escape(prefix)}Advice[/b]: no rule fired", highlight=False)
