"""Terminal lines for a run's roofline and advice (`summarize`, `compare`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from profiler.analysis.insight import Insight
from profiler.analysis.records import plain
from profiler.analysis.roofline import MIN_BYTES_LABEL, Roofline
from profiler.report.advice_view import advice_record, line
from profiler.report.console import print_prose
from profiler.report.fmt import gbs, megabytes, ms_plain, pct as _pct, tenths, tflops, thousands


def roofline_line(r: Roofline | None, missing: str | None = None) -> str:
    if r is None:
        return missing or "no roofline (result.json has no roofline_inputs)"
    if r.peak_tflops is None and r.peak_gbs is None:  # no roof to draw it against
        return (
            f"none drawn (no compute or bandwidth ceilings for this device; "
            f"`profile.py peaks` measures them): {tenths(r.flops / 1e9)} GFLOP and "
            f"{megabytes(r.min_bytes)} {MIN_BYTES_LABEL} per batch, "
            f"{tflops(r.achieved_tflops)} in {ms_plain(r.seconds * 1e3)} ms (timed p50)"
        )

    def pct(v):
        return _pct(v) if v is not None else "n/a"

    return (
        f"{tenths(r.flops / 1e9)} GFLOP and {megabytes(r.min_bytes)} {MIN_BYTES_LABEL} "
        f"per batch in {ms_plain(r.seconds * 1e3)} ms (timed p50): {tflops(r.achieved_tflops)}"
        f" = {pct(r.pct_of_compute)} of {r.matmul_key} peak, at least "
        f"{gbs(r.achieved_gbs)} = at least {pct(r.pct_of_bandwidth)} of bandwidth, "
        f"intensity {thousands(r.intensity)} FLOP per minimum byte ({r.bound}-bound by the "
        "roofline)"
    )


def to_dict(found: Insight) -> dict:
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
