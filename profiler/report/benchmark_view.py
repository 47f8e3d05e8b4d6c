"""A sweep's benchmark table (profiler.analysis.benchmark) written as benchmark.csv and
benchmark.md, printed with rich, and as --json."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape

from profiler.analysis.benchmark import (
    GENERATION_COLUMNS,
    NOT_FINITE,
    PHASE_COLUMNS,
    axis_columns,
    geomean_rows,
)
from profiler.analysis.gpu_offsets import GpuOffset
from profiler.analysis.records import BenchmarkCell, TimedVerdicts, plain as plain_record
from profiler.analysis.roofline import MIN_BYTES_LABEL, MIN_GBS, MIN_PCT_BANDWIDTH
from profiler.analysis.timed_verdict import LATENCY_TARGET, LEVER
from profiler.analysis.verdict import FDR_Q
from profiler.fsutil import write_text_atomic
from profiler.report.console import FitTable, print_prose
from profiler.report.export import integer_counts, markdown_table
from profiler.report.fmt import (
    CSV_FLOATS,
    MD_FORMATS,
    interval,
    marked,
    md_cell,
    missing,
    number,
    percent,
    plain,
    ratio,
    size,
    sweep_cell,
    window_flags,
)
from profiler.report.sentences import (
    BOUND_MEANINGS,
    BOUND_RULES,
    note_lines,
    verdict_note,
    withheld_note,
)
from profiler.runs.manifest import SweepManifest, axis_options
from profiler.runs.samples import LAUNCH_BOUND, NEAR_LAUNCH_BOUND
from profiler.trace.kernels import PIPE_BUSY_NOTE
from profiler.trace.summary import json_safe

#: benchmark.md's heads of the columns whose CSV names say less than the figure is: time in
#: Tensor Core kernels (not tensor pipe busy), and bandwidth from the minimum bytes (a lower bound)
MD_HEADERS = {
    "tensor_core_pct": "TC-kernel time %",
    "gbs": MIN_GBS,
    "pct_peak_bandwidth": MIN_PCT_BANDWIDTH,
}


def write_benchmark(
    sweep_dir: Path,
    frame: pd.DataFrame,
    manifest: SweepManifest,
    offsets: list[GpuOffset] | None = None,
) -> list[Path]:
    csv_path, md_path = sweep_dir / "benchmark.csv", sweep_dir / "benchmark.md"
    table = integer_counts(csv_table(frame))
    write_text_atomic(csv_path, table.to_csv(index=False, float_format=CSV_FLOATS))
    write_text_atomic(md_path, markdown(frame, manifest, offsets))
    return [csv_path, md_path]


def csv_table(frame: pd.DataFrame) -> pd.DataFrame:
    """benchmark.csv's table: the frame with each cell's verdicts in words (verdict_note) in
    place of their records (profiler.analysis.benchmark.benchmark_frame)."""
    if "verdicts" not in frame:
        return frame
    table = frame.drop(columns="verdicts")
    table.insert(list(frame.columns).index("verdicts"), "verdict_note", note_texts(frame))
    return table


def note_texts(frame: pd.DataFrame) -> list[str]:
    """Each cell's verdict_note: written from its verdicts record, or the text of a table read
    back from a benchmark.csv."""
    if "verdicts" in frame:
        return [verdict_note(v if isinstance(v, TimedVerdicts) else None) for v in frame.verdicts]
    notes = frame["verdict_note"] if "verdict_note" in frame else [""] * len(frame)
    return [note if isinstance(note, str) else "" for note in notes]


def markdown(
    frame: pd.DataFrame, manifest: SweepManifest, offsets: list[GpuOffset] | None = None
) -> str:
    gpu_time = has_gpu_time(frame)
    lines = _md_preamble(frame, manifest)
    lines.append(markdown_table(_md_shown(frame, gpu_time).rename(columns=MD_HEADERS)))
    if (frame["status"] == "ok").any():
        lines.append("\n## Geometric mean over batch sizes\n")
        lines.append(markdown_table(geomean_table(frame, gpu_time)))
    lines.extend(f"\n{line}" for line in gpu_offset_lines(offsets or []))
    if not gpu_time:
        lines.append(f"\n{NO_GPU_TIME}")
    notes = verdict_notes(frame, manifest)
    if notes:
        lines.append("\n## How to read the verdicts\n")
        lines.extend(f"- {label}: {note}" for label, note in notes)
    lines += _md_unquotable_cells(frame, manifest)
    return "\n".join(lines) + "\n"


def _md_preamble(frame: pd.DataFrame, manifest: SweepManifest) -> list[str]:
    """benchmark.md's title and the lines that say what its table's figures are."""
    devices = sorted({d for d in frame["device"].dropna() if d})
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


def _md_dropped(frame: pd.DataFrame, gpu_time: bool) -> list[str]:
    """benchmark.csv's columns benchmark.md leaves out: the same in every cell, or empty."""
    dropped = ["model", "device", "baseline", "reason", *PHASE_COLUMNS]
    if frame["node"].nunique() < 2:  # one host: its name says nothing per cell
        dropped.append("node")
    if not frame["gpu"].astype(bool).any():  # a CPU sweep
        dropped.append("gpu")
    if not frame["tokens_per_s"].notna().any():  # not a generation sweep
        dropped += list(GENERATION_COLUMNS)
    if not gpu_time:
        dropped += ["gpu_compute_ms", "enqueue_ms", "bound"]
    return dropped


