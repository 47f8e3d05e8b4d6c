"""--repeat-runs: the timed window again in fresh processes, for the spread between processes
(allocator state, clocks, autotuner choices) that one window cannot show.

Each repeat is ``python -m profiler.collect.repeat_window`` with the run's config as JSON on stdin: it
builds the model, prepares the backend (a TensorRT engine comes from the engine cache), warms up
as the main run did, times the same number of iterations, and prints the latencies as JSON.
Collection code: it touches the GPU."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import torch

from profiler.collect import backends, models, timing, window
from profiler.collect.device import set_math_flags
from profiler.collect.workloads.base import RunContext
from profiler.collect.workloads.forward import Forward
from profiler.errors import UserError
from profiler.runs.config import RunConfig, config_from_json, config_to_json
from profiler import SOURCE_ROOT

def repeat(config: RunConfig, iters: int, warmup: int, say) -> list[list[float]]:
    """K - 1 more timed windows (the main run is the first), each in a fresh process; the
    latencies (ms) of each."""
    child = dataclasses.replace(config, iters=iters, timed_warmup=warmup, min_time=None,
                                repeat_runs=1)
    windows = []
    for index in range(1, config.repeat_runs):
        say(f"  repeat {index + 1} of {config.repeat_runs}: a fresh process")
        done = subprocess.run([sys.executable, "-m", "profiler.collect.repeat_window"],
                              input=json.dumps(config_to_json(child)), capture_output=True, text=True,
                              env=_child_env())
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"--repeat-runs: repeat {index + 1} failed: {last}")
        windows.append(json.loads(done.stdout.strip().splitlines()[-1])["latencies_ms"])
    return windows


def _child_env() -> dict:
    """This process's environment, with this copy of the package (and the current folder, for
    package.module:function models) importable first."""
    package_root = str(SOURCE_ROOT)
    paths = [package_root, os.getcwd(), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def time_once(config: RunConfig) -> dict:
    """The first phases of profiler.collect.window (prepare, warm-up, the timed window) for the
    forward workload, as the main run went through them; the latencies (ms)."""
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    set_math_flags(config)
    model, inputs = models.build(config, device)
    progress = window.Progress(quiet=True)
    workload = Forward(RunContext(config, backends.get(config.backend), model, inputs, device,
                                  use_cuda, progress.say, progress.warn))
    step, _, _ = window.prepare(workload, use_cuda, progress)
    plan = timing.plan_window(config.iters, config.timed_warmup, None, use_cuda)
    estimate_ms = window.warm_up(plan, step, use_cuda, progress)
    timed = window.timed(workload, step, plan, estimate_ms, config.batch_size, use_cuda,
                         progress)
    return {"latencies_ms": list(timed.window.latencies_ms)}


if __name__ == "__main__":
    print(json.dumps(time_once(config_from_json(json.loads(sys.stdin.read())))))
