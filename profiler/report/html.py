"""One self-contained HTML file for a run, a comparison or a sweep: inline CSS, tables and
matplotlib figures as base64 PNG. Nothing is loaded from the network (no script, no font, no
CDN), so it opens the same on an air-gapped machine. A view: it renders data it is given."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from html import escape

import pandas as pd

from profiler.runs.result import RunResult
from profiler.analysis.advice import Advice
from profiler.analysis.headline import gpu_state_of
from profiler.analysis.roofline import NO_ROOFLINE_INPUTS, Roofline
from profiler.report.advice_view import evidence, measured_line, projected_gain

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.kv td{text-align:left}.note{color:#555}.advice li{margin:6px 0}
.rule{font-weight:600}.src{color:#666;font-size:12px}img{max-width:100%}
.big{font-size:20px;font-weight:600}
"""


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
        parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
                 f"<title>{escape(self.title)}</title><style>{CSS}</style></head><body>",
                 f"<h1>{escape(self.title)}</h1>"]
        for s in self.sections:
            anchor = "".join(c if c.isalnum() else "-" for c in s.title.lower())
            parts.append(f"<h2 id='{anchor}'>{escape(s.title)}</h2>{s.body}")
        parts.append("</body></html>")
        return "\n".join(parts)


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if isinstance(value, float) and 0 < abs(value) < 0.01:
        return f"{value:.2e}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


#: longest text shown in a table cell (kernel names run to kilobytes)
CELL_CHARS = 110


def table(frame: pd.DataFrame, columns: list[str] | None = None, top: int = 0) -> str:
    if frame is None or not len(frame):
        return "<p class='note'>(none)</p>"
    frame = frame[columns] if columns else frame
    frame = frame.head(top) if top else frame
    frame = frame.map(lambda v: v[:CELL_CHARS] + "…" if isinstance(v, str) and
                      len(v) > CELL_CHARS else v)
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{escape(_fmt(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><tr>{head}</tr>{rows}</table>"


def key_values(pairs: list[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(_fmt(v))}</td></tr>" for k, v in pairs)
    return f"<table class='kv'>{rows}</table>"


def figure_png(fig) -> str:
    """A matplotlib figure as an inline <img> (base64 PNG); the figure is closed."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt='figure' src='data:image/png;base64,{data}'>"


def headline(result: RunResult | None, label: str) -> str:
    if result is None:
        return f"<p class='note'>{escape(label)}: a trace without result.json (no timed window)</p>"
    t = result.timing
    gpu = (result.environment.gpu or {}).get("name", result.device)
    noise = 100 * t.std_ms / t.mean_ms if t.mean_ms else None
    return (f"<p class='big'>{escape(label)}: p50 {t.p50_ms:.3f} ms, "
            f"{t.throughput_samples_per_s:,.0f} samples/s</p>" + key_values([
                ("model", result.model), ("backend", result.backend.name),
                ("batch size", result.batch_size), ("device", gpu),
                ("p90 / p99 ms", f"{t.p90_ms:.3f} / {t.p99_ms:.3f}"),
                ("noise (std / mean)", f"{noise:.1f} %" if noise is not None else None),
                ("timed iterations", t.iters),
                ("GPU state (timed window)",
                 gpu_state_of(result).line().removeprefix("GPU state: "))]))


def roofline_block(roofline: Roofline | None, source: str, missing: str | None = None) -> str:
    if roofline is None:
        return f"<p class='note'>{escape(missing or NO_ROOFLINE_INPUTS, quote=False)}</p>"
    r = roofline
    pct = (lambda v: f"{v:.1f} %" if v is not None else "-")
    return key_values([
        ("FLOPs per batch (FlopCounterMode)", f"{r.flops / 1e9:,.2f} GFLOP"),
        ("minimum bytes per batch", f"{r.min_bytes / 1e6:,.1f} MB"),
        ("arithmetic intensity", f"{r.intensity:,.0f} FLOP/byte (ridge "
                                 f"{_fmt(r.ridge)})"),
        ("achieved compute", f"{r.achieved_tflops:,.2f} TFLOP/s = {pct(r.pct_of_compute)} of "
                             f"{_fmt(r.peak_tflops)} ({r.matmul_key})"),
        ("achieved bandwidth", f"{r.achieved_gbs:,.1f} GB/s = {pct(r.pct_of_bandwidth)} of "
                               f"{_fmt(r.peak_gbs)}"),
        ("bound by", r.bound), ("of the roofline at this intensity", pct(r.pct_of_roof)),
        ("ceilings", source)])


def advice_block(advice: list[Advice]) -> str:
    if not advice:
        return "<p class='note'>no rule fired</p>"
    items = []
    for a in advice:
        facts = "; ".join(f"{escape(k)}: {escape(str(v))}" for k, v in evidence(a).items())
        measured = ""
        if a.measured:
            measured = "<br>measured in the sweep: " + escape(measured_line(a))
        items.append(f"<li><span class='rule'>{escape(a.title)}</span> [{escape(a.rule)}]<br>"
                     f"evidence: {facts}<br>try: {escape(a.action)}<br>projected gain: "
                     f"{escape(projected_gain(a))}{measured}<br><span class='src'>source: "
                     f"{escape(a.source)}</span></li>")
    return f"<ul class='advice'>{''.join(items)}</ul>"


def layer_view(layer_times: pd.DataFrame | None, top: int = 20) -> str | None:
    """TensorRT per-layer times (RunAnalysis.layer_times), when the run wrote them."""
    if layer_times is None or not len(layer_times):
        return None
    frame = layer_times.sort_values("averageMs", ascending=False)
    frame = frame.rename(columns={"name": "layer", "averageMs": "ms per call",
                                  "percentage": "% of engine"})
    return table(frame, ["layer", "ms per call", "% of engine"], top)


def roofline_chart(points: list[tuple[str, Roofline]]) -> str | None:
    """The roofline figure of plots.roofline_figure, inlined; None without a roofline."""
    from profiler.report.plots import roofline_figure

    fig = roofline_figure(points)
    return figure_png(fig) if fig is not None else None


def category_chart(labels: list[str], categories: list[pd.DataFrame], steps: list[int]) -> str:
    if not any(len(frame) for frame in categories):
        return "<p class='note'>no GPU kernels in the trace</p>"
    from profiler.report.plots import CATEGORY_COLOURS, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * len(labels)))
    for i, (frame, n) in enumerate(zip(categories, steps)):
        left = 0.0
        for row in frame.itertuples():
            width = row.total_us / max(n, 1) / 1e3
            ax.barh(i, width, left=left, color=CATEGORY_COLOURS.get(row.category, "#7f7f7f"),
                    label=row.category if i == 0 else None)
            left += width
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("kernel time per profiled step (ms)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure_png(fig)
