"""One self-contained HTML file for a run, a comparison or a sweep: inline CSS, tables and
matplotlib figures as base64 PNG. Nothing is loaded from the network (no script, no font, no
CDN), so it opens the same on an air-gapped machine. A view: it renders data it is given.

Tables speak as the terminal does: column headers in words with their unit (never a field name
such as ``us_a``), and one number format per column (a column of times never mixes ``100``,
``100.000`` and ``1.44e-03``). Without matplotlib (the ``plots`` extra) the figures are left out,
each place saying so, and the tables stay."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pandas as pd

from profiler.analysis.advice import Advice
from profiler.analysis.headline import config_line, gpu_state_of, window_noise, window_tails
from profiler.analysis.records import CompareTimed, Explanation, Headline
from profiler.analysis.roofline import MIN_BYTES_LABEL, NO_ROOFLINE_INPUTS, Roofline, chart_data
from profiler.analysis.timed_window import window_flags
from profiler.report.advice_view import evidence, measured_line, projected_gain
from profiler.report.compare_view import (
    NO_GPU_TIME,
    NO_LATENCY,
    RECORDED_TITLE,
    figure_short,
    has_processes,
    noise_warnings,
    overview_figure,
    process_rows,
    recorded_rows,
    timed_title,
    verdict_basis,
    verdict_entries,
    verdict_notes,
    verdict_words,
)
from profiler.report.fmt import (
    HEADERS,
    HTML_FORMATS,
    LAYER_FORMATS,
    absent,
    column_format,
    count,
    gflop,
    key_value,
    marked,
    number,
    percent,
    rate,
    size,
    time,
    with_unit,
)
from profiler.report.headline_view import gpu_compute_line
from profiler.report.sentences import (
    explanation_line,
    gpu_state_line,
    tail_meaning,
    tail_value,
    verdict_method,
)
from profiler.runs.result import RunResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: how a table's column is written: a format spec, or a function of its cells (a DataFrame's
#: values, which pandas leaves untyped, so Any)
CellFormat: TypeAlias = str | Callable[[Any], str]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.kv td{text-align:left}.note{color:#555}.advice li{margin:6px 0}
.rule{font-weight:600}.src{color:#666;font-size:12px}img{max-width:100%}
.big{font-size:20px;font-weight:600}.warn{color:#a65d00}
.verdict{font-size:16px}.faster,.same{color:#1a7f37}.slower{color:#c62828}
.undecided{color:#a65d00}td.text{text-align:left}
"""

#: what a page says where a figure would be when matplotlib is not installed
NO_FIGURES = 'figures left out: they need matplotlib (pip install -e ".[plots]")'


def figures_missing() -> str | None:
    """Why figures cannot be drawn here (NO_FIGURES), or None when matplotlib imports."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return NO_FIGURES
    return None


@dataclass
class Section:
    title: str
    body: str


@dataclass
class Page:
    title: str
    sections: list[Section] = field(default_factory=list)

    def add(self, title: str, body: str) -> None:
        self.sections.append(Section(title, body))

    def render(self) -> str:
        parts = [
            f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{escape(self.title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{escape(self.title)}</h1>",
        ]
        for s in self.sections:
            anchor = "".join(c if c.isalnum() else "-" for c in s.title.lower())
            parts.append(f"<h2 id='{anchor}'>{escape(s.title)}</h2>{s.body}")
        parts.append("</body></html>")
        return "\n".join(parts)


def note(text: str, css: str = "note") -> str:
    return f"<p class='{css}'>{escape(text)}</p>"


def header(column: str) -> str:
    """A column's header in words: HEADERS, else the name with its underscores as spaces."""
    return HEADERS.get(column, str(column).replace("_", " "))


def _numbers(series: pd.Series) -> list[float]:
    return [
        float(v)
        for v in series
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not absent(v)
    ]


def _formatter(column: str, series: pd.Series, spec: CellFormat | None) -> Callable[[Any], str]:
    if callable(spec):
        return spec
    spec = spec or HTML_FORMATS.get(column) or column_format(_numbers(series))

    def cell(value: object) -> str:
        if absent(value):
            return "-"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format(value, spec)
        return str(value)

    return cell


#: longest text shown in a table cell (kernel names run to kilobytes)
CELL_CHARS = 110


def _cut(value: str) -> str:
    return value[:CELL_CHARS] + "…" if len(value) > CELL_CHARS else value


