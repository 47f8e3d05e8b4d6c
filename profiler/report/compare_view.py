"""A Diff of two runs as terminal tables, opened by the timed headline: the figures of the
processes the verdicts use (fresh ones with compare --processes), both verdicts (latency: what a
caller waits; GPU time: the device's work), each named, and the recorded runs' own figures
under their own heading."""

from __future__ import annotations

from typing import Protocol

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.analysis.records import (
    CompareTimed,
    Explanation,
    FigureOverProcesses,
    ProcessFigures,
    TimedFigures,
    Verdict,
    WindowNoise,
)
from profiler.analysis.tails import iterations_needed
from profiler.analysis.timed_window import NOISY_CV
from profiler.report.console import FitTable, print_prose
from profiler.report.fmt import (
    TimeColumn,
    head,
    interval_figure,
    marked,
    missing,
    number,
    percent,
    ratio,
    signed,
    size,
    time,
    window_flags,
    with_unit,
)
from profiler.report.phases_view import compare_phases_table, compare_positions_table
from profiler.report.sentences import (
    WITHHELD_WORDS,
    explanation_line,
    fdr_note,
    gpu_state_line,
    noise_source_words,
    note_lines,
    verdict_method,
)
from profiler.trace.diff import BOTH, ONLY_A, ONLY_B, Diff
from profiler.trace.summary import Summary


def _side_name(label: str, summary: Summary) -> str:
    device = (
        summary.devices[0]["name"]
        if summary.devices
        else "no GPU"
        if summary.overview.has_gpu
        else "CPU"
    )
    return f"{label} ({device}; {summary.trace_path.name})"


def print_diff(
    result: Diff, sa: Summary, sb: Summary, top: int, console: Console, recorded: bool = True
) -> None:
    """The trace diff's tables; ``recorded=False`` (compare --processes) leaves the recorded
    runs' result.json rows out of the overview: every figure outside the "Recorded runs" table
    is then the fresh processes'."""
    console.print(f"[b]A[/b] = {escape(_side_name(result.a_label, sa))}", highlight=False)
    console.print(f"[b]B[/b] = {escape(_side_name(result.b_label, sb))}", highlight=False)
    console.print(
        "times are per profiled step; delta = B - A ([green]-[/] B faster, [red]+[/] B slower)",
        highlight=False,
    )
    console.print(overview_table(result, recorded))
    if result.on_cpu:  # no kernels: the CPU operators are the diff
        console.print(cpu_operators_table(result, top))
    else:
        console.print(categories_table(result))
        if result.shared_kernels:
            console.print(kernels_table(result, top))
        for side in (ONLY_A, ONLY_B):
            if (result.kernels["side"] == side).any():
                console.print(unmatched_table(result, side, top))
        console.print(operators_table(result, top))
    if sa.phases is not None and sb.phases is not None:
        console.print(compare_phases_table(sa.phases, sb.phases))
        console.print(compare_positions_table(sa.phases, sb.phases, top=top))
    faster, slower = result.top_changes(top or 10)
    level = result.change_level
    self_time = " (self time)" if result.on_cpu else ""
    for frame, title, none in (
        (
            faster,
            f"Top {len(faster)} gains: {level}s faster in B{self_time}",
            f"no {level} is faster in B",
        ),
        (
            slower,
            f"Top {len(slower)} losses: {level}s slower in B{self_time}",
            f"no {level} is slower in B",
        ),
    ):
        if len(frame):
            console.print(changes_table(frame, title, level, result.on_cpu))
        else:
            console.print(none, highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)


#: the overview rows read from result.json (profiler.analysis.run_analysis.timed_rows), not the
#: trace
RECORDED_SUFFIX = "(result.json)"


class OverviewCells(Protocol):
    """A row of a Diff's overview frame (``itertuples()``): its unit; each side's value and CV
    are read by name (``a``, ``cv_a``)."""

    @property
    def unit(self) -> str: ...


