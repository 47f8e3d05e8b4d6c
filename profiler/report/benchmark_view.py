"""A sweep's benchmark table (profiler.analysis.benchmark: one BenchmarkCell per cell) written as
benchmark.csv and benchmark.md, printed with rich, and as --json. Each medium walks the typed
rows through its column specs (profiler.report.columns.Column: the quantity a column shows, its
formatter of profiler.units, the noise its figures follow); no frame stands between."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape

from profiler.analysis.benchmark import (
    COLUMNS,
    FLOAT_COLUMNS,
    GENERATION_COLUMNS,
    NOT_FINITE,
    PHASE_COLUMNS,
    PHASE_COLUMNS_OF_GENERATION,
    Geomean,
    axis_columns,
    geomeans,
)
from profiler.analysis.gpu_offsets import GpuOffset
from profiler.analysis.records import BenchmarkCell, TimedVerdicts, plain as plain_record
from profiler.analysis.roofline import MIN_BYTES_LABEL, MIN_GBS, MIN_PCT_BANDWIDTH
from profiler.analysis.timed_verdict import LATENCY_TARGET, LEVER
from profiler.analysis.verdict import FDR_Q
from profiler.fsutil import write_text_atomic
from profiler.report.columns import Column, cells, csv_value, markdown_table, text
from profiler.report.console import FitTable, print_prose
from profiler.report.fmt import (
    CSV_FLOATS,
    exponent,
    interval,
    marked,
    missing,
    number,
    percent,
    plain,
    rate,
    ratio,
    relative_error,
    size,
    time,
    window_flags,
)
from profiler.report.sentences import (
    BOUND_MEANINGS,
    BOUND_RULES,
    note_lines,
    verdict_note,
    withheld_note,
)
from profiler.runs.manifest import OK, SweepManifest, axis_options
from profiler.runs.samples import LAUNCH_BOUND, NEAR_LAUNCH_BOUND
from profiler.trace.kernels import PIPE_BUSY_NOTE

#: a sweep's rows, in its grid's order
Rows = Sequence[BenchmarkCell]
#: a column of the sweep's table, of one cell's record
CellColumn = Column[BenchmarkCell, Any]

#: benchmark.md's heads of the columns whose CSV names say less than the figure is: time in
#: Tensor Core kernels (not tensor pipe busy), and bandwidth from the minimum bytes (a lower bound)
MD_HEADERS = {
    "tensor_core_pct": "TC-kernel time %",
    "gbs": MIN_GBS,
    "pct_peak_bandwidth": MIN_PCT_BANDWIDTH,
}


def write_benchmark(
    sweep_dir: Path,
    rows: Rows,
    manifest: SweepManifest,
    offsets: list[GpuOffset] | None = None,
) -> list[Path]:
    """benchmark.csv and benchmark.md of the rows, in ``sweep_dir``."""
    csv_path, md_path = sweep_dir / "benchmark.csv", sweep_dir / "benchmark.md"
    write_text_atomic(csv_path, csv_text(rows, manifest))
    write_text_atomic(md_path, markdown(rows, manifest, offsets))
    return [csv_path, md_path]


def csv_columns(manifest: SweepManifest) -> list[str]:
    """benchmark.csv's columns: the record's fields in order, the swept options' after bs, the
    generation phases' only in a sweep of generations, the verdicts in words (verdict_note) in
    place of their records."""
    columns = [*COLUMNS[:4], *axis_columns(manifest), *COLUMNS[4:]]
    if manifest.options.get("workload", "forward") != "generate":
        columns = [c for c in columns if c not in PHASE_COLUMNS_OF_GENERATION]
    return ["verdict_note" if c == "verdicts" else c for c in columns]


def csv_text(rows: Rows, manifest: SweepManifest) -> str:
    """benchmark.csv: one line per cell, each field as it is (floats to CSV_FLOATS's six
    significant figures, a missing one empty), the verdicts in words."""
    columns = csv_columns(manifest)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            [
                verdict_note(row.verdicts)
                if c == "verdict_note"
                else csv_value(field(row, c), CSV_FLOATS, c in FLOAT_COLUMNS)
                for c in columns
            ]
        )
    return out.getvalue()


def field(row: BenchmarkCell, name: str) -> object:
    """A field of a cell's record by its benchmark.csv name (a swept option's value None where
    the cell has none)."""
    value: object = getattr(row, name, None)
    return None if value is msgspec.UNSET else value


def markdown(rows: Rows, manifest: SweepManifest, offsets: list[GpuOffset] | None = None) -> str:
    gpu_time = has_gpu_time(rows)
    lines = _md_preamble(rows, manifest)
    columns = md_columns(rows, manifest, gpu_time)
    lines.append(markdown_table([c.header for c in columns], cells(columns, rows)))
    if any(r.status == OK for r in rows):
        lines.append("\n## Geometric mean over batch sizes\n")
        found = geomeans(rows)
        shown = geomean_columns(rows, gpu_time)
        lines.append(markdown_table([c.header for c in shown], cells(shown, found)))
    lines.extend(f"\n{line}" for line in gpu_offset_lines(offsets or []))
    if not gpu_time:
        lines.append(f"\n{NO_GPU_TIME}")
    notes = verdict_notes(rows, manifest)
    if notes:
        lines.append("\n## How to read the verdicts\n")
        lines.extend(f"- {label}: {note}" for label, note in notes)
    lines += _md_unquotable_cells(rows, manifest)
    return "\n".join(lines) + "\n"


def _devices(rows: Rows) -> list[str]:
    return sorted({r.device for r in rows if r.device})


def _md_preamble(rows: Rows, manifest: SweepManifest) -> list[str]:
    """benchmark.md's title and the lines that say what its table's figures are."""
    devices = _devices(rows)
    options = {
        key: "default" if value is None else value for key, value in manifest.options.items()
    }
    return [
        f"# Sweep `{manifest.name}`: {manifest.model} on "
        f"{', '.join(devices) or 'no finished cell'}\n",
        f"- backends: {', '.join(manifest.backends)}; batch sizes: "
        f"{', '.join(map(str, manifest.batch_sizes))}"
        + "".join(
            f"; {key}: {', '.join(map(str, manifest.options[key]))}"
            for key in axis_columns(manifest)
        ),
        f"- speedup = the figure of `{manifest.baseline}` / the cell's, at the same batch "
        "size"
        + (" and the same " + ", ".join(axis_columns(manifest)) if axis_columns(manifest) else "")
        + f", on two figures, each with its own verdict: {LATENCY_WORDS} and "
        f"{GPU_TIME_WORDS}; with several processes per cell each figure (p50_ms, "
        f"gpu_compute_ms) is the geometric mean of the per-process medians; {PAIRED_WORDS}; "
        "[low-high] is the speedup's 95 % interval and the verdict says whether the cell is "
        "faster, slower, the same (±2 %) or undecided against the machine's noise (with "
        "several GPUs, over the windows on the GPUs both cells share); "
        + FDR_WORDS
        + f"; bound: launch-bound ({BOUND_RULES[LAUNCH_BOUND]}: the host paces the call), "
        f"near the launch bound ({BOUND_RULES[NEAR_LAUNCH_BOUND]}) or GPU-bound, on the "
        "geometric means of the processes' medians",
        f"- timed window: {options.get('iters', 'default')} iterations after "
        f"{options.get('timed_warmup', 'default')} warm-up (defaults: 100 after 20 on a "
        "GPU, a 5 s budget after 2 on a CPU), synchronized every iteration; TF32 "
        f"{'on' if options.get('tf32') else 'off'}",
        "- ready_s = prepare + first call; compile_s: see compile_what; rel_l2_error vs the "
        "FP32 eager reference; TC-kernel time % (time in Tensor Core kernels, not tensor "
        "pipe busy) and gpu_util_pct from the profiled steps' trace; "
        f"{MD_HEADERS['gbs']} and {MD_HEADERS['pct_peak_bandwidth']}: the "
        f"{MIN_BYTES_LABEL} over the p50, lower bounds of the traffic",
        f"- note: {PIPE_BUSY_NOTE}",
        "",
    ]


#: benchmark.md's spelling of each figure (a missing one blank): ms to the microsecond, rates
#: and percentages to one decimal, seconds to the hundredth, as the quantities' formatters
#: spell them without thousands separators
def _ms(value: float | None, noise: float | None = None) -> str:
    return time(value, labelled=False, thousands=False, blank="")


def _seconds(decimals: int) -> Callable[[float | None, float | None], str]:
    return lambda v, noise: time(
        v, "s", decimals=decimals, labelled=False, thousands=False, blank=""
    )


def _plain(decimals: int) -> Callable[[float | None, float | None], str]:
    return lambda v, noise: number(v, decimals, thousands=False, blank="")


def _md_ratio(value: float | None, noise: float | None = None) -> str:
    return ratio(value, suffix="", blank="")


def _md_percent(value: float | None, noise: float | None = None) -> str:
    return percent(value, labelled=False, blank="")


def _md_rate(unit: str, decimals: int = 1) -> Callable[[float | None, float | None], str]:
    return lambda v, noise: rate(v, unit, decimals, thousands=False, labelled=False, blank="")


def _md_exponent(value: float | None, noise: float | None = None) -> str:
    return exponent(value, blank="")


MD_SPELLINGS: dict[str, Callable[[Any, float | None], str]] = {
    "mean_ms": _ms,
    "p50_ms": _ms,
    "p90_ms": _ms,
    "p99_ms": _ms,
    "gpu_compute_ms": _ms,
    "enqueue_ms": _ms,
    "throughput_per_s": _md_rate("samples/s"),
    "processes": _plain(0),
    "ready_s": _seconds(2),
    "compile_s": _seconds(2),
    "rel_l2_error": _md_exponent,
    "tensor_core_pct": _md_percent,
    "gpu_util_pct": _md_percent,
    "elapsed_s": _seconds(1),
    "cv_pct": _md_percent,
    "peak_allocated_mib": _plain(1),
    "peak_reserved_mib": _plain(1),
    "engine_mib": _plain(1),
    "tflops": _md_rate("TFLOP/s", 2),
    "pct_peak_compute": _md_percent,
    "gbs": _md_rate("GB/s"),
    "pct_peak_bandwidth": _md_percent,
    "flop_per_byte": _plain(0),
    "ttft_ms": _ms,
    "token_p50_ms": _ms,
    "token_p99_ms": _ms,
    "tokens_per_s": _md_rate("tokens/s"),
    "token_agreement": _plain(3),
    "tpot_ms": _ms,
    "ttft_speedup": _md_ratio,
    "tpot_speedup": _md_ratio,
}


def _md_words(value: object, noise: float | None = None) -> str:
    """A field without a figure's spelling: its words, a number as it is, blank without."""
    return "" if value is None or missing(value) else str(value)


