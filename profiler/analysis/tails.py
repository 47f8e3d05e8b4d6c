"""A window's tail percentiles (p90, p99) with distribution-free 95 % intervals: order
statistics, no assumption on the shape of the latencies. Pure Python on the sorted values.

For the q-quantile xi of the distribution a window's iterations are drawn from, the number B
of iterations below xi is Binomial(n, q), whatever that distribution is. So the interval from
the l-th to the u-th smallest of the n values, [X(l), X(u)], holds xi with probability
P(l <= B <= u - 1) = F(u - 1) - F(l - 1), F the binomial CDF (Hahn and Meeker, *Statistical
Intervals*, the distribution-free interval for a quantile). The ranks have equal tails: l is
the largest rank with F(l - 1) <= alpha / 2 and u the smallest with F(u - 1) >= 1 - alpha / 2,
so the interval holds xi with probability at least 1 - alpha.

A window too small for the percentile has no rank for an end: for p99 the upper end needs
q^n <= alpha / 2, 368 iterations at 95 %; with 100 the p99 is the 99th of 100 values, and the
interval's upper end lies above the largest of them (``high_ms`` None; ``needed`` says how many
iterations would give it one). The iterations of one window are taken as exchangeable draws:
drift inside the window (its ``drifting`` warning) makes the interval too narrow, as it does
every figure of the window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

from profiler.analysis.records import TailFigure
from profiler.analysis.sampling import betainc
from profiler.analysis.timed_window import percentile

#: the tails a window's headline carries, and the level of their intervals
TAIL_PERCENTILES = (90, 99)
CONFIDENCE = 0.95


def binomial_cdf(k: int, n: int, q: float) -> float:
    """P(B <= k) for B ~ Binomial(n, q): the regularized incomplete beta I_{1-q}(n - k, k + 1)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1, 1.0 - q)


@lru_cache(maxsize=256)
def order_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """(l, u): the ranks (1 = smallest) of the equal-tailed distribution-free interval for the
    q-quantile from n values; an end the n values cannot give is None (module doc). F(r - 1)
    grows with r: both are found by bisection."""
    tail = (1.0 - confidence) / 2

    def first(holds: Callable[[int], bool]) -> int | None:  # the first rank where it holds
        lo, hi = 1, n + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if holds(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo if lo <= n else None

    above = first(lambda r: binomial_cdf(r - 1, n, q) > tail)  # l is the rank before it
    low = (n if above is None else above - 1) or None
    high = first(lambda r: binomial_cdf(r - 1, n, q) >= 1.0 - tail)
    return low, high


def iterations_needed(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values whose interval for the q-quantile has both ends: q^n <= alpha / 2 for
    the upper end, (1 - q)^n <= alpha / 2 for the lower."""
    tail = (1.0 - confidence) / 2
    return max(math.ceil(math.log(tail) / math.log(p)) for p in (q, 1.0 - q))


def tail_figure(values: Sequence[float], pct: int, confidence: float = CONFIDENCE) -> TailFigure:
    """The ``pct`` percentile of ``values`` (numpy's linear interpolation, as the window's own
    p90 and p99) with its distribution-free interval (module doc)."""
    ordered = sorted(float(v) for v in values)
    n, q = len(ordered), pct / 100.0
    low, high = order_ranks(n, q, confidence)
    coverage = binomial_cdf((high or n + 1) - 1, n, q) - binomial_cdf((low or 0) - 1, n, q)
    return TailFigure(
        percentile=pct,
        value_ms=percentile(ordered, pct),
        low_ms=None if low is None else ordered[low - 1],
        high_ms=None if high is None else ordered[high - 1],
        low_rank=low,
        high_rank=high,
        iterations=n,
        needed=iterations_needed(q, confidence),
        coverage=coverage,
    )


def tail_figures(values: Sequence[float]) -> list[TailFigure]:
    """TAIL_PERCENTILES of one window, each with its interval; none without values."""
    return [tail_figure(values, pct) for pct in TAIL_PERCENTILES] if len(values) else []
