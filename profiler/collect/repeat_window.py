"""Timed windows in fresh processes, for the spread between processes (allocator state, clocks,
autotuner choices, launch jitter) that one window cannot show.

``python -m profiler.collect.repeat_window`` reads JSON on stdin: one run config (a repeat of
``--repeat-runs``; it prints ``{"latencies_ms": [...], "gpu_ms": [...], "enqueue_ms":
[...]}``), or ``{"cells": [{"key": K, "config": C}, ...]}`` (a round of a sweep's or
compare's ``--processes``, profiler.sweep.rounds): it times
every cell in the order given, one JSON line per cell as it finishes (``{"key": K,
"latencies_ms": [...]}``, or ``{"key": K, "error": "one line"}`` when that cell fails; the
others still run). For each cell it builds the model, prepares the backend (a TensorRT engine
comes from the engine cache), warms up as the main run did, times the same number of
iterations, and frees the model before the next. Collection code: it touches the GPU."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys

import msgspec
import torch

from profiler import child_env, signals
from profiler.collect import backends, cuda_graphs, gpu_time, models, timing, window
from profiler.collect.device import set_math_flags
from profiler.collect.workloads.forward import Forward
from profiler.collect.workloads.generate import Generate
from profiler.collect.workloads.protocol import RunContext
from profiler.errors import UserError, first_line
from profiler.notices import Say
from profiler.runs.config import RunConfig, config_from_json, config_to_json
from profiler.runs.samples import ProcessWindow, window_of, window_record


def child_config(config: RunConfig, iters: int, warmup: int) -> RunConfig:
    """The config a repeat window times: the main window's iterations and warm-up, no
    time-chosen window, no sampling of its own."""
    return dataclasses.replace(
        config,
        iters=iters,
        timed_warmup=warmup,
        min_time=None,
        repeat_runs=1,
        target_noise=None,
        budget=None,
    )


def one_window(child: RunConfig, what: str) -> ProcessWindow:
    """One timed window of ``child`` in a fresh process, with its GPU-time window."""
    # Ctrl-C, SIGTERM, SIGHUP (run's as_interrupts): the window's process is stopped too
    done = signals.run_child(
        [sys.executable, "-m", "profiler.collect.window_child"],
        input=json.dumps(config_to_json(child)),
        env=child_env(),
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{what} failed: {last}")
    return window_of(json.loads(done.stdout.strip().splitlines()[-1]))


def repeat(config: RunConfig, iters: int, warmup: int, say: Say) -> list[ProcessWindow]:
    """K - 1 more timed windows (the main run is the first), each in a fresh process."""
    child = child_config(config, iters, warmup)
    windows = []
    for index in range(1, config.repeat_runs):
        say(f"  repeat {index + 1} of {config.repeat_runs}: a fresh process")
        windows.append(one_window(child, f"--repeat-runs: repeat {index + 1}"))
    return windows


def time_once(config: RunConfig) -> dict:
    """The first phases of profiler.collect.window (prepare, warm-up, the timed window, the
    GPU-time window; a generation's phase windows) for the config's workload, as the main run
    went through them, with no profiler (no CUDA graph capture is profiled); the latencies,
    GPU times and enqueue times (ms), a generation's ``phases`` (profiler.runs.samples
    .window_record) and the GPU's state around the timed window
    (profiler.runs.gpu_record.GpuState as JSON builtins)."""
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    set_math_flags(config)
    model, inputs = models.build(config, device)
    progress = window.Progress(quiet=True)
    context = RunContext(
        config,
        backends.get(config.backend),
        model,
        inputs,
        device,
        use_cuda,
        progress.say,
        progress.warn,
        profile_captures=False,
    )
    workload = Generate(context) if config.workload == "generate" else Forward(context)
    step, _, _ = window.prepare(workload, use_cuda, progress)
    if config.cuda_graphs and not workload.captures_graphs:  # the main run's replays
        step = cuda_graphs.capture(step, config.backend, progress.say, profiled=False)
    plan = timing.plan_window(config.iters, config.timed_warmup, None, use_cuda)
    estimate_ms = window.warm_up(plan, step, use_cuda, progress)
    timed = window.timed(workload, step, plan, estimate_ms, config.batch_size, use_cuda, progress)
    gpu = gpu_time.measure(
        step.fn,
        step.inputs,
        len(timed.window.latencies_ms),
        use_cuda,
        config.workload,
        enqueue_ms=timed.enqueue_ms,
    )
    own = ProcessWindow(
        tuple(timed.window.latencies_ms),
        gpu.gpu_ms,
        timed.enqueue_ms,
        phases=workload.phase_windows(timed.details, use_cuda),
    )
    return {
        **window_record(own),
        "gpu_redone": gpu.figures.invalid_iterations,
        "held_enqueue_p50_ms": gpu.figures.held_enqueue_p50_ms,
        "device": torch.cuda.get_device_name() if use_cuda else "cpu",
        "gpu_state": msgspec.to_builtins(timed.gpu_state),
    }


def time_cells(cells: list[dict], out=sys.stdout) -> None:
    """Each cell in order, a JSON line each; a failing cell is a line with its error."""
    for cell in cells:
        try:
            line = {"key": cell["key"], **time_once(config_from_json(cell["config"]))}
        except Exception as error:  # one cell's failure is that cell's, not the round's
            line = {"key": cell["key"], "error": f"{type(error).__name__}: {first_line(error)}"}
        out.write(json.dumps(line) + "\n")
        out.flush()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def apply_levers(text: str | None) -> None:
    """The host-jitter levers a timing process may be started with (``INFER_PROFILER_LEVERS``,
    comma-separated; scripts/bench_verdicts.py measures them): ``pin=CPUS`` (this process on
    those cores, e.g. ``pin=0-1``), ``gc-off`` (no garbage collection while timing),
    ``threads=N`` (N intra-op threads)."""
    for lever in filter(None, (text or "").split(",")):
        name, _, value = lever.partition("=")
        if name == "pin":
            cores: set[int] = set()
            for part in value.split(";"):
                low, _, high = part.partition("-")
                cores.update(range(int(low), int(high or low) + 1))
            os.sched_setaffinity(0, cores)
        elif name == "gc-off":
            gc.disable()
        elif name == "threads":
            torch.set_num_threads(int(value))


if __name__ == "__main__":
    apply_levers(os.environ.get("INFER_PROFILER_LEVERS"))
    asked = json.loads(sys.stdin.read())
    if isinstance(asked, dict) and "cells" in asked:
        time_cells(asked["cells"])
    else:
        print(json.dumps(time_once(config_from_json(asked))))