def _md_dropped(rows: Rows, gpu_time: bool) -> list[str]:
    """benchmark.csv's columns benchmark.md leaves out: the same in every cell, or empty."""
    dropped = ["model", "device", "baseline", "reason", *PHASE_COLUMNS]
    if len({r.node for r in rows}) < 2:  # one host: its name says nothing per cell
        dropped.append("node")
    if not any(r.gpu for r in rows):  # a CPU sweep
        dropped.append("gpu")
    if not any(r.tokens_per_s is not None for r in rows):  # not a generation sweep
        dropped += list(GENERATION_COLUMNS)
    if not gpu_time:
        dropped += ["gpu_compute_ms", "enqueue_ms", "bound"]
    return dropped


def md_columns(rows: Rows, manifest: SweepManifest, gpu_time: bool) -> list[CellColumn]:
    """benchmark.md's columns: benchmark.csv's that say something per cell, the latencies to
    the figures their window's CV allows (p50 marked), each figure's speedup, interval and
    verdict in one labelled column in place of the speedup's four."""
    dropped = {*_md_dropped(rows, gpu_time), "verdict_note", *SPEEDUP_COLUMNS, *GPU_SPEEDUP_COLUMNS}
    columns: list[CellColumn] = []
    for name in csv_columns(manifest):
        if name == "speedup":
            columns += _md_figures(rows, gpu_time)
        if name in dropped:
            continue
        if name in LATENCY_FIGURES:
            columns.append(Column(name, latency_cells, _md_latency(LATENCY_FIGURES.index(name))))
        else:
            spell = MD_SPELLINGS.get(name, _md_words)
            columns.append(Column(MD_HEADERS.get(name, name), _reader(name), spell))
    return columns


