"""Two verdicts on B against A, one per figure (profiler.analysis.verdict): latency (what a
caller waits) and GPU time (the device's work), with each config's classification (launch-bound,
near the launch bound or GPU-bound, profiler.runs.samples), which verdict leads and the
processes the latency would need. Pure numpy, no printing: the views say ``TimedVerdicts`` in words
(profiler.report.sentences.note_lines, also a sweep's benchmark.csv verdict_note).

Which verdict leads:
- both configs GPU-bound: latency leads (the GPU paces the call, so latency is quiet too); GPU
  time is the cross-check, and a disagreement is flagged (``disagree``, ``split``);
- either launch-bound or near the launch bound: both are shown, named; the host paces (or
  nearly paces) that config's latency, so the latency verdict says how many processes a side it
  would need for ±5 %, and the lever is named (``--cuda-graphs`` replays the call without
  launches; its figure when it was measured).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from profiler.analysis.records import Bound, FigureName, TimedVerdicts, Verdict
from profiler.analysis.sampling import processes_needed
from profiler.analysis.verdict import (
    ALPHA,
    FIGURES,
    GPU_TIME,
    LATENCY,
    TOLERANCE,
    MachineNoise,
    compare,
    control_fdr,
)
from profiler.runs.samples import GPU_BOUND, LAUNCH_BOUND, NEAR_LAUNCH_BOUND, ConfigSamples

#: the latency interval a verdict on a config the host paces says how to reach
LATENCY_TARGET = 0.05
LEVER = "--cuda-graphs"


def bound_of(samples: ConfigSamples) -> Bound:
    """The config's classification, the figures it was read from and the processes each word
    holds in (profiler.runs.samples.ConfigSamples.bound)."""
    figures = samples.bound_figures()
    if figures is None:
        return Bound(None)
    latency, gpu, enqueue = figures
    counts = samples.bound_counts()
    return Bound(
        samples.bound(),
        counts[LAUNCH_BOUND],
        sum(counts.values()),
        enqueue_p50_ms=enqueue,
        gpu_p50_ms=gpu,
        latency_p50_ms=latency,
        gpu_bound_processes=counts[GPU_BOUND],
    )


def figure_verdict(
    a: ConfigSamples,
    b: ConfigSamples,
    figure: FigureName,
    *,
    tolerance: float = TOLERANCE,
    floor: float | None = None,
    alpha: float = ALPHA,
    machine: MachineNoise | None = None,
) -> Verdict | None:
    """One figure's verdict over the processes of each side that measured it (pilot windows
    left out), its tests at level ``alpha``; None when a side has none. ``machine``: the floor
    and rho measured for the runs' machine (profiler.analysis.verdict.MachineNoise)."""
    a, b = a.for_verdict(), b.for_verdict()
    ma, mb = a.medians(figure), b.medians(figure)
    if not ma or not mb:
        return None
    found = compare(
        ma,
        mb,
        figure=figure,
        rounds_a=a.rounds(figure),
        rounds_b=b.rounds(figure),
        tolerance=tolerance,
        noise_floor=floor,
        alpha=alpha,
        machine=machine,
    )
    return _with_gpus(found, a, b, figure)


def _with_gpus(found: Verdict, a: ConfigSamples, b: ConfigSamples, figure: str) -> Verdict:
    """The GPU of each side's windows, when they ran on several GPUs: paired, every pair's two
    windows share a process and so a GPU, and an offset between GPUs cancels; unpaired, the
    GPU is a recorded factor whose offset the interval carries as noise (each side's windows
    per GPU are named, so a lopsided spread shows)."""
    ga = [w.gpu or "?" for w in a.with_figure(figure)]
    gb = [w.gpu or "?" for w in b.with_figure(figure)]
    if len(set(ga) | set(gb)) < 2:
        return found
    return msgspec.structs.replace(found, gpus_a=ga, gpus_b=gb)


def judge(
    a: ConfigSamples,
    b: ConfigSamples,
    *,
    tolerance: float = TOLERANCE,
    floors: dict[str, float | None] | None = None,
    cuda_graphs_ms: float | None = None,
    machine: MachineNoise | None = None,
) -> TimedVerdicts | None:
    """Both verdicts of B against A; None without latencies on a side. ``floors``: a floor per
    figure from no named source; ``machine``: the runs' machine's floors and rho, with their
    sources (a figure in ``floors`` takes that floor)."""
    floors = floors or {}
    latency = figure_verdict(
        a, b, LATENCY, tolerance=tolerance, floor=floors.get(LATENCY), machine=machine
    )
    if latency is None:
        return None
    gpu = figure_verdict(
        a, b, GPU_TIME, tolerance=tolerance, floor=floors.get(GPU_TIME), machine=machine
    )
    if LATENCY not in floors and machine is not None:
        floors = {**floors, LATENCY: machine.floor(LATENCY)}
    return explain(
        latency,
        gpu,
        bound_of(a.for_verdict()),
        bound_of(b.for_verdict()),
        a.for_verdict(),
        b.for_verdict(),
        floors.get(LATENCY),
        cuda_graphs_ms,
    )


def explain(
    latency: Verdict | None,
    gpu: Verdict | None,
    bound_a: Bound,
    bound_b: Bound,
    a: ConfigSamples | None = None,
    b: ConfigSamples | None = None,
    latency_floor: float | None = None,
    cuda_graphs_ms: float | None = None,
) -> TimedVerdicts:
    """The lead and the processes the latency needs (module doc)."""
    both_gpu_bound = bound_a.word == GPU_BOUND and bound_b.word == GPU_BOUND
    lead: Literal["latency", "both"] = LATENCY if both_gpu_bound or gpu is None else "both"
    paced = bool({LAUNCH_BOUND, NEAR_LAUNCH_BOUND} & {bound_a.word, bound_b.word})
    needed = _latency_processes(a, b, latency_floor) if paced else None
    return TimedVerdicts(latency, gpu, bound_a, bound_b, lead, needed, cuda_graphs_ms)


def _latency_processes(
    a: ConfigSamples | None, b: ConfigSamples | None, floor: float | None
) -> int | None:
    """Processes a side for the latency ratio's interval to be within ±LATENCY_TARGET, at the
    larger between-process CV of the two sides (the floor where a side has one process)."""
    spreads: list[list[float]] = []
    for side in (a, b):
        medians = side.medians(LATENCY) if side is not None else []
        if len(medians) >= 2:
            spreads.append(medians)
    if spreads:
        plans = [
            processes_needed(m, LATENCY_TARGET, sides=2, max_processes=10_000) for m in spreads
        ]
        return max(p.processes for p in plans)
    cv = floor if floor is not None else FIGURES[LATENCY].default_floor
    return processes_needed(
        [1 - cv, 1 + cv], LATENCY_TARGET, sides=2, max_processes=10_000
    ).processes


def control_family(verdicts: list[TimedVerdicts | None]) -> list[TimedVerdicts | None]:
    """A family of comparisons with one baseline (a sweep's cells, advise's experiments): each
    figure's verdicts held to a false discovery rate across the family
    (profiler.analysis.verdict.control_fdr)."""
    latency = control_fdr([v.latency if v else None for v in verdicts])
    gpu = control_fdr([v.gpu_time if v else None for v in verdicts])
    out: list[TimedVerdicts | None] = []
    for v, lat, g in zip(verdicts, latency, gpu):
        # the processes the latency needs stay the first pass's (they need the samples)
        out.append(None if v is None else msgspec.structs.replace(v, latency=lat, gpu_time=g))
    return out