def _md_shown(frame: pd.DataFrame, gpu_time: bool) -> pd.DataFrame:
    """benchmark.md's table as text, each figure's speedup, interval and verdict in one
    labelled column."""
    shown = frame.drop(columns=_md_dropped(frame, gpu_time)).astype(object)
    for column in MD_FORMATS:
        if column in shown:
            shown[column] = [md_cell(column, v) for v in frame[column]]
    for r in frame.itertuples():  # latencies to the figures their noise allows, p50 marked
        for column, text in zip(LATENCY_FIGURES, latency_cells(r)):
            shown.at[r.Index, column] = "" if text == "-" else text
    at = list(shown.columns).index("speedup")
    figures = _md_figures(frame, gpu_time)
    notes = [c for c in ("verdicts", "verdict_note") if c in shown]
    shown = shown.drop(columns=[*SPEEDUP_COLUMNS, *GPU_SPEEDUP_COLUMNS, *notes])
    for offset, (name, cells) in enumerate(figures.items()):
        shown.insert(at + offset, name, cells)
    return shown


def _md_figures(frame: pd.DataFrame, gpu_time: bool) -> dict[str, list[str]]:
    """Each figure's column: its header (with what the intervals span, where every cell's is
    the same) and its cells' speedup, interval and verdict."""
    latency_column, latency_spans = figure_spans(frame, "latency", LATENCY_COLUMN)
    figures = {
        latency_column: [
            _spanned(speedup_text(r.speedup, r.speedup_low, r.speedup_high, r.verdict), span)
            for r, span in zip(frame.itertuples(), latency_spans)
        ]
    }
    if gpu_time:
        gpu_column, gpu_spans = figure_spans(frame, "gpu_time", GPU_TIME_COLUMN)
        figures[gpu_column] = [
            _spanned(
                speedup_text(r.gpu_speedup, r.gpu_speedup_low, r.gpu_speedup_high, r.gpu_verdict),
                span,
            )
            for r, span in zip(frame.itertuples(), gpu_spans)
        ]
    return figures


def _md_unquotable_cells(frame: pd.DataFrame, manifest: SweepManifest) -> list[str]:
    """The cells whose output is not finite, and those that did not finish (benchmark.md)."""
    lines = []
    broken = frame[(frame["status"] == "ok") & (frame["reason"] == NOT_FINITE)]
    if len(broken):
        lines.append(
            "\n## Cells whose output holds NaN or Inf (their latency is not one to quote)\n"
        )
        lines.extend(f"- `{r.backend}` bs {r.bs}" for r in broken.itertuples())
    failed = frame[frame["status"] != "ok"]
    if len(failed):
        lines.append("\n## Cells that did not finish\n")
        for r in failed.itertuples():
            values = "".join(f" {key} {getattr(r, key)}" for key in axis_columns(manifest))
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


def has_gpu_time(frame: pd.DataFrame) -> bool:
    """Any cell measured GPU time (the GPU-time columns are shown)."""
    verdicts = frame["gpu_verdict"] if "gpu_verdict" in frame else pd.Series(dtype=object)
    return bool(
        frame["gpu_compute_ms"].notna().any() or any(isinstance(v, str) and v for v in verdicts)
    )