def _md_latency(index: int) -> Callable[[list[str], float | None], str]:
    """A latency of latency_cells (to the figures its CV allows), blank where missing."""
    return lambda cells, noise: "" if cells[index] == "-" else cells[index]


def _reader(name: str) -> Callable[[BenchmarkCell], object]:
    return lambda row: field(row, name)


def _md_figures(rows: Rows, gpu_time: bool) -> list[CellColumn]:
    """Each figure's column: its header (with what the intervals span, where every cell's is
    the same) and its cells' speedup, interval and verdict."""
    found = [_figure_column(rows, "latency", LATENCY_COLUMN, plain_words=True)]
    if gpu_time:
        found.append(_figure_column(rows, "gpu_time", GPU_TIME_COLUMN, plain_words=True))
    return found


def _md_unquotable_cells(rows: Rows, manifest: SweepManifest) -> list[str]:
    """The cells whose output is not finite, and those that did not finish (benchmark.md)."""
    lines = []
    broken = [r for r in rows if r.status == OK and r.reason == NOT_FINITE]
    if broken:
        lines.append(
            "\n## Cells whose output holds NaN or Inf (their latency is not one to quote)\n"
        )
        lines.extend(f"- `{r.backend}` bs {r.bs}" for r in broken)
    failed = [r for r in rows if r.status != OK]
    if failed:
        lines.append("\n## Cells that did not finish\n")
        for r in failed:
            values = "".join(f" {key} {field(r, key)}" for key in axis_columns(manifest))
            where = f" (gpu {r.gpu})" if r.gpu else ""
            lines.append(f"- `{r.backend}` bs {r.bs}{values}{where}: {r.status}: {r.reason}")
    return lines


#: the sweep table's columns left out, the last first, where the width cannot show them all
OPTIONAL = (
    "GPUs",
    "processes",
    "mean ms",
    "p90 ms",
    "bound",
    "ready s",
    "compile s",
    "rel L2 err",
    "TC-kernel time",
    "profiled GPU util",
    "peak alloc MiB",
    "peak reserved MiB",
    "TTFT ms",
    "token p99",
)
#: with a GPU-time verdict column beside latency's, these give way too where the width is short
GIVE_WAY_FOR_GPU_TIME = ("p99 ms", "samples/s", "CV")
#: benchmark.csv's columns of each figure's verdict (profiler.analysis.benchmark)
SPEEDUP_COLUMNS = ("speedup", "speedup_low", "speedup_high", "verdict")
GPU_SPEEDUP_COLUMNS = ("gpu_speedup", "gpu_speedup_low", "gpu_speedup_high", "gpu_verdict")
#: the two figures a sweep's verdicts are taken on, in words
LATENCY_WORDS = "latency (p50: what a caller waits)"
GPU_TIME_WORDS = (
    "GPU time (the device's work: the host's launch gaps excluded, the device's own gaps "
    "between kernels included)"
)
#: what a paired speedup is (a column or cell says "paired over N rounds")
PAIRED_WORDS = (
    'a speedup marked "paired over N rounds" is the geometric mean of the ratios of the N '
    "rounds that timed both cells, and can differ from the ratio of the cells' printed figures"
)
#: benchmark.md's column of each figure's speedup, interval and verdict
LATENCY_COLUMN = "latency speedup [95 %] verdict"
GPU_TIME_COLUMN = "GPU-time speedup [95 %] verdict"