class TimedCells(Protocol):
    """A row of a Diff's kernel or operator frame (``itertuples()``): each side's time per step
    (µs), B - A and the relative change."""

    @property
    def us_a(self) -> float | None: ...
    @property
    def us_b(self) -> float | None: ...
    @property
    def delta_us(self) -> float | None: ...
    @property
    def change_pct(self) -> float | None: ...


def overview_table(result: Diff, recorded: bool = True) -> Table:
    t = FitTable(title="Overview")
    t.add_column("metric")
    for col in ("A", "B", "delta", "change"):
        t.add_column(col, number=True)
    for r in result.overview.itertuples():
        if not recorded and str(r.metric).endswith(RECORDED_SUFFIX):
            continue
        t.add_row(
            r.metric,
            overview_figure(r, "a"),
            overview_figure(r, "b"),
            signed(r.delta, r.unit),
            percent(r.change_pct, sign=True),
        )
    return t


def overview_figure(row: OverviewCells, side: str) -> str:
    """An overview cell: a recorded latency to the figures its window's CV allows, anything
    else with its unit."""
    value, cv = getattr(row, side), getattr(row, f"cv_{side}", None)
    if row.unit == "ms" and cv is not None and not missing(cv):
        return time(value, decimals=None, noise=cv)
    return with_unit(value, row.unit)


def categories_table(result: Diff) -> Table:
    t = FitTable(title="Kernel time by category (per step)")
    t.add_column("category")
    for col in (
        "A",
        "B",
        "delta",
        "change",
        "share A",
        "share B",
        "TC-kernel time A",
        "TC-kernel time B",
    ):
        t.add_column(col, number=True, optional=col not in ("A", "B", "delta", "change"))
    c = result.categories
    for r in c.itertuples():
        t.add_row(
            r.category,
            time(r.us_a, "µs", ("ms", "µs")),
            time(r.us_b, "µs", ("ms", "µs")),
            signed(r.delta_us),
            percent(r.change_pct, sign=True),
            percent(r.share_a_pct),
            percent(r.share_b_pct),
            percent(r.tensor_core_a_pct),
            percent(r.tensor_core_b_pct),
        )
    t.add_row(
        "[b]all[/b]",
        time(c["us_a"].sum(), "µs", ("ms", "µs")),
        time(c["us_b"].sum(), "µs", ("ms", "µs")),
        signed(float(c["delta_us"].sum())),
        "",
        "",
        "",
        "",
        "",
    )
    return t


def kernels_table(result: Diff, top: int) -> Table:
    matched = result.kernels[result.kernels["side"] == BOTH]
    shown = head(matched, top)
    t = _delta_table(
        f"Kernels in both runs, matched by full name ({len(shown)} of {len(matched)} by |delta|)",
        "kernel (short name; full name in --out/--json)",
        "category",
        "calls",
    )
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
    t = FitTable(
        title=f"Kernels only in {which}: {len(rows)} kernels, "
        f"{time(rows[column].sum(), 'µs', ('ms', 'µs'))} per step (top {len(shown)})"
    )
    t.add_column("kernel")
    t.add_column("category", optional=True)
    t.add_column("Tensor Cores", optional=True)
    t.add_column("calls", number=True)
    t.add_column("time", number=True)
    for r in shown.itertuples():
        t.add_row(
            escape(r.kernel),
            r.category,
            r.tensor_core,
            with_unit(getattr(r, calls)),
            time(getattr(r, column), "µs", ("ms", "µs")),
        )
    return t


def operators_table(result: Diff, top: int) -> Table:
    ops = result.operators
    shown = head(ops, top)
    t = _delta_table(
        f"Kernel time by launching operator, per step ({len(shown)} of {len(ops)} by |delta|)",
        "operator",
        "in",
        "kernels",
    )
    for r in shown.itertuples():
        t.add_row(escape(r.operator), r.side, *_delta_cells(r, r.kernels_a, r.kernels_b))
    return t