def table(
    frame: pd.DataFrame | None,
    columns: list[str] | None = None,
    top: int = 0,
    headers: dict[str, str] | None = None,
    formats: Mapping[str, CellFormat] | None = None,
    figures: tuple[str, ...] = (),
) -> str:
    """A table of ``frame``'s ``columns`` (all by default), the first ``top`` rows (0: all; a
    line says how many there were): headers in words (``headers``, else HEADERS), one format
    per column (``formats``, else HTML_FORMATS, else chosen from the column's values). ``figures``:
    columns of numbers already written as text (a latency to its noise's figures, marked),
    aligned as numbers."""
    if frame is None or not len(frame):
        return note("(none)")
    frame = frame[columns] if columns else frame
    total = len(frame)
    frame = frame.head(top) if top else frame
    headers, formats = headers or {}, formats or {}
    cells = [_formatter(c, frame[c], formats.get(c)) for c in frame.columns]
    head = "".join(f"<th>{escape(headers.get(c) or header(c))}</th>" for c in frame.columns)
    text_columns = [not _numbers(frame[c]) and c not in figures for c in frame.columns]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=text' if text else ''}>{escape(str(_cut(fmt(v))))}</td>"
            for fmt, text, v in zip(cells, text_columns, row)
        )
        + "</tr>"
        for row in frame.itertuples(index=False)
    )
    shown = "" if total == len(frame) else note(f"the first {len(frame)} of {total} rows")
    return f"<table class='grid'><tr>{head}</tr>{rows}</table>{shown}"


#: a cell that shows a number: it starts with one (a digit, or a sign and a digit: ``1,234.5``,
#: ``-0.3``, ``4.60x [3.46-6.11] faster``, ``4.3 (! noisy)``)
_NUMBER_CELL = re.compile(r"[+-]?\d")


def _number_column(cells: Sequence[str]) -> bool:
    """A column of numbers (aligned right): every cell starts with a number or is the "-"
    placeholder, and one at least is not the placeholder."""
    shown = [c.strip() for c in cells if c.strip() != "-"]
    return bool(shown) and all(_NUMBER_CELL.match(c) for c in shown)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of cells already written as text (a view's column specs,
    profiler.report.columns): each cell escaped and cut to CELL_CHARS, a column of numbers
    aligned right, any other marked ``text`` (as ``table`` marks its columns)."""
    if not rows:
        return note("(none)")
    text_columns = [not _number_column([row[i] for row in rows]) for i in range(len(headers))]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=text' if text else ''}>{escape(_cut(cell))}</td>"
            for text, cell in zip(text_columns, row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table class='grid'><tr>{head}</tr>{body}</table>"


def key_values(pairs: list[tuple[str, object]]) -> str:
    rows = "".join(
        f"<tr><th>{escape(k)}</th><td>{escape(key_value(v))}</td></tr>" for k, v in pairs
    )
    return f"<table class='kv'>{rows}</table>"


def metrics(header_row: list[str], rows: Sequence[tuple[object, ...]]) -> str:
    """A table whose every row is its own quantity (formatted per row, unit in the cell)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header_row)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table class='metrics'><tr>{head}</tr>{body}</table>"


