"""Write a trace Summary as CSV, JSON and Markdown. Every file is written atomically
(fsutil), so a crash never leaves half a CSV behind."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from profiler.analysis.insight import Insight
from profiler.analysis.records import Headline, plain
from profiler.errors import UserError
from profiler.fsutil import atomic_path, write_text_atomic, write_with
from profiler.report.advice_view import line
from profiler.report.fmt import number, percent, size, time
from profiler.report.headline_view import gpu_compute_line
from profiler.report.insight_view import roofline_line, to_dict as insight_dict
from profiler.report.sentences import gpu_state_line, tail_meaning, tail_value
from profiler.trace.breakdown import DEFINERS
from profiler.trace.kernels import PIPE_BUSY_NOTE, TC_KERNELS_LABEL
from profiler.trace.summary import Summary, json_safe

#: columns that count things: written as integers (a count missing on one side stays empty)
COUNT_COLUMN = re.compile(
    r"^(calls|kernels|gpu_events|launch_configs|bs|iters|runs|steps)"
    r"(_a|_b)?$"
)


def write_json(path: Path, data: object) -> Path:
    """A file export's JSON (summary.json), indented, written atomically; ``path``."""
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return path


def integer_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Count columns as nullable integers, so a CSV says 27, not 27.0."""
    counts = [
        c
        for c in frame.columns
        if COUNT_COLUMN.match(str(c))
        and pd.api.types.is_float_dtype(frame[c])
        and (frame[c].dropna() % 1 == 0).all()
    ]
    return frame.astype({c: "Int64" for c in counts}) if counts else frame


def _table_writer(path: Path, frame: pd.DataFrame) -> Callable[[Path], object]:
    """Writes ``frame`` to a given (temp) path: Parquet (pyarrow) when ``path`` ends in
    .parquet, else CSV; counts as integers either way."""
    frame = integer_counts(frame)
    if path.suffix != ".parquet":
        return lambda tmp: tmp.write_text(frame.to_csv(index=False), encoding="utf-8")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UserError(
            f"{path}: Parquet needs pyarrow (pip install pyarrow), or give a folder for CSVs"
        ) from None
    return lambda tmp: frame.to_parquet(tmp, index=False)


def write_table(path: Path, frame: pd.DataFrame) -> Path:
    """One table, atomically (see _table_writer)."""
    return write_with(path, _table_writer(path, frame))


def write_tables(out_dir: Path, frames: dict[str, pd.DataFrame]) -> list[Path]:
    """<name>.csv for each frame in ``out_dir``: all of them or none (a full disk half-way
    leaves no new file: every one is written before any takes its place)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --out folder {out_dir}: {error.strerror}") from None
    paths = [out_dir / f"{name}.csv" for name in frames]
    with contextlib.ExitStack() as stack:
        for path, frame in zip(paths, frames.values()):
            _table_writer(path, frame)(stack.enter_context(atomic_path(path)))
    return paths


#: categories.csv's Tensor Core columns as summary.md heads them: time in Tensor Core kernels,
#: not how busy the tensor pipe was
TC_COLUMNS = {"tensor_core_us": "TC-kernel µs", "tensor_core_pct": "TC-kernel time %"}


