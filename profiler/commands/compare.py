"""`compare`: two targets -> Diff (with the timed window's rows from result.json) and the timed
headline (profiler.analysis.headline.compare_timed) -> CSVs or Parquet, terminal tables or --json."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from profiler.errors import UserError
from profiler.analysis.headline import compare_timed
from profiler.report.compare_view import print_diff, print_timed_headline
from profiler.report.export import write_table, write_tables
from profiler.report.fmt import head
from profiler.runs.result import RunResult
from profiler.runs.targets import Target, resolve_target
from profiler.trace.diff import Diff, diff
from profiler.trace.summary import _clean
from profiler.analysis.target import summarize_target


def load_side(target: str) -> Target:
    """The resolved target (its trace's Summary via .summary(), its run's result if a run)."""
    resolved = resolve_target(target)
    if resolved.note:
        print(f"{target}: {resolved.note}", file=sys.stderr)
    return resolved


def run(a: str, b: str, top: int = 15, out: Path | None = None, *, sink) -> Diff:
    """``sink``: profiler.cli.output.Output, where the tables or the --json document go."""
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    ta, tb = load_side(a), load_side(b)
    sa, sb = summarize_target(ta), summarize_target(tb)
    result = diff(sa, sb, a_label=a, b_label=b)
    timed_ab = compare_timed(ta.result, tb.result, ta.result_json, tb.result_json)
    timed = timed_rows(ta.result, tb.result)
    if len(timed):
        result.overview = pd.concat([timed, result.overview], ignore_index=True)
    if out is not None:
        written = write_csvs(result, out)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if sink.json:
        sink.document("compare", diff_json(result, timed_ab, top))
        return result
    console = sink.console
    if timed_ab is not None:
        print_timed_headline(timed_ab, console)
    print_diff(result, sa, sb, top=top, console=console)
    print_insights(a, b, sa, sb, console)
    return result


def diff_json(result: Diff, timed_ab: dict | None, top: int) -> dict:
    """The compare as JSON: the timed headline first, then every table (full kernel names)."""
    def records(frame: pd.DataFrame) -> list[dict]:
        return frame.to_dict(orient="records") if len(frame) else []

    faster, slower = result.top_changes(top or 0)
    return _clean({"a": result.a_label, "b": result.b_label, "timed": timed_ab,
                   "overview": records(result.overview),
                   "categories": records(result.categories),
                   "kernels": records(head(result.kernels, top)),
                   "operators": records(head(result.operators, top)),
                   "faster_in_b": records(faster), "slower_in_b": records(slower),
                   "notes": list(result.notes)})


def print_insights(a: str, b: str, sa: Summary, sb: Summary, console) -> None:
    """Roofline and advice of each side that is a run (has result.json)."""
    from profiler.report.insight_view import print_insight
    from profiler.commands.report import insight_of

    for label, target, summary in (("A", a, sa), ("B", b, sb)):
        resolved = resolve_target(target)
        if resolved.result_json is not None:
            print_insight(insight_of(resolved, summary), console, label)


def timed_rows(ra: RunResult | None, rb: RunResult | None) -> pd.DataFrame:
    """The timed window's p50 and throughput from both result.json files (not from the trace,
    whose steps ran under the profiler)."""
    if ra is None or rb is None:
        return pd.DataFrame()
    rows = []
    for key, metric, unit in (("p50_ms", "timed p50 latency (result.json)", "ms"),
                              ("throughput_samples_per_s", "timed throughput (result.json)",
                               "samples/s")):
        x, y = getattr(ra.timing, key), getattr(rb.timing, key)
        if x is not None and y is not None:
            rows.append({"metric": metric, "unit": unit, "a": float(x), "b": float(y),
                         "delta": float(y) - float(x),
                         "change_pct": 100.0 * (y - x) / x if x else float("nan")})
    return pd.DataFrame(rows)


def write_csvs(result: Diff, out: Path) -> list[Path]:
    """The tables as CSVs in the folder ``out``; with ``out`` ending in .parquet, the kernel
    table (the big one, full names) as one Parquet file."""
    if out.suffix == ".parquet":
        return [write_table(out, result.kernels)]
    faster, slower = result.top_changes(0)
    changes = pd.concat([faster.assign(direction="faster in B"),
                         slower.assign(direction="slower in B")], ignore_index=True)
    return write_tables(out, {"overview": result.overview, "categories": result.categories,
                              "kernels": result.kernels, "operators": result.operators,
                              "top_changes": changes})