def figure_png(fig: Figure) -> str:
    """A matplotlib figure as an inline <img> (base64 PNG); the figure is closed."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt='figure' src='data:image/png;base64,{data}'>"


def warnings_list(warnings: list[str]) -> str:
    return "".join(f"<p class='warn'>warning: {escape(w)}</p>" for w in warnings)


def headline(
    result: RunResult | None,
    label: str,
    result_json: Path | None = None,
    data: Headline | None = None,
) -> str:
    """A run's timed headline; ``result_json``: where it was read, so that the noise of a run
    recorded before noise was is computed from the latency.csv beside it; ``data``: the
    headline beside the trace (the GPU's utilization over the timed window and the profiled
    steps, GPU compute against the kernels' time)."""
    if result is None:
        return note(f"{label}: a trace without result.json (no timed window)")
    t = result.timing
    gpu = (result.environment.gpu or {}).get("name", result.device)
    window = window_noise(result, result_json)
    tails = window_tails(result, result_json)  # p90 and p99 with their intervals
    cv = window.cv if window else None  # each latency to the figures its window's noise allows
    warnings = window.warnings if window else []
    p50 = marked(time(t.p50_ms, decimals=None, noise=cv), window_flags(warnings))
    return (
        f"<p class='big'>{escape(label)}: p50 {escape(p50)}, "
        f"{count(t.throughput_samples_per_s, 0)} samples/s</p>"
        + key_values(
            [
                ("model", result.model),
                ("backend", result.backend.name),
                ("batch size", result.batch_size),
                ("device", gpu),
                *(
                    [(f"p{x.percentile}", f"{tail_value(x, cv)}: {tail_meaning(x)}") for x in tails]
                    or [
                        (
                            "p90 / p99 ms",
                            f"{number(t.p90_ms, None, noise=cv)} / "
                            f"{number(t.p99_ms, None, noise=cv)}",
                        )
                    ]
                ),
                ("noise (std / mean)", percent(100 * cv) if cv is not None else None),
                ("timed iterations", t.iters),
                *_beside_the_trace(data),
                ("config", config_line(result)),
                _state_row(result),
            ]
        )
        + warnings_list(warnings)
    )


def _beside_the_trace(data: Headline | None) -> list[tuple[str, object]]:
    """The GPU's utilization over the timed window and over the profiled steps, each named, and
    GPU compute with the kernels' time and the device's gaps (headline_view.gpu_compute_line)."""
    if data is None:
        return []
    rows: list[tuple[str, object]] = []
    kernel_ms = data.kernel_ms_per_step
    for label, value, over in (
        ("timed window", data.gpu_utilization_timed_pct, "the timed p50"),
        ("profiled steps", data.gpu_utilization_profiled_pct, "the step under the profiler"),
    ):
        if value is not None and kernel_ms is not None:
            rows.append(
                (
                    f"GPU utilization, {label}",
                    f"{percent(value)} (kernels running {time(kernel_ms)} per call / {over})",
                )
            )
    cv = data.noise.cv if data.noise else None  # the latency to the figures its window allows
    compute = data.timed.gpu_compute
    if compute is not None and compute.not_measured == "no GPU":  # a CPU run's page: no GPU rows
        return rows
    gpu = gpu_compute_line(compute, data.timed.p50_ms, kernel_ms, cv)
    if gpu:
        rows.append(("GPU compute", gpu.removeprefix("GPU compute ")))
    return rows


def _state_row(result: RunResult) -> tuple[str, object]:
    """The timed window's GPU state; a CPU run's host load."""
    state = gpu_state_of(result)
    if not result.device.startswith("cpu"):
        return "GPU state (timed window)", gpu_state_line(state).removeprefix("GPU state: ")
    load = state.load_average
    return "host load (timed window)", None if load is None else number(
        load[0], 2, thousands=False
    ) + (f" on {state.cpus} CPUs" if state.cpus else "")


def timed_block(t: CompareTimed | None, a_label: str, b_label: str) -> str:
    """The compare's timed headline, as `compare` prints it: the processes the verdicts use,
    both verdicts (latency and GPU time, each named, with their 95 % intervals and the processes
    behind them) and the lines that say how to read them, the recorded runs' own figures under
    their own heading, the noise warnings, both configs and every field that differs."""
    if t is None:
        return note(
            "no timed window: a side is a trace without result.json, so there is no "
            "timed latency and no verdict"
        )
    header_row = ["metric", f"A ({a_label})", f"B ({b_label})", "B vs A"]
    parts = []
    if has_processes(t):
        parts.append(f"<p>{escape(timed_title(t))}</p>" + metrics(header_row, process_rows(t)))
    for figure, label, verdict in verdict_entries(t):
        if verdict:
            parts.append(
                f"<p class='verdict'>{escape(label)}: {escape(verdict_basis(verdict))}"
                f": <b class='{escape(verdict.verdict)}'>"
                f"{escape(verdict_words(verdict))}</b></p>"
            )
        else:
            parts.append(note(f"{label}: {NO_LATENCY if figure == 'latency' else NO_GPU_TIME}"))
    parts.append("".join(note("note: " + line, "warn") for line in verdict_notes(t)))
    parts.append(
        "".join(
            f"<p class='src'>how ({escape(figure_short(figure))}): "
            f"{escape(verdict_method(verdict))}</p>"
            for figure, _, verdict in verdict_entries(t)
            if verdict
        )
    )
    parts.append(f"<p>{escape(RECORDED_TITLE)}</p>" + metrics(header_row, recorded_rows(t)))
    parts.append(
        "".join(
            f"<p class='warn'>warning ({escape(side)}): {escape(w)}</p>"
            for side, w in noise_warnings(t)
        )
    )
    parts.append(key_values([("config A", t.config_a), ("config B", t.config_b)]))
    differing = t.differences
    if differing:
        parts.append(
            f"<p>Config and environment fields that differ ({len(differing)})</p>"
            + metrics(
                ["field", "A", "B"], [(r.field, key_value(r.a), key_value(r.b)) for r in differing]
            )
        )
    else:
        parts.append(note("config and environment: no field differs"))
    return "".join(parts)


def explanation_block(e: Explanation | None) -> str | None:
    """Why B differs from A at the kernel level (as `compare` says it), or None."""
    if e is None:
        return None
    line = explanation_line(e, short=True)
    return f"<p><b>{escape(e.cause)}</b>: {escape(line)}</p>" + "".join(
        note(gpu_state_line(state, side))
        for side, state in (("A", e.gpu_state_a), ("B", e.gpu_state_b))
    )


def overview_block(overview: pd.DataFrame) -> str:
    """A diff's overview: each row in its own unit, as the terminal shows it."""

    def delta(value: float, unit: str) -> str:
        if absent(value):
            return "-"
        text = with_unit(abs(value), unit)
        text = text.replace(" %", " pt") if unit == "%" else text
        return ("+" if value > 0 else "-" if value < 0 else "±") + text

    return metrics(
        ["metric", "A", "B", "delta (B - A)", "change"],
        [
            (
                r.metric,
                overview_figure(r, "a"),
                overview_figure(r, "b"),
                delta(r.delta, r.unit or "n"),
                percent(r.change_pct, sign=True),
            )
            for r in overview.itertuples()
        ],
    )


def roofline_block(roofline: Roofline | None, source: str, missing: str | None = None) -> str:
    if roofline is None:
        return f"<p class='note'>{escape(missing or NO_ROOFLINE_INPUTS, quote=False)}</p>"
    r = roofline
    return key_values(
        [
            ("FLOPs per batch (FlopCounterMode)", gflop(r.flops)),
            (f"{MIN_BYTES_LABEL} per batch", size(r.min_bytes, unit="MB")),
            (
                "arithmetic intensity",
                f"{count(r.intensity, 0)} FLOP per minimum byte (ridge {key_value(r.ridge)})",
            ),
            (
                "achieved compute",
                f"{rate(r.achieved_tflops, 'TFLOP/s', 2)} = {percent(r.pct_of_compute)} of "
                f"{key_value(r.peak_tflops)} ({r.matmul_key})",
            ),
            (
                "achieved bandwidth (minimum bytes / p50)",
                f"at least {rate(r.achieved_gbs, 'GB/s')} = at least "
                f"{percent(r.pct_of_bandwidth)} of "
                f"{key_value(r.peak_gbs)}",
            ),
            ("bound by", r.bound),
            ("of the roofline at this intensity", percent(r.pct_of_roof)),
            ("ceilings", source),
        ]
    )


def advice_block(advice: list[Advice], noise: str = "") -> str:
    """The advice, each rule with its evidence; ``noise`` (advice_view.noise_line): the noise
    of the run it was drawn from, as a note above."""
    head = note(noise) if noise else ""
    if not advice:
        return head + "<p class='note'>no rule fired</p>"
    items = []
    for a in advice:
        facts = "; ".join(f"{escape(k)}: {escape(str(v))}" for k, v in evidence(a).items())
        measured = ""
        if a.measured:
            measured = "<br>measured in the sweep: " + escape(measured_line(a))
        items.append(
            f"<li><span class='rule'>{escape(a.title)}</span> [{escape(a.rule)}]<br>"
            f"evidence: {facts}<br>try: {escape(a.action)}<br>projected gain: "
            f"{escape(projected_gain(a))}{measured}<br><span class='src'>source: "
            f"{escape(a.source)}</span></li>"
        )
    return f"{head}<ul class='advice'>{''.join(items)}</ul>"


def layer_view(layer_times: pd.DataFrame | None, top: int = 20) -> str | None:
    """TensorRT per-layer times (RunAnalysis.layer_times), when the run wrote them."""
    if layer_times is None or not len(layer_times):
        return None
    frame = layer_times.sort_values("averageMs", ascending=False)
    return table(
        frame,
        ["name", "averageMs", "percentage"],
        top,
        headers={"name": "layer", "averageMs": "ms per call", "percentage": "% of engine"},
        formats=LAYER_FORMATS,
    )


def roofline_chart(points: Sequence[tuple[str, Roofline | None]]) -> str | None:
    """The roofline figure of plots.roofline_figure, inlined; None without a roofline; a note
    without matplotlib."""
    chart = chart_data(points)
    if chart is None or not chart.roofs:  # no ceilings: points without a roof say nothing
        return None
    missing = figures_missing()
    if missing:
        return note(missing)
    from profiler.report.plots import roofline_figure

    fig = roofline_figure(points)
    return figure_png(fig) if fig is not None else None


def category_chart(labels: list[str], categories: list[pd.DataFrame], steps: list[int]) -> str:
    """Kernel time per profiled step by category, one bar per label (a run's name): `plot`'s
    figure (plots.category_figure), its legend naming every category of every bar."""
    if not any(len(frame) for frame in categories):
        return "<p class='note'>no GPU kernels in the trace</p>"
    missing = figures_missing()
    if missing:
        return note(missing)
    from profiler.report.plots import category_figure

    per_label = [
        {r.category: float(r.total_us) / max(n, 1) for r in frame.itertuples()}
        for frame, n in zip(categories, steps)
    ]
    return figure_png(
        category_figure(labels, per_label, "GPU kernel time by category, per profiled step")
    )


def figures(named: dict[str, Figure]) -> str:
    """Figures (matplotlib, by name) inlined one after the other."""
    return "".join(figure_png(fig) for fig in named.values())
