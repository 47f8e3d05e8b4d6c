"""PNG plots with matplotlib's Agg backend (no display needed).

A sweep gives latency vs batch size per backend (p50 line, p90 and p99 marks), speedup bars vs
the baseline per batch size (each with its 95 % interval and verdict, the cells whose timed
window is flagged noisy hatched), throughput vs batch size, and kernel time per step by category for
every finished cell, and a roofline of the cells that counted their FLOPs. A run (or any trace)
gives its kernel time by category. Drawing only:
commands.plot finds the sweep or run and computes what is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pandas as pd

from profiler.analysis.roofline import MIN_BYTES_LABEL, Roof, Roofline, chart_data
from profiler.errors import UserError
from profiler.fsutil import write_with
from profiler.report.fmt import number, ratio
from profiler.report.sentences import roof_label, roof_name, roofline_title
from profiler.runs.manifest import OK, SweepManifest, axis_options, grid_cells, short_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: one colour per kernel category, the same in every figure
CATEGORY_COLOURS = {
    "GEMM": "#1f77b4",
    "convolution": "#ff7f0e",
    "attention": "#9467bd",
    "elementwise": "#2ca02c",
    "reduction": "#d62728",
    "normalization": "#8c564b",
    "copy": "#e377c2",
    "memset": "#bcbd22",
    "communication": "#17becf",
    "other": "#7f7f7f",
}


def use_agg() -> None:
    """matplotlib on its Agg backend (no display needed); a UserError saying how to install it
    when it is missing. The figures below then import matplotlib.pyplot, typed."""
    try:
        import matplotlib
    except ImportError:
        raise UserError('plots need matplotlib: pip install -e ".[plots]"') from None
    matplotlib.use("Agg", force=True)


def pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend (see use_agg)."""
    use_agg()
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> Path:
    """Write the PNG atomically (temp file + rename), like every other export."""
    try:
        write_with(path, lambda tmp: fig.savefig(tmp, format="png", dpi=130, bbox_inches="tight"))
    except OSError as error:  # --out is a file, a read-only folder, a full disk ...
        raise UserError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path


def _title(what: str, model: str, device: str) -> str:
    return f"{what}\n{model} on {device}"


def _devices(frame: pd.DataFrame) -> str:
    devices = sorted({d for d in frame["device"].dropna() if d})
    return ", ".join(devices) or "unknown device"


# ---- sweep figures ---------------------------------------------------------------------------


def series(frame: pd.DataFrame) -> pd.Series:
    """A line per backend, or per backend and value of each swept option (``ttrt_fp16
    max_new_tokens=16``) when the sweep was given a list of one."""
    labels = frame["backend"].astype(str)
    for key in (k for k in axis_options() if k in frame.columns):
        labels = (
            labels
            + f" {key}="
            + frame[key].map(lambda v: number(v, 0, thousands=False)).astype(str)
        )
    return labels


def latency_plot(frame: pd.DataFrame, model: str, out: Path) -> Path:
    return _save(latency_figure(frame, model), out)