def cpu_operators_table(result: Diff, top: int) -> Table:
    """Two CPU runs' operators matched by name: calls, self and total CPU time per step."""
    ops = result.cpu_operators
    shown = head(ops, top)
    # one unit a column (s, ms or µs): CPU operators run from microseconds to seconds
    own = TimeColumn(shown["us_a"], shown["us_b"], shown["delta_us"])
    total = TimeColumn(shown["total_a_us"], shown["total_b_us"])
    t = FitTable(
        title=f"CPU operators by self CPU time, per step ({len(shown)} of {len(ops)} by |delta|)"
    )
    t.add_column("operator")
    t.add_column("in", optional=True)
    for col in ("calls A", "calls B"):
        t.add_column(col, number=True, optional=True)
    for col in ("A", "B", "delta"):
        t.add_column(f"{col} {own.unit}", number=True)
    t.add_column("change", number=True)
    t.add_column(f"total A {total.unit}", number=True, optional=True)
    t.add_column(f"total B {total.unit}", number=True, optional=True)
    for r in shown.itertuples():
        t.add_row(
            escape(r.operator),
            r.side,
            with_unit(r.calls_a),
            with_unit(r.calls_b),
            own(r.us_a),
            own(r.us_b),
            own.signed(r.delta_us),
            percent(r.change_pct, sign=True),
            total(r.total_a_us),
            total(r.total_b_us),
        )
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


def _delta_cells(r: TimedCells, count_a: float | None, count_b: float | None) -> list[str]:
    return [
        with_unit(count_a),
        with_unit(count_b),
        time(r.us_a, "µs", ("ms", "µs")),
        time(r.us_b, "µs", ("ms", "µs")),
        signed(r.delta_us),
        percent(r.change_pct, sign=True),
    ]


def changes_table(frame: pd.DataFrame, title: str, level: str, on_cpu: bool = False) -> Table:
    """The largest gains or losses; two CPU runs' (``on_cpu``: operators of up to seconds) in
    one unit for the table, named in the headers."""
    t = FitTable(title=title)
    t.add_column(level)
    t.add_column("in", optional=True)
    column = TimeColumn(frame["us_a"], frame["us_b"]) if on_cpu else None
    for col in ("A", "B", "delta"):
        t.add_column(f"{col} {column.unit}" if column else col, number=True)
    name = "kernel" if level == "kernel" else "operator"
    for r in frame.itertuples():
        if column is not None:
            cells = [column(r.us_a), column(r.us_b), column.signed(r.delta_us)]
        else:
            cells = [
                time(r.us_a, "µs", ("ms", "µs")),
                time(r.us_b, "µs", ("ms", "µs")),
                signed(r.delta_us),
            ]
        t.add_row(escape(getattr(r, name)), r.side, *cells)
    return t


# ---- the timed headline --------------------------------------------------------------------

#: the two figures a verdict is taken on, in words
FIGURE_NAMES = {
    "latency": "latency (what a caller waits)",
    "gpu_time": "GPU time (the device's work)",
}
#: the figure every row of the processes' table is (never a plain mean)
GEOMEAN = "geometric mean of per-process medians"
#: the heading of the figures result.json recorded (apart from those the verdicts use)
RECORDED_TITLE = "Recorded runs (result.json)"
#: a figure without a verdict: why
NO_LATENCY = "no verdict: a side has no per-iteration latencies (latency.csv or processes.csv)"
NO_GPU_TIME = (
    "no verdict: GPU time was not measured on both sides (a CPU, a generation, a "
    "call that synchronizes inside, or a run recorded before GPU time was)"
)


def figure_short(figure: str) -> str:
    """A figure's name alone: "latency", "GPU time"."""
    return FIGURE_NAMES[figure].split(" (")[0]


def _change(a: float | None, b: float | None) -> str:
    return percent(100 * (b - a) / a, sign=True) if a and b else "-"


def _plural(count: int, one: str = "process", many: str = "processes") -> str:
    return one if count == 1 else many