def markdown_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "_(none)_\n"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append(number(v, thousands=False, blank=""))
            else:
                cells.append(str(v).replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def headline_markdown(headline: Headline) -> list[str]:
    """The run's timed window as summary.md's first section: what `summarize` prints first."""
    timed, window, memory = headline.timed, headline.noise, headline.memory
    tails = headline.tails
    lines = [
        "## Timed window (no profiler attached; quote these)\n",
        f"- p50 latency: {time(timed.p50_ms)} (median of {timed.iters} "
        f"synchronized iterations, {timed.timer})",
        *(
            [f"- p{t.percentile} latency: {tail_value(t)} ({tail_meaning(t)})" for t in tails]
            or [f"- p90 / p99 latency: {time(timed.p90_ms)} / {time(timed.p99_ms)}"]
        ),
        f"- throughput: {number(timed.throughput_samples_per_s)} samples/s",
    ]
    if window:
        lines.append(f"- CV / IQR: {percent(100 * window.cv)} / {time(window.iqr_ms)}")
    spread = timed.repeat_runs
    if spread:
        lines.append(
            f"- p50 over {spread.runs} processes: {time(spread.min_p50_ms)} to "
            f"{time(spread.max_p50_ms)}"
        )
    lines.append(
        f"- peak memory allocated / reserved: "
        f"{size(memory.peak_allocated_mib, 'MiB', blank=memory.note or '-')} / "
        f"{size(memory.peak_reserved_mib, 'MiB', blank=memory.note or '-')}"
    )
    if headline.profiled_step_ms is not None:
        lines.append(
            f"- step time under the profiler: {time(headline.profiled_step_ms)} "
            "(not a latency to quote)"
        )
    for label, value in (
        ("timed window", headline.gpu_utilization_timed_pct),
        ("profiled steps", headline.gpu_utilization_profiled_pct),
    ):
        if value is not None:
            lines.append(
                f"- GPU utilization, {label}: {percent(value)} (kernels running "
                f"{time(headline.kernel_ms_per_step)} per call)"
            )
    gpu = gpu_compute_line(timed.gpu_compute, timed.p50_ms, headline.kernel_ms_per_step)
    if gpu:
        lines.append(f"- {gpu}")
    lines.append(f"- config: {headline.config}")
    lines.append(f"- {gpu_state_line(headline.gpu_state)}")
    lines += [f"- warning: {w}" for w in (window.warnings if window else [])]
    return lines + [""]


def insight_markdown(found: Insight) -> list[str]:
    """The roofline and the advice, as `summarize` prints them."""
    lines = [
        "## Roofline and advice\n",
        f"- roofline ({found.ceilings_source}): "
        f"{roofline_line(found.roofline, found.roofline_missing)}",
    ]
    lines += [f"- advice: {line(a)}" for a in found.advice] or ["- advice: no rule fired"]
    return lines + [""]


def export(
    summary: Summary,
    out_dir: Path,
    top: int = 0,
    headline: Headline | None = None,
    insight: Insight | None = None,
    more: list[str] | None = None,
) -> list[Path]:
    """kernels.csv, categories.csv, operators.csv, steps.csv, summary.json, summary.md; with a
    run's ``headline`` (profiler.analysis.headline.headline_data) and ``insight`` (roofline and
    advice), both files open with them, as `summarize` and its --json do; ``more``: summary.md's
    sections after the trace's (a memory snapshot's)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --out folder {out_dir}: {error.strerror}") from None
    k, o = summary.kernels, summary.overview
    tables = {
        "kernels.csv": k.table,
        "categories.csv": k.categories,
        "operators.csv": o.operators,
        "steps.csv": o.steps,
    }
    written = [write_table(out_dir / name, frame) for name, frame in tables.items()]
    data = summary.to_dict()
    if headline is not None:
        data = {"headline": json_safe(plain(headline)), **data}
    if insight is not None:
        data["insight"] = json_safe(insight_dict(insight))
    written.append(write_json(out_dir / "summary.json", data))
    md = [f"# Trace summary: `{summary.trace_path.name}`\n"]
    if headline is not None:
        md += headline_markdown(headline)
    if insight is not None:
        md += insight_markdown(insight)
    if headline is not None or insight is not None:
        md.append("## Trace\n")
    md += trace_markdown(summary, data["tensor_cores"]) + tables_markdown(summary, top)
    md += more or []
    write_text_atomic(out_dir / "summary.md", "\n".join(md))
    written.append(out_dir / "summary.md")
    return written


def trace_markdown(summary: Summary, tensor_cores: dict[str, float | None]) -> list[str]:
    """The trace's facts as summary.md lists them: schema, steps, each GPU's utilization and
    occupancy, the time in Tensor Core kernels (``tensor_cores``: summary.json's), notes."""
    o, t = summary.overview, tensor_cores
    md = [
        f"- schema: {summary.schema}",
        f"- steps: {len(o.steps)}, mean step time {number(o.mean_step_us)} µs",
    ]
    for d in o.devices:
        md.append(
            f"- GPU {d.device} ({d.name}): utilization over the profiled steps "
            f"{percent(d.gpu_utilization_pct)}, "
            f"est. SM efficiency {percent(d.est_sm_efficiency_pct)}, "
            f"est. achieved occupancy (Kineto) {percent(d.est_achieved_occupancy_pct)}, "
            f"theoretical occupancy (computed) {percent(d.theoretical_occupancy_pct)}, "
            f"{d.idle_gaps} idle gaps totalling {number(d.idle_total_us)} µs "
            f"(largest {number(d.idle_largest_us)} µs)"
        )
    if o.has_gpu:  # a CPU trace has no kernel, and no Tensor Core to speak of
        md.append(
            f"- {TC_KERNELS_LABEL}: {percent(t['tensor_core_share_pct'])} of all kernel "
            f"time, {percent(t['tensor_core_share_of_gemm_conv_pct'])} of GEMM + "
            "convolution time"
        )
        md.append(f"- note: {PIPE_BUSY_NOTE}")
    return md + [f"- note: {n}" for n in summary.notes]


def tables_markdown(summary: Summary, top: int) -> list[str]:
    """summary.md's tables: the step time breakdown, kernel time by category and the kernels
    (a GPU trace), the CPU operators; the first ``top`` rows of the long ones (0: all)."""
    k, o = summary.kernels, summary.overview
    md = [
        f"\n## Step time breakdown (µs; {DEFINERS[o.definitions]}'s definitions: "
        "profiler/trace/breakdown.py BREAKDOWN_DEFINITIONS)\n",
        markdown_table(
            o.steps.drop(columns=["start", "end", "cpu_start", "cpu_end"], errors="ignore")
        ),
    ]
    if o.has_gpu:
        md.append("\n## Kernel time by category\n")
        md.append(markdown_table(k.categories.rename(columns=TC_COLUMNS)))
        shown = k.table if not top else k.table.head(top)
        md.append("\n## Kernels\n")
        md.append(markdown_table(shown.drop(columns=["name", "tensor_core_why"], errors="ignore")))
    ops = o.operators if not top else o.operators.head(top)
    md.append("\n## CPU operators\n")
    md.append(markdown_table(ops))
    return md
