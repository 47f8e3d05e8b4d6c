"""`noise`'s report: the floor of this machine in a few lines a person reads top to bottom."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from profiler.analysis.floor import MIN_RHO_PROCESSES, rho_interval
from profiler.report.fmt import percent, plain, time
from profiler.runs.noise_floor import NoiseFloor


def rho_line(floor: NoiseFloor) -> str:
    """The within-process correlation of both figures, each with its 95 % interval, and what
    the verdicts do with it."""
    n = floor.rho_processes or 0
    if floor.rho_latency is None and floor.rho_gpu_time is None:
        why = (
            f"needs {MIN_RHO_PROCESSES} processes or more (--processes)"
            if n < MIN_RHO_PROCESSES
            else "a side did not vary"
        )
        return f"  within one process (rho): not measured, {why}; the H100's rho stands in"
    parts = []
    for name, rho in (("latency", floor.rho_latency), ("GPU time", floor.rho_gpu_time)):
        if rho is None:
            continue
        span = rho_interval(rho, n)
        within = f" [{plain(round(span[0], 2))}, {plain(round(span[1], 2))}]" if span else ""
        parts.append(f"{name} {plain(round(rho, 2))}{within}")
    second = f" and {escape(floor.rho_workload)}" if floor.rho_workload else ""
    return (
        f"  within one process (rho, 95 % interval): {', '.join(parts)}, over {n} processes "
        f"timing the fixed config{second}: the verdicts pair rounds where this rho makes "
        "the interval narrower"
    )


def print_floor(
    floor: NoiseFloor,
    path: Path | None,
    state: dict[str, str],
    console: Console,
    unkept: str = "--no-save",
) -> None:
    """``state``: the GPU state line "before" and "after" the rounds; ``unkept``: why the floor
    was not kept, when ``path`` is None."""
    p50s = ", ".join(time(v, thousands=False, labelled=False) for v in floor.p50_ms)
    lines = [
        f"[b]Noise floor of {escape(floor.gpu)} on {escape(floor.host)}[/b] "
        f"({escape(floor.workload)}; {floor.processes} fresh processes)",
        f"  p50 of each process: {p50s} ms",
        f"  between processes: CV {percent(100 * floor.between_process_cv, 2)} of the p50",
        f"  inside one window: CV {percent(100 * floor.within_window_cv, 2)} "
        "(median over processes)",
        "  smallest difference a compare resolves here: "
        f"±{percent(100 * floor.smallest_resolvable)} "
        f"with {floor.processes_per_side} processes a side, "
        f"±{percent(100 * (floor.smallest_resolvable_one_process or 0))} with one",
        rho_line(floor),
        f"  GPU before: {escape(state['before'].removeprefix('GPU state: '))}",
        f"  GPU after:  {escape(state['after'].removeprefix('GPU state: '))}",
        "  settings: "
        + ", ".join(
            f"{k} {'unknown' if v is None else escape(str(v))}" for k, v in floor.settings.items()
        ),
        "[b]What would lower it[/b] (nothing was changed):",
        *(f"  - {escape(tip)}" for tip in floor.suggestions),
        (
            f"kept in {escape(str(path))}: compare and sweep use it for runs of one process "
            "on this kind of machine, and its rho to choose whether to pair"
            if path
            else f"not kept ({escape(unkept)})"
        ),
    ]
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
