"""`compare`: two targets -> Diff (with the timed window's rows from result.json) -> CSVs and
terminal tables."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..fsutil import write_text_atomic
from ..report.compare_view import print_diff
from ..report.console import make_console
from ..trace.diff import Diff, diff
from ..runs import RunResult, resolve_target
from ..trace.summary import Summary


def load_side(target: str) -> tuple[Summary, RunResult | None]:
    """Summary of a target's trace, and its run's result when the target is a run."""
    resolved = resolve_target(target)
    if resolved.note:
        print(f"{target}: {resolved.note}", file=sys.stderr)
    return resolved.summary(), resolved.result


def run(a: str, b: str, top: int = 15, out: Path | None = None) -> Diff:
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    (sa, ra), (sb, rb) = load_side(a), load_side(b)
    result = diff(sa, sb, a_label=a, b_label=b)
    timed = timed_rows(ra, rb)
    if len(timed):
        result.overview = pd.concat([timed, result.overview], ignore_index=True)
    if out is not None:
        written = write_csvs(result, out)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    print_diff(result, sa, sb, top=top, console=make_console())
    return result


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
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --out folder {out}: {error.strerror}") from None
    faster, slower = result.top_changes(0)
    changes = pd.concat([faster.assign(direction="faster in B"),
                         slower.assign(direction="slower in B")], ignore_index=True)
    frames = {"overview.csv": result.overview, "categories.csv": result.categories,
              "kernels.csv": result.kernels, "operators.csv": result.operators,
              "top_changes.csv": changes}
    written = []
    for name, frame in frames.items():
        write_text_atomic(out / name, frame.to_csv(index=False))
        written.append(out / name)
    return written
