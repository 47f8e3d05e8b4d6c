"""Which of two configs is faster, from several independent processes of each: a hierarchical
bootstrap over processes, then iterations, and a verdict of four outcomes. Pure numpy.

Why processes: the same config's p50 moves from one fresh process to the next far more than
inside one timed window (issue 21: 4.29-5.26 ms for one eager ResNet50 config on an H100), so a
bootstrap of the iterations of one window calls differences that are the machine's. The process
is the independent unit; its iterations are repeated measurements inside it.

The statistic: the ratio of the **mean of the per-process medians**, B over A. A process's
median is what one ``run`` reports (robust to the launch-jitter spikes inside a window); each
process counts once whatever its iteration count, so a long window cannot outweigh the others;
the mean over processes estimates the p50 a user gets in a fresh process. (The median of all
iterations pooled would weight processes by their length and hide a bimodal set of processes.)

The interval: the two-stage (hierarchical) bootstrap of Davison & Hinkley, *Bootstrap Methods
and their Application* (1997, section 3.8, hierarchical data), as applied to multi-level data
by Saravanan et al., "Application of the hierarchical bootstrap to multi-level data in
neuroscience" (Neurons, Behavior, Data analysis and Theory, 2020): each side separately,
``RESAMPLES`` times, draw its processes with replacement, then each drawn process' iterations
with replacement, and take the statistic; the 95 % percentile interval of the B/A replicates.
With few processes the percentile interval is too narrow: the plug-in spread of a mean over k
processes is too small by sqrt((k - 1) / k), and its quantiles are the normal's where the spread
itself is estimated from k values (Student). Each side's replicates are therefore widened
around its estimate, on the log scale (so they stay positive however few the processes), by sqrt(k / (k - 1)) * t(0.975, k - 1) / z(0.975) (1.58 for k = 5, 1.26
for k = 10). Simulated on lognormal processes with a 5 % between-process CV (not in the tests),
identical configs drew a faster/slower verdict in 11 % of 300 pairs at 3 and at 5 processes
per side without it; with it, 1 % at 3, 4 % at 5 and 1 % at 8 processes, while a real 10 %
difference was called in 22, 58 and 94 % of pairs (the rest undecided, none wrong).

The verdict (``tolerance`` default ``TOLERANCE``, 2 %):
- same: the interval lies within [1 - tolerance, 1 + tolerance];
- slower / faster: the interval excludes 1 and the ratio is more than the tolerance from 1
  (B slower when above, faster when below);
- undecided: otherwise.

One process on a side: its between-process spread cannot be estimated, so the machine's known
spread stands in for it: ``noise_floor``, the coefficient of variation of one process's median
between fresh processes of one config on this machine (``profile.py noise`` measures it). When
unknown, ``DEFAULT_NOISE_FLOOR`` (10 %) is used: conservative, as issue 21 measured a 4.29-5.26
ms range over fresh processes of eager ResNet50 (CV of a few %) and 381-589 ms for eager gpt2
generation (CV near 20 %). The ratio's relative spread is then s = floor * sqrt(1/k_A + 1/k_B),
and the verdict is slower or faster only when |log ratio| > ``FAR_BEYOND`` (3) * s and the
bootstrap interval excludes 1; never same (sameness needs the between-process spread);
undecided otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from profiler.analysis.sampling import Z975, t975

RESAMPLES = 2000
SEED = 0
TOLERANCE = 0.02
DEFAULT_NOISE_FLOOR = 0.10
FAR_BEYOND = 3.0

FASTER, SLOWER, SAME, UNDECIDED = "faster", "slower", "same", "undecided"


@dataclass(frozen=True)
class Verdict:
    """B against A: the ratio of the mean per-process medians (B / A), its 95 % interval, the
    verdict (faster / slower / same / undecided: B relative to A) and how it was reached."""

    ratio: float
    low: float
    high: float
    verdict: str
    tolerance: float
    processes_a: int
    processes_b: int
    noise_floor: float | None  # the between-process CV assumed, when a side had one process
    method: str
    #: where noise_floor came from: "default" (DEFAULT_NOISE_FLOOR) or "given" (measured)
    floor_source: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _as_processes(samples, side: str) -> list[np.ndarray]:
    processes = [np.asarray(p, dtype=float).ravel() for p in samples]
    if not processes or any(len(p) == 0 for p in processes):
        raise ValueError(f"{side}: every process needs at least one latency")
    return processes


def mean_of_medians(processes: list[np.ndarray]) -> float:
    """The statistic: the mean over processes of each process's median."""
    return float(np.mean([np.median(p) for p in processes]))