def latency_figure(frame: pd.DataFrame, model: str) -> Figure:
    """p50 latency per backend against batch size (p90 and p99 marked)."""
    use_agg()
    import matplotlib.pyplot as plt

    ok = frame[frame["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, (backend, rows) in enumerate(ok.groupby(series(ok), sort=False)):
        rows = rows.sort_values("bs")
        colour = f"C{i % 10}"
        ax.plot(rows["bs"], rows["p50_ms"], marker="o", color=colour, label=f"{backend} p50")
        ax.scatter(rows["bs"], rows["p90_ms"], marker="_", s=140, color=colour, linewidths=2)
        ax.scatter(rows["bs"], rows["p99_ms"], marker="x", s=40, color=colour)
    ax.scatter([], [], marker="_", s=140, color="black", linewidths=2, label="p90")
    ax.scatter([], [], marker="x", s=40, color="black", label="p99")
    _batch_axis(ax, frame)
    ax.set_ylabel("latency per batch (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(
        _title("Latency vs batch size (p50 line; p90 -, p99 x)", model, _devices(frame)),
        fontsize=10,
    )
    return fig


def throughput_plot(frame: pd.DataFrame, model: str, out: Path) -> Path:
    return _save(throughput_figure(frame, model), out)


def throughput_figure(frame: pd.DataFrame, model: str) -> Figure:
    """Throughput per backend against batch size."""
    use_agg()
    import matplotlib.pyplot as plt

    ok = frame[frame["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, (backend, rows) in enumerate(ok.groupby(series(ok), sort=False)):
        rows = rows.sort_values("bs")
        ax.plot(rows["bs"], rows["throughput_per_s"], marker="o", color=f"C{i % 10}", label=backend)
    _batch_axis(ax, frame)
    ax.set_ylabel("throughput (samples/s, from the mean latency)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(_title("Throughput vs batch size", model, _devices(frame)), fontsize=10)
    return fig


def speedup_plot(frame: pd.DataFrame, model: str, baseline: str, out: Path) -> Path:
    return _save(speedup_figure(frame, model, baseline), out)


def speedup_figure(frame: pd.DataFrame, model: str, baseline: str) -> Figure:
    """Latency speedup bars over the baseline, per batch size and backend, each with its 95 %
    interval (an error bar) and its verdict; a cell whose timed window is flagged (noisy,
    bimodal, drifting) is hatched and says so, and a verdict withheld or undecided reads as
    such (the bar alone is no claim)."""
    use_agg()
    import matplotlib.pyplot as plt

    sizes = sorted(frame["bs"].unique())
    labels = series(frame)
    backends = list(dict.fromkeys(labels))
    fig, ax = plt.subplots(figsize=(max(7.5, 1.2 * len(sizes) * max(len(backends), 1) / 2), 4.8))
    width = 0.8 / max(len(backends), 1)
    flagged_any = False
    for i, backend in enumerate(backends):
        rows = frame[labels == backend].set_index("bs")
        values = [rows["speedup"].get(bs, math.nan) for bs in sizes]
        xs = [k + (i - (len(backends) - 1) / 2) * width for k in range(len(sizes))]
        flagged = [_flagged(rows, bs) for bs in sizes]
        flagged_any = flagged_any or any(flagged)
        bars = ax.bar(
            xs,
            [0 if pd.isna(v) else v for v in values],
            width * 0.95,
            color=f"C{i % 10}",
            label=backend,
            edgecolor="black",
            linewidth=0.4,
        )
        for bar, flag in zip(bars, flagged):
            if flag:
                bar.set_hatch("//")
        lows, highs = _interval(rows, sizes, values)
        ax.errorbar(
            xs,
            [0 if pd.isna(v) else v for v in values],
            yerr=[lows, highs],
            fmt="none",
            ecolor="black",
            elinewidth=0.9,
            capsize=3,
        )
        for bar, value, bs, flag, high in zip(bars, values, sizes, flagged, highs):
            status = rows["status"].get(bs, "not run")
            text = (
                _bar_text(value, rows, bs, flag)
                if not pd.isna(value)
                else (status if status != "ok" else "no baseline")
            )
            top = bar.get_height() + (0 if pd.isna(high) else high)
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, top),
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90 if len(backends) > 3 else 0,
                xytext=(0, 2),
                textcoords="offset points",
            )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(sizes)), [str(bs) for bs in sizes])
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"latency speedup vs {baseline} (x, bar: 95 % interval)")
    ax.margins(y=0.15)
    ax.grid(True, axis="y", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    if flagged_any:
        from matplotlib.patches import Patch

        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//"))
        names.append(NOISY_LABEL)
    ax.legend(handles, names, fontsize=8, loc="upper left")
    ax.set_title(
        _title(f"Speedup over {baseline} at the same batch size", model, _devices(frame)),
        fontsize=10,
    )
    return fig


#: the legend's entry of a hatched bar
NOISY_LABEL = "hatched: timed window flagged (noisy, bimodal or drifting)"


def _flagged(rows: pd.DataFrame, bs: int) -> bool:
    """The cell's timed window carries a noise flag (benchmark.csv's ``noise`` column)."""
    if "noise" not in rows.columns:
        return False
    flags = rows["noise"].get(bs, "")
    return isinstance(flags, str) and bool(flags.strip())


def _interval(
    rows: pd.DataFrame, sizes: list[int], values: list[float]
) -> tuple[list[float], list[float]]:
    """Each bar's distance down to its interval's low end and up to its high end (0 without
    an interval)."""
    lows: list[float] = []
    highs: list[float] = []
    for bs, value in zip(sizes, values):
        low = rows["speedup_low"].get(bs, math.nan) if "speedup_low" in rows else math.nan
        high = rows["speedup_high"].get(bs, math.nan) if "speedup_high" in rows else math.nan
        known = not (pd.isna(value) or pd.isna(low) or pd.isna(high))
        lows.append(max(0.0, value - low) if known else 0.0)
        highs.append(max(0.0, high - value) if known else 0.0)
    return lows, highs


def _bar_text(value: float, rows: pd.DataFrame, bs: int, flagged: bool) -> str:
    """A bar's words: the speedup, its verdict (the baseline's own bar none), and "! noisy"
    where the window is flagged."""
    verdict = rows["verdict"].get(bs, "") if "verdict" in rows else ""
    word = verdict if isinstance(verdict, str) and verdict not in ("", "baseline") else ""
    text = ratio(value) + (f" {word}" if word else "")
    return text + ("\n! noisy" if flagged else "")


def _batch_axis(ax: Axes, frame: pd.DataFrame) -> None:
    sizes = sorted(frame["bs"].unique())
    if len(sizes) > 1 and sizes[-1] / sizes[0] >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("batch size")


def category_bars(
    labels: list[str], per_label: list[dict[str, float]], title: str, out: Path, legend: bool = True
) -> Path:
    return _save(category_figure(labels, per_label, title, legend), out)


def category_figure(
    labels: list[str], per_label: list[dict[str, float]], title: str, legend: bool = True
) -> Figure:
    """Horizontal stacked bars: one per label, kernel µs per step by category; the legend
    names every category any bar holds."""
    use_agg()
    import matplotlib.pyplot as plt

    categories = [c for c in CATEGORY_COLOURS if any(d.get(c, 0) > 0 for d in per_label)]
    categories += sorted({c for d in per_label for c in d} - set(categories))
    unit, scale = (
        ("ms", 1e-3) if max((sum(d.values()) for d in per_label), default=0) >= 1e3 else ("µs", 1.0)
    )
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.42 * len(labels)))
    left = [0.0] * len(labels)
    ys = list(range(len(labels)))[::-1]
    for category in categories:
        values = [d.get(category, 0.0) * scale for d in per_label]
        ax.barh(
            ys,
            values,
            left=left,
            color=CATEGORY_COLOURS.get(category, "#444444"),
            label=category,
            height=0.7,
        )
        left = [a + b for a, b in zip(left, values)]
    for y, total in zip(ys, left):
        ax.annotate(
            f"{number(total)} {unit}",
            (total, y),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_xlabel(f"GPU kernel time per profiled step ({unit})")
    ax.set_xlim(0, max(max(left, default=0), 1e-9) * 1.15)
    ax.grid(True, axis="x", alpha=0.3)
    if legend:
        ax.legend(
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            title="category",
            title_fontsize=8,
        )
    ax.set_title(title, fontsize=10)
    return fig


#: what a sweep of CPU runs says in place of its category figure
NO_SWEEP_KERNELS = "no GPU kernels in this sweep's traces (CPU run?): categories.png left out"


def sweep_figures(frame: pd.DataFrame, manifest: SweepManifest) -> dict[str, Figure]:
    """The figures of a sweep's benchmark table (a frame with at least one finished cell) and
    manifest, by name: latency, speedup, throughput and, where a cell ran GPU kernels,
    categories. `plot` writes each as <name>.png; `report` inlines them."""
    model = manifest.model
    figures = {
        "latency": latency_figure(frame, model),
        "speedup": speedup_figure(frame, model, manifest.baseline),
        "throughput": throughput_figure(frame, model),
    }
    cells = [
        cell
        for _, cell in grid_cells(manifest)
        if cell.status == OK and (cell.metrics or {}).get("categories_us_per_step")
    ]
    data = [(c.metrics or {})["categories_us_per_step"] for c in cells]
    if data and any(sum(d.values()) > 0 for d in data):
        labels = [short_label(c) for c in cells]
        figures["categories"] = category_figure(
            labels, data, _title("GPU kernel time by category, per cell", model, _devices(frame))
        )
    return figures


def sweep_plots(
    frame: pd.DataFrame, manifest: SweepManifest, out: Path, note: Callable[[str], object]
) -> list[Path]:
    """latency.png, speedup.png, throughput.png and categories.png of a sweep's benchmark
    table (a frame with at least one finished cell) and manifest; ``note`` says what is left
    out."""
    figures = sweep_figures(frame, manifest)
    if "categories" not in figures:
        note(NO_SWEEP_KERNELS)
    return [_save(fig, out / f"{name}.png") for name, fig in figures.items()]


#: marker of each backend in the roofline chart, in order of appearance
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def roofline_figure(points: Sequence[tuple[str, Roofline | None]]) -> Figure | None:
    """Log-log roofline of (label, Roofline) points (analysis.roofline.chart_data): one roof per
    precision present, each point in its roof's colour, marked by backend; None when no point
    has a roofline."""
    chart = chart_data(points)
    if chart is None:
        return None
    use_agg()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour: dict[Roof | None, str] = {
        roof: colours[i % len(colours)] for i, roof in enumerate(chart.roofs)
    }
    marker = {b: _MARKERS[i % len(_MARKERS)] for i, b in enumerate(chart.backends)}
    lo = min([1.0] + [p.intensity for p in chart.points if p.intensity > 0])
    for roof in chart.roofs:
        xs = [lo, roof.ridge, max(roof.ridge * 10, 1e4)]
        ax.plot(xs, [roof.at(x) for x in xs], color=colour[roof], label=roof_label(roof))
    for p in chart.points:
        ax.scatter(
            [p.intensity],
            [p.achieved_tflops],
            zorder=3,
            marker=marker[p.backend],
            color=colour.get(p.roof, "black"),
            label=f"{p.label} ({p.backend}{', ' + roof_name(p.roof) if p.roof else ''})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"arithmetic intensity (FLOP per byte; {MIN_BYTES_LABEL})")
    ax.set_ylabel("achieved TFLOP/s (timed p50)")
    ax.set_title(roofline_title(chart), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def roofline_plot(points: Sequence[tuple[str, Roofline | None]], out: Path) -> Path | None:
    """roofline.png of (label, Roofline) points; None when none has a roofline."""
    fig = roofline_figure(points)
    return _save(fig, out) if fig is not None else None


def run_plot(
    cats: dict[str, float],
    share: dict[str, float],
    steps: int,
    name: str,
    model: str,
    device: str,
    out: Path,
) -> Path:
    """<name>_categories.png: kernel time per step by category (``cats``, µs), each labelled
    with its time in Tensor Core kernels (not how busy the tensor pipe was)."""
    labels = sorted(cats, key=lambda c: cats[c], reverse=True)
    labels_shown = [
        f"{c} ({number(share[c], 0, thousands=False)} % TC-kernel time)" if share.get(c) else c
        for c in labels
    ]
    title = (
        f"GPU kernel time by category: {name} ({steps} profiled steps)\n"
        f"{model + ' on ' if model else ''}{device}; TC-kernel time = time in Tensor Core "
        "kernels"
    )
    return category_bars(
        labels_shown,
        [{c: cats[c]} for c in labels],
        title,
        out / f"{name}_categories.png",
        legend=False,
    )


def require_matplotlib() -> None:
    """Say so early when matplotlib is missing."""
    pyplot()
