"""`compare`: two targets -> a Comparison (profiler.analysis.run: the Diff with the timed window's
rows from result.json, and the timed headline) -> CSVs or Parquet, terminal tables or --json."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from profiler.errors import UserError
from profiler.analysis.run import Comparison, RunAnalysis
from profiler.report.compare_view import print_diff, print_timed_headline
from profiler.report.export import write_table, write_tables
from profiler.report.fmt import head
from profiler.report.insight_view import print_insight
from profiler.trace.diff import Diff
from profiler.trace.summary import json_safe


def load_side(target: str) -> RunAnalysis:
    """One side of the comparison (a note on stderr when the target held several traces)."""
    side = RunAnalysis(target)
    if side.note:
        print(f"{target}: {side.note}", file=sys.stderr)
    return side


def run(a: str, b: str, top: int = 15, out: Path | None = None, *, sink) -> Diff:
    """``sink``: profiler.cli.output.Output, where the tables or the --json document go."""
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    both = Comparison(load_side(a), load_side(b), a, b)
    result, timed_ab = both.diff, both.timed
    if out is not None:
        written = write_csvs(result, out)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if sink.json:
        sink.document("compare", diff_json(result, timed_ab, top))
        return result
    console = sink.console
    if timed_ab is not None:
        print_timed_headline(timed_ab, console)
    print_diff(result, both.a.summary, both.b.summary, top=top, console=console)
    for label, side in (("A", both.a), ("B", both.b)):  # roofline and advice of each run
        if side.result_json is not None:
            print_insight(side.insight, console, label)
    return result


def diff_json(result: Diff, timed_ab: dict | None, top: int) -> dict:
    """The compare as JSON: the timed headline first, then every table (full kernel names)."""
    def records(frame: pd.DataFrame) -> list[dict]:
        return frame.to_dict(orient="records") if len(frame) else []

    faster, slower = result.top_changes(top or 0)
    return json_safe({"a": result.a_label, "b": result.b_label, "timed": timed_ab,
                   "overview": records(result.overview),
                   "categories": records(result.categories),
                   "kernels": records(head(result.kernels, top)),
                   "operators": records(head(result.operators, top)),
                   "faster_in_b": records(faster), "slower_in_b": records(slower),
                   "notes": list(result.notes)})


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