def fdr_words(family: str = "the sweep's cells") -> str:
    """The false discovery rate the verdicts of a family are held to, in words."""
    return (
        f"each figure's verdicts are held to a {plain(100 * FDR_Q)} % false discovery rate over "
        f"{family} (Benjamini-Hochberg; the intervals are the raw 95 % ones)"
    )


FDR_WORDS = fdr_words()
NO_GPU_TIME = (
    "GPU time: not measured in these cells (a CPU, a generation, or runs recorded "
    "before GPU time was): the verdicts are latency's only"
)


def has_gpu_time(rows: Rows) -> bool:
    """Any cell measured GPU time (the GPU-time columns are shown)."""
    return any(r.gpu_compute_ms is not None or r.gpu_verdict for r in rows)


def speedup_text(
    speedup: float | None, low: float | None, high: float | None, verdict: str | None
) -> str:
    """One figure's speedup, its 95 % interval and its verdict, plain: "7.89x [3.16-19.70]
    faster"; "1.00x baseline"; "-" without one."""
    word = verdict if isinstance(verdict, str) else ""
    if missing(speedup):
        return word or "-"
    if word in ("", "baseline") or low is None or high is None or missing(low):
        return f"{ratio(speedup)} {word}".strip()
    return f"{ratio(speedup)} {interval(low, high)} {word}"


def _label(r: BenchmarkCell, manifest: SweepManifest) -> str:
    values = "".join(f" {key} {field(r, key)}" for key in axis_columns(manifest))
    return f"{r.backend} bs {r.bs}{values}"


def verdict_notes(rows: Rows, manifest: SweepManifest) -> list[tuple[str, str]]:
    """(cell, note) for every cell whose verdicts carry a note (launch-bound, the lever, the
    processes the latency needs, a disagreement between the figures)."""
    notes = [(_label(r, manifest), verdict_note(r.verdicts)) for r in rows]
    return [(label, note) for label, note in notes if note]


def judged(rows: Rows) -> int:
    """The cells with a verdict against the baseline (the family the FDR is held over)."""
    return sum(r.verdict not in ("", "baseline") for r in rows)


def undecided_on_both(row: BenchmarkCell) -> bool:
    """The cell's verdicts are undecided on every figure judged (latency, and GPU time where
    it was measured)."""
    return row.verdict == "undecided" and row.gpu_verdict in ("undecided", "")


def decided(rows: Rows) -> list[BenchmarkCell]:
    """The cells not undecided on both figures (`--only-decided`)."""
    return [r for r in rows if not undecided_on_both(r)]


def _same_key(row: BenchmarkCell, axes: Sequence[str]) -> tuple[object, ...]:
    """What a speedup compares a cell with the baseline's on: batch size and swept values."""
    return (row.bs, *(field(row, key) for key in axes))


def interval_processes(rows: Rows) -> list[str]:
    """Per cell, the processes its speedup interval spans: "6 proc." (a side), "3+6 proc."
    (baseline + cell) where the two differ; "" for a cell without an interval."""
    axes = [key for key in AXIS_KEYS if any(field(r, key) is not None for r in rows)]
    base = {_same_key(r, axes): r.processes for r in rows if r.verdict == "baseline"}
    texts = []
    for r in rows:
        theirs, ours = base.get(_same_key(r, axes)), r.processes
        if r.speedup_low is None or theirs is None or ours is None:
            texts.append("")
        else:
            texts.append(
                f"{number(ours, 0, thousands=False)} proc."
                if theirs == ours
                else f"{number(theirs, 0, thousands=False)}+"
                f"{number(ours, 0, thousands=False)} proc."
            )
    return texts


def common_processes(texts: list[str]) -> str | None:
    """The processes every interval spans, when they all span the same (for the header)."""
    found = {t for t in texts if t}
    return found.pop() if len(found) == 1 else None


def interval_spans(rows: Rows, figure: str) -> list[str]:
    """Per cell, what one figure's speedup interval spans: "paired over 5 rounds" where its
    verdict paired the rounds that timed both cells (the speedup is then the geometric mean of
    the per-round ratios, not the ratio of the cells' printed figures), else the processes
    (interval_processes); "" for a cell without an interval."""
    spans = []
    for span, r in zip(interval_processes(rows), rows):
        verdict = getattr(r.verdicts, figure, None) if r.verdicts is not None else None
        if span and verdict is not None and verdict.design == "paired":
            span = f"paired over {verdict.pairs} rounds"
        spans.append(span)
    return spans


