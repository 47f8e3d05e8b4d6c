"""Between-process samples, interleaved: the rounds behind a sweep's and a compare's
``--processes N`` and ``--target-noise P``.

A **round** is one fresh process (``python -m profiler.collect.repeat_window``) that times every
cell still sampled once, in the order of profiler.sweep.schedule.interleaved (A B, then B A ...;
round-robin over a sweep's cells, the leader rotated): drift of the machine (clocks, temperature,
other tenants) lands on every cell alike, and two cells timed in one round are a pair. A cell's
window in a round is a new process, a new CUDA context, a new model and backend (a TensorRT
engine from the engine cache, Inductor from its caches), new cuDNN/cuBLAS heuristics and
allocator state: everything that differs between two ``run`` calls of one config, which is what
the verdict has to hold against. One process per round rather than per cell pays the interpreter
and torch import once per round.

``--processes N``: every cell ends with N windows, its own run counting as the first (so N - 1
rounds). ``--target-noise P``: rounds go on (at least N in all) while a cell's 95 % interval of
its mean per-process median is wider than ±P % (profiler.analysis.sampling.stopping_rule, the
NVBench-style rule), until ``budget_s`` is spent or the rule says the target is out of reach;
a cell that reached it leaves the rounds. Never imports torch: the rounds are child processes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from profiler import child_env
from profiler.analysis.sampling import REACHED, Stop, stopping_rule
from profiler.errors import UserError
from profiler.runs.config import config_from_json, config_to_json
from profiler.sweep.schedule import interleaved

CHILD = ("-m", "profiler.collect.repeat_window")
#: rounds at most under --target-noise (the budget usually ends them first)
MAX_ROUNDS = 50
DEFAULT_BUDGET_S = 600.0


def window_config(config: dict, iters: int, warmup: int) -> dict:
    """A cell's config (config_to_json) for a repeat window: the iterations and warm-up its
    own run timed, no time-chosen window, no repeats of its own."""
    base = config_from_json(config)
    return config_to_json(dataclasses.replace(base, iters=iters, timed_warmup=warmup,
                                              min_time=None, repeat_runs=1))


def run_round(cells: list[tuple[str, dict]], timeout_s: float | None = None
              ) -> dict[str, dict | str]:
    """One fresh process timing ``cells`` ((key, config JSON)) in order: key -> its record
    (``latencies_ms``, ``device``), or the one-line reason the cell gave none."""
    asked = {"cells": [{"key": key, "config": config} for key, config in cells]}
    try:
        done = subprocess.run([sys.executable, *CHILD], input=json.dumps(asked),
                              capture_output=True, text=True, env=child_env(),
                              timeout=timeout_s)
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else \
            (expired.stdout or "")
        stderr, code = f"the round ran past {timeout_s:.0f} s", None
    found: dict[str, dict | str] = {}
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # something the libraries printed
        if isinstance(record, dict) and record.get("key") in dict(cells):
            found[record["key"]] = record if record.get("latencies_ms") else \
                record.get("error", "no result")
    why = (stderr.strip().splitlines() or [f"exit status {code}"])[-1]
    for key, _ in cells:
        found.setdefault(key, f"the round's process ended before this cell: {why}")
    return found


@dataclass
class Sampled:
    """What the rounds took: per cell its new windows, the error that stopped it, and under
    --target-noise where its interval stands."""

    windows: dict[str, list[list[float]]]
    errors: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # the device each cell was timed on
    stops: dict[str, Stop] = field(default_factory=dict)
    rounds: int = 0
    wall_s: float = 0.0

    def schedule(self, cells: int) -> str:
        return (f"interleaved: {self.rounds} round(s) after the run, each a fresh process "
                f"timing {cells} config(s) in turn, the leader rotated")


def sample(cells: dict[str, dict], have: dict[str, list[list[float]]], processes: int, *,
           target_noise: float | None = None, budget_s: float | None = None, seed: int = 0,
           say: Callable[[str], None] = print,
           on_round: Callable[[dict[str, list[list[float]]]], None] | None = None,
           round_runner=run_round, clock=time.perf_counter) -> Sampled:
    """Rounds until every cell in ``cells`` (key -> repeat-window config JSON) has
    ``processes`` windows counting the ``have`` ones (key -> windows it has: its own run's at
    least), and, with ``target_noise`` (relative, 0.02 for ±2 %), until each cell's interval is
    within it or ``budget_s`` is spent. ``on_round(windows so far)`` after every round, for
    recording as they come (nothing lost on Ctrl-C)."""
    if processes < 1:
        raise UserError(f"--processes must be 1 or more (got {processes})")
    if target_noise is not None and not 0 < target_noise < 1:
        raise UserError(f"--target-noise must be a percentage between 0 and 100 (got "
                        f"{100 * target_noise:g})")
    budget = (DEFAULT_BUDGET_S if budget_s is None else budget_s) if target_noise else math.inf
    keys = list(cells)
    wanted = {k: max(0, processes - len(have.get(k, []))) for k in keys}
    most = max(wanted.values(), default=0)
    limit = MAX_ROUNDS if target_noise else most
    order = interleaved(keys, limit, seed=seed)
    out = Sampled(windows={k: [] for k in keys})
    began = clock()
    active = [k for k in keys if wanted[k] > 0 or target_noise]
    for index in range(limit):
        if not active:
            break
        elapsed = clock() - began
        if target_noise and index >= most and elapsed >= budget:
            break
        turn = [t.cell for t in order[index * len(keys):(index + 1) * len(keys)]
                if t.cell in active]
        say(f"round {index + 1}{'' if target_noise else f' of {limit}'}: a fresh process "
            f"times {', '.join(turn)}")
        got = round_runner([(k, cells[k]) for k in turn])
        out.rounds = index + 1
        for key in turn:
            value = got[key]
            if isinstance(value, str):
                out.errors[key] = value
                active.remove(key)
                say(f"  {key}: no sample ({value}); it leaves the rounds")
                continue
            out.windows[key].append(list(value["latencies_ms"]))
            out.devices[key] = value.get("device") or out.devices.get(key, "")
        if on_round is not None:
            on_round(out.windows)
        elapsed = clock() - began
        for key in list(active):
            taken = len(out.windows[key])
            if taken < wanted[key]:
                continue
            if not target_noise:
                active.remove(key)
                continue
            medians = [float(np.median(w)) for w in [*have.get(key, []), *out.windows[key]]]
            stop = stopping_rule(medians, target_noise, elapsed_s=elapsed, budget_s=budget,
                                 min_samples=max(processes, 2))
            out.stops[key] = stop
            if stop.stop:
                active.remove(key)
                if stop.reason == REACHED:
                    say(f"  {key}: ±{100 * stop.half_width:.1f} % after {stop.samples} "
                        f"processes: target reached")
    for key in active:  # the budget or MAX_ROUNDS ended the rounds first
        medians = [float(np.median(w)) for w in [*have.get(key, []), *out.windows[key]]]
        if target_noise and len(medians) >= 1:
            out.stops[key] = stopping_rule(medians, target_noise, elapsed_s=math.inf,
                                           budget_s=budget, min_samples=max(processes, 2))
    out.wall_s = clock() - began
    return out