def timed_title(t: CompareTimed) -> str:
    """The processes' table's title: how many processes a side, fresh or recorded, and which
    mean its figures are."""
    pa, pb = t.processes_a.processes, t.processes_b.processes
    kind = t.source.split()[0]  # fresh, recorded
    count = (
        f"{pa} {kind} {_plural(pa)} a side"
        if pa == pb
        else f"{pa} (A) and {pb} (B) {kind} processes"
    )
    return f"Timed windows (no profiler): {count}, {GEOMEAN}"


Figure = FigureOverProcesses | None


def _geomean(figure: Figure) -> float | None:
    return None if figure is None else figure.geomean_ms


def _noise(figure: Figure, window: WindowNoise | None) -> tuple[float | None, list[str]]:
    """A side's noise and its flags: the between-process CV of the per-process medians with
    several processes ("noisy" from NOISY_CV), else the recorded timed window's CV and flags."""
    cv = figure.cv if figure is not None else None
    if cv is not None:
        return cv, ["noisy"] if cv >= NOISY_CV else []
    if window is None:
        return None, []
    return window.cv, window_flags(window.warnings)


def _figure(figure: Figure, window: WindowNoise | None) -> str:
    """The geometric mean to the figures the side's noise allows, marked with its flags."""
    if figure is None:
        return "-"
    cv, flags = _noise(figure, window)
    return marked(time(figure.geomean_ms, decimals=None, noise=cv), flags)


def _range(figure: Figure, window: WindowNoise | None) -> str:
    if figure is None:
        return "-"
    cv = _noise(figure, window)[0]
    return f"{number(figure.min_ms, None, noise=cv)}-{time(figure.max_ms, decimals=None, noise=cv)}"


def _processes(side: ProcessFigures) -> str:
    pilots = side.pilot_processes
    return f"{side.processes}" + (f" (+{pilots} pilot)" if pilots else "")


def _bound(side: ProcessFigures) -> str:
    """The side's classification and how its processes fell: "launch-bound (4 of 5)", "near
    the launch bound (3 launch-bound, 3 GPU-bound of 6)"."""
    word, seen = side.bound, side.classified_processes
    if not word:
        return "-"
    if seen < 2:
        return word
    launch, gpu = side.launch_bound_processes, side.gpu_bound_processes
    if word == "launch-bound":
        return f"{word} ({launch} of {seen})"
    if word == "GPU-bound":
        return f"{word} ({gpu} of {seen})"
    return f"{word} ({launch} launch-bound, {gpu} GPU-bound of {seen})"


def has_processes(t: CompareTimed) -> bool:
    """Either side has per-process latencies (the processes' table has figures to show)."""
    return t.processes_a.latency is not None or t.processes_b.latency is not None


def process_rows(t: CompareTimed) -> list[tuple[str, str, str, str]]:
    """The rows (metric, A, B, B vs A) of the processes the verdicts use (fresh ones with
    compare --processes, else the recorded ones: ``t.source``): each figure's geometric mean
    of the per-process medians and its range over processes, to the figures the side's noise
    allows (_noise), the processes, the
    classification and both speedups. The terminal and the HTML report show the same rows."""
    pa, pb = t.processes_a, t.processes_b
    several = max(pa.processes, pb.processes) > 1
    rows = []
    for figure, label, short in (
        ("latency", FIGURE_NAMES["latency"], "latency"),
        ("gpu_time", FIGURE_NAMES["gpu_time"], "GPU time"),
        ("enqueue", "enqueue (host launch time)", "enqueue"),
    ):
        fa, fb = getattr(pa, figure), getattr(pb, figure)
        if fa is None and fb is None:
            continue
        ga, gb = _geomean(fa), _geomean(fb)
        wa, wb = t.noise_a, t.noise_b
        rows.append((label, _figure(fa, wa), _figure(fb, wb), _change(ga, gb)))
        if several:
            rows.append((f"{short}: min-max over processes", _range(fa, wa), _range(fb, wb), ""))
    rows.append(("processes", _processes(pa), _processes(pb), ""))
    if pa.bound or pb.bound:
        rows.append(("bound (latency, enqueue against GPU time)", _bound(pa), _bound(pb), ""))
    if t.verdict:
        rows.append((f"latency speedup (A / B, {_basis(t.verdict)})", "", "", ratio(t.speedup_x)))
    if t.gpu_speedup_x is not None:
        label = f"GPU-time speedup (A / B, {_basis(t.gpu_verdict)})"
        rows.append((label, "", "", ratio(t.gpu_speedup_x)))
    return rows