def figure_spans(rows: Rows, figure: str, column: str) -> tuple[str, list[str]]:
    """A figure's column header and its cells' spans: what every interval spans said once in
    the header when it is the same for all ("[95 %, paired over 5 rounds]"), else per cell."""
    spans = interval_spans(rows, figure)
    common = common_processes(spans)
    if common:
        return column.replace("[95 %]", f"[95 %, {common}]"), [""] * len(spans)
    return column, spans


def _figure_column(rows: Rows, figure: str, header: str, plain_words: bool) -> CellColumn:
    """One figure's column (latency or GPU time): its speedup, its 95 % interval and its
    verdict (``plain_words``: without colour), what the interval spans in the header where it
    is the same for every cell, else in the cell."""
    header, spans = figure_spans(rows, figure, header)
    by_row = {id(r): span for r, span in zip(rows, spans)}
    markup = _verdict_markup if not plain_words else speedup_text
    if figure == "latency":
        return Column(
            header,
            lambda r: _spanned(
                markup(r.speedup, r.speedup_low, r.speedup_high, r.verdict), by_row[id(r)]
            ),
            text,
        )
    return Column(
        header,
        lambda r: _spanned(
            markup(r.gpu_speedup, r.gpu_speedup_low, r.gpu_speedup_high, r.gpu_verdict),
            by_row[id(r)],
        ),
        text,
    )


def print_benchmark(
    rows: Rows, manifest: SweepManifest, console: Console, only_decided: bool = False
) -> None:
    """The sweep's table; with ``only_decided`` the cells undecided on both figures left out
    (and counted); the geometric mean of each backend over its batch sizes under it."""
    shown = decided(rows) if only_decided else list(rows)
    gpu_time = has_gpu_time(shown)
    console.print(_sweep_table(shown, manifest, gpu_time))
    if only_decided:
        console.print(
            f"[dim]--only-decided: {len(rows) - len(shown)} of {len(rows)} cells hidden "
            "(undecided on both figures)[/]",
            highlight=False,
        )
    print_geomeans(rows, console, gpu_time)
    if any(r.tensor_core_pct is not None for r in shown):
        console.print(f"[dim]TC-kernel time: {PIPE_BUSY_NOTE}[/]", highlight=False)
    print_verdict_notes(shown, manifest, console, gpu_time)


def _ms_noise(value: float | None, noise: float | None) -> str:
    """A time in ms to the figures its window's noise allows (four without one)."""
    return number(value, None, noise=noise)


def _seconds_2(value: float | None, noise: float | None = None) -> str:
    return time(value, "s", decimals=2, labelled=False, thousands=False)


def _ms_3(value: float | None, noise: float | None = None) -> str:
    return time(value, labelled=False, thousands=False)


def _rate(unit: str) -> Callable[[float | None, float | None], str]:
    return lambda value, noise: rate(value, unit, labelled=False)


def _processes(value: int | None, noise: float | None = None) -> str:
    return number(value, 0, thousands=False)


def _error(value: float | None, noise: float | None = None) -> str:
    return relative_error(value)


def _axis_value(value: object, noise: float | None = None) -> str:
    """A swept option's value (a whole number)."""
    return number(value if isinstance(value, int | float) else None, 0, thousands=False)


def _percent_cell(value: float | None, noise: float | None = None) -> str:
    return percent(value)


def _cv(row: BenchmarkCell) -> float | None:
    """The cell's relative noise: its window's CV (the figures its latencies allow)."""
    return None if row.cv_pct is None or missing(row.cv_pct) else row.cv_pct / 100


def _latency_column(header: str, index: int) -> CellColumn:
    return Column(header, latency_cells, lambda cells, noise: cells[index])


