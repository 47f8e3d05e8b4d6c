"""Which of two configs is faster, on each figure a config's processes measured, and a verdict of
four outcomes per figure. Pure numpy.

The figures (``FIGURES``):
- **latency**: the host-synchronized time of one call (CUDA events around it, a synchronize
  after): what a caller waits. On a shared host it spreads 10-33 % between fresh processes when
  the config is launch-bound (the host paces it), under 1 % when the GPU does.
- **GPU time**: the device's work for one call, launch gaps excluded (the call queued behind a
  blocking kernel, profiler.collect.gpu_time). It spreads 0.5-2 % between processes whatever
  paces the call.

The process is the independent unit: the same config's median moves far more from one fresh
process to the next than between windows of one process (allocator state, clocks, autotuner
choices, launch jitter). A process enters through its median of each figure. The statistic is
the ratio B / A of the **geometric means of the per-process medians**; on the log scale it is a
difference.

Three designs, chosen per figure before looking at the data (``design_for``):
- **paired**: when A and B were timed in the same processes (the rounds of a sweep's or
  compare's ``--processes``: a round is one process timing every config), the per-round log
  ratios log b_i - log a_i, a t-interval with (pairs - 1) degrees of freedom. A process that is
  slow is slow for every config it times, so pairing removes the offset the two share. It costs
  degrees of freedom, so it is used only where the figure's within-process correlation ``rho``
  makes its expected half-width smaller than the unpaired one's: t(k - 1) * sqrt(2 (1 - rho) /
  k) < t(Welch df) * sqrt(1 / k_A + 1 / k_B). rho is this machine's where `noise` measured it
  for the runs' machine kind (``MachineNoise``), else the figure's H100 default (``Figure.rho``);
  the verdict names which (``Verdict.rho_source``). A rho that is wrong costs width, never the
  level: both designs are valid intervals.
- **unpaired**: Welch's t-interval (Welch 1947) on the log of the per-process medians, the
  Welch-Satterthwaite degrees of freedom.
- **floor**: one process on a side: its between-process spread cannot be estimated, so the
  figure's floor stands in (``noise`` measures it per machine kind; else the worst case of the
  reference configs measured on an H100, ``Figure.default_floor``): a normal interval with se =
  floor * sqrt(1 / k_A + 1 / k_B). The interval printed is the one the verdict used. On a CPU
  the H100's floor says nothing of the machine (on a busy CPU one config's median moves by
  several times between processes), so without a floor `noise` measured for it the verdict is
  undecided whatever the interval says (``Verdict.withheld``).

The verdict (``tolerance`` default ``TOLERANCE``, 2 %, ``--same-within``):
- same: the 90 % interval lies within [1 - tolerance, 1 + tolerance] (two one-sided tests at
  5 %, TOST);
- faster / slower: the 95 % interval excludes 1 (p < 0.05; with many comparisons to one
  baseline, the Benjamini-Hochberg step-up at q = 0.05 over the family, ``control_fdr``) and the
  ratio is more than the tolerance from 1 (B faster when below);
- undecided: otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from profiler.analysis.records import (
    Design,
    FigureName,
    FloorSource,
    NoiseSource,
    Verdict,
    Withheld,
    Word,
)
from profiler.analysis.sampling import Samples, t_quantile, t_two_sided_p
from profiler.runs.noise_floor import MAX_FLOOR_CV

TOLERANCE = 0.02
#: the level of a verdict's tests: faster/slower at p < ALPHA (its 95 % interval), same on the
#: 90 % interval (two one-sided tests at ALPHA)
ALPHA = 0.05
#: the largest between-process CV taken as a floor: a floor above it, below 0 or not a number
#: is refused, and the figure's default floor stands in (a floor of 0 from a file is refused
#: where it is read, profiler.runs.noise_floor; given here, it means "no spread allowed")
MAX_FLOOR = MAX_FLOOR_CV
#: the false discovery rate a sweep's verdicts are held to, over its cells
FDR_Q = 0.05

FASTER: Final = "faster"
SLOWER: Final = "slower"
SAME: Final = "same"
UNDECIDED: Final = "undecided"
PAIRED: Final = "paired"
UNPAIRED: Final = "unpaired"
FLOOR: Final = "floor"
LATENCY: Final = "latency"
GPU_TIME: Final = "gpu_time"


@dataclass(frozen=True)
class Figure:
    """One figure a verdict is taken on: its name in words, the within-process correlation of
    two configs' medians (the pairing's pay-off) and the between-process CV assumed when a side
    has one process and `noise` has not measured this machine."""

    name: str
    words: str
    rho: float
    default_floor: float
    rho_source: str
    floor_source: str


FIGURES: dict[str, Figure] = {
    LATENCY: Figure(
        LATENCY,
        "latency (host-synchronized: what a caller waits)",
        rho=0.34,
        default_floor=0.33,
        rho_source="H100, 15 fresh processes each timing 9 eager ResNet50 configs: the median "
        "over 4 pairs of different configs (0.08-0.62; docs/gpu/h100/verdicts)",
        floor_source="worst of eager ResNet50 FP32 bs 8 (CV 7-11 %) and FP16 bs 1 (CV 24-31 %), "
        "15 fresh processes, H100 (docs/gpu/h100/verdicts)",
    ),
    GPU_TIME: Figure(
        GPU_TIME,
        "GPU time (the device's work, launch gaps excluded)",
        rho=0.55,
        default_floor=0.031,
        rho_source="H100, 15 fresh processes each timing 9 eager ResNet50 configs: the median "
        "over 4 pairs of different configs (0.33-0.94; identical configs 0.89-0.96)",
        floor_source="worst of eager ResNet50 FP32 bs 8 (CV 0.4-0.5 %), FP16 bs 1 (CV 2.4-3.1 "
        "%) and FP32 bs 16 (0.35-0.45 %), 15 fresh processes, H100",
    ),
}


#: where a figure's H100 constants stand in
DEFAULT_SOURCE = NoiseSource("default")


@dataclass(frozen=True)
class MachineNoise:
    """What the verdicts know of the machine the runs ran on (profiler.analysis.headline
    .machine_noise): per figure the between-process floor `noise` measured and the
    within-process rho, each with its source (a figure left out: its H100 default), and whether
    the runs ran on a CPU (where the H100's floor decides nothing)."""

    floors: dict[str, float] = field(default_factory=dict)
    floor_sources: dict[str, NoiseSource] = field(default_factory=dict)
    rhos: dict[str, float] = field(default_factory=dict)
    rho_sources: dict[str, NoiseSource] = field(default_factory=dict)
    cpu: bool = False

    def floor(self, figure: str) -> float | None:
        return self.floors.get(figure)

    def floor_source(self, figure: str) -> NoiseSource:
        return self.floor_sources.get(figure, NoiseSource("given"))

    def rho(self, figure: str) -> tuple[float, NoiseSource]:
        """The figure's rho and its source: this machine's, else the H100 default."""
        if figure in self.rhos:
            return self.rhos[figure], self.rho_sources.get(figure, NoiseSource("given"))
        return FIGURES[figure].rho, DEFAULT_SOURCE


def geometric_mean(values: Samples) -> float:
    """The figure of one side: the geometric mean of its per-process medians."""
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def welch(
    log_a: npt.NDArray[np.float64], log_b: npt.NDArray[np.float64]
) -> tuple[float, float, float]:
    """(difference of the means of logs B - A, its standard error, Welch's degrees of
    freedom) for two samples of two or more values each."""
    va = log_a.var(ddof=1) / len(log_a)
    vb = log_b.var(ddof=1) / len(log_b)
    se = math.sqrt(va + vb)
    df = (
        float(len(log_a) + len(log_b) - 2)
        if se == 0
        else (va + vb) ** 2 / (va**2 / (len(log_a) - 1) + vb**2 / (len(log_b) - 1))
    )
    return float(log_b.mean() - log_a.mean()), se, df


def pairing_pays(pairs: int, ka: int, kb: int, rho: float) -> bool:
    """The expected paired half-width is below the unpaired one, for equal spreads (the design
    is chosen from counts and the figure's measured rho, never from the data at hand)."""
    if pairs < 2:
        return False
    if min(ka, kb) < 2:
        return True
    paired = t_quantile(0.975, pairs - 1) * math.sqrt(2 * max(0.0, 1 - rho) / pairs)
    unpaired = t_quantile(0.975, ka + kb - 2) * math.sqrt(1 / ka + 1 / kb)
    return paired < unpaired


def design_for(figure: str, ka: int, kb: int, pairs: int, rho: float | None = None) -> Design:
    """Which design a figure's verdict uses with these counts (module doc), at ``rho``
    (default: the figure's H100 constant)."""
    rho = FIGURES[figure].rho if rho is None else rho
    if pairs >= 2 and pairing_pays(pairs, ka, kb, rho):
        return PAIRED
    return FLOOR if min(ka, kb) == 1 else UNPAIRED


def _pairs(
    rounds_a: Sequence[str | None] | None, rounds_b: Sequence[str | None] | None
) -> list[tuple[int, int]]:
    """(index in A, index in B) of windows taken in the same round (process)."""
    if rounds_a is None or rounds_b is None:
        return []
    where_b = {r: j for j, r in enumerate(rounds_b) if r}
    return [(i, where_b[r]) for i, r in enumerate(rounds_a) if r and r in where_b]


def compare(
    medians_a: Samples,
    medians_b: Samples,
    *,
    figure: FigureName = LATENCY,
    rounds_a: Sequence[str | None] | None = None,
    rounds_b: Sequence[str | None] | None = None,
    tolerance: float = TOLERANCE,
    noise_floor: float | None = None,
    alpha: float = ALPHA,
    machine: MachineNoise | None = None,
) -> Verdict:
    """The verdict on B against A for one figure, from each side's per-process medians (and,
    where known, the round each was timed in: windows of one round pair up). ``alpha``: the
    test's level (faster/slower at p < alpha, its 1 - alpha interval; same on the 1 - 2 alpha
    interval); a sequential look takes a smaller one (profiler.analysis.sequential).
    ``machine``: the floor and rho measured for the runs' machine, and whether it is a CPU
    (``noise_floor``, when given, is the floor, from no named source)."""
    a, b = _checked(medians_a, medians_b, tolerance)
    ka, kb = len(a), len(b)
    pairs = _pairs(rounds_a, rounds_b)
    rho, rho_source = machine.rho(figure) if machine else (FIGURES[figure].rho, DEFAULT_SOURCE)
    design = design_for(figure, ka, kb, len(pairs), rho)
    chosen_by_rho = len(pairs) >= 2 and min(ka, kb) >= 2  # else the counts decided
    floor: float | None = None
    source: FloorSource | None = None
    refused: float | None = None
    floor_from: NoiseSource | None = None
    if noise_floor is None and machine is not None:
        noise_floor = machine.floor(figure)
        floor_from = machine.floor_source(figure) if noise_floor is not None else None
    if design == PAIRED:
        diffs = np.log([b[j] for _, j in pairs]) - np.log([a[i] for i, _ in pairs])
        d, df = float(diffs.mean()), float(len(diffs) - 1)
        se = float(diffs.std(ddof=1) / math.sqrt(len(diffs)))
    elif design == UNPAIRED:
        d, se, df = welch(np.log(a), np.log(b))
    else:
        d, se, df, source, floor, refused = _with_floor(a, b, figure, noise_floor)
        floor_from = (floor_from or NoiseSource("given")) if source == "given" else DEFAULT_SOURCE
    withheld: Withheld | None = (
        "cpu-one-process" if source == "default" and machine is not None and machine.cpu else None
    )
    found = _decide(
        d,
        se,
        df,
        tolerance,
        figure=figure,
        ka=ka,
        kb=kb,
        design=design,
        floor=floor,
        source=source,
        pairs=len(pairs) if design == PAIRED else None,
        refused=refused,
        alpha=alpha,
    )
    return msgspec.structs.replace(
        found,
        verdict=UNDECIDED if withheld else found.verdict,
        rho=rho if chosen_by_rho else None,
        rho_source=rho_source if chosen_by_rho else None,
        floor_from=floor_from if design == FLOOR else None,
        withheld=withheld,
    )


def _checked(
    medians_a: Samples, medians_b: Samples, tolerance: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Both sides' medians as flat float arrays; ValueError for what no verdict can use."""
    a = np.asarray(medians_a, dtype=float).ravel()
    b = np.asarray(medians_b, dtype=float).ravel()
    if len(a) == 0 or len(b) == 0:
        raise ValueError("every side needs at least one process")
    if tolerance < 0:
        raise ValueError("tolerance must be >= 0")
    if not (np.isfinite(a).all() and np.isfinite(b).all() and (a > 0).all() and (b > 0).all()):
        raise ValueError("times must be positive and finite")
    return a, b


def _with_floor(
    a: npt.NDArray[np.float64],
    b: npt.NDArray[np.float64],
    figure: FigureName,
    noise_floor: float | None,
) -> tuple[float, float, float, FloorSource, float, float | None]:
    """One process on a side: a noise floor stands in for the unknown between-process spread.
    The log ratio, its standard error, degrees of freedom, the floor's source and value, and
    the floor given when it was refused (no spread from 0 to MAX_FLOOR)."""
    ka, kb = len(a), len(b)
    refused = noise_floor is not None and not 0 <= noise_floor <= MAX_FLOOR
    source: FloorSource
    if noise_floor is None or refused:
        source, floor = "default", FIGURES[figure].default_floor
    else:
        source, floor = "given", noise_floor
    d = float(np.log(b).mean() - np.log(a).mean())
    se, df = floor * math.sqrt(1 / ka + 1 / kb), math.inf
    return d, se, df, source, floor, noise_floor if refused else None


def _decide(
    d: float,
    se: float,
    df: float,
    tolerance: float,
    *,
    figure: FigureName,
    ka: int,
    kb: int,
    design: Design,
    floor: float | None,
    source: FloorSource | None,
    pairs: int | None,
    refused: float | None,
    alpha: float = 0.05,
) -> Verdict:
    t95, t90 = t_quantile(1 - alpha / 2, df), t_quantile(1 - alpha, df)
    ratio = math.exp(d)
    low, high = math.exp(d - t95 * se), math.exp(d + t95 * se)
    same_low, same_high = math.exp(d - t90 * se), math.exp(d + t90 * se)
    p = 0.0 if se == 0 and d != 0 else (1.0 if se == 0 else t_two_sided_p(d / se, df))
    verdict = _word(ratio, p, same_low, same_high, tolerance, alpha=alpha)
    return Verdict(
        ratio,
        low,
        high,
        verdict,
        tolerance,
        ka,
        kb,
        floor,
        source,
        figure,
        design,
        p,
        same_low,
        same_high,
        pairs,
        df=None if math.isinf(df) else df,
        floor_refused=refused,
    )


def _word(
    ratio: float, p: float, same_low: float, same_high: float, tolerance: float, alpha: float
) -> Word:
    if 1 - tolerance <= same_low and same_high <= 1 + tolerance:
        return SAME
    if p < alpha and abs(ratio - 1) > tolerance:
        return SLOWER if ratio > 1 else FASTER
    return UNDECIDED


def control_fdr(verdicts: list[Verdict | None], q: float = FDR_Q) -> list[Verdict | None]:
    """Many comparisons with one baseline (a sweep's cells, advise's experiments): the
    Benjamini-Hochberg step-up over the family's p-values; a faster/slower that does not survive
    it becomes undecided. The intervals stay the raw 95 % ones; ``fdr_comparisons`` and
    ``fdr_q`` say what was done."""
    family = [(i, v) for i, v in enumerate(verdicts) if v is not None]
    m = len(family)
    if m <= 1:
        return list(verdicts)
    ranked = sorted(family, key=lambda item: item[1].p_value)
    passed = 0
    for rank, (_, v) in enumerate(ranked, start=1):
        if v.p_value <= q * rank / m:
            passed = rank
    survivors = {i for i, _ in ranked[:passed]}
    out = list(verdicts)
    for i, v in family:
        word = v.verdict
        if word in (FASTER, SLOWER) and i not in survivors:
            word = UNDECIDED
        out[i] = msgspec.structs.replace(v, verdict=word, fdr_comparisons=m, fdr_q=q)
    return out