def speedup_text(speedup, low, high, verdict) -> str:
    """One figure's speedup, its 95 % interval and its verdict, plain: "7.89x [3.16-19.70]
    faster"; "1.00x baseline"; "-" without one."""
    word = verdict if isinstance(verdict, str) else ""
    if missing(speedup):
        return word or "-"
    if word in ("", "baseline") or missing(low):
        return f"{ratio(speedup)} {word}".strip()
    return f"{ratio(speedup)} {interval(low, high)} {word}"


def _label(r, manifest: SweepManifest) -> str:
    values = "".join(f" {key} {getattr(r, key)}" for key in axis_columns(manifest))
    return f"{r.backend} bs {r.bs}{values}"


def verdict_notes(frame: pd.DataFrame, manifest: SweepManifest) -> list[tuple[str, str]]:
    """(cell, note) for every cell whose verdicts carry a note (launch-bound, the lever, the
    processes the latency needs, a disagreement between the figures)."""
    return [
        (_label(r, manifest), note)
        for r, note in zip(frame.itertuples(), note_texts(frame))
        if note
    ]


def judged(frame: pd.DataFrame) -> int:
    """The cells with a verdict against the baseline (the family the FDR is held over)."""
    return sum(isinstance(v, str) and v not in ("", "baseline") for v in frame["verdict"])


def undecided_on_both(frame: pd.DataFrame) -> pd.Series:
    """The cells whose verdicts are undecided on every figure judged (latency, and GPU time
    where it was measured)."""
    gpu = frame["gpu_verdict"] if "gpu_verdict" in frame else pd.Series("", index=frame.index)
    return (frame["verdict"] == "undecided") & gpu.map(
        lambda v: v == "undecided" or not (isinstance(v, str) and v)
    )


def interval_processes(frame: pd.DataFrame) -> list[str]:
    """Per cell, the processes its speedup interval spans: "6 proc." (a side), "3+6 proc."
    (baseline + cell) where the two differ; "" for a cell without an interval."""
    same = ["bs", *[c for c in frame.columns if c in AXIS_KEYS]]
    base = {tuple(r[same]): r.processes for _, r in frame.iterrows() if r.verdict == "baseline"}
    texts = []
    for _, r in frame.iterrows():
        theirs, ours = base.get(tuple(r[same])), r.processes
        if missing(r.speedup_low) or missing(theirs) or missing(ours):
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


def interval_spans(frame: pd.DataFrame, figure: str) -> list[str]:
    """Per cell, what one figure's speedup interval spans: "paired over 5 rounds" where its
    verdict paired the rounds that timed both cells (the speedup is then the geometric mean of
    the per-round ratios, not the ratio of the cells' printed figures), else the processes
    (interval_processes); "" for a cell without an interval. A table read back from
    benchmark.csv (no verdict records) gives the processes."""
    records = frame["verdicts"] if "verdicts" in frame else pd.Series(None, index=frame.index)
    spans = []
    for text, record in zip(interval_processes(frame), records):
        verdict = getattr(record, figure, None) if isinstance(record, TimedVerdicts) else None
        if text and verdict is not None and verdict.design == "paired":
            text = f"paired over {verdict.pairs} rounds"
        spans.append(text)
    return spans


def figure_spans(frame: pd.DataFrame, figure: str, column: str) -> tuple[str, list[str]]:
    """A figure's column header and its cells' spans: what every interval spans said once in
    the header when it is the same for all ("[95 %, paired over 5 rounds]"), else per cell."""
    spans = interval_spans(frame, figure)
    common = common_processes(spans)
    if common:
        return column.replace("[95 %]", f"[95 %, {common}]"), [""] * len(spans)
    return column, spans


def print_benchmark(
    frame: pd.DataFrame, manifest: SweepManifest, console: Console, only_decided: bool = False
) -> None:
    """The sweep's table; with ``only_decided`` the cells undecided on both figures left out
    (and counted); the geometric mean of each backend over its batch sizes under it."""
    hidden = undecided_on_both(frame) if only_decided else pd.Series(False, index=frame.index)
    whole, frame = frame, frame[~hidden]
    gpu_time = has_gpu_time(frame)
    console.print(_sweep_table(frame, manifest, gpu_time))
    if only_decided:
        console.print(
            f"[dim]--only-decided: {int(hidden.sum())} of {len(whole)} cells hidden "
            "(undecided on both figures)[/]",
            highlight=False,
        )
    print_geomeans(whole, console, gpu_time)
    if frame["tensor_core_pct"].notna().any():
        console.print(f"[dim]TC-kernel time: {PIPE_BUSY_NOTE}[/]", highlight=False)
    print_verdict_notes(frame, manifest, console, gpu_time)


