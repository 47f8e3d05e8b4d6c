"""How many samples a figure needs, and when to stop taking them (``--target-noise P``). Pure
numpy, no state: the caller passes what it has sampled so far.

- ``processes_needed``: from the per-process medians of one config, the between-process
  coefficient of variation (CV = std / mean, n - 1 divisor) and the fewest processes n for which
  the 95 % interval of the mean of per-process medians, t(0.975, n - 1) * CV / sqrt(n), is within
  ±P %; for a ratio of two configs sampled alike (``sides=2``) the spread is sqrt(2) times that.
- ``stopping_rule``: in the spirit of NVBench's ``stdrel`` criterion (stop once the relative
  standard deviation is below ``max-noise``, after ``min-time``; or once that noise has settled
  above the threshold, judged by the relative spread of its recent estimates, < 5 %), applied
  to the interval of the quoted figure rather than to the spread of the samples: stop when the
  relative half-width of the interval is within ±P % (target reached), when the time budget is
  spent, or when the CV has settled and the projected number of samples to reach ±P % does not
  fit in the budget (not reachable). ``min_samples`` first, as NVBench's ``--min-samples``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

#: a run of samples: a list of floats or a float array
Samples: TypeAlias = Sequence[float] | npt.NDArray[np.float64]

#: 97.5 % quantiles of Student's t for 1..30 degrees of freedom (two-sided 95 %)
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
Z975 = 1.959964
MIN_SAMPLES = 3
MAX_PROCESSES = 100
#: the CV has settled when its last SETTLE_WINDOW estimates spread by less than SETTLED_SPREAD
SETTLE_WINDOW = 4
SETTLED_SPREAD = 0.05

REACHED, BUDGET, UNREACHABLE, CONTINUE = (
    "target reached",
    "time budget spent",
    "target not reachable within the budget",
    "keep sampling",
)


def t975(df: int) -> float:
    """Student's t 97.5 % quantile; beyond 30 degrees of freedom the Cornish-Fisher expansion
    around the normal quantile (within 0.001 of the table there)."""
    if df < 1:
        return math.inf
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (df = inf: the normal)."""
    if not math.isfinite(t):
        return 0.0
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2))
    return betainc(df / 2, 0.5, df / (df + t * t))


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t: bisection on t_two_sided_p, to 1e-13 of
    the quantile (remembered: a sweep's verdicts ask for the same few again and again)."""
    tail = 2 * (1 - p)
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > tail:
        high *= 2
    while high - low > 1e-13 * high:
        mid = (low + high) / 2
        low, high = (mid, high) if t_two_sided_p(mid, df) > tail else (low, mid)
    return (low + high) / 2


def relative_half_width(cv: float, n: int, sides: int = 1) -> float:
    """The 95 % interval's half-width, relative to the mean, of a mean of n samples of CV ``cv``
    (``sides=2``: of the ratio of two such means)."""
    return t975(n - 1) * cv * math.sqrt(sides / n) if n > 1 else math.inf


def cv_of(values: Samples) -> float:
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        raise ValueError("the spread needs at least two values")
    return float(x.std(ddof=1) / x.mean())


@dataclass(frozen=True)
class ProcessPlan:
    """How many processes the figure needs for ±``target`` (relative)."""

    cv: float  # between-process CV of the per-process medians
    processes: int  # the fewest processes reaching the target (capped at max_processes)
    reachable: bool  # False when even max_processes do not reach it
    half_width_now: float  # the relative half-width with the processes measured
    target: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def processes_needed(
    medians: Samples, target: float, *, sides: int = 1, max_processes: int = MAX_PROCESSES
) -> ProcessPlan:
    """The processes needed for the interval of the mean per-process median (``sides=2``: of
    a ratio of two configs with that many processes each) to be within ±``target``."""
    if target <= 0:
        raise ValueError("the target must be > 0")
    cv = cv_of(medians)
    # t >= z, so no n below sides * (z * cv / target)^2 reaches it: search up from there
    start = max(2, math.floor(sides * (Z975 * cv / target) ** 2))
    needed = next(
        (n for n in range(start, max_processes + 1) if relative_half_width(cv, n, sides) <= target),
        None,
    )
    return ProcessPlan(
        cv=cv,
        processes=needed or max_processes,
        reachable=needed is not None,
        half_width_now=relative_half_width(cv, len(medians), sides),
        target=target,
    )


@dataclass(frozen=True)
class Stop:
    """Whether to stop sampling, why, and where the figure stands."""

    stop: bool
    reason: str
    samples: int
    half_width: float  # relative, of the mean so far (inf below two samples)
    cv: float | None
    samples_needed: int | None  # projected for the target at the current CV

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _settled(x: npt.NDArray[np.float64]) -> bool:
    """The CV estimated on each of the last SETTLE_WINDOW prefixes spreads by less than
    SETTLED_SPREAD of the latest (NVBench's convergence test, on the CV)."""
    n = len(x)
    if n < MIN_SAMPLES + SETTLE_WINDOW:
        return False
    cvs = np.array([cv_of(x[:m]) for m in range(n - SETTLE_WINDOW + 1, n + 1)])
    return bool(cvs[-1] > 0 and cvs.std() / cvs[-1] < SETTLED_SPREAD)


def stopping_rule(
    values: Samples,
    target: float,
    *,
    elapsed_s: float = 0.0,
    budget_s: float = math.inf,
    min_samples: int = MIN_SAMPLES,
) -> Stop:
    """Stop sampling? ``values``: the samples so far (per-iteration latencies, or per-process
    medians when sampling processes), in the order taken; ``elapsed_s`` the time they took."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < max(2, min_samples):
        return Stop(
            elapsed_s >= budget_s,
            BUDGET if elapsed_s >= budget_s else CONTINUE,
            n,
            math.inf,
            None,
            None,
        )
    cv = cv_of(x)
    width = relative_half_width(cv, n)
    needed = processes_needed(x, target, max_processes=max(n, 10_000)).processes
    if width <= target:
        return Stop(True, REACHED, n, width, cv, needed)
    if elapsed_s >= budget_s:
        return Stop(True, BUDGET, n, width, cv, needed)
    per_sample = elapsed_s / n
    if per_sample > 0 and needed * per_sample > budget_s and _settled(x):
        return Stop(True, UNREACHABLE, n, width, cv, needed)
    return Stop(False, CONTINUE, n, width, cv, needed)
