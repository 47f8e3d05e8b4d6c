"""Which of two configs is faster, from several independent processes of each, and a verdict of
four outcomes. Pure numpy.

Why processes: the same config's p50 moves from one fresh process to the next far more than
between windows inside one process. Measured on an H100 (docs/gpu/h100/reproduce/sources.log,
eager ResNet50 FP32 bs 8, 8 windows each): the CV of the window's median was 3.4 % between
back-to-back windows of one process, 3.1 % between windows of a rebuilt model in one process,
and 10.7 % between fresh processes (12.1 % with cudnn.benchmark on, whose first window picked
other kernels). The process is the independent unit; its iterations are repeated measurements
inside it and enter through its median.

The statistic: the ratio B / A of the **geometric mean of the per-process medians**. A process's
median is what one ``run`` reports (robust to the launch-jitter spikes inside a window); each
process counts once whatever its iteration count, so a long window cannot outweigh the others;
on the log scale a ratio is a difference and the spread of a latency is closer to symmetric.

The interval, with two or more processes a side: Welch's t-interval (B. L. Welch, "The
generalization of Student's problem when several different population variances are involved",
Biometrika 34, 1947) on the log of the per-process medians: exp(d ± t(0.975, ν) · se), d the
difference of the two means of logs, se² = s_A²/k_A + s_B²/k_B, ν the Welch-Satterthwaite
degrees of freedom (rounded down). This is the top level of the hierarchical (two-stage)
bootstrap of Davison & Hinkley (*Bootstrap Methods and their Application*, 1997, section 3.8)
in closed form: the between-process spread of the medians already holds the within-process
noise, and resampling the iterations again counts it twice. The two-stage bootstrap this module
used first, with a Student widening for few processes, gave intervals of ±80 % for identical
configs at 3 processes a side and a 10 % between-process CV on the H100
(docs/gpu/h100/reproduce/identical_eager.log), where this interval gives about ±23 %.

The verdict (``tolerance`` default ``TOLERANCE``, 2 %):
- same: the interval lies within [1 - tolerance, 1 + tolerance];
- slower / faster: the interval excludes 1 and the ratio is more than the tolerance from 1
  (B slower when above, faster when below);
- undecided: otherwise.

One process on a side: its between-process spread cannot be estimated, so the machine's known
spread stands in for it: ``noise_floor``, the coefficient of variation of one process's median
between fresh processes of one config on this machine (``profile.py noise`` measures it). When
unknown, ``DEFAULT_NOISE_FLOOR`` (10 %) is used: the between-process CV `noise` measured for
eager ResNet50 FP32 bs 8 on a shared H100 was 12.5 % (docs/gpu/h100/reproduce/noise.log),
eager gpt2 generation's spread near 20 %. The interval is then the percentile bootstrap of the
two windows' medians (``RESAMPLES`` resamples of each window's iterations), the ratio's relative
spread s = floor * sqrt(1/k_A + 1/k_B), and the verdict is slower or faster only when |log
ratio| > ``FAR_BEYOND`` (3) * s and that interval excludes 1; never same (sameness needs the
between-process spread); undecided otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from profiler.analysis.sampling import t975

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
    """The figure of one side: the geometric mean over processes of each process's median."""
    return float(np.exp(np.mean(np.log([np.median(p) for p in processes]))))


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


def welch(log_a: np.ndarray, log_b: np.ndarray) -> tuple[float, float, float]:
    """(difference of the means of logs B - A, its standard error, Welch's degrees of
    freedom) for two samples of two or more values each."""
    va = log_a.var(ddof=1) / len(log_a)
    vb = log_b.var(ddof=1) / len(log_b)
    se = math.sqrt(va + vb)
    df = float(len(log_a) + len(log_b) - 2) if se == 0 else \
        (va + vb) ** 2 / (va ** 2 / (len(log_a) - 1) + vb ** 2 / (len(log_b) - 1))
    return float(log_b.mean() - log_a.mean()), se, df


def compare(a, b, *, tolerance: float = TOLERANCE, noise_floor: float | None = None,
            resamples: int = RESAMPLES, seed: int = SEED) -> Verdict:
    """The verdict on B against A; ``a`` and ``b`` are lists of per-process arrays of
    per-iteration latencies (see the module doc for every rule)."""
    pa, pb = _as_processes(a, "A"), _as_processes(b, "B")
    if tolerance < 0:
        raise ValueError("tolerance must be >= 0")
    medians_a = np.array([np.median(p) for p in pa])
    medians_b = np.array([np.median(p) for p in pb])
    if (medians_a <= 0).any() or (medians_b <= 0).any():
        raise ValueError("latencies must be positive")
    ka, kb = len(pa), len(pb)
    if min(ka, kb) == 1:
        return _one_process(pa, pb, tolerance, noise_floor, resamples, seed)
    d, se, df = welch(np.log(medians_a), np.log(medians_b))
    t = t975(max(1, math.floor(df)))
    ratio, low, high = math.exp(d), math.exp(d - t * se), math.exp(d + t * se)
    if 1 - tolerance <= low and high <= 1 + tolerance:
        verdict = SAME
    elif (low > 1 or high < 1) and abs(ratio - 1) > tolerance:
        verdict = SLOWER if ratio > 1 else FASTER
    else:
        verdict = UNDECIDED
    method = (f"Welch t-interval on the log of per-process medians, B/A of their geometric "
              f"means, {ka} vs {kb} processes, {df:.1f} degrees of freedom, 95 %; same when "
              f"the interval is within ±{100 * tolerance:g} %, faster/slower when it excludes 1 "
              f"and the ratio is beyond ±{100 * tolerance:g} %")
    return Verdict(ratio, low, high, verdict, tolerance, ka, kb, None, method)


def _one_process(pa, pb, tolerance, noise_floor, resamples, seed) -> Verdict:
    """A side with one process: the machine's floor stands in for the between-process spread
    (module doc)."""
    rng = np.random.default_rng(seed)
    ka, kb = len(pa), len(pb)
    ratios = (bootstrap_medians(pb, rng.integers(kb, size=(resamples, kb)), rng).reshape(
        resamples, kb).mean(axis=1) / bootstrap_medians(pa, rng.integers(
            ka, size=(resamples, ka)), rng).reshape(resamples, ka).mean(axis=1))
    low, high = (float(v) for v in np.percentile(ratios, [2.5, 97.5]))
    ratio = mean_of_medians(pb) / mean_of_medians(pa)
    floor = DEFAULT_NOISE_FLOOR if noise_floor is None else noise_floor
    spread = floor * math.sqrt(1 / ka + 1 / kb)
    far = abs(math.log(ratio)) > FAR_BEYOND * spread
    verdict = (SLOWER if ratio > 1 else FASTER) if far and (low > 1 or high < 1) else UNDECIDED
    source = "default" if noise_floor is None else "given"
    method = (f"one process on a side ({ka} vs {kb}): percentile bootstrap of the windows' "
              f"medians, {resamples} resamples, seed {seed}; the between-process spread is "
              f"unknown, a {source} machine floor of {100 * floor:.1f} % CV stands in; a "
              f"verdict needs |log ratio| > {FAR_BEYOND:g} x {100 * spread:.1f} %")
    return Verdict(ratio, low, high, verdict, tolerance, ka, kb, floor, method, source)