def _sweep_table(frame: pd.DataFrame, manifest: SweepManifest, gpu_time: bool) -> FitTable:
    """The sweep's table on the terminal, one row per cell."""
    devices = sorted({d for d in frame["device"].dropna() if d})
    t = FitTable(
        title=f"{manifest.model} on {', '.join(devices) or '-'}: speedup = "
        f"{manifest.baseline} / cell, on latency" + (" and on GPU time" if gpu_time else " (p50)")
    )
    axes = axis_columns(manifest)
    # what every interval spans, said once in the header where it is the same for all
    latency_column, latency_spans = figure_spans(frame, "latency", LATENCY_COLUMN)
    gpu_column, gpu_spans = figure_spans(frame, "gpu_time", GPU_TIME_COLUMN)
    figures: tuple[str, ...] = (latency_column, gpu_column) if gpu_time else (latency_column,)
    generation = bool(frame["tokens_per_s"].notna().any())
    on_gpus = bool(frame["gpu"].astype(bool).any())
    bad = bool(((frame["status"] != "ok") | (frame["reason"] == NOT_FINITE)).any())
    headers = _sweep_headers(axes, figures, gpu_time, generation, on_gpus)
    _add_sweep_columns(t, headers, figures, gpu_time, bad)
    for r, span, gpu_span in zip(frame.itertuples(), latency_spans, gpu_spans):
        t.add_row(
            *((windows_gpus(r),) if on_gpus else ()),
            r.backend,
            str(r.bs),
            *(number(getattr(r, key), 0, thousands=False) for key in axes),
            *latency_cells(r),
            *((number(r.gpu_compute_ms, None, noise=None), _text(r.bound)) if gpu_time else ()),
            sweep_cell("throughput_per_s", r.throughput_per_s),
            verdict_cell(r, span),
            *((gpu_verdict_cell(r, gpu_span),) if gpu_time else ()),
            *_sweep_run_cells(r),
            *(_sweep_generation_cells(r) if generation else ()),
            _sweep_status(r),
        )
    return t


def _sweep_headers(
    axes: list[str], figures: tuple[str, ...], gpu_time: bool, generation: bool, on_gpus: bool
) -> tuple[str, ...]:
    headers = (
        "backend",
        "bs",
        *axes,
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        *(("GPU ms", "bound") if gpu_time else ()),
        "samples/s",
        *figures,
        "processes",
        "ready s",
        "compile s",
        "rel L2 err",
        "TC-kernel time",
        "profiled GPU util",
        "CV",
        "peak alloc MiB",
        "peak reserved MiB",
        "status",
    )
    if generation:
        headers = headers[:-1] + (
            "TTFT ms",
            "TPOT ms",
            "token p99",
            "tokens/s",
            "TTFT vs baseline",
            "TPOT vs baseline",
            "status",
        )
    if on_gpus:
        headers = ("GPUs", *headers)
    return headers


