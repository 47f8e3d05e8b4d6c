"""The `compare` command behind the CLI: two targets -> Diff -> terminal tables and CSVs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..trace.diff import BOTH, ONLY_A, ONLY_B, Diff, diff
from ..trace.summary import Summary, resolve_target
from .console import make_console
from .export import write_atomic
from .fmt import head, missing


def load_side(target: str) -> tuple[Summary, dict | None]:
    """Summary of a target's trace, and its run's result.json when the target is a run."""
    resolved = resolve_target(target)
    if resolved.note:
        print(f"{target}: {resolved.note}", file=sys.stderr)
    result = None
    if resolved.result_json is not None:
        try:
            result = json.loads(resolved.result_json.read_text())
        except (OSError, ValueError):
            result = None
    return resolved.summary(), result


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


def timed_rows(ra: dict | None, rb: dict | None) -> pd.DataFrame:
    """The timed window's p50 and throughput from both result.json files (not from the trace,
    whose steps ran under the profiler)."""
    if not ra or not rb or "timing" not in ra or "timing" not in rb:
        return pd.DataFrame()
    rows = []
    for key, metric, unit in (("p50_ms", "timed p50 latency (result.json)", "ms"),
                              ("throughput_samples_per_s", "timed throughput (result.json)",
                               "samples/s")):
        x, y = ra["timing"].get(key), rb["timing"].get(key)
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
        write_atomic(out / name, frame.to_csv(index=False))
        written.append(out / name)
    return written


# ---- terminal ------------------------------------------------------------------------------

def _v(value, unit: str = "") -> str:
    if missing(value):
        return "-"
    if unit == "µs":
        return _us(value)
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "ms":
        return f"{value:.3f} ms"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _us(value: float) -> str:
    if abs(value) >= 1e3:
        return f"{value / 1e3:,.3f} ms"
    return f"{value:,.1f} µs"


def _signed(value, unit: str = "µs") -> str:
    if missing(value):
        return "-"
    text = _v(abs(value), unit)
    if unit == "%":
        text = text.replace(" %", " pt")
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    colour = "red" if value > 0 else "green" if value < 0 else ""
    return f"[{colour}]{sign}{text}[/]" if colour else f"{sign}{text}"


def _pct(value) -> str:
    if missing(value):
        return "-"
    return f"{value:+.1f} %"


def _side_name(label: str, summary: Summary) -> str:
    device = summary.devices[0]["name"] if summary.devices else "no GPU"
    return f"{label} ({device}; {summary.trace_path.name})"


def print_diff(result: Diff, sa: Summary, sb: Summary, top: int, console: Console) -> None:
    console.print(f"[b]A[/b] = {escape(_side_name(result.a_label, sa))}", highlight=False)
    console.print(f"[b]B[/b] = {escape(_side_name(result.b_label, sb))}", highlight=False)
    console.print("times are per profiled step; delta = B - A ([green]-[/] B faster, "
                  "[red]+[/] B slower)", highlight=False)
    console.print(overview_table(result))
    console.print(categories_table(result))
    if result.shared_kernels:
        console.print(kernels_table(result, top))
    for side in (ONLY_A, ONLY_B):
        console.print(unmatched_table(result, side, top))
    console.print(operators_table(result, top))
    if sa.phases is not None and sb.phases is not None:
        from .phases_view import compare_phases_table, compare_positions_table

        console.print(compare_phases_table(sa.phases, sb.phases))
        console.print(compare_positions_table(sa.phases, sb.phases, top=top))
    faster, slower = result.top_changes(top or 10)
    level = result.change_level
    console.print(changes_table(faster, f"Top {len(faster)} gains: {level}s faster in B", level))
    console.print(changes_table(slower, f"Top {len(slower)} losses: {level}s slower in B", level))
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)


def overview_table(result: Diff) -> Table:
    t = Table(title="Overview", title_justify="left")
    for col in ("metric", "A", "B", "delta", "change"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in result.overview.itertuples():
        t.add_row(r.metric, _v(r.a, r.unit), _v(r.b, r.unit),
                  _signed(r.delta, r.unit or "n"), _pct(r.change_pct))
    return t


def categories_table(result: Diff) -> Table:
    t = Table(title="Kernel time by category (per step)", title_justify="left")
    for col in ("category", "A", "B", "delta", "change", "share A", "share B",
                "Tensor Cores A", "Tensor Cores B"):
        t.add_column(col, justify="left" if col == "category" else "right")
    c = result.categories
    for r in c.itertuples():
        t.add_row(r.category, _us(r.us_a), _us(r.us_b), _signed(r.delta_us), _pct(r.change_pct),
                  _v(r.share_a_pct, "%"), _v(r.share_b_pct, "%"), _v(r.tensor_core_a_pct, "%"),
                  _v(r.tensor_core_b_pct, "%"))
    t.add_row("[b]all[/b]", _us(c["us_a"].sum()), _us(c["us_b"].sum()),
              _signed(float(c["delta_us"].sum())), "", "", "", "", "")
    return t


def kernels_table(result: Diff, top: int) -> Table:
    matched = result.kernels[result.kernels["side"] == BOTH]
    shown = head(matched, top)
    t = Table(title=f"Kernels in both runs, matched by full name ({len(shown)} of "
                    f"{len(matched)} by |delta|)", title_justify="left")
    t.add_column("kernel (short name; full name in --out)", no_wrap=True, overflow="ellipsis",
                 max_width=60)
    for col in ("category", "calls A", "calls B", "A", "B", "delta", "change"):
        t.add_column(col, justify="left" if col == "category" else "right")
    for r in shown.itertuples():
        t.add_row(escape(r.kernel), r.category, _v(r.calls_a), _v(r.calls_b), _us(r.us_a),
                  _us(r.us_b), _signed(r.delta_us), _pct(r.change_pct))
    return t


def unmatched_table(result: Diff, side: str, top: int) -> Table:
    rows = result.kernels[result.kernels["side"] == side]
    column = "us_a" if side == ONLY_A else "us_b"
    calls = "calls_a" if side == ONLY_A else "calls_b"
    rows = rows.sort_values(column, ascending=False, kind="stable")
    shown = head(rows, top)
    which = "A" if side == ONLY_A else "B"
    t = Table(title=f"Kernels only in {which}: {len(rows)} kernels, {_us(rows[column].sum())} "
                    f"per step (top {len(shown)})", title_justify="left")
    t.add_column("kernel", no_wrap=True, overflow="ellipsis", max_width=70)
    for col in ("category", "Tensor Cores", "calls", "time"):
        t.add_column(col, justify="left" if col in ("category", "Tensor Cores") else "right")
    for r in shown.itertuples():
        t.add_row(escape(r.kernel), r.category, r.tensor_core, _v(getattr(r, calls)),
                  _us(getattr(r, column)))
    return t


def operators_table(result: Diff, top: int) -> Table:
    ops = result.operators
    shown = head(ops, top)
    t = Table(title=f"Kernel time by launching operator, per step ({len(shown)} of {len(ops)} "
                    "by |delta|)", title_justify="left")
    t.add_column("operator", no_wrap=True, overflow="ellipsis", max_width=60)
    for col in ("in", "kernels A", "kernels B", "A", "B", "delta", "change"):
        t.add_column(col, justify="left" if col == "in" else "right")
    for r in shown.itertuples():
        t.add_row(escape(r.operator), r.side, _v(r.kernels_a), _v(r.kernels_b), _us(r.us_a),
                  _us(r.us_b), _signed(r.delta_us), _pct(r.change_pct))
    return t


def changes_table(frame: pd.DataFrame, title: str, level: str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column(level, no_wrap=True, overflow="ellipsis", max_width=70)
    for col in ("in", "A", "B", "delta"):
        t.add_column(col, justify="left" if col == "in" else "right")
    name = "kernel" if level == "kernel" else "operator"
    for r in frame.itertuples():
        t.add_row(escape(getattr(r, name)), r.side, _us(r.us_a), _us(r.us_b),
                  _signed(r.delta_us))
    return t
