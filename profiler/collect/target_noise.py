"""``run --target-noise P``: keep sampling until the quoted p50's 95 % interval is within ±P %,
first iterations in the run's own window, then windows in fresh processes, or until the budget
(``--budget``, default ``DEFAULT_BUDGET_S``) is spent (profiler.analysis.sampling.stopping_rule,
NVBench's relative-noise criterion applied to the interval).

- Iterations: the window grows by chunks of its first size while the interval of its mean,
  t * CV / sqrt(n), is wider than P; iterations inside one process are not independent samples
  of what a fresh process gets, so this only settles the window's own figure.
- Processes: then windows of the same size in fresh processes (profiler.collect.repeat_window),
  at least ``MIN_PROCESSES`` in all (the budget counts from there: below it there is no
  interval), until the interval of the mean per-process median is within
  P: the figure another `run` of this config would land in. What was reached, and why sampling
  stopped, is recorded (result.json ``timing.noise.target``) and printed.
Collection code: it times on the GPU."""

from __future__ import annotations

import math
import time

from profiler import units
from profiler.analysis.sampling import REACHED, stopping_rule
from profiler.analysis.timed_window import TimedWindow
from profiler.collect import repeat_window, window
from profiler.runs.config import RunConfig
from profiler.runs.result import TargetNoise
from profiler.runs.samples import ConfigSamples, ProcessWindow

DEFAULT_BUDGET_S = 60.0
MIN_PROCESSES = 3
MAX_CHUNKS = 100


def extend_window(
    workload,
    step,
    timed: window.Timed,
    config: RunConfig,
    use_cuda: bool,
    progress: window.Progress,
    began: float,
) -> window.Timed:
    """The timed window grown by chunks until its own interval is within the target."""
    assert config.target_noise is not None  # called with --target-noise only
    target, budget = config.target_noise / 100, config.budget or DEFAULT_BUDGET_S
    latencies = list(timed.window.latencies_ms)
    chunk, output = len(latencies), timed.output
    for _ in range(MAX_CHUNKS):
        stop = stopping_rule(
            latencies, target, elapsed_s=time.perf_counter() - began, budget_s=budget
        )
        if stop.stop:
            break
        more, _, output = workload.time(step, chunk, use_cuda, lambda: None)
        latencies += list(more)
    grown = TimedWindow(tuple(latencies), timed.window.batch_size)
    if len(latencies) > chunk:
        progress.say(
            f"  --target-noise {units.plain(config.target_noise)} %: window grown to "
            f"{len(latencies)} iterations, p50 {units.time(grown.p50_ms, thousands=False)}"
        )
    return window.Timed(grown, timed.details, output, timed.memory, timed.plan)


def more_processes(
    config: RunConfig,
    own: ProcessWindow,
    timed: window.Timed,
    progress: window.Progress,
    began: float,
) -> tuple[ConfigSamples, TargetNoise]:
    """Windows in fresh processes (the run's own first) until the mean per-process median is
    within the target, at least MIN_PROCESSES; all windows and what was reached."""
    assert config.target_noise is not None  # called with --target-noise only
    target, budget = config.target_noise / 100, config.budget or DEFAULT_BUDGET_S
    least = max(MIN_PROCESSES, config.repeat_runs)
    child = repeat_window.child_config(config, len(own.latency_ms), timed.plan.warmup)
    windows = [own]
    while True:
        # every window timed at least one iteration: each has its median
        medians = [m for m in (w.median("latency") for w in windows) if m is not None]
        elapsed = time.perf_counter() - began
        # the budget counts once MIN_PROCESSES windows exist: below that there is no interval
        stop = stopping_rule(
            medians,
            target,
            elapsed_s=elapsed,
            budget_s=budget if len(windows) >= least else math.inf,
            min_samples=least,
        )
        if stop.stop:
            break
        progress.say(
            f"  --target-noise: window {len(windows) + 1} in a fresh process"
            + (
                ""
                if stop.half_width == float("inf")
                else f" (±{units.percent(100 * stop.half_width)} so far)"
            )
        )
        windows.append(
            repeat_window.one_window(child, f"--target-noise: window {len(windows) + 1}")
        )
    reached = stop.reason == REACHED
    record = TargetNoise(
        target=target,
        reached=reached,
        reason=stop.reason,
        half_width=stop.half_width if math.isfinite(stop.half_width) else None,
        iterations=len(own.latency_ms),
        processes=len(windows),
        spent_s=round(elapsed, 3),
        budget_s=budget,
    )
    progress.say(
        f"  --target-noise {units.plain(config.target_noise)} %: "
        + (
            f"reached ±{units.percent(100 * stop.half_width)}"
            if reached
            else f"not reached ({stop.reason}; ±{units.percent(100 * stop.half_width)})"
        )
        + f" with {len(windows)} processes of {len(own.latency_ms)} iterations"
    )
    return ConfigSamples(tuple(windows)), record