def _basis(verdict: Verdict | None) -> str:
    """What a speedup is a ratio of: its verdict's rounds where it paired them (the geometric
    mean of the per-round ratios, which can differ from the ratio of the rows above), else the
    geometric means of the per-process medians."""
    if verdict is not None and verdict.design == "paired":
        return f"paired over {verdict.pairs} rounds"
    return GEOMEAN


def _too_few(label: str, a: TimedFigures, b: TimedFigures) -> str:
    """A tail's label where a window has too few iterations for its 95 % order-statistic
    interval (profiler.analysis.tails): " (100 iterations: no 95 % interval; 368 give one)"."""
    if label == "p50":
        return ""
    needed = iterations_needed(int(label[1:]) / 100)
    fewest = min(a.iters, b.iters)
    return f" ({fewest} iterations: no 95 % interval; {needed} give one)" if fewest < needed else ""


def recorded_rows(t: CompareTimed) -> list[tuple[str, str, str, str]]:
    """The rows (metric, A, B, B vs A) of each run's own timed window as result.json recorded
    it: p50, p90, p99 (to the figures the window's CV allows), throughput, GPU compute and
    enqueue, the window's CV, peak memory (and the p50 speedup where no verdict could be
    taken)."""
    a, b = t.a, t.b
    cv_a, cv_b = (window.cv if window else None for window in (t.noise_a, t.noise_b))
    # each side's latencies to the figures its window's noise allows (fmt.time with its noise)
    rows = [
        (
            f"{label} latency" + _too_few(label, a, b),
            time(getattr(a, key), decimals=None, noise=cv_a),
            time(getattr(b, key), decimals=None, noise=cv_b),
            _change(getattr(a, key), getattr(b, key)),
        )
        for key, label in (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99"))
    ]
    rows.append(
        (
            "throughput (samples/s)",
            with_unit(a.throughput_samples_per_s),
            with_unit(b.throughput_samples_per_s),
            _change(a.throughput_samples_per_s, b.throughput_samples_per_s),
        )
    )
    for key, label in (
        ("gpu_p50_ms", "GPU compute p50 (device gaps between kernels included)"),
        ("enqueue_p50_ms", "enqueue p50 (host launch time)"),
    ):
        xa, xb = (getattr(side.gpu_compute, key) if side.gpu_compute else None for side in (a, b))
        if xa is not None or xb is not None:
            rows.append((label, with_unit(xa, "ms"), with_unit(xb, "ms"), _change(xa, xb)))
    if not t.verdict:
        rows.append(("speedup (A / B of the p50)", "", "", ratio(t.speedup_x)))
    for window, label in ((t.noise_a, "CV of the window A"), (t.noise_b, "CV of the window B")):
        if window:
            rows.append((label, "", "", percent(100 * window.cv)))
    ma, mb = t.memory_a, t.memory_b
    for key, label in (
        ("peak_allocated_mib", "peak allocated"),
        ("peak_reserved_mib", "peak reserved"),
        ("engine_mib", "TensorRT engine memory"),
    ):
        xa, xb = getattr(ma, key), getattr(mb, key)
        if key != "engine_mib" or xa is not None or xb is not None:
            rows.append(
                (
                    label,
                    size(xa, "MiB", blank=ma.note or "-"),
                    size(xb, "MiB", blank=mb.note or "-"),
                    "",
                )
            )
    return rows


def noise_warnings(t: CompareTimed) -> list[tuple[str, str]]:
    """(side, warning) for every noise warning of either recorded timed window."""
    return [
        (f"{label}, recorded run", warning)
        for window, label in ((t.noise_a, "A"), (t.noise_b, "B"))
        for warning in (window.warnings if window else [])
    ]


def _metrics_table(title: str, rows: list[tuple[str, str, str, str]]) -> FitTable:
    table = FitTable(title=title)
    table.add_column("metric")
    for col in ("A", "B", "B vs A"):
        table.add_column(col, number=True)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


#: a generation's phases in words (profiler.runs.samples.PHASES)
PHASE_LABELS = {"ttft": "TTFT (prefill and its token)", "tpot": "TPOT (mean decode step)"}


def generation_rows(t: CompareTimed) -> list[tuple[str, str, str, str]]:
    """(metric, A, B, B vs A) of each side's generation figures over its processes: TTFT,
    TPOT, ITL p50/p99 and tokens/s, each with its 95 % interval."""
    ga, gb = t.generation_a, t.generation_b
    if ga is None and gb is None:
        return []
    a = {f.figure: f for f in ga.figures} if ga else {}
    b = {f.figure: f for f in gb.figures} if gb else {}
    rows = []
    for name in ("TTFT", "TPOT", "ITL p50", "ITL p99", "tokens/s"):
        fa, fb = a.get(name), b.get(name)
        if fa is None and fb is None:
            continue
        change = _change(fa.value if fa else None, fb.value if fb else None)
        rows.append((name, interval_figure(fa), interval_figure(fb), change))
    for key, label in (("ttft_bound", "TTFT bound"), ("tpot_bound", "TPOT bound")):
        wa, wb = (getattr(g, key) if g else None for g in (ga, gb))
        if wa or wb:
            rows.append((label, wa or "-", wb or "-", ""))
    return rows


def phase_verdict_lines(t: CompareTimed) -> list[str]:
    """Each phase's verdicts (latency, then GPU time), one line each (rich markup), then the
    lines that say how to read them (launch-bound, the lever)."""
    lines = []
    for phase in t.phases:
        label = PHASE_LABELS[phase.phase]
        verdicts = phase.verdicts
        if verdicts is None:
            continue
        for figure, verdict in (("latency", verdicts.latency), ("gpu_time", verdicts.gpu_time)):
            if verdict is not None:
                lines.append(verdict_line(verdict, f"{label}, {FIGURE_NAMES[figure]}"))
        lines += [f"[yellow]note ({label}):[/] {escape(n)}" for n in note_lines(verdicts)]
    return lines


def print_generation(t: CompareTimed, console: Console) -> None:
    """A generation's figures over processes and its phases judged apart (TTFT, TPOT)."""
    rows = generation_rows(t)
    if rows:
        console.print(
            _metrics_table(
                "Generation (each figure over processes: geometric mean [95 % interval])", rows
            )
        )
    for line in phase_verdict_lines(t):
        console.print(line, highlight=False)


def print_timed_headline(t: CompareTimed, console: Console) -> None:
    """The processes the verdicts use (profiler.analysis.headline.compare_timed: fresh ones with
    compare --processes), both verdicts (latency and GPU time, each named) with the lines that
    say how to read them, the recorded runs' own figures under their own heading, and every
    differing config and environment field."""
    if has_processes(t):
        console.print(_metrics_table(timed_title(t), process_rows(t)))
    else:
        console.print(
            f"[yellow]note:[/] {NO_LATENCY}: the recorded runs' figures only", highlight=False
        )
    _print_verdicts(t, console)
    print_generation(t, console)
    console.print(_metrics_table(RECORDED_TITLE, recorded_rows(t)))
    for label, warning in noise_warnings(t):
        print_prose(console, f"[bold yellow]warning ({label}):[/] {escape(warning)}")
    console.print(f"config A: {escape(t.config_a)}", highlight=False)
    console.print(f"config B: {escape(t.config_b)}", highlight=False)
    differing = t.differences
    diffs = Table(
        title=f"Config and environment fields that differ ({len(differing)})", title_justify="left"
    )
    for col in ("field", "A", "B"):
        diffs.add_column(col, overflow="fold")
    for row in differing:
        diffs.add_row(escape(row.field), escape(str(row.a)), escape(str(row.b)))
    console.print(diffs if differing else "config and environment: no field differs")


#: how each verdict reads, and its colour
VERDICT_WORDS = {
    "faster": ("B faster", "green"),
    "slower": ("B slower", "red"),
    "same": ("the same within ±{tol:g} %", "green"),
    "undecided": ("undecided", "yellow"),
}


def verdict_entries(t: CompareTimed) -> list[tuple[str, str, Verdict | None]]:
    """(figure, label, verdict or None) of both figures, latency first: when both configs are
    GPU-bound latency leads and GPU time is its cross-check; otherwise both are named alike
    (profiler.analysis.timed_verdict). Two CPU runs: latency's only."""
    lead = t.verdicts.lead if t.verdicts else "latency"
    gpu = FIGURE_NAMES["gpu_time"]
    latency = [("latency", FIGURE_NAMES["latency"], t.verdict)]
    if both_on_cpu(t):  # no GPU time to judge: latency's verdict only
        return latency
    return latency + [
        ("gpu_time", f"cross-check, {gpu}" if lead == "latency" else gpu, t.gpu_verdict)
    ]


def both_on_cpu(t: CompareTimed) -> bool:
    """Both runs of a compare's timed headline ran on the CPU."""
    return all(str(side.device or "").startswith("cpu") for side in (t.a, t.b))


def verdict_words(verdict: Verdict) -> str:
    """The verdict in words: "B faster", "the same within ±2 %" ..., or why it is
    undecided whatever its interval says (Verdict.withheld)."""
    if verdict.withheld:
        return WITHHELD_WORDS
    return VERDICT_WORDS[verdict.verdict][0].format(tol=100 * verdict.tolerance)


def _design(verdict: Verdict) -> str:
    design, floor = verdict.design, verdict.noise_floor
    if design == "paired":
        return f"paired over {verdict.pairs} rounds"
    if design == "floor" and floor is not None:
        source = (
            noise_source_words(verdict.floor_from, "floor")
            if verdict.floor_from is not None
            else "this machine's, measured by `noise`"
            if verdict.floor_source == "given"
            else "a default: no usable floor measured by `noise` here"
        )
        return (
            "one process on a side; between-process spread taken as "
            f"{percent(100 * floor)}, {source}"
        )
    return "unpaired"


def verdict_basis(verdict: Verdict) -> str:
    """The ratio, its interval, the processes behind it and how they were compared, in one
    sentence."""
    ka, kb = verdict.processes_a, verdict.processes_b
    window = ""
    if min(ka, kb) == 1:  # the spread between processes is assumed, not seen
        window = ", within one window a side" if ka == kb == 1 else ", one side within one window"
    basis = (
        f"B/A = {ratio(verdict.ratio, 3, suffix='')}, "
        f"95 % interval [{ratio(verdict.low, 3, suffix='')}, "
        f"{ratio(verdict.high, 3, suffix='')}] over {ka} vs {kb} {_plural(max(ka, kb))}{window} "
        f"({_design(verdict)})"
    )
    fdr = fdr_note(verdict)
    if fdr:
        basis += f"; {fdr}"  # how it was held against its family
    return basis


def verdict_line(verdict: Verdict, label: str | None = None) -> str:
    """One line (rich markup): the figure, the ratio, its interval, the processes behind it
    and the verdict."""
    colour = VERDICT_WORDS[verdict.verdict][1]
    label = label or FIGURE_NAMES.get(verdict.figure, "")
    return f"{escape(label)}: {verdict_basis(verdict)}: [{colour}]{verdict_words(verdict)}[/]"


def undecided_note(verdict: Verdict) -> str:
    """What to do about an undecided verdict: more processes than it had (compare --processes,
    --target-noise), or the machine's own floor where a default stood in; withheld (one window
    a side on a CPU), what decides it."""
    if verdict.withheld:
        return (
            "one window a side on a CPU, whose between-process spread is unknown here: "
            "`python profile.py noise` measures this machine's floor, or compare --processes 5 "
            "times both again in fresh processes"
        )
    have = min(verdict.processes_a, verdict.processes_b)
    more = (
        "compare --processes 5"
        if have < 5
        else f"compare --processes {2 * have}, more than the {have} a side here"
    )
    note = (
        f"the difference is within what this machine's noise can explain; take fresh "
        f"samples of both with {more} (or --target-noise 2)"
    )
    if verdict.floor_source == "default":
        note += ", or measure the machine with `noise`"
    return note


def verdict_notes(t: CompareTimed) -> list[str]:
    """The lines that say how to read the two verdicts (launch-bound, the lever, the processes
    the latency needs, a disagreement), then what to do about each undecided one."""
    lines = note_lines(t.verdicts) if t.verdicts else []
    for figure, _, verdict in verdict_entries(t):
        if verdict and verdict.verdict == "undecided":
            lines.append(f"{figure_short(figure)} undecided: {undecided_note(verdict)}")
    return lines


def print_answer(t: CompareTimed, console: Console) -> None:
    """compare's first screen: both verdicts with the lines that say how to read them, a
    generation's phase verdicts and the noise warnings; the tables stay behind --view."""
    _print_verdicts(t, console, how=False)
    for line in phase_verdict_lines(t):
        console.print(line, highlight=False)
    for label, warning in noise_warnings(t):
        print_prose(console, f"[bold yellow]warning ({label}):[/] {escape(warning)}")


#: rows of the first screen's table of the largest changes; kernels added and dropped it names
ANSWER_ROWS, ANSWER_KERNELS = 6, 2


def largest_changes_table(result: Diff, rows: int = ANSWER_ROWS) -> Table | None:
    """The largest changes either way, by |delta| (kernels, or operators where the runs share
    no kernel name, or CPU operators); None when nothing changed."""
    faster, slower = result.top_changes(rows)
    frame = pd.concat([faster, slower], ignore_index=True)
    if not len(frame):
        return None
    frame = frame.reindex(frame["delta_us"].abs().sort_values(ascending=False).index).head(rows)
    level = result.change_level
    column = TimeColumn(frame["us_a"], frame["us_b"])
    what = " self time" if result.on_cpu else ""
    t = FitTable(title="Largest changes per step (all: --view diff)")
    t.add_column(f"{level}{what}")
    for col in ("A", "B", "delta"):
        t.add_column(f"{col} {column.unit}", number=True)
    name = "kernel" if level == "kernel" else "operator"
    for r in frame.itertuples():
        t.add_row(
            escape(getattr(r, name)), column(r.us_a), column(r.us_b), column.signed(r.delta_us)
        )
    return t


def _print_verdicts(t: CompareTimed, console: Console, how: bool = True) -> None:
    for figure, label, verdict in verdict_entries(t):
        if verdict:
            print_prose(console, verdict_line(verdict, label))
        else:
            missing = NO_LATENCY if figure == "latency" else NO_GPU_TIME
            print_prose(console, f"{escape(label)}: [dim]{missing}[/]")
    for line in verdict_notes(t):
        print_prose(console, f"[yellow]note:[/] {escape(line)}")
    if not how:
        return
    for figure, _, verdict in verdict_entries(t):
        if verdict:
            print_prose(
                console, f"[dim]how ({figure_short(figure)}): {escape(verdict_method(verdict))}[/]"
            )


def print_explanation(e: Explanation, console: Console, states: bool = True) -> None:
    """Why B differs from A at the kernel level (profiler.analysis.difference.explain_runs): one
    line (the kernels added and dropped named in it, short names; --json lists them in full),
    then each side's GPU state (``states``; without them, the first screen's: two kernels of
    each named)."""
    listed = None if states else ANSWER_KERNELS
    print_prose(
        console,
        f"[b]why B differs from A[/b] ({escape(e.cause)}): "
        f"{escape(explanation_line(e, short=True, listed=listed))}",
    )
    if not states:
        return
    for side, state in (("A", e.gpu_state_a), ("B", e.gpu_state_b)):
        console.print(escape(gpu_state_line(state, side)), highlight=False)
