"""Two verdicts on B against A, one per figure (profiler.analysis.verdict): latency (what a
caller waits) and GPU time (the device's work), with each config's classification (launch-bound
or GPU-bound, profiler.runs.samples) and the lines that say which verdict to read and why they
may disagree. Pure numpy, no printing: views render ``TimedVerdicts``.

Which verdict leads:
- both configs GPU-bound: latency leads (the GPU paces the call, so latency is quiet too); GPU
  time is the cross-check, and a line flags a disagreement;
- either launch-bound: both are shown, named; the host paces that config's latency, so the
  latency verdict says how many processes a side it would need for ±5 %, and the lever is named
  (``--cuda-graphs`` replays the call without launches; its figure when it was measured).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import msgspec

from profiler.analysis.records import Bound, FigureName, TimedVerdicts, Verdict
from profiler.analysis.sampling import processes_needed
from profiler.analysis.verdict import (
    FIGURES,
    GPU_TIME,
    LATENCY,
    PAIRED,
    SAME,
    TOLERANCE,
    UNDECIDED,
    compare,
    control_fdr,
)
from profiler.runs.samples import GPU_BOUND, LAUNCH_BOUND, LAUNCH_BOUND_SHARE, ConfigSamples

#: the latency interval a launch-bound verdict says how to reach
LATENCY_TARGET = 0.05
LEVER = "--cuda-graphs"


def bound_of(samples: ConfigSamples) -> Bound:
    launch, seen = samples.launch_bound_processes()
    classified = [w for w in samples.windows if w.bound is not None]
    if not classified:
        return Bound(None)
    enqueue = math.exp(
        sum(math.log(float(_p90(w.enqueue_ms))) for w in classified) / len(classified)
    )
    # a classified window measured both figures (ProcessWindow.bound)
    gpus = [g for w in classified if (g := w.median(GPU_TIME)) is not None]
    gpu = math.exp(sum(math.log(g) for g in gpus) / len(gpus))
    return Bound(samples.bound(), launch, seen, enqueue, gpu)


def _p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    position = 0.9 * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def figure_verdict(
    a: ConfigSamples,
    b: ConfigSamples,
    figure: FigureName,
    *,
    tolerance: float = TOLERANCE,
    floor: float | None = None,
) -> Verdict | None:
    """One figure's verdict over the processes of each side that measured it (pilot windows
    left out); None when a side has none."""
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
    )
    return _with_gpus(found, a, b, figure)


def _with_gpus(found: Verdict, a: ConfigSamples, b: ConfigSamples, figure: str) -> Verdict:
    """The method says where the windows ran when they ran on several GPUs: paired, every
    pair's two windows share a process and so a GPU, and an offset between GPUs cancels;
    unpaired, the GPU is a recorded factor whose offset the interval carries as noise (each
    side's windows per GPU are named, so a lopsided spread shows)."""
    ga = [w.gpu or "?" for w in a.with_figure(figure)]
    gb = [w.gpu or "?" for w in b.with_figure(figure)]
    if len(set(ga) | set(gb)) < 2:
        return found
    if found.design == PAIRED:
        note = (
            f"windows on GPUs {_gpu_list(ga + gb)}; each pair's two windows on one GPU (one "
            "process): an offset between GPUs cancels"
        )
    else:
        note = (
            f"GPU a recorded factor, not paired out: A's windows by GPU {_per_gpu(ga)}, "
            f"B's {_per_gpu(gb)}; an offset between GPUs widens the interval (sweep's "
            "GPU offsets)"
        )
    return msgspec.structs.replace(found, method=f"{found.method}; {note}")


def _gpu_list(gpus: list[str]) -> str:
    return ",".join(sorted(set(gpus), key=lambda g: (not g.isdigit(), g.zfill(8))))


def _per_gpu(gpus: list[str]) -> str:
    return " ".join(f"{g}:{gpus.count(g)}" for g in _gpu_list(gpus).split(","))


def judge(
    a: ConfigSamples,
    b: ConfigSamples,
    *,
    tolerance: float = TOLERANCE,
    floors: dict[str, float | None] | None = None,
    cuda_graphs_ms: float | None = None,
) -> TimedVerdicts | None:
    """Both verdicts of B against A; None without latencies on a side."""
    floors = floors or {}
    latency = figure_verdict(a, b, LATENCY, tolerance=tolerance, floor=floors.get(LATENCY))
    if latency is None:
        return None
    gpu = figure_verdict(a, b, GPU_TIME, tolerance=tolerance, floor=floors.get(GPU_TIME))
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
    """The lead, the processes the latency needs, and the lines (module doc)."""
    launch = [
        (label, bound)
        for label, bound in (("A", bound_a), ("B", bound_b))
        if bound.word == LAUNCH_BOUND
    ]
    both_gpu_bound = bound_a.word == GPU_BOUND and bound_b.word == GPU_BOUND
    lead: Literal["latency", "both"] = LATENCY if both_gpu_bound or gpu is None else "both"
    needed = None
    lines: list[str] = []
    for label, bound in launch:
        lines.append(
            f"launch-bound ({label}): enqueue p90 {bound.enqueue_p90_ms:.3f} ms >= "
            f"{LAUNCH_BOUND_SHARE:g} x GPU time {bound.gpu_p50_ms:.3f} ms in "
            f"{bound.launch_bound_processes} of {bound.classified_processes} "
            "processes: the host paces the call, so its latency spreads with the host"
        )
    if launch:
        needed = _latency_processes(a, b, latency_floor)
        lever = f"`{LEVER}` replays the call without launches"
        if cuda_graphs_ms is not None:
            lever += f" (measured: {cuda_graphs_ms:.3f} ms)"
        lines.append(
            f"the latency verdict would need about {needed} processes a side for "
            f"±{100 * LATENCY_TARGET:g} %; the GPU-time verdict holds with these; "
            f"{lever}"
            if needed is not None
            else lever
        )
    draft = TimedVerdicts(latency, gpu, bound_a, bound_b, lead, needed, cuda_graphs_ms)
    if draft.disagree and latency is not None and gpu is not None:  # disagree: both decided
        why = (
            "the host's launches, not the GPU's work, decide what the caller waits"
            if launch
            else "check the GPU state of both runs (clocks, other tenants)"
        )
        lines.append(
            f"the two figures disagree: latency says {latency.verdict}, GPU time says "
            f"{gpu.verdict}: {why}"
        )
    elif (
        both_gpu_bound
        and latency is not None
        and gpu is not None
        and latency.verdict != gpu.verdict
        and SAME not in (latency.verdict, gpu.verdict)
        and UNDECIDED in (latency.verdict, gpu.verdict)
    ):
        lines.append(f"latency says {latency.verdict}, GPU time says {gpu.verdict}")
    return TimedVerdicts(latency, gpu, bound_a, bound_b, lead, needed, cuda_graphs_ms, tuple(lines))


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
    (profiler.analysis.verdict.control_fdr); the explanation lines taken again."""
    latency = control_fdr([v.latency if v else None for v in verdicts])
    gpu = control_fdr([v.gpu_time if v else None for v in verdicts])
    out: list[TimedVerdicts | None] = []
    for v, lat, g in zip(verdicts, latency, gpu):
        if v is None:
            out.append(None)
            continue
        again = explain(lat, g, v.bound_a, v.bound_b, cuda_graphs_ms=v.cuda_graphs_ms)
        out.append(
            TimedVerdicts(
                lat,
                g,
                v.bound_a,
                v.bound_b,
                v.lead,
                v.latency_processes_for_5pct,
                v.cuda_graphs_ms,
                _keep_counts(v.lines, again.lines),
            )
        )
    return out


def _keep_counts(before: tuple[str, ...], again: tuple[str, ...]) -> tuple[str, ...]:
    """The lines after the FDR step: the launch-bound lines of the first pass (they carry the
    processes needed, which needs the samples), the disagreement line as it is now."""
    kept = tuple(
        line for line in before if not line.startswith(("the two figures disagree", "latency says"))
    )
    return kept + tuple(
        line for line in again if line.startswith(("the two figures disagree", "latency says"))
    )
