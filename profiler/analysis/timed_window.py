"""The timed window's record (TimedWindow: raw times, statistics, noise) and how far a latency
figure can be trusted: spread, shape and drift of the window. Pure numpy; never imports torch.

Rules (each stated once, here, and printed beside its warning):

- noisy: coefficient of variation (std / mean) above ``NOISY_CV`` (10 %), or relative IQR
  (IQR / median) above ``NOISY_IQR`` (10 %, torch.utils.benchmark's "may be unreliable" bound).
- bimodal: the best two-cluster split of the sorted latencies (the split that maximises the
  between-cluster variance, i.e. 1-D k-means with k = 2 / Otsu), each cluster holding at least
  ``BIMODAL_MIN_SHARE`` of the samples, separates with Ashman's D = sqrt(2)·|m1 - m2| /
  sqrt(s1² + s2²) above ``BIMODAL_D`` (4.5; one normal or log-normal sample of 30-100 points
  stays below 4 in 95 % of draws, two modes five standard deviations apart reach 5).
- drifting: the medians of the first and last third differ by more than three standard errors
  of that difference (each third's median error taken as 1.2533·σ/√n, σ = IQR / 1.349 of the
  whole window) and by more than ``DRIFT_MIN_SHARE`` (2 %) of the median.

Whether two configs differ is profiler.analysis.verdict's: over processes, not one window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt

from profiler import units
from profiler.analysis.sampling import Samples
from profiler.runs.result import NoiseStats, RepeatSpread, TimingStats
from profiler.runs.samples import (
    read_latency_csv as read_latency_csv,  # re-exported
    spread_of_runs as spread_of_runs,  # re-exported
)

#: a rule that fired on a timed window (the module doc)
NoiseFlag = Literal["noisy", "bimodal", "drifting"]
#: the flags a timed window's noise warnings carry, in the order they are shown
FLAGS: tuple[NoiseFlag, ...] = ("noisy", "bimodal", "drifting")


def window_flags(warnings: str | Iterable[object] | None) -> list[str]:
    """The flags of a window's noise warnings ("noisy: CV ..." -> "noisy"), or of a
    benchmark.csv ``noise`` cell ("noisy; bimodal")."""
    if isinstance(warnings, str):
        warnings = warnings.split(";")
    names = [str(w).split(":")[0].strip() for w in warnings or []]
    return [name for name in FLAGS if name in names]


NOISY_CV = 0.10
NOISY_IQR = 0.10
BIMODAL_MIN_SHARE = 0.10
BIMODAL_D = 4.5
DRIFT_MIN_SHARE = 0.02
MIN_SAMPLES = 6  # fewer latencies: shape and drift are not judged


#: the noise of one window: its record in result.json (timing.noise) is this type
Noise = NoiseStats

PERCENTILES = (50, 90, 95, 99)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on pre-sorted data."""
    if not sorted_values:
        raise ValueError("no values")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def latency_stats(latencies_ms: list[float], batch_size: int) -> dict[str, float]:
    """mean, std (sample), min, p50/p90/p95/p99, max in ms, and throughput in samples/s."""
    n = len(latencies_ms)
    ordered = sorted(latencies_ms)
    mean = sum(ordered) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in ordered) / (n - 1)) if n > 1 else 0.0
    stats = {"mean_ms": mean, "std_ms": std, "min_ms": ordered[0]}
    for q in PERCENTILES:
        stats[f"p{q}_ms"] = percentile(ordered, q)
    stats["max_ms"] = ordered[-1]
    stats["throughput_samples_per_s"] = batch_size * n / (sum(ordered) / 1000.0)
    return stats


def noise(latencies_ms: Samples) -> Noise:
    """The Noise of one timed window: its figures, and a warning for each rule that fired on
    them (flags_of; the module doc), in words (warning_line)."""
    x = np.asarray(latencies_ms, dtype=float)
    if len(x) == 0:
        raise ValueError("no latencies")
    median = float(np.median(x))
    mean = float(x.mean())
    cv = float(x.std(ddof=1) / mean) if len(x) > 1 and mean > 0 else 0.0
    q1, q3 = np.percentile(x, [25, 75])
    iqr = float(q3 - q1)
    relative_iqr = iqr / median if median > 0 else 0.0
    shape: dict[str, Any] = {}
    if len(x) >= MIN_SAMPLES:
        d, clusters = two_cluster_split(x)
        first, last = _third_medians(x)
        shape = {
            "bimodal_d": d,
            "clusters_ms": clusters,
            "first_third_median_ms": first,
            "last_third_median_ms": last,
        }
    figures = Noise(
        n=len(x), median_ms=median, cv=cv, iqr_ms=iqr, relative_iqr=relative_iqr, **shape
    )
    warnings = [warning_line(flag, figures) for flag in flags_of(figures)]
    return msgspec.structs.replace(figures, warnings=warnings)


