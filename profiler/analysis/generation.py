"""A generation's figures over a config's processes, and TTFT and TPOT judged apart.

Each timed process of a generation run keeps, beside its whole generations, a window per phase
(profiler.runs.samples: TTFT, the prefill and its token; TPOT, each generation's mean decode
step; each with the phase's GPU time and enqueue where measured) and every inter-token latency
(ITL). From those:

- ``generation_figures``: TTFT, TPOT, ITL p50 and p99 and tokens/s over the processes, each the
  geometric mean of the per-process values with its 95 % interval (a t-interval on the logs of
  the per-process values: the spread between processes is the noise a figure carries), and each
  phase's classification (launch-bound, near the launch bound or GPU-bound, as a forward
  call's);
- B against A on TTFT and on TPOT, each with both verdicts (latency and GPU time), is
  profiler.analysis.headline.phase_comparisons: the same statistics as a forward call's.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from profiler.analysis.records import GenerationFigures, IntervalFigure
from profiler.analysis.sampling import cv_of, t975
from profiler.analysis.verdict import LATENCY
from profiler.runs.samples import ITL, TPOT, TTFT, ConfigSamples


def interval(values: list[float]) -> tuple[float, float | None, float | None]:
    """The geometric mean of positive ``values`` and its 95 % t-interval (None, None with
    fewer than two values)."""
    logs = np.log(np.asarray(values, dtype=float))
    centre = float(np.exp(logs.mean()))
    if len(values) < 2:
        return centre, None, None
    half = t975(len(values) - 1) * float(logs.std(ddof=1)) / math.sqrt(len(values))
    return centre, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


FigureWord = Literal["TTFT", "TPOT", "ITL p50", "ITL p99", "tokens/s"]


def _figure(
    name: FigureWord, unit: Literal["ms", "tokens/s"], values: list[float]
) -> IntervalFigure | None:
    values = [v for v in values if v > 0]
    if not values:
        return None
    value, low, high = interval(values)
    return IntervalFigure(
        figure=name,
        unit=unit,
        value=value,
        low=low,
        high=high,
        processes=len(values),
        cv=cv_of(values) if len(values) > 1 else None,
    )


def generation_figures(
    samples: ConfigSamples, batch_size: int, new_tokens: int
) -> GenerationFigures | None:
    """TTFT, TPOT, ITL p50/p99 and tokens/s over the processes (module doc); None when no
    process timed the phases."""
    used = samples.for_verdict()
    if not used.phase_names:
        return None
    itl = used.phase(ITL)
    tokens = batch_size * new_tokens
    found = [
        _figure("TTFT", "ms", used.phase(TTFT).medians(LATENCY)),
        _figure("TPOT", "ms", used.phase(TPOT).medians(LATENCY)),
        _figure("ITL p50", "ms", itl.medians(LATENCY)),
        _figure("ITL p99", "ms", [float(np.percentile(w.latency_ms, 99)) for w in itl.windows]),
        _figure("tokens/s", "tokens/s", [1000.0 * tokens / m for m in used.medians(LATENCY)]),
    ]
    return GenerationFigures(
        figures=[f for f in found if f is not None],
        ttft_bound=used.phase(TTFT).bound(),
        tpot_bound=used.phase(TPOT).bound(),
    )
