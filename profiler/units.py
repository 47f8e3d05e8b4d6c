"""The one spelling of a number, for every floor: a missing value ("-"), times, percentages,
ratios, counts, sizes, significant figures and the floats of the files a run writes.

Ground: it imports nothing of the package, so a run's progress lines, an error message and a
view spell the same figure the same way. report/fmt.py builds the views' tables on these."""

from __future__ import annotations

import math

#: the float format of the CSV files the views write (six significant figures)
CSV_FLOATS = "%.6g"
#: the most significant figures a latency is printed to, however quiet its window
MAX_FIGURES = 4
#: the fewest: a figure whose noise is as large as itself still shows its leading two digits
MIN_FIGURES = 2


def missing(value: object) -> bool:
    """None or NaN: shown as "-"."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def fixed(value: float | None, spec: str, blank: str = "-") -> str:
    """``format(value, spec)``, or ``blank`` for a missing value."""
    return blank if missing(value) else format(value, spec)


def plain(value: float) -> str:
    """A number in its shortest spelling (``5``, ``0.5``, ``2.5e-05``): an option's value."""
    return f"{value:g}"


def significant(value: float, digits: int = 3) -> str:
    """``digits`` significant figures: ``0.00123``, ``1.23e+03``."""
    return f"{value:.{digits}g}"


def finite(value: float | None, digits: int = 3) -> str:
    """A figure that may not be finite (None): ``not finite``, else ``digits`` significant
    figures."""
    return "not finite" if value is None else significant(value, digits)


def pct(value: float | None) -> str:
    """A share: ``42.1 %``."""
    return "-" if missing(value) else f"{value:.1f} %"


def pct_fine(value: float | None) -> str:
    """A small share (a CV) to two decimals: ``0.42 %``."""
    return "-" if missing(value) else f"{value:.2f} %"


def change_pct(value: float | None) -> str:
    """A relative change: ``+12.5 %``."""
    return "-" if missing(value) else f"{value:+.1f} %"


def times(value: float | None) -> str:
    """A speedup: ``4.03x``."""
    return "-" if missing(value) else f"{value:.2f}x"


def count(value: float | None, digits: int = 0) -> str:
    """A count with thousands separators; a fraction (or ``digits``) with decimals."""
    if value is None or missing(value):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return f"{value}"
    if isinstance(value, float) and not value.is_integer() or digits:
        return f"{value:,.{digits or 2}f}"
    return f"{int(value):,}"


def us(value: float | None) -> str:
    """A duration given in µs, in µs, ms or s (two decimals above µs)."""
    if value is None or missing(value):
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


def ms(value: float | None) -> str:
    """A latency given in ms, its unit in the column's header: ``1,150.053``."""
    return "-" if missing(value) else f"{value:,.3f}"


def ms_unit(value: float | None) -> str:
    """A latency given in ms: ``5.791 ms``, ``1,150.053 ms``."""
    return "-" if missing(value) else f"{value:,.3f} ms"


def ms_plain(value: float | None) -> str:
    """A latency given in ms, no separators, its unit beside it or in the column's header:
    ``1150.053``."""
    return fixed(value, ".3f")


def csv_ms(value: float) -> str:
    """A latency of a run's samples file, in ms to the nanosecond: ``5.791234``."""
    return f"{value:.6f}"


def seconds(value: float) -> str:
    """A wall time: ``12.5 s`` or ``3 min 5 s``."""
    minutes, rest = divmod(value, 60)
    return f"{int(minutes)} min {rest:.0f} s" if minutes else f"{rest:.1f} s"


def seconds_unit(value: float | None, digits: int = 1) -> str:
    """A wall time or a time limit to ``digits`` decimals, no separators, never in minutes:
    ``12.5 s``, ``600 s``."""
    return "-" if missing(value) else f"{value:.{digits}f} s"


def seconds_figure(value: float | None) -> str:
    """A wall time given in s, its unit in the column's header: ``12.34``."""
    return fixed(value, ".2f")


def tenths_plain(value: float | None) -> str:
    """A figure to one decimal, no separators, its unit beside it: ``1234.5`` (tokens/s)."""
    return fixed(value, ".1f")


def fraction(value: float | None) -> str:
    """A fraction 0..1 to three decimals: ``0.875``."""
    return fixed(value, ".3f")


def rounded(value: float | None) -> str:
    """A number rounded to a whole one, no separators: ``12``."""
    return fixed(value, ".0f")


def host_load(value: float | None) -> str:
    """A host's load average: ``3.25``."""
    return fixed(value, ".2f")


def mib(value: float | None, note: str | None = None) -> str:
    """A size given in MiB: ``1,234.5 MiB``; ``note`` (why there is none) for a missing one."""
    return (note or "-") if missing(value) else f"{value:,.1f} MiB"


def mib_figure(value: float | None, note: str | None = None) -> str:
    """A size given in MiB, its unit in the column's header: ``1,234.5``; ``note`` (why there
    is none) for a missing one."""
    return (note or "-") if missing(value) else f"{value:,.1f}"


def figures_allowed(relative_noise: float | None) -> int:
    """The significant figures a value with this relative noise (a CV: 0.05 for 5 %) carries:
    one more than the digits above the noise's, between MIN_FIGURES and MAX_FIGURES
    (CV 0.1 % -> 4, 1 % -> 3, 10 % or more -> 2); MAX_FIGURES without a noise."""
    if relative_noise is None or missing(relative_noise) or relative_noise <= 0:
        return MAX_FIGURES
    if math.isinf(relative_noise):
        return MIN_FIGURES
    return max(MIN_FIGURES, min(MAX_FIGURES, math.floor(-math.log10(relative_noise)) + 1))


def trimmed(value: float | None, relative_noise: float | None, unit: str = "") -> str:
    """A latency to the significant figures its noise allows (figures_allowed), never fewer
    than its whole digits, thousands separated: 7.231 at CV 180 % -> ``7.2``, at 1 % ->
    ``7.23``; 1,150.053 at 1 % -> ``1,150``; ``unit`` appended (``7.2 ms``)."""
    if value is None or missing(value):
        return "-"
    if math.isinf(value):  # (a damaged file's figure: shown as what it is)
        return f"{value}" + (f" {unit}" if unit else "")
    magnitude = math.floor(math.log10(abs(value))) if value else 0
    decimals = max(0, figures_allowed(relative_noise) - 1 - magnitude)
    return f"{value:,.{decimals}f}" + (f" {unit}" if unit else "")
