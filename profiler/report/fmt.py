"""Every number the views print or export goes through here: one spelling of a missing value
("-"), of times, percentages, counts and sizes, and one way to cut a table to its top rows."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (pandas: not imported by a run, which prints no frame)
    import pandas as pd

    from profiler.analysis.records import IntervalFigure

from profiler.analysis.timed_window import (  # re-exported for the views
    FLAGS as FLAGS,
    window_flags as window_flags,
)
from profiler.runs.phases import LABELS as PHASE_LABELS
from profiler.trace.diff_rows import CpuOperatorRow
from profiler.units import (  # the one spelling of numbers, re-exported for the views
    CSV_FLOATS as CSV_FLOATS,
    MAX_FIGURES as MAX_FIGURES,
    MIN_FIGURES as MIN_FIGURES,
    count as count,
    figures_allowed as figures_allowed,
    fixed as fixed,
    missing as missing,
    number as number,
    percent as percent,
    plain as plain,
    rate as rate,
    ratio as ratio,
    significant as significant,
    size as size,
    time as time,
    wall_time as wall_time,
)

#: C0 and C1 control characters (ESC, CSI, BEL...): a name from a file never reaches the terminal
#: raw
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """A name read from a file, for rich: control characters shown as ``?`` and rich markup
    escaped, so ``[/]`` or ``ESC[2J`` in a kernel name is printed, never obeyed."""
    from rich.markup import escape

    return escape(_CONTROL.sub("?", str(text)))


def marked(text: str, flags: Sequence[str]) -> str:
    """A figure with its window's flags beside it: ``7.2 ms (! noisy, bimodal)``."""
    return f"{text} (! {', '.join(flags)})" if flags else text


def size_bytes(value: float | None) -> str:
    if missing(value):
        return "-"
    assert value is not None  # (missing: None or NaN)
    if value < 0:
        return "-"
    return f"{value / 1024:.1f} KB" if value >= 1024 else f"{int(value)} B"


#: a figure that was not finite (significant's None), in red
NOT_FINITE = "[red]not finite[/]"


def with_unit(value: float | None, unit: str = "") -> str:
    """A value of a diff's overview row in its unit: a time given in µs in ms or µs, one given
    in ms to the microsecond, a percentage (or its change in points, ``pt``), a count (no unit)
    or any other figure to one decimal with its unit."""
    if missing(value):
        return "-"
    if unit == "µs":
        return time(value, "µs", ("ms", "µs"))
    if unit == "ms":
        return time(value, thousands=False)
    if unit in ("%", "pt"):
        return percent(value, unit=unit)
    return count(value, fractions=1) + (f" {unit}" if unit else "")


def coloured(value: float, text: str) -> str:
    """``text`` (the size of a difference B - A) behind its sign: red when B is slower (+),
    green when faster (-)."""
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    colour = "red" if value > 0 else "green" if value < 0 else ""
    return f"[{colour}]{sign}{text}[/]" if colour else f"{sign}{text}"


def signed(value: float | None, unit: str = "µs") -> str:
    """A difference in its ``unit`` (with_unit; a percentage's in points) with its sign, red
    when B is slower (+), green when faster (-)."""
    if missing(value):
        return "-"
    assert value is not None  # (missing: None or NaN)
    return coloured(value, with_unit(abs(value), "pt" if unit == "%" else unit))


# --- per-column format tables: a column's unit fixes its format, one table per kind of table

#: an HTML table's column headers in words, with their unit, for the field names the tables carry
HEADERS = {
    "name": "kernel",
    "kernel": "kernel",
    "category": "category",
    "operator": "operator",
    "side": "in",
    "calls": "calls",
    "kernels": "kernels",
    "tensor_core": "Tensor Cores",
    "total_us": "total µs",
    "ms_total": "total ms",
    "ms_per_step": "ms per step",
    "share_pct": "share %",
    "tensor_core_pct": "TC-kernel time %",
    "us_a": "A µs",
    "us_b": "B µs",
    "delta_us": "delta µs (B - A)",
    "change_pct": "change %",
    "share_a_pct": "share A %",
    "share_b_pct": "share B %",
    "tensor_core_a_pct": "TC-kernel time A %",
    "tensor_core_b_pct": "TC-kernel time B %",
    "calls_a": "calls A",
    "calls_b": "calls B",
    "kernels_a": "kernels A",
    "kernels_b": "kernels B",
    "input_dims": "input shapes",
    "flops_per_call": "FLOPs per call",
    "flops": "FLOPs",
    "gpu_us": "GPU µs",
    "tflops": "TFLOP/s",
    "pct_of_peak": "% of peak",
    "gbs": "≥ GB/s (minimum bytes)",
    "pct_peak_bandwidth": "≥ % of bandwidth",
    "backend": "backend",
    "bs": "batch",
    "p50_ms": "p50 ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "mean_ms": "mean ms",
    "throughput_per_s": "samples/s",
    "speedup": "speedup x",
    "interval": "95 % interval",
    "verdict": "verdict",
    "processes": "processes",
    "cv_pct": "CV %",
    "noise": "noise warnings",
    "gpu_util_pct": "profiled GPU util %",
    "rel_l2_error": "rel L2 error",
    "status": "status",
    "reason": "reason",
    "gpu": "GPU",
    "max_new_tokens": "new tokens",
    "src_len": "source length",
    "prompt_len": "prompt length",
    "seq_len": "sequence length",
    "image_size": "image size",
    "ttft_ms": "TTFT p50 ms",
    "tpot_ms": "TPOT ms",
    "ttft_speedup": "TTFT speedup",
    "tpot_speedup": "TPOT speedup",
    "token_p50_ms": "token p50 ms",
    "token_p99_ms": "token p99 ms",
    "tokens_per_s": "tokens/s",
    "cpu_total_us": "total CPU µs",
    "cpu_self_us": "self CPU µs",
    "total_a_us": "total A µs",
    "total_b_us": "total B µs",
    "total_delta_us": "total delta µs (B - A)",
}
#: an HTML table's format per column, for the field names whose unit fixes it
HTML_FORMATS = {
    "p50_ms": ".3f",
    "p90_ms": ".3f",
    "p99_ms": ".3f",
    "mean_ms": ".3f",
    "ms_total": ",.3f",
    "ms_per_step": ",.3f",
    "ttft_ms": ".3f",
    "token_p50_ms": ".3f",
    "token_p99_ms": ".3f",
    "throughput_per_s": ",.1f",
    "tokens_per_s": ",.1f",
    "speedup": ".2f",
    "processes": ".0f",
    "cv_pct": ".1f",
    "share_pct": ".1f",
    "tensor_core_pct": ".1f",
    "gpu_util_pct": ".1f",
    "share_a_pct": ".1f",
    "share_b_pct": ".1f",
    "tensor_core_a_pct": ".1f",
    "tensor_core_b_pct": ".1f",
    "change_pct": "+.1f",
    "pct_of_peak": ".1f",
    "us_a": ",.1f",
    "us_b": ",.1f",
    "delta_us": "+,.1f",
    "total_us": ",.1f",
    "gpu_us": ",.1f",
    "rel_l2_error": ".2e",
    "tflops": ",.2f",
    "flops_per_call": ",.0f",
    "flops": ",.0f",
    "calls": ",.0f",
    "kernels": ",.0f",
    "calls_a": ",.0f",
    "calls_b": ",.0f",
    "kernels_a": ",.0f",
    "kernels_b": ",.0f",
    "bs": ".0f",
    "cpu_total_us": ",.1f",
    "cpu_self_us": ",.1f",
    "total_a_us": ",.1f",
    "total_b_us": ",.1f",
    "total_delta_us": "+,.1f",
}


#: TensorRT's per-layer times (an HTML table)
LAYER_FORMATS = {"averageMs": ".4f", "percentage": ".1f"}


def relative_error(value: float | None, blank: str = "-") -> str:
    """A relative error to two significant figures: ``0.00059``."""
    return blank if value is None or missing(value) else significant(value, 2)


def exponent(value: float | None, decimals: int = 2, blank: str = "-") -> str:
    """A figure in scientific notation (a relative error): ``5.89e-04``."""
    return blank if missing(value) else f"{value:.{decimals}e}"


def absent(value: object) -> bool:
    """None, NaN or pandas' NA (a frame's cell): shown as "-"."""
    pandas = sys.modules.get("pandas")  # (no NA without pandas imported)
    return missing(value) or (pandas is not None and value is pandas.NA)


def key_value(value: object) -> str:
    """One value of a key-value table (each row its own quantity): a whole number with
    thousands separators, a small one in scientific notation, else three decimals below 100
    and one above; text as it is."""
    if absent(value):
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if isinstance(value, float) and 0 < abs(value) < 0.01:
        return f"{value:.2e}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def column_format(values: list[float]) -> str:
    """One format for a whole column of numbers: counts as whole numbers; else decimals enough
    for three figures of the largest value and two of the smallest one that is not zero (at
    most four); scientific notation for the whole column when its values are all below 0.01 or
    span more than four orders of magnitude (a column never shows a value as 0.0 that is not)."""
    if not values:
        return ","
    magnitudes = [abs(v) for v in values if v]
    if all(v.is_integer() for v in values) and max(magnitudes, default=0) < 1e15:
        return ",.0f"
    largest, smallest = max(magnitudes, default=0), min(magnitudes, default=0)
    if 0 < largest < 0.01 or (smallest and largest / smallest > 1e4):
        return ".2e"
    decimals = 1 if largest >= 100 else 2 if largest >= 10 else 3
    if smallest:
        decimals = max(decimals, min(4, 1 - math.floor(math.log10(smallest))))
    return f",.{decimals}f"


class TimeColumn:
    """One unit for a column of durations given in µs (a CPU trace's run to seconds): s, ms or
    µs by the column's largest value, named once in its header, so a column never mixes units
    nor prints millions of µs (``2,487,216.94`` µs is ``2.487`` s)."""

    #: unit -> (µs in one, decimals)
    UNITS = {"s": (1e6, 3), "ms": (1e3, 2), "µs": (1.0, 1)}

    def __init__(self, *columns: pd.Series) -> None:
        largest = max(
            (abs(float(v)) for values in columns for v in values if not missing(v)), default=0.0
        )
        self.unit = "s" if largest >= 1e6 else "ms" if largest >= 1e3 else "µs"
        self.scale, self.decimals = self.UNITS[self.unit]

    def __call__(self, value: float | None) -> str:
        """``value`` (µs) in the column's unit, without it."""
        return time(value, "µs", self.unit, decimals=self.decimals, labelled=False)

    def signed(self, value: float | None) -> str:
        """A difference in the column's unit, with its sign: red when B is slower (+), green when
        faster (-)."""
        if missing(value):
            return "-"
        assert value is not None  # (missing: None or NaN)
        return coloured(value, self(abs(value)))


def interval(low: float | None, high: float | None) -> str:
    """A speedup's 95 % interval: ``[3.16-19.70]``; ``[-]`` where a bound is missing."""
    if low is None or high is None or missing(low) or missing(high):
        return "[-]"
    return f"[{low:.2f}-{high:.2f}]"


def gflop(flops: float) -> str:
    """FLOPs as GFLOP, two decimals: ``1,234.57 GFLOP``."""
    return f"{flops / 1e9:,.2f} GFLOP"


def head(frame: pd.DataFrame, top: int) -> pd.DataFrame:
    """The first ``top`` rows; all of them when ``top`` is 0."""
    return frame if not top else frame.head(top)


def phases_line(
    phases_s: dict[str, float],
    total_s: float | None,
    compile_s: float | None = None,
    cache_load_s: float | None = None,
) -> str:
    """``seconds: build 5.7, prepare 8.4 (compile 7.1), ...; total 23.4``."""
    parts = []
    for key, spent in phases_s.items():
        text = f"{PHASE_LABELS.get(key, key.replace('_', ' '))} {spent:.1f}"
        if key == "prepare":
            inside = [
                f"{what} {value:.1f}"
                for what, value in (("compile", compile_s), ("cache load", cache_load_s))
                if value is not None
            ]
            text += f" ({', '.join(inside)})" if inside else ""
        parts.append(text)
    total = "" if total_s is None else f"; total {total_s:.1f}"
    return f"seconds: {', '.join(parts)}{total}"


# --- the figures of the run, compare, noise and peaks views and of the report page


def peak_tflops(value: float) -> str:
    """A measured compute ceiling, four significant figures in ten columns:
    ``     989.4 TFLOP/s``."""
    return f"{value:10.4g} TFLOP/s"


def peak_gbs(value: float) -> str:
    """A measured copy bandwidth, one decimal in ten columns: ``    2961.5 GB/s``."""
    return f"{value:10.1f} GB/s"


#: the report page's table whose columns read otherwise than HTML_FORMATS: a CPU run's
#: operators (calls per step, a fraction)
CPU_OPERATOR_FORMATS = {"calls": ",.1f"}

# --- the report pages' columns and headers, table by table (a field name's header in words is
# HEADERS' unless a table says otherwise)

#: a run's kernel time by category, top kernels, CPU operators and GEMMs by recorded shape
RUN_CATEGORY_COLUMNS = [
    "category",
    "kernels",
    "calls",
    "ms_per_step",
    "share_pct",
    "tensor_core_pct",
]
TOP_KERNEL_COLUMNS = ["name", "category", "calls", "ms_total", "share_pct", "tensor_core"]
CPU_OPERATOR_COLUMNS = ["operator", "calls", "cpu_self_us", "cpu_total_us"]
GEMM_COLUMNS = ["operator", "input_dims", "calls", "flops_per_call"]
#: the GEMMs' columns of a GPU run
GEMM_GPU_COLUMNS = ["gpu_us", "tflops", "pct_of_peak"]
#: the headers of the CPU operator tables (per profiled step)
CPU_HEADERS = {
    "cpu_self_us": "self CPU µs per step",
    "cpu_total_us": "total CPU µs per step",
    "calls": "calls per step",
    "us_a": "self A µs",
    "us_b": "self B µs",
    "delta_us": "self delta µs (B - A)",
}
#: two CPU runs' operators, matched by name: the typed row's fields but the total's delta (the
#: top changes: all but the last two)
CPU_DIFF_COLUMNS = [c for c in CpuOperatorRow.__struct_fields__ if c != "total_delta_us"]
#: the comparison's category table, in order
CATEGORY_DIFF_COLUMNS = [
    "category",
    "us_a",
    "us_b",
    "delta_us",
    "change_pct",
    "share_a_pct",
    "share_b_pct",
    "tensor_core_a_pct",
    "tensor_core_b_pct",
    "calls_a",
    "calls_b",
]
#: a comparison's top changes after the kernel's (or operator's) name (those the frame has)
CHANGE_COLUMNS = ("side", "us_a", "us_b", "delta_us", "change_pct")


def interval_figure(figure: IntervalFigure | None) -> str:
    """A generation figure over processes (profiler.analysis.records.IntervalFigure) to the
    digits its between-process CV allows, with its 95 % interval: ``12.3 ms [12.1-12.6]``;
    one process: the value alone."""
    if figure is None:
        return "-"
    if figure.unit == "ms":
        text = time(figure.value, decimals=None, noise=figure.cv)
    else:
        text = number(figure.value, None, noise=figure.cv)
    if figure.low is None or figure.high is None:
        return text
    low, high = (number(x, None, noise=figure.cv) for x in (figure.low, figure.high))
    return f"{text} [{low}-{high}]"