def sweep_columns(rows: Rows, manifest: SweepManifest, gpu_time: bool) -> list[CellColumn]:
    """The sweep's table on the terminal, column by column: the cell, its latencies to the
    figures its window's CV allows (p50 marked with the window's first flag), the GPU time and
    bound, each figure's speedup, interval and verdict, the run's own figures, a generation's
    and the status."""
    columns: list[CellColumn] = []
    if any(r.gpu for r in rows):
        columns.append(Column("GPUs", windows_gpus, text))
    columns += [
        Column("backend", lambda r: r.backend, text),
        Column("bs", lambda r: str(r.bs), text),
        *(Column(key, _reader(key), _axis_value) for key in axis_columns(manifest)),
        *(_latency_column(h, i) for i, h in enumerate(("mean ms", "p50 ms", "p90 ms", "p99 ms"))),
    ]
    if gpu_time:
        columns += [
            Column("GPU ms", lambda r: r.gpu_compute_ms, _ms_noise),
            Column("bound", lambda r: r.bound, text),
        ]
    columns += [
        Column("samples/s", lambda r: r.throughput_per_s, _rate("samples/s")),
        _figure_column(rows, "latency", LATENCY_COLUMN, plain_words=False),
        *(
            (_figure_column(rows, "gpu_time", GPU_TIME_COLUMN, plain_words=False),)
            if gpu_time
            else ()
        ),
        Column("processes", lambda r: r.processes, _processes),
        Column("ready s", lambda r: r.ready_s, _seconds_2),
        Column("compile s", lambda r: r.compile_s, _seconds_2),
        Column("rel L2 err", lambda r: r.rel_l2_error, _error),
        Column("TC-kernel time", lambda r: r.tensor_core_pct, _percent_cell),
        Column("profiled GPU util", lambda r: r.gpu_util_pct, _percent_cell),
        Column("CV", lambda r: r, lambda r, noise: _cv_cell(r)),
        Column(
            "peak alloc MiB", lambda r: r, lambda r, noise: _mib(r.peak_allocated_mib, r.device)
        ),
        Column(
            "peak reserved MiB", lambda r: r, lambda r, noise: _mib(r.peak_reserved_mib, r.device)
        ),
    ]
    if any(r.tokens_per_s is not None for r in rows):
        columns += [
            Column("TTFT ms", lambda r: r.ttft_ms, _ms_3),
            Column("TPOT ms", lambda r: r.tpot_ms, _ms_3),
            Column("token p99", lambda r: r.token_p99_ms, _ms_3),
            Column("tokens/s", lambda r: r.tokens_per_s, _rate("tokens/s")),
            Column(
                "TTFT vs baseline", lambda r: r, lambda r, noise: _phase_verdict_cell(r, "ttft")
            ),
            Column(
                "TPOT vs baseline", lambda r: r, lambda r, noise: _phase_verdict_cell(r, "tpot")
            ),
        ]
    columns.append(Column("status", lambda r: r, lambda r, noise: _sweep_status(r)))
    return columns


def _sweep_table(rows: Rows, manifest: SweepManifest, gpu_time: bool) -> FitTable:
    """The sweep's table on the terminal, one row per cell (sweep_columns)."""
    t = FitTable(
        title=f"{manifest.model} on {', '.join(_devices(rows)) or '-'}: speedup = "
        f"{manifest.baseline} / cell, on latency" + (" and on GPU time" if gpu_time else " (p50)")
    )
    columns = sweep_columns(rows, manifest, gpu_time)
    bad = any(r.status != OK or r.reason == NOT_FINITE for r in rows)
    figures = tuple(c.header for c in columns if "speedup [95 %" in c.header)
    _add_sweep_columns(t, [c.header for c in columns], figures, gpu_time, bad)
    for r in rows:
        t.add_row(*(c.cell(r) for c in columns))
    return t


def _add_sweep_columns(
    t: FitTable, headers: list[str], figures: tuple[str, ...], gpu_time: bool, bad: bool
) -> None:
    """The sweep table's columns; the status column kept where a cell failed (``bad``)."""
    # two verdict columns: the figures behind them stay, the rest gives way at narrow widths
    optional = OPTIONAL + (GIVE_WAY_FOR_GPU_TIME if gpu_time else ())
    for h in headers:
        if h == "backend":  # whole, like a number: the names are short and the row's key
            t.add_column(h, number=True, justify="left")
        elif h == "status":
            t.add_column(h, optional=not bad)
        elif h in figures or h == "bound":  # words and an interval: wrap where short
            t.add_column(h, optional=h in optional, whole=h in figures)
        elif h == "CV":  # a figure and the window's flags (noisy; bimodal): wrap where short
            t.add_column(h, justify="right", optional=h in optional, whole=True)
        else:
            t.add_column(h, number=True, optional=h in optional)


def _cv_cell(r: BenchmarkCell) -> str:
    """The window's CV and its noise warnings (yellow)."""
    return percent(r.cv_pct) + (f" [yellow]{escape(r.noise)}[/]" if r.noise else "")


def _phase_verdict_cell(r: BenchmarkCell, phase: str) -> str:
    """A generation phase's speedup over the baseline's cell and its latency verdict, the GPU
    time's beside it where it was taken: ``4.12x faster (GPU: faster)``."""
    if phase == "ttft":
        speedup, word, gpu = r.ttft_speedup, r.ttft_verdict, r.ttft_gpu_verdict
    else:
        speedup, word, gpu = r.tpot_speedup, r.tpot_verdict, r.tpot_gpu_verdict
    shown = _verdict_markup(speedup, None, None, word) if word else "-"
    if gpu and gpu != "baseline":
        shown += f" (GPU: {gpu})"
    return shown


def _sweep_status(r: BenchmarkCell) -> str:
    if r.status == OK and r.reason == NOT_FINITE:
        return "[yellow]ok, NaN/Inf output[/]"
    return r.status if r.status == OK else f"[red]{escape(str(r.status))}[/]"