def bootstrap_medians(processes: list[np.ndarray], chosen: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """The median of one resample (with replacement, same size) of each chosen process' values.

    Drawn from its exact distribution rather than by drawing n values: with the window sorted,
    a resample's median is the value at the middle order statistic(s) of n uniform draws of
    positions, and the k-th of n sorted uniforms is Beta(k, n - k + 1); the next one up is
    u + (1 - u) Beta(1, n - k). O(1) per drawn process instead of O(n)."""
    values = np.concatenate([np.sort(p) for p in processes])
    lengths = np.array([len(p) for p in processes])
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    n, offset = lengths[chosen], offsets[chosen]
    k = (n + 1) // 2  # the middle rank (odd n), the lower of the two middle ranks (even n)
    u = rng.beta(k, n - k + 1)
    v = u + (1 - u) * rng.beta(1, np.maximum(n - k, 1))
    lower = values[offset + np.minimum((n * u).astype(np.int64), n - 1)]
    upper = values[offset + np.minimum((n * v).astype(np.int64), n - 1)]
    return np.where(n % 2 == 0, (lower + upper) / 2, lower)


def widening(k: int) -> float:
    """How much a side's replicates are spread out around its estimate, for k processes."""
    return math.sqrt(k / (k - 1)) * t975(k - 1) / Z975


def bootstrap_means(processes: list[np.ndarray], resamples: int,
                    rng: np.random.Generator) -> np.ndarray:
    """``resamples`` replicates of the mean of per-process medians: processes drawn with
    replacement, then each drawn process' iterations with replacement (through
    ``bootstrap_medians``), widened for few processes (``widening``)."""
    k = len(processes)
    chosen = rng.integers(k, size=(resamples, k))
    means = bootstrap_medians(processes, chosen, rng).mean(axis=1)
    if k > 1:  # the small-k widening of the module doc, on the log scale: stays positive
        centre = mean_of_medians(processes)
        means = centre * np.exp(widening(k) * np.log(means / centre))
    return means


def compare(a, b, *, tolerance: float = TOLERANCE, noise_floor: float | None = None,
            resamples: int = RESAMPLES, seed: int = SEED) -> Verdict:
    """The verdict on B against A; ``a`` and ``b`` are lists of per-process arrays of
    per-iteration latencies (see the module doc for every rule)."""
    pa, pb = _as_processes(a, "A"), _as_processes(b, "B")
    if tolerance < 0:
        raise ValueError("tolerance must be >= 0")
    rng = np.random.default_rng(seed)
    centre_a, centre_b = mean_of_medians(pa), mean_of_medians(pb)
    if centre_a <= 0 or centre_b <= 0:
        raise ValueError("latencies must be positive")
    ratios = bootstrap_means(pb, resamples, rng) / bootstrap_means(pa, resamples, rng)
    low, high = (float(v) for v in np.percentile(ratios, [2.5, 97.5]))
    ratio = centre_b / centre_a
    direction = SLOWER if ratio > 1 else FASTER
    excludes_one = low > 1 or high < 1
    ka, kb = len(pa), len(pb)
    base = (f"hierarchical bootstrap (processes, then iterations) of mean per-process median "
            f"B/A, {resamples} resamples, seed {seed}, 95 % percentile interval; "
            f"{ka} vs {kb} processes")
    if min(ka, kb) == 1:
        floor = DEFAULT_NOISE_FLOOR if noise_floor is None else noise_floor
        spread = floor * math.sqrt(1 / ka + 1 / kb)
        far = abs(math.log(ratio)) > FAR_BEYOND * spread
        verdict = direction if far and excludes_one else UNDECIDED
        source = "default" if noise_floor is None else "given"
        method = (f"{base}; one process on a side: between-process spread unknown, a {source} "
                  f"machine floor of {100 * floor:.1f} % CV stands in; a verdict needs |log "
                  f"ratio| > {FAR_BEYOND:g} x {100 * spread:.1f} %")
        return Verdict(ratio, low, high, verdict, tolerance, ka, kb, floor, method, source)
    if 1 - tolerance <= low and high <= 1 + tolerance:
        verdict = SAME
    elif excludes_one and abs(ratio - 1) > tolerance:
        verdict = direction
    else:
        verdict = UNDECIDED
    method = (f"{base}; same when the interval is within ±{100 * tolerance:g} %, faster/slower "
              f"when it excludes 1 and the ratio is beyond ±{100 * tolerance:g} %")
    return Verdict(ratio, low, high, verdict, tolerance, ka, kb, None, method)
