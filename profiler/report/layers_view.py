"""`summarize --view layers`: a TensorRT run's layers with the profiled kernels attributed to
them (a view over trace.trt_layers results)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from profiler.report.console import FitTable
from profiler.report.fmt import head, missing, number, percent, time
from profiler.trace.rules import short_name
from profiler.trace.trt_layers import Attribution


def _cut(value: object, width: int) -> str:
    """A cell of the layer frame (a name, or None/NaN where TensorRT gave none) within ``width``."""
    text = "" if missing(value) else str(value)
    return text if len(text) <= width else text[: width // 2 - 1] + "…" + text[-(width // 2) :]


def print_layers(attributions: list[Attribution], top: int, console: Console) -> None:
    """Each engine's layers (the ``top`` by share), then how its kernels were attributed."""
    for index, a in enumerate(attributions):
        console.print(layer_table(index, a, top))
        for line in attribution_lines(a):
            console.print(line, highlight=False)


#: the layer table's columns; those of numbers right-aligned, the optional ones left out first
#: where the terminal is narrow
LAYER_TABLE_COLUMNS = (
    "#",
    "layer",
    "type",
    "precision",
    "tactic",
    "ms/call",
    "share",
    "profiled µs/call",
    "kernel (profiled trace)",
)
NUMBER_COLUMNS = ("#", "ms/call", "share", "profiled µs/call")
OPTIONAL_COLUMNS = ("type", "precision", "tactic", "kernel (profiled trace)")


def layer_table(index: int, a: Attribution, top: int) -> FitTable:
    """Engine ``index``'s layers, by share, with the profiled kernels attributed to them."""
    shown = head(
        a.layers.sort_values("share_pct", ascending=False, kind="stable")
        if "share_pct" in a.layers
        else a.layers,
        top,
    )
    t = FitTable(
        title=f"TensorRT engine {index}: {len(a.layers)} layers"
        + (f" (top {len(shown)} by share)" if top and len(a.layers) > top else "")
    )
    for col in LAYER_TABLE_COLUMNS:
        if col in NUMBER_COLUMNS:
            t.add_column(col, number=True)
        else:
            t.add_column(col, optional=col in OPTIONAL_COLUMNS)
    for position, r in shown.iterrows():
        t.add_row(
            str(position),
            escape(_cut(r["layer"], 44)),
            r["type"],
            escape(r["precision"]),
            escape(_cut(r["tactic"], 30)),
            time(r.get("ms_per_call"), decimals=4, thousands=False, labelled=False),
            percent(r.get("share_pct")),
            number(r["profiled_us_per_call"]),
            escape(_cut(r["kernel"], 44)),
        )
    return t


def attribution_lines(a: Attribution) -> list[str]:
    """What the columns are, how much of the engine's kernel time was attributed, and the
    kernels left out of the layers (not attributed, or outside the engine)."""
    lines = [
        f"ms/call and share: TensorRT's engine profiler (per-layer timing, "
        f"synchronized per layer); profiled µs/call: kernels of the trace over "
        f"{a.calls} engine call(s). Attribution: {a.method}. "
        f"{percent(100 * a.coverage)} of engine kernel time attributed "
        f"({number(a.attributed_us)} of {number(a.engine_kernel_us)} µs)."
    ]
    lines += [
        f"not attributed: {escape(short_name(r.kernel))} ({r.calls} calls, {number(r.total_us)} µs)"
        for r in a.not_attributed.itertuples()
    ]
    lines += [
        f"outside the engine (PyTorch): {escape(short_name(r.kernel))} "
        f"({r.calls} calls, "
        f"{number(r.total_us)} µs)"
        for r in a.outside_engine.itertuples()
    ]
    return lines