def print_verdict_notes(
    rows: Rows, manifest: SweepManifest, console: Console, gpu_time: bool
) -> None:
    """Under the table: what the verdict columns are, the false discovery rate they are held
    to, and each cell's notes."""
    if not judged(rows):
        return
    what = f"{LATENCY_WORDS} and {GPU_TIME_WORDS}, judged apart" if gpu_time else LATENCY_WORDS
    means = (
        "p50 ms and GPU ms are geometric means of per-process medians"
        if gpu_time
        else "p50 ms is the geometric mean of per-process medians"
    ) + f"; {PAIRED_WORDS}"
    fdr = f"; {FDR_WORDS}" if judged(rows) > 1 else ""
    console.print(
        f"[dim]verdicts: the cell (B) against {escape(manifest.baseline)} (A) at the "
        f"same batch size, on {what}; {means}{fdr}[/]",
        highlight=False,
    )
    if not gpu_time:
        console.print(f"[dim]{NO_GPU_TIME}[/]", highlight=False)
    flagged = [_label(r, manifest) for r in rows if cell_noise(r)[1]]
    if flagged:
        console.print(
            f"[yellow]note[/]: {len(flagged)} cells' timed windows are flagged "
            "(! noisy, bimodal or drifting: all flags in the CV column): their p50 "
            "is printed to the figures its CV allows, and their latency verdicts rest "
            "on the spread between processes, which such a window widens",
            highlight=False,
        )
    withheld = withheld_cells(rows, manifest)
    if withheld:
        print_prose(console, f"[yellow]note[/]: {escape(withheld_note(withheld))}")
    for line in grouped_notes(rows, manifest):
        print_prose(console, f"[yellow]note[/]{escape(line)}")


def withheld_cells(rows: Rows, manifest: SweepManifest) -> list[str]:
    """The cells whose latency verdict was withheld (one process a side on a CPU whose floor
    `noise` has not measured: profiler.analysis.verdict)."""
    return [
        _label(r, manifest)
        for r in rows
        if r.verdicts is not None and r.verdicts.latency is not None and r.verdicts.latency.withheld
    ]


def grouped_notes(rows: Rows, manifest: SweepManifest) -> list[str]:
    """The cells' verdict notes with what they share said once: one line names the
    launch-bound cells (and the baseline, where it is one) with the lever and the processes
    each latency verdict would need, then what is a cell's own (two figures that disagree).
    Each line starts after the word "note" (": ..." or " (cell): ...")."""
    cells = [(_label(r, manifest), r.verdicts) for r in rows if r.verdicts is not None]
    lines = []
    for word in (LAUNCH_BOUND, NEAR_LAUNCH_BOUND):
        line = _bound_group(cells, word, manifest)
        if line:
            lines.append(line)
    for label, v in cells:
        own = [
            line
            for line in note_lines(v)
            if not line.startswith(
                (
                    f"{LAUNCH_BOUND} (",
                    f"{NEAR_LAUNCH_BOUND} (",
                    "the latency verdict would need",
                    "`",
                )
            )
        ]
        lines += [f" ({label}): {line}" for line in own]
    return lines


def _bound_group(
    cells: list[tuple[str, TimedVerdicts]], word: str, manifest: SweepManifest
) -> str | None:
    """One note line naming the cells of ``word`` (launch-bound, near the launch bound), and
    the baseline's batch sizes where it is, with the rule, the lever and the processes each
    latency verdict would need; None when no cell is."""
    named = [label for label, v in cells if v.bound_b.word == word]
    baseline = sorted({label.split(" bs ")[1] for label, v in cells if v.bound_a.word == word})
    if not named and not baseline:
        return None
    who = "; ".join(
        filter(
            None,
            (
                ", ".join(named),
                f"the baseline {manifest.baseline} at bs {', '.join(baseline)}" if baseline else "",
            ),
        )
    )
    needed = [
        f"{label} {v.latency_processes_for_5pct}"
        for label, v in cells
        if word in (v.bound_a.word, v.bound_b.word) and v.latency_processes_for_5pct is not None
    ]
    return (
        f": {word} ({BOUND_RULES[word]}: {BOUND_MEANINGS[word]}): {who}. Quote the GPU-time "
        f"verdicts there; `{LEVER}` replays the call without launches"
        + (
            f"; processes a side a latency verdict would need for "
            f"±{plain(100 * LATENCY_TARGET)} %: {', '.join(needed)}"
            if needed
            else ""
        )
    )


VERDICT_COLOURS = {"faster": "green", "slower": "red", "same": "cyan", "undecided": "yellow"}


def windows_gpus(r: BenchmarkCell) -> str:
    """The GPUs the cell's figures were taken on: its windows' (comma-separated), else the GPU
    that ran the cell."""
    return (r.gpus or "").replace(";", ",") or r.gpu


def _verdict_markup(
    speedup: float | None, low: float | None, high: float | None, verdict: str | None
) -> str:
    """A figure's speedup, its 95 % interval and its verdict (rich markup): "4.60x [3.46-6.11]
    faster"; "1.00x baseline"; "-"."""
    shown = speedup_text(speedup, low, high, verdict)
    word = verdict or ""
    colour = VERDICT_COLOURS.get(word)
    return (
        shown[: -len(word)] + f"[{colour}]{word}[/]" if colour and shown.endswith(word) else shown
    )


def _spanned(shown: str, span: str) -> str:
    return f"{shown}, {span}" if span and "[" in shown else shown


