"""Every number the views print or export goes through here: one spelling of a missing value
("-"), of times, percentages, counts and sizes, and one way to cut a table to its top rows."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (pandas: not imported by a run, which prints no frame)
    import pandas as pd

from profiler.analysis.noise import FLAGS, window_flags  # noqa: F401 (re-exported)
from profiler.runs.phases import LABELS as PHASE_LABELS

#: C0 and C1 control characters (ESC, CSI, BEL...): a name from a file never reaches the terminal
#: raw
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe(text) -> str:
    """A name read from a file, for rich: control characters shown as ``?`` and rich markup
    escaped, so ``[/]`` or ``ESC[2J`` in a kernel name is printed, never obeyed."""
    from rich.markup import escape

    return escape(_CONTROL.sub("?", str(text)))


def missing(value) -> bool:
    """None or NaN: shown as "-"."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def fixed(value, spec: str, blank: str = "-") -> str:
    """``format(value, spec)``, or ``blank`` for a missing value."""
    return blank if missing(value) else format(value, spec)


def pct(value) -> str:
    """A share: ``42.1 %``."""
    return "-" if missing(value) else f"{value:.1f} %"


def change_pct(value) -> str:
    """A relative change: ``+12.5 %``."""
    return "-" if missing(value) else f"{value:+.1f} %"


def times(value) -> str:
    """A speedup: ``4.03x``."""
    return "-" if missing(value) else f"{value:.2f}x"


def count(value, digits: int = 0) -> str:
    """A count with thousands separators; a fraction (or ``digits``) with decimals."""
    if missing(value):
        return "-"
    if isinstance(value, float) and not value.is_integer() or digits:
        return f"{value:,.{digits or 2}f}"
    return f"{int(value):,}"


def us(value) -> str:
    """A duration given in µs, in µs, ms or s (two decimals above µs)."""
    if missing(value):
        return "-"
    if abs(value) >= 1e6:
        return f"{value / 1e6:,.2f} s"
    if abs(value) >= 1e3:
        return f"{value / 1e3:,.2f} ms"
    return f"{value:,.1f} µs"


def us_fine(value: float) -> str:
    """A duration given in µs, in µs or ms with three decimals (differences of a diff)."""
    if abs(value) >= 1e3:
        return f"{value / 1e3:,.3f} ms"
    return f"{value:,.1f} µs"


#: the most significant figures a latency is printed to, however quiet its window
MAX_FIGURES = 4
#: the fewest: a figure whose noise is as large as itself still shows its leading two digits
MIN_FIGURES = 2
#: the window flags (profiler.analysis.noise) marked beside a figure


def figures_allowed(relative_noise) -> int:
    """The significant figures a value with this relative noise (a CV: 0.05 for 5 %) carries:
    one more than the digits above the noise's, between MIN_FIGURES and MAX_FIGURES
    (CV 0.1 % -> 4, 1 % -> 3, 10 % or more -> 2); MAX_FIGURES without a noise."""
    if missing(relative_noise) or relative_noise <= 0:
        return MAX_FIGURES
    return max(MIN_FIGURES, min(MAX_FIGURES, math.floor(-math.log10(relative_noise)) + 1))


def trimmed(value, relative_noise, unit: str = "") -> str:
    """A latency to the significant figures its noise allows (figures_allowed), never fewer
    than its whole digits, thousands separated: 7.231 at CV 180 % -> ``7.2``, at 1 % ->
    ``7.23``; 1,150.053 at 1 % -> ``1,150``; ``unit`` appended (``7.2 ms``)."""
    if missing(value):
        return "-"
    magnitude = math.floor(math.log10(abs(value))) if value else 0
    decimals = max(0, figures_allowed(relative_noise) - 1 - magnitude)
    return f"{value:,.{decimals}f}" + (f" {unit}" if unit else "")


def marked(text: str, flags) -> str:
    """A figure with its window's flags beside it: ``7.2 ms (! noisy, bimodal)``."""
    return f"{text} (! {', '.join(flags)})" if flags else text


def ms(value) -> str:
    """A latency given in ms, its unit in the column's header: ``1,150.053``."""
    return "-" if missing(value) else f"{value:,.3f}"


def ms_unit(value) -> str:
    """A latency given in ms: ``5.791 ms``, ``1,150.053 ms``."""
    return "-" if missing(value) else f"{value:,.3f} ms"


def mib(value, note: str | None = None) -> str:
    """A size given in MiB: ``1,234.5 MiB``; ``note`` (why there is none) for a missing one."""
    return (note or "-") if missing(value) else f"{value:,.1f} MiB"


def mib_figure(value, note: str | None = None) -> str:
    """A size given in MiB, its unit in the column's header: ``1,234.5``; ``note`` (why there
    is none) for a missing one."""
    return (note or "-") if missing(value) else f"{value:,.1f}"


def seconds(value: float) -> str:
    """A wall time: ``12.5 s`` or ``3 min 5 s``."""
    minutes, rest = divmod(value, 60)
    return f"{int(minutes)} min {rest:.0f} s" if minutes else f"{rest:.1f} s"


def size_bytes(value) -> str:
    if missing(value) or value < 0:
        return "-"
    return f"{value / 1024:.1f} KB" if value >= 1024 else f"{int(value)} B"


def significant(value, digits: int = 3) -> str:
    """``digits`` significant figures; None (a value that was not finite) in red."""
    return "[red]not finite[/]" if value is None else f"{value:.{digits}g}"


def with_unit(value, unit: str = "") -> str:
    """A value of a diff's overview row in its unit (µs, %, ms, or a count)."""
    if missing(value):
        return "-"
    if unit == "µs":
        return us_fine(value)
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "ms":
        return f"{value:.3f} ms"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def signed(value, unit: str = "µs") -> str:
    """A difference with its sign, red when B is slower (+), green when faster (-)."""
    if missing(value):
        return "-"
    text = with_unit(abs(value), unit)
    if unit == "%":
        text = text.replace(" %", " pt")
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    colour = "red" if value > 0 else "green" if value < 0 else ""
    return f"[{colour}]{sign}{text}[/]" if colour else f"{sign}{text}"


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
    for key, seconds in phases_s.items():
        text = f"{PHASE_LABELS.get(key, key.replace('_', ' '))} {seconds:.1f}"
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
