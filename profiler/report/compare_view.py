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
from ..trace.headline import compare_timed, read_result
from ..trace.rules import SHORT_WIDTH
from ..trace.summary import Summary, _clean, resolve_target
from .console import make_console
from .export import write_table, write_tables
from .fmt import head, missing
from .headline_view import mib


def load_side(target: str) -> tuple[Summary, dict | None, Path | None]:
    """Summary of a target's trace, its run's result.json and run folder when it is a run."""
    resolved = resolve_target(target)
    if resolved.note:
        print(f"{target}: {resolved.note}", file=sys.stderr)
    result = run_dir = None
    if resolved.result_json is not None:
        result = read_result(resolved.result_json)
        run_dir = resolved.result_json.parent
    return resolved.summary(), result, run_dir


def run(a: str, b: str, top: int = 15, out: Path | None = None, json_out: bool = False) -> Diff:
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    (sa, ra, da), (sb, rb, db) = load_side(a), load_side(b)
    result = diff(sa, sb, a_label=a, b_label=b)
    timed_ab = compare_timed(ra, rb, da, db)
    timed = timed_rows(ra, rb)
    if len(timed):
        result.overview = pd.concat([timed, result.overview], ignore_index=True)
    if out is not None:
        written = write_csvs(result, out)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if json_out:
        json.dump(diff_json(result, timed_ab, top), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return result
    console = make_console()
    if timed_ab is not None:
        print_timed_headline(timed_ab, result.a_label, result.b_label, console)
    print_diff(result, sa, sb, top=top, console=console)
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


def print_timed_headline(t: dict, a_label: str, b_label: str, console: Console) -> None:
    """Timed figures of both runs, the speedup, whether it is outside noise, what differs."""
    table = Table(title="Timed window (no profiler attached)", title_justify="left")
    for col in ("metric", "A", "B", "B vs A"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    a, b = t["a"], t["b"]
    for key, label in (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99")):
        table.add_row(f"{label} latency", _v(a[key], "ms"), _v(b[key], "ms"),
                      _pct(100 * (b[key] - a[key]) / a[key]) if a[key] and b[key] else "-")
    key = "throughput_samples_per_s"
    table.add_row("throughput (samples/s)", _v(a[key]), _v(b[key]),
                  _pct(100 * (b[key] - a[key]) / a[key]) if a[key] and b[key] else "-")
    table.add_row("speedup (p50 A / p50 B)", "", "",
                  "-" if t["speedup_x"] is None else f"{t['speedup_x']:.2f}x")
    for side, label in (("noise_a", "CV A"), ("noise_b", "CV B")):
        window = t[side]
        if window:
            table.add_row(label, "", "", f"{100 * window['cv']:.1f} %")
    ma, mb = t["memory_a"], t["memory_b"]
    for key, label in (("peak_allocated_mib", "peak allocated"), ("peak_reserved_mib",
                                                                  "peak reserved"),
                       ("engine_mib", "TensorRT engine memory")):
        if key != "engine_mib" or ma[key] is not None or mb[key] is not None:
            table.add_row(label, mib(ma[key], ma["note"]), mib(mb[key], mb["note"]), "")
    console.print(table)
    ratio = t["p50_ratio"]
    if ratio:
        colour = "green" if ratio["verdict"] == "within noise" else "bold"
        console.print(f"p50 B / A = {ratio['ratio']:.3f}, 95 % interval [{ratio['low']:.3f}, "
                      f"{ratio['high']:.3f}]: [{colour}]{ratio['verdict']}[/] ({ratio['method']})",
                      highlight=False)
    for side, label in (("noise_a", "A"), ("noise_b", "B")):
        for warning in (t[side] or {}).get("warnings") or []:
            console.print(f"[bold yellow]warning ({label}):[/] {escape(warning)}", highlight=False)
    console.print(f"config A: {escape(t['config_a'])}", highlight=False)
    console.print(f"config B: {escape(t['config_b'])}", highlight=False)
    differing = t["differences"]
    diffs = Table(title=f"Config and environment fields that differ ({len(differing)})",
                  title_justify="left")
    for col in ("field", "A", "B"):
        diffs.add_column(col, overflow="fold")
    for row in differing:
        diffs.add_row(escape(row["field"]), escape(str(row["a"])), escape(str(row["b"])))
    console.print(diffs if differing else "config and environment: no field differs")


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
    t.add_column("kernel (short name; full name in --out/--json)", no_wrap=True,
                 min_width=SHORT_WIDTH)
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
    t.add_column("kernel", no_wrap=True, min_width=SHORT_WIDTH)
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
    t.add_column(level, no_wrap=True, min_width=SHORT_WIDTH if level == "kernel" else None,
                 overflow="ellipsis", max_width=None if level == "kernel" else 70)
    for col in ("in", "A", "B", "delta"):
        t.add_column(col, justify="left" if col == "in" else "right")
    name = "kernel" if level == "kernel" else "operator"
    for r in frame.itertuples():
        t.add_row(escape(getattr(r, name)), r.side, _us(r.us_a), _us(r.us_b),
                  _signed(r.delta_us))
    return t