def geomean_columns(rows: Rows, gpu_time: bool) -> list[Column[Geomean, Any]]:
    """The geometric mean rows' columns (profiler.analysis.benchmark.geomeans): p50 and GPU ms
    to the figures the noisiest cell's CV allows, speedups as ``2.24x``."""
    cvs = [r.cv_pct for r in rows if r.cv_pct is not None and not missing(r.cv_pct)]
    cv = max(cvs) / 100 if cvs else None
    columns: list[Column[Geomean, Any]] = [
        Column("backend", lambda g: g.backend, text),
        Column("cells", lambda g: str(g.cells), text),
        Column("p50 ms", lambda g: g.p50_ms, lambda v, noise: number(v, None, noise=cv)),
    ]
    if gpu_time:
        columns.append(Column("GPU ms", lambda g: g.gpu_compute_ms, _ms_noise))
    columns.append(Column("latency speedup", lambda g: g.speedup, lambda v, noise: ratio(v)))
    if gpu_time:
        columns.append(
            Column("GPU-time speedup", lambda g: g.gpu_speedup, lambda v, noise: ratio(v))
        )
    return columns


def print_geomeans(rows: Rows, console: Console, gpu_time: bool) -> None:
    """Each backend's geometric mean over its batch sizes, in a table of its own."""
    if not any(r.status == OK for r in rows):
        return
    columns = geomean_columns(rows, gpu_time)
    t = FitTable(title="geometric mean over batch sizes (cells: the finished cells behind it)")
    for column in columns:
        t.add_column(
            column.header, number=True, justify="left" if column.header == "backend" else "right"
        )
    for g in geomeans(rows):
        t.add_row(*(c.cell(g) for c in columns))
    console.print(t)


#: the swept options (a speedup compares cells with the same values of them)
AXIS_KEYS = tuple(axis_options())
#: the latency columns of benchmark.csv, printed to the figures the window's CV allows
LATENCY_FIGURES = ("mean_ms", "p50_ms", "p90_ms", "p99_ms")


def cell_noise(r: BenchmarkCell) -> tuple[float | None, list[str]]:
    """A cell's relative noise (its window's CV) and its window's flags."""
    return _cv(r), window_flags(r.noise or "")


def latency_cells(r: BenchmarkCell) -> list[str]:
    """mean, p50, p90, p99 of a cell to the figures its CV allows, p50 marked with the
    window's flags ("4.3 (! noisy)")."""
    cv, flags = cell_noise(r)
    cells = [number(v, None, noise=cv) for v in (r.mean_ms, r.p50_ms, r.p90_ms, r.p99_ms)]
    cells[1] = marked(cells[1], flags[:1])  # the first flag; all of them beside the CV
    return cells


def _mib(value: float | None, device: str) -> str:
    return size(value, "MiB", labelled=False, blank="n/a (CPU)" if device == "CPU" else "-")


def gpu_offset_lines(offsets: list[GpuOffset]) -> list[str]:
    """The GPUs' offsets from each other on the same configs, against their floors: one line
    for all, then one per GPU further from the others than its floor (plain text)."""
    if not offsets:
        return []
    figure = "GPU time" if offsets[0].figure == "gpu_time" else "latency"
    each = "; ".join(
        f"GPU {o.gpu} {percent(_percent(o.offset), sign=True)} (floor "
        f"{percent(_percent(o.floor))}, {o.windows} windows)"
        for o in offsets
    )
    lines = [
        f"GPUs on the same configs ({figure}, each against the median GPU; floor: its "
        f"between-process CV): {each}"
    ]
    lines += [
        f"GPU {o.gpu} sits {percent(_percent(o.offset), sign=True)} from the other GPUs on "
        f"{figure}, beyond its floor of {percent(_percent(o.floor))}: its windows pair only "
        "with windows of the same process (on it); unpaired verdicts carry the offset as "
        "noise"
        for o in offsets
        if o.apart
    ]
    return lines


def _percent(value: float | None) -> float | None:
    return None if value is None else 100 * value


def print_gpu_offsets(offsets: list[GpuOffset], console: Console) -> None:
    lines = gpu_offset_lines(offsets)
    if lines:
        console.print(f"[dim]{escape(lines[0])}[/]", highlight=False)
    for line in lines[1:]:
        console.print(f"[yellow]note[/]: {escape(line)}", highlight=False)


def benchmark_json(
    rows: Rows,
    manifest: SweepManifest,
    sweep_dir: Path,
    offsets: list[GpuOffset] | None = None,
) -> dict[str, Any]:
    """The sweep's `benchmark` --json document: each cell's record (BenchmarkCell: the
    benchmark.csv columns), and each GPU's offset and floor where the windows ran on several
    (Output.document writes a figure that is not finite as null)."""
    return {
        "sweep": manifest.name,
        "folder": str(sweep_dir),
        "model": manifest.model,
        "baseline": manifest.baseline,
        "gpus": [{**dataclasses.asdict(o), "apart": o.apart} for o in offsets or []],
        "cells": plain_record(list(rows)),
    }