def flags_of(window: Noise) -> list[NoiseFlag]:
    """The rules that fire on a window's figures (the module doc), in the order of FLAGS."""
    flags: list[NoiseFlag] = []
    if window.cv > NOISY_CV or window.relative_iqr > NOISY_IQR:
        flags.append("noisy")
    d, clusters = window.bimodal_d, window.clusters_ms
    if d is not None and clusters is not None and d > BIMODAL_D:
        flags.append("bimodal")
    first, last = window.first_third_median_ms, window.last_third_median_ms
    if (
        first is not None
        and last is not None
        and drifts(window.n, first, last, window.iqr_ms, window.median_ms)
    ):
        flags.append("drifting")
    return flags


def warning_line(flag: NoiseFlag, window: Noise) -> str:
    """A flag's warning in words, from the window's figures: the one place the sentence is
    written, since result.json keeps it (timing.noise.warnings) and a run prints it as it
    times, below the views."""
    if flag == "noisy":
        return (
            f"noisy: CV {units.percent(100 * window.cv)}, IQR "
            f"{units.percent(100 * window.relative_iqr)}"
            f" of the median (above {units.number(100 * NOISY_CV, 0, thousands=False)} %)"
        )
    if flag == "bimodal":
        low, high = window.clusters_ms or (None, None)
        return (
            f"bimodal: two clusters around {units.time(low, thousands=False, labelled=False)} "
            f"and {units.time(high, thousands=False)} "
            f"(Ashman's D {units.number(window.bimodal_d, thousands=False)} > {BIMODAL_D})"
        )
    return (
        f"drifting: median of the first third "
        f"{units.time(window.first_third_median_ms, thousands=False, labelled=False)} "
        f"ms, of the last third {units.time(window.last_third_median_ms, thousands=False)}"
    )


@dataclass(frozen=True, eq=False)
class TimedWindow:
    """One timed window, as torch.utils.benchmark's Measurement: the raw per-iteration times
    (ms) and, derived from them when first asked, the statistics and the noise rules' verdicts.
    Built where the window is timed (profiler.collect.window.timed); ``timing_stats`` is its
    record in result.json (the raw times are the run's latency.csv)."""

    latencies_ms: tuple[float, ...]
    batch_size: int

    @cached_property
    def stats(self) -> dict[str, float]:
        """mean_ms, std_ms, min_ms, p50/p90/p95/p99_ms, max_ms, throughput_samples_per_s."""
        return latency_stats(list(self.latencies_ms), self.batch_size)

    @cached_property
    def noise(self) -> Noise:
        return noise(self.latencies_ms)

    @property
    def p50_ms(self) -> float:
        return self.stats["p50_ms"]

    def timing_stats(self, repeat_runs: RepeatSpread | None = None, **how: Any) -> TimingStats:
        """The window's record in result.json (``timing``): its figures and noise, with ``how``
        it was timed (timer, sync, warm-up, the time to get there ...)."""
        window_noise = msgspec.structs.replace(self.noise, repeat_runs=repeat_runs)
        stats: dict[str, Any] = dict(self.stats)
        return TimingStats(**stats, iters=len(self.latencies_ms), noise=window_noise, **how)


def two_cluster_split(x: npt.NDArray[np.float64]) -> tuple[float | None, list[float] | None]:
    """Ashman's D of the between-variance-maximising split with >= BIMODAL_MIN_SHARE per side."""
    s = np.sort(x)
    n = len(s)
    low = max(2, math.ceil(BIMODAL_MIN_SHARE * n))
    if n - low < low:
        return None, None
    k = np.arange(low, n - low + 1)
    c = np.cumsum(s)
    m1 = c[k - 1] / k
    m2 = (c[-1] - c[k - 1]) / (n - k)
    best = int(k[np.argmax(k * (n - k) * (m1 - m2) ** 2)])
    a, b = s[:best], s[best:]
    spread = math.sqrt(a.var() + b.var())
    if spread == 0:
        if a.mean() == b.mean():
            return None, None
        return math.inf, [float(a.mean()), float(b.mean())]
    return math.sqrt(2) * float(b.mean() - a.mean()) / spread, [float(a.mean()), float(b.mean())]


def _third_medians(x: npt.NDArray[np.float64]) -> tuple[float, float]:
    third = len(x) // 3
    return float(np.median(x[:third])), float(np.median(x[-third:]))


def drifts(n: int, first: float, last: float, iqr: float, median: float) -> bool:
    """The medians of the first and last third of ``n`` latencies differ beyond three standard
    errors and DRIFT_MIN_SHARE of the median (the module doc)."""
    third = n // 3
    sigma = iqr / 1.349
    standard_error = math.sqrt(2) * 1.2533 * sigma / math.sqrt(third)
    return abs(last - first) > max(3 * standard_error, DRIFT_MIN_SHARE * median)