def _add_sweep_columns(
    t: FitTable, headers: tuple[str, ...], figures: tuple[str, ...], gpu_time: bool, bad: bool
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


def _sweep_run_cells(r) -> tuple[str, ...]:
    """A cell's processes, times to ready, numerics, GPU use, noise and memory."""
    return (
        sweep_cell("processes", r.processes),
        sweep_cell("ready_s", r.ready_s),
        sweep_cell("compile_s", r.compile_s),
        sweep_cell("rel_l2_error", r.rel_l2_error),
        percent(r.tensor_core_pct),
        percent(r.gpu_util_pct),
        percent(r.cv_pct)
        + (f" [yellow]{escape(r.noise)}[/]" if isinstance(r.noise, str) and r.noise else ""),
        _mib(r.peak_allocated_mib, r.device),
        _mib(r.peak_reserved_mib, r.device),
    )


def _sweep_generation_cells(r) -> tuple[str, ...]:
    return (
        sweep_cell("ttft_ms", r.ttft_ms),
        sweep_cell("tpot_ms", getattr(r, "tpot_ms", None)),
        sweep_cell("token_p99_ms", r.token_p99_ms),
        sweep_cell("tokens_per_s", r.tokens_per_s),
        _phase_verdict_cell(r, "ttft"),
        _phase_verdict_cell(r, "tpot"),
    )


def _phase_verdict_cell(r, phase: str) -> str:
    """A generation phase's speedup over the baseline's cell and its latency verdict, the GPU
    time's beside it where it was taken: ``4.12x faster (GPU: faster)``."""
    speedup = getattr(r, f"{phase}_speedup", None)
    word = getattr(r, f"{phase}_verdict", "") or ""
    gpu = getattr(r, f"{phase}_gpu_verdict", "") or ""
    text = _verdict_markup(speedup, word, None, None) if word else "-"
    if gpu and gpu != "baseline":
        text += f" (GPU: {gpu})"
    return text


def _sweep_status(r) -> str:
    if r.status == "ok" and r.reason == NOT_FINITE:
        return "[yellow]ok, NaN/Inf output[/]"
    return r.status if r.status == "ok" else f"[red]{escape(str(r.status))}[/]"


def print_verdict_notes(
    frame: pd.DataFrame, manifest: SweepManifest, console: Console, gpu_time: bool
) -> None:
    """Under the table: what the verdict columns are, the false discovery rate they are held
    to, and each cell's notes."""
    if not judged(frame):
        return
    what = f"{LATENCY_WORDS} and {GPU_TIME_WORDS}, judged apart" if gpu_time else LATENCY_WORDS
    means = (
        "p50 ms and GPU ms are geometric means of per-process medians"
        if gpu_time
        else "p50 ms is the geometric mean of per-process medians"
    ) + f"; {PAIRED_WORDS}"
    fdr = f"; {FDR_WORDS}" if judged(frame) > 1 else ""
    console.print(
        f"[dim]verdicts: the cell (B) against {escape(manifest.baseline)} (A) at the "
        f"same batch size, on {what}; {means}{fdr}[/]",
        highlight=False,
    )
    if not gpu_time:
        console.print(f"[dim]{NO_GPU_TIME}[/]", highlight=False)
    flagged = [_label(r, manifest) for r in frame.itertuples() if cell_noise(r)[1]]
    if flagged:
        console.print(
            f"[yellow]note[/]: {len(flagged)} cells' timed windows are flagged "
            "(! noisy, bimodal or drifting: all flags in the CV column): their p50 "
            "is printed to the figures its CV allows, and their latency verdicts rest "
            "on the spread between processes, which such a window widens",
            highlight=False,
        )
    withheld = withheld_cells(frame, manifest)
    if withheld:
        print_prose(console, f"[yellow]note[/]: {escape(withheld_note(withheld))}")
    for line in grouped_notes(frame, manifest):
        print_prose(console, f"[yellow]note[/]{escape(line)}")


def withheld_cells(frame: pd.DataFrame, manifest: SweepManifest) -> list[str]:
    """The cells whose latency verdict was withheld (one process a side on a CPU whose floor
    `noise` has not measured: profiler.analysis.verdict)."""
    if "verdicts" not in frame:
        return []
    return [
        _label(r, manifest)
        for r, v in zip(frame.itertuples(), frame["verdicts"])
        if isinstance(v, TimedVerdicts) and v.latency is not None and v.latency.withheld
    ]


def grouped_notes(frame: pd.DataFrame, manifest: SweepManifest) -> list[str]:
    """The cells' verdict notes with what they share said once: one line names the
    launch-bound cells (and the baseline, where it is one) with the lever and the processes
    each latency verdict would need, then what is a cell's own (two figures that disagree).
    A table read back from benchmark.csv (no verdict records) gives each cell's note whole.
    Each line starts after the word "note" (": ..." or " (cell): ...")."""
    if "verdicts" not in frame:
        return [f" ({label}): {note}" for label, note in verdict_notes(frame, manifest)]
    cells = [
        (_label(r, manifest), v)
        for r, v in zip(frame.itertuples(), frame["verdicts"])
        if isinstance(v, TimedVerdicts)
    ]
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


def _text(value) -> str:
    return value if isinstance(value, str) and value else "-"


def windows_gpus(r) -> str:
    """The GPUs the cell's figures were taken on: its windows' (comma-separated), else the GPU
    that ran the cell."""
    gpus = r.gpus if isinstance(r.gpus, str) and r.gpus else ""
    return gpus.replace(";", ",") or (r.gpu if isinstance(r.gpu, str) else "")


def _verdict_markup(speedup, verdict, low, high) -> str:
    """A figure's speedup, its 95 % interval and its verdict (rich markup): "4.60x [3.46-6.11]
    faster"; "1.00x baseline"; "-"."""
    text = speedup_text(speedup, low, high, verdict)
    word = verdict if isinstance(verdict, str) else ""
    colour = VERDICT_COLOURS.get(word)
    return text[: -len(word)] + f"[{colour}]{word}[/]" if colour and text.endswith(word) else text


def verdict_cell(r, span: str = "") -> str:
    """The cell's latency speedup against the baseline, its 95 % interval and the verdict;
    ``span``: the processes the interval spans ("6 proc."), when the header does not say."""
    return _spanned(_verdict_markup(r.speedup, r.verdict, r.speedup_low, r.speedup_high), span)


def gpu_verdict_cell(r, span: str = "") -> str:
    """The same on GPU time."""
    return _spanned(
        _verdict_markup(r.gpu_speedup, r.gpu_verdict, r.gpu_speedup_low, r.gpu_speedup_high), span
    )


def _spanned(text: str, span: str) -> str:
    return f"{text}, {span}" if span and "[" in text else text


def geomean_table(frame: pd.DataFrame, gpu_time: bool) -> pd.DataFrame:
    """The geometric mean rows (profiler.analysis.benchmark.geomean_rows) as text: p50 and GPU
    ms to the figures the noisiest cell's CV allows, speedups as ``2.24x``."""
    rows = geomean_rows(frame)
    cv = frame["cv_pct"].max() / 100 if frame["cv_pct"].notna().any() else None
    shown = pd.DataFrame(
        {
            "backend": rows["backend"],
            "cells": rows["cells"].astype(str),
            "p50 ms": [number(v, None, noise=cv) for v in rows["p50_ms"]],
            "latency speedup": [ratio(v) for v in rows["speedup"]],
        }
    )
    if gpu_time:
        shown.insert(3, "GPU ms", [number(v, None, noise=None) for v in rows["gpu_compute_ms"]])
        shown["GPU-time speedup"] = [ratio(v) for v in rows["gpu_speedup"]]
    return shown


def print_geomeans(frame: pd.DataFrame, console: Console, gpu_time: bool) -> None:
    """Each backend's geometric mean over its batch sizes, in a table of its own."""
    if not (frame["status"] == "ok").any():
        return
    shown = geomean_table(frame, gpu_time)
    t = FitTable(title="geometric mean over batch sizes (cells: the finished cells behind it)")
    for column in shown.columns:
        t.add_column(column, number=True, justify="left" if column == "backend" else "right")
    for row in shown.itertuples(index=False):
        t.add_row(*map(str, row))
    console.print(t)


#: the swept options' columns (a speedup compares cells with the same values of them)
AXIS_KEYS = tuple(axis_options())
#: the latency columns of benchmark.csv, printed to the figures the window's CV allows
LATENCY_FIGURES = ("mean_ms", "p50_ms", "p90_ms", "p99_ms")


def cell_noise(r) -> tuple[float | None, list[str]]:
    """A cell's relative noise (its window's CV) and its window's flags."""
    cv = None if missing(r.cv_pct) else r.cv_pct / 100
    return cv, window_flags(r.noise if isinstance(r.noise, str) else "")


def latency_cells(r) -> list[str]:
    """mean, p50, p90, p99 of a cell to the figures its CV allows, p50 marked with the
    window's flags ("4.3 (! noisy)")."""
    cv, flags = cell_noise(r)
    cells = [number(getattr(r, key), None, noise=cv) for key in LATENCY_FIGURES]
    cells[1] = marked(cells[1], flags[:1])  # the first flag; all of them beside the CV
    return cells


def _mib(value, device) -> str:
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
    rows: list[BenchmarkCell],
    manifest: SweepManifest,
    sweep_dir: Path,
    offsets: list[GpuOffset] | None = None,
) -> dict:
    """The sweep's table as JSON: each cell's record (BenchmarkCell: the benchmark.csv
    columns), and each GPU's offset and floor where the windows ran on several."""
    return json_safe(
        {
            "sweep": manifest.name,
            "folder": str(sweep_dir),
            "model": manifest.model,
            "baseline": manifest.baseline,
            "gpus": [{**dataclasses.asdict(o), "apart": o.apart} for o in offsets or []],
            "cells": plain_record(rows),
        }
    )
