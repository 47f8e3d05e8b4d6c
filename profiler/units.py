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


def significant(value: float | None, digits: int = 3, not_finite: str = "not finite") -> str:
    """``digits`` significant figures: ``0.00123``, ``1.23e+03``; ``not_finite`` for None (a
    figure that was not finite)."""
    return not_finite if value is None else f"{value:.{digits}g}"


def figures_allowed(relative_noise: float | None) -> int:
    """The significant figures a value with this relative noise (a CV: 0.05 for 5 %) carries:
    one more than the digits above the noise's, between MIN_FIGURES and MAX_FIGURES
    (CV 0.1 % -> 4, 1 % -> 3, 10 % or more -> 2); MAX_FIGURES without a noise."""
    if relative_noise is None or missing(relative_noise) or relative_noise <= 0:
        return MAX_FIGURES
    if math.isinf(relative_noise):
        return MIN_FIGURES
    return max(MIN_FIGURES, min(MAX_FIGURES, math.floor(-math.log10(relative_noise)) + 1))


# --- one formatter per quantity: time, rate, size, percentage, ratio and count. Each takes the
# value in the unit it was measured in, chooses the unit shown and the decimals, and spells a
# missing value as ``blank``. ``labelled=False`` leaves the unit to the column's header;
# ``thousands=False`` drops the separators (a file's figure, an option's value).


def number(
    value: float | None,
    decimals: int | None = 1,
    *,
    noise: float | None = None,
    thousands: bool = True,
    sign: bool = False,
    blank: str = "-",
) -> str:
    """The digits of every quantity: ``decimals`` decimals, or with ``decimals=None`` the
    significant figures a value with relative noise ``noise`` carries (figures_allowed), never
    fewer than its whole digits; ``1,234.5``, ``+12.5``; an infinite value as it is."""
    if value is None or missing(value):
        return blank
    if math.isinf(value):  # (a damaged file's figure: shown as what it is)
        return format(value, "+" if sign else "")
    if decimals is None:
        magnitude = math.floor(math.log10(abs(value))) if value else 0
        decimals = max(0, figures_allowed(noise) - 1 - magnitude)
    return format(value, ("+" if sign else "") + ("," if thousands else "") + f".{decimals}f")


def _labelled(text: str, unit: str, labelled: bool, blank: str) -> str:
    return text if not labelled or text == blank or not unit else f"{text} {unit}"


#: a unit of time -> nanoseconds in one
TIME_UNITS = {"s": 10**9, "ms": 10**6, "µs": 10**3, "ns": 1}
#: the units ``time(..., unit="auto")`` chooses among: a trace's durations, from µs to seconds
AUTO_TIME_UNITS = ("s", "ms", "µs")


def _convert(value: float, given: int, shown: int) -> float:
    """``value`` of a unit worth ``given`` in one worth ``shown`` (a division by a whole factor
    where the unit shown is the larger, so 2,500 µs is exactly 2.5 ms)."""
    if shown % given == 0:
        return value / float(shown // given) if shown != given else value
    return value * float(given // shown) if given % shown == 0 else value * given / shown


def time(
    value: float | None,
    given: str = "ms",
    unit: str | tuple[str, ...] | None = None,
    decimals: int | None = 3,
    *,
    noise: float | None = None,
    thousands: bool = True,
    labelled: bool = True,
    sign: bool = False,
    blank: str = "-",
) -> str:
    """A duration measured in ``given``, shown in ``unit`` (``given`` by default) or, for a tuple
    of units (largest first; ``"auto"``: AUTO_TIME_UNITS), in the largest one it reaches 1 of,
    µs to one decimal: ``time(5.791)`` is ``5.791 ms``, ``time(2_487_216.9, "µs", "auto",
    2)`` ``2.49 s``. ``decimals=None``: the figures its relative noise allows (number)."""
    if value is None or missing(value):
        return blank
    if unit == "auto":
        unit = AUTO_TIME_UNITS
    if isinstance(unit, tuple):
        shown = next((u for u in unit if abs(value) >= TIME_UNITS[u] / TIME_UNITS[given]), unit[-1])
        if shown == "µs":
            decimals = 1
    else:
        shown = unit or given
    scaled = _convert(value, TIME_UNITS[given], TIME_UNITS[shown])
    text = number(scaled, decimals, noise=noise, thousands=thousands, sign=sign, blank=blank)
    return _labelled(text, shown, labelled, blank)


def wall_time(value: float) -> str:
    """A wall time given in s: ``12.5 s`` or, from a minute, ``3 min 5 s``."""
    minutes, rest = divmod(value, 60)
    return f"{int(minutes)} min {rest:.0f} s" if minutes else f"{rest:.1f} s"


def rate(
    value: float | None,
    unit: str,
    decimals: int = 1,
    *,
    thousands: bool = True,
    labelled: bool = True,
    blank: str = "-",
) -> str:
    """A rate given in ``unit`` (samples/s, tokens/s, TFLOP/s, GB/s): ``1,234.5 GB/s``."""
    text = number(value, decimals, thousands=thousands, blank=blank)
    return _labelled(text, unit, labelled, blank)


#: a unit of size -> bytes in one
SIZE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "MB": 10**6, "GB": 10**9}


def size(
    value: float | None,
    given: str = "B",
    unit: str | None = None,
    decimals: int = 1,
    *,
    labelled: bool = True,
    blank: str = "-",
) -> str:
    """A size measured in ``given``, shown in ``unit`` (``given`` by default): ``1,234.5 MiB``,
    ``size(12_300_000, unit="MB")`` ``12.3 MB``."""
    if value is None or missing(value):
        return blank
    shown = unit or given
    text = number(_convert(value, SIZE_UNITS[given], SIZE_UNITS[shown]), decimals, blank=blank)
    return _labelled(text, shown, labelled, blank)


def percent(
    value: float | None,
    decimals: int = 1,
    *,
    of_one: bool = False,
    sign: bool = False,
    labelled: bool = True,
    unit: str = "%",
    blank: str = "-",
) -> str:
    """A percentage (``of_one``: a share 0..1): ``42.1 %``, ``+12.5 %`` with ``sign``; a change
    of a percentage is in points (``unit="pt"``)."""
    if value is None or missing(value):
        return blank
    text = number(100 * value if of_one else value, decimals, thousands=False, sign=sign)
    return _labelled(text, unit, labelled, blank)


def ratio(value: float | None, decimals: int = 2, *, suffix: str = "x", blank: str = "-") -> str:
    """A ratio (a speedup): ``4.03x``; ``suffix=""`` for a column headed by its unit."""
    text = number(value, decimals, thousands=False, blank=blank)
    return text if text == blank else text + suffix


def count(
    value: float | None,
    decimals: int | None = None,
    *,
    fractions: int = 2,
    thousands: bool = True,
    blank: str = "-",
) -> str:
    """A count: a whole one as it is (``1,234``), a fraction (a mean per step) to ``fractions``
    decimals; ``decimals`` for every value."""
    if value is None or missing(value):
        return blank
    if isinstance(value, float) and math.isinf(value):
        return f"{value}"
    if decimals is None:
        whole = not isinstance(value, float) or value.is_integer()
        return format(int(value), "," if thousands else "d") if whole else number(value, fractions)
    return number(value, decimals, thousands=thousands)
