"""A Diff of two runs as terminal tables, opened by the timed figures of both runs."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.trace.diff import BOTH, ONLY_A, ONLY_B, Diff
from profiler.trace.summary import Summary
from profiler.report.console import FitTable
from profiler.report.fmt import change_pct, head, mib, pct, signed, times, us_fine, with_unit
from profiler.report.phases_view import compare_phases_table, compare_positions_table


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
        console.print(compare_phases_table(sa.phases, sb.phases))
        console.print(compare_positions_table(sa.phases, sb.phases, top=top))
    faster, slower = result.top_changes(top or 10)
    level = result.change_level
    console.print(changes_table(faster, f"Top {len(faster)} gains: {level}s faster in B", level))
    console.print(changes_table(slower, f"Top {len(slower)} losses: {level}s slower in B", level))
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)


def overview_table(result: Diff) -> Table:
    t = FitTable(title="Overview")
    t.add_column("metric")
    for col in ("A", "B", "delta", "change"):
        t.add_column(col, number=True)
    for r in result.overview.itertuples():
        t.add_row(r.metric, with_unit(r.a, r.unit), with_unit(r.b, r.unit),
                  signed(r.delta, r.unit or "n"), change_pct(r.change_pct))
    return t


def categories_table(result: Diff) -> Table:
    t = FitTable(title="Kernel time by category (per step)")
    t.add_column("category")
    for col in ("A", "B", "delta", "change", "share A", "share B",
                "Tensor Cores A", "Tensor Cores B"):
        t.add_column(col, number=True, optional=col not in ("A", "B", "delta", "change"))
    c = result.categories
    for r in c.itertuples():
        t.add_row(r.category, us_fine(r.us_a), us_fine(r.us_b), signed(r.delta_us),
                  change_pct(r.change_pct), pct(r.share_a_pct), pct(r.share_b_pct),
                  pct(r.tensor_core_a_pct), pct(r.tensor_core_b_pct))
    t.add_row("[b]all[/b]", us_fine(c["us_a"].sum()), us_fine(c["us_b"].sum()),
              signed(float(c["delta_us"].sum())), "", "", "", "", "")
    return t


def kernels_table(result: Diff, top: int) -> Table:
    matched = result.kernels[result.kernels["side"] == BOTH]
    shown = head(matched, top)
    t = _delta_table(f"Kernels in both runs, matched by full name ({len(shown)} of "
                     f"{len(matched)} by |delta|)", "kernel (short name; full name in --out/--json)",
                     "category", "calls")
    for r in shown.itertuples():
        t.add_row(escape(r.kernel), r.category, *_delta_cells(r, r.calls_a, r.calls_b))
    return t


def unmatched_table(result: Diff, side: str, top: int) -> Table:
    rows = result.kernels[result.kernels["side"] == side]
    column = "us_a" if side == ONLY_A else "us_b"
    calls = "calls_a" if side == ONLY_A else "calls_b"
    rows = rows.sort_values(column, ascending=False, kind="stable")
    shown = head(rows, top)
    which = "A" if side == ONLY_A else "B"
    t = FitTable(title=f"Kernels only in {which}: {len(rows)} kernels, "
                       f"{us_fine(rows[column].sum())} per step (top {len(shown)})")
    t.add_column("kernel")
    t.add_column("category", optional=True)
    t.add_column("Tensor Cores", optional=True)
    t.add_column("calls", number=True)
    t.add_column("time", number=True)
    for r in shown.itertuples():
        t.add_row(escape(r.kernel), r.category, r.tensor_core, with_unit(getattr(r, calls)),
                  us_fine(getattr(r, column)))
    return t


def operators_table(result: Diff, top: int) -> Table:
    ops = result.operators
    shown = head(ops, top)
    t = _delta_table(f"Kernel time by launching operator, per step ({len(shown)} of "
                     f"{len(ops)} by |delta|)", "operator", "in", "kernels")
    for r in shown.itertuples():
        t.add_row(escape(r.operator), r.side, *_delta_cells(r, r.kernels_a, r.kernels_b))
    return t


def _delta_table(title: str, name: str, kind: str, counted: str) -> FitTable:
    """A table of named rows, each with counts and times of A and B and their difference; the
    names fold where the width is short."""
    t = FitTable(title=title)
    t.add_column(name)
    t.add_column(kind, optional=True)
    for col in (f"{counted} A", f"{counted} B", "A", "B", "delta", "change"):
        t.add_column(col, number=True, optional=col.startswith(counted))
    return t


def _delta_cells(r, count_a, count_b) -> list[str]:
    return [with_unit(count_a), with_unit(count_b), us_fine(r.us_a), us_fine(r.us_b),
            signed(r.delta_us), change_pct(r.change_pct)]


def changes_table(frame: pd.DataFrame, title: str, level: str) -> Table:
    t = FitTable(title=title)
    t.add_column(level)
    t.add_column("in", optional=True)
    for col in ("A", "B", "delta"):
        t.add_column(col, number=True)
    name = "kernel" if level == "kernel" else "operator"
    for r in frame.itertuples():
        t.add_row(escape(getattr(r, name)), r.side, us_fine(r.us_a), us_fine(r.us_b),
                  signed(r.delta_us))
    return t


# ---- the timed headline --------------------------------------------------------------------

def _change(a, b) -> str:
    return change_pct(100 * (b - a) / a) if a and b else "-"


def timed_rows(t: dict) -> list[tuple[str, str, str, str]]:
    """The timed window's rows (metric, A, B, B vs A) as text: the terminal and the HTML report
    show the same rows."""
    a, b = t["a"], t["b"]
    rows = [(f"{label} latency", with_unit(a[key], "ms"), with_unit(b[key], "ms"),
             _change(a[key], b[key]))
            for key, label in (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99"))]
    key = "throughput_samples_per_s"
    rows.append(("throughput (samples/s)", with_unit(a[key]), with_unit(b[key]),
                 _change(a[key], b[key])))
    ga, gb = a.get("gpu_compute") or {}, b.get("gpu_compute") or {}
    for key, label in (("gpu_p50_ms", "GPU compute p50 (launch gaps excluded)"),
                       ("enqueue_p50_ms", "enqueue p50 (host launch time)")):
        if ga.get(key) is not None or gb.get(key) is not None:
            rows.append((label, with_unit(ga.get(key), "ms"), with_unit(gb.get(key), "ms"),
                         _change(ga.get(key), gb.get(key))))
    verdict = t.get("verdict")
    if verdict:
        rows.append(("processes timed", str(verdict["processes_a"]),
                     str(verdict["processes_b"]), ""))
    rows.append(("speedup (A / B, mean of per-process p50)", "", "", times(t["speedup_x"])))
    for side, label in (("noise_a", "CV A"), ("noise_b", "CV B")):
        if t[side]:
            rows.append((label, "", "", pct(100 * t[side]["cv"])))
    ma, mb = t["memory_a"], t["memory_b"]
    for key, label in (("peak_allocated_mib", "peak allocated"),
                       ("peak_reserved_mib", "peak reserved"),
                       ("engine_mib", "TensorRT engine memory")):
        if key != "engine_mib" or ma[key] is not None or mb[key] is not None:
            rows.append((label, mib(ma[key], ma["note"]), mib(mb[key], mb["note"]), ""))
    return rows


def noise_warnings(t: dict) -> list[tuple[str, str]]:
    """(side, warning) for every noise warning of either timed window."""
    return [(label, warning) for side, label in (("noise_a", "A"), ("noise_b", "B"))
            for warning in (t[side] or {}).get("warnings") or []]


def print_timed_headline(t: dict, console: Console) -> None:
    """Timed figures of both runs (profiler.analysis.headline.compare_timed), the speedup, whether it is
    outside noise, and every differing config and environment field."""
    table = Table(title="Timed window (no profiler attached)", title_justify="left")
    for col in ("metric", "A", "B", "B vs A"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in timed_rows(t):
        table.add_row(*row)
    console.print(table)
    _print_verdict(t, console)
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


#: how each verdict reads, and its colour
VERDICT_WORDS = {"faster": ("B faster", "green"), "slower": ("B slower", "red"),
                 "same": ("the same within ±{tol:g} %", "green"),
                 "undecided": ("undecided", "yellow")}
#: what to do about an undecided verdict
UNDECIDED_NOTE = ("the difference is within what this machine's noise can explain; take fresh "
                  "samples of both with compare --processes 5 (or --target-noise 2), or measure "
                  "the machine with `noise`")


def verdict_words(verdict: dict) -> str:
    """The verdict in words: "B faster", "the same within ±2 %" ..."""
    return VERDICT_WORDS[verdict["verdict"]][0].format(tol=100 * verdict["tolerance"])


def verdict_basis(verdict: dict) -> str:
    """The ratio, its interval and the processes behind it, in one sentence."""
    floor = verdict.get("noise_floor")
    basis = f"{verdict['processes_a']} vs {verdict['processes_b']} process(es)"
    if floor is not None:
        source = ("this machine's, measured by `noise`" if verdict.get("floor_source") == "given"
                  else "a default: `noise` has not measured this machine")
        basis += f"; between-process spread taken as {100 * floor:.1f} % ({source})"
    return (f"p50 B / A = {verdict['ratio']:.3f}, 95 % interval [{verdict['low']:.3f}, "
            f"{verdict['high']:.3f}] over {basis}")


def verdict_line(verdict: dict) -> str:
    """One line: the ratio, its interval, the processes behind it and the verdict."""
    colour = VERDICT_WORDS[verdict["verdict"]][1]
    return f"{verdict_basis(verdict)}: [{colour}]{verdict_words(verdict)}[/]"


def _print_verdict(t: dict, console: Console) -> None:
    verdict = t["verdict"]
    if verdict:
        console.print(verdict_line(verdict), highlight=False)
        console.print(f"[dim]how: {escape(verdict['method'])}[/]", highlight=False)
        if verdict["verdict"] == "undecided":
            console.print(f"[yellow]note:[/] {UNDECIDED_NOTE}", highlight=False)
    for label, warning in noise_warnings(t):
        console.print(f"[bold yellow]warning ({label}):[/] {escape(warning)}", highlight=False)


def print_explanation(e: dict, console: Console) -> None:
    """Why B differs from A at the kernel level (profiler.analysis.difference.explain_runs): one
    line (the kernels added and dropped named in it, short names; full ones in --json), then
    each side's GPU state."""
    console.print(f"[b]why B differs from A[/b] ({escape(e['cause'])}): "
                  f"{escape(e['short_line'])}",
                  highlight=False)
    for side in ("a", "b"):
        console.print(escape(e[f"gpu_state_{side}"].replace("GPU state:", f"GPU state "
                                                             f"{side.upper()}:", 1)),
                      highlight=False)
