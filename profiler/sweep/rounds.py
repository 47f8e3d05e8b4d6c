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

``--processes N``: N rounds, so every cell has N windows from fresh processes that pair with
the other cells' (its own run's window is kept too, as process 0, and pairs with none).
``--target-noise P``: two stages (``sample``): pilot rounds (N windows a cell, at least
MIN_SAMPLES) estimate each cell's between-process CV and so the processes its ±P %
interval needs (profiler.analysis.sampling.processes_needed); then that many fresh rounds, as
many as ``budget_s`` leaves at the pilot's pace; the pilot's windows are flagged and left out of
the verdicts. Never imports torch: the rounds are child processes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import msgspec

from profiler import child_env, signals
from profiler.analysis.sampling import (BUDGET, MIN_SAMPLES, REACHED, UNREACHABLE, Stop,
                                       processes_needed, stopping_rule)
from profiler.errors import UserError
from profiler.runs.config import check_processes, config_from_json, config_to_json
from profiler.runs.samples import ConfigSamples, ProcessWindow, window_of
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
    try:  # Ctrl-C, SIGTERM, SIGHUP: the round's process is stopped, not left running
        done = signals.run_child([sys.executable, *CHILD], input=json.dumps(asked),
                                 env=child_env(), timeout=timeout_s)
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
    """What the rounds took: per cell its new windows (typed, each with the round it was timed
    in), the error that stopped it, and under --target-noise where its interval stands."""

    windows: dict[str, list[ProcessWindow]]
    errors: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # the device each cell was timed on
    stops: dict[str, Stop] = field(default_factory=dict)
    rounds: int = 0
    wall_s: float = 0.0
    #: --target-noise: the pilot rounds that chose the count (their windows and the ones the
    #: cells had before are flagged pilot, and left out of the verdicts)
    pilot_rounds: int = 0

    def schedule(self, cells: int) -> str:
        return (f"interleaved: {self.rounds} round(s) after the run, each a fresh process "
                f"timing {cells} config(s) in turn, the leader rotated")

    def merged(self, key: str, have: ConfigSamples) -> ConfigSamples:
        """A cell's windows from before and from the rounds; under a two-stage --target-noise
        the earlier ones are pilot windows too."""
        before = have.windows
        if self.pilot_rounds:
            before = tuple(msgspec.structs.replace(w, pilot=True) for w in before)
        return ConfigSamples((*before, *self.windows.get(key, [])))


def quoted_figure(windows: list[ProcessWindow]) -> str:
    """The figure --target-noise aims at: GPU time where every window measured it (it is the
    figure that reproduces), else latency."""
    return "gpu_time" if windows and all(w.gpu_ms for w in windows) else "latency"


def sample(cells: dict[str, dict], have: dict[str, ConfigSamples], processes: int, *,
           target_noise: float | None = None, budget_s: float | None = None, seed: int = 0,
           say: Callable[[str], None] = print,
           on_round: Callable[[Sampled], None] | None = None,
           round_runner=run_round, clock=time.perf_counter, gpu: str | None = None) -> Sampled:
    """Rounds until every cell in ``cells`` (key -> repeat-window config JSON) has
    ``processes`` windows from rounds, counting the round windows among the ``have`` ones (key
    -> its samples: its own run's at least, which pairs with no other cell's and counts for
    none). With ``target_noise`` (relative, 0.02 for ±2 %) the sampling has two stages: a pilot
    (those rounds) estimates each cell's between-process CV of its quoted figure and so the
    processes its interval needs (profiler.analysis.sampling.processes_needed), capped by what
    ``budget_s`` leaves at the pilot's pace; then that many fresh rounds, and the verdicts use
    only those (choosing the count on the samples that are judged would let the noise decide
    when to stop). ``on_round(sampled so far)`` after every round, for recording as they come
    (nothing lost on Ctrl-C). ``gpu``: the GPU the rounds run on, recorded per window."""
    check_processes(processes)
    if target_noise is not None and not 0 < target_noise < 1:
        raise UserError(f"--target-noise must be a percentage between 0 and 100 (got "
                        f"{100 * target_noise:g})")
    keys = list(cells)
    out = Sampled(windows={k: [] for k in keys})
    began = clock()
    tag = uuid.uuid4().hex[:8]
    # the pilot needs a spread to size the fresh rounds: MIN_SAMPLES windows at least
    pilot = max(processes, MIN_SAMPLES) if target_noise else processes
    # the rounds' windows are the ones that pair: a cell's own run counts for none of them
    wanted = {k: max(0, pilot - sum(1 for w in have.get(k, ConfigSamples()).windows
                                    if w.round)) for k in keys}
    _rounds(out, cells, wanted, tag, seed, say, on_round, round_runner, gpu)
    if target_noise:
        budget = DEFAULT_BUDGET_S if budget_s is None else budget_s
        _second_stage(out, cells, have, processes, target_noise, budget, began, tag, seed, say,
                      on_round, round_runner, clock, gpu)
    out.wall_s = clock() - began
    return out


def _rounds(out: Sampled, cells: dict[str, dict], wanted: dict[str, int], tag: str, seed: int,
            say, on_round, round_runner, gpu, stage: str = "") -> None:
    """Rounds until each cell has its ``wanted`` new windows (or failed)."""
    keys = [k for k in cells if k not in out.errors]
    most = max((wanted.get(k, 0) for k in keys), default=0)
    order = interleaved(keys, most, seed=seed + out.rounds)
    taken = {k: 0 for k in keys}
    for index in range(most):
        turn = [t.cell for t in order[index * len(keys):(index + 1) * len(keys)]
                if taken.get(t.cell, 0) < wanted.get(t.cell, 0) and t.cell not in out.errors]
        if not turn:
            break
        say(f"round {out.rounds + 1}{stage}: a fresh process times {', '.join(turn)}")
        got = round_runner([(k, cells[k]) for k in turn])
        out.rounds += 1
        round_id = f"{tag}-{out.rounds}"
        for key in turn:
            value = got[key]
            if isinstance(value, str):
                out.errors[key] = value
                say(f"  {key}: no sample ({value}); it leaves the rounds")
                continue
            out.windows[key].append(window_of(value, round_id, gpu))
            taken[key] += 1
            out.devices[key] = value.get("device") or out.devices.get(key, "")
        if on_round is not None:
            on_round(out)


def _second_stage(out: Sampled, cells, have, processes: int, target: float, budget: float,
                  began: float, tag: str, seed: int, say, on_round, round_runner, clock,
                  gpu) -> None:
    """--target-noise's fresh rounds, their count chosen from the pilot (``sample``'s doc)."""
    pilot = {k: [*have.get(k, ConfigSamples()).windows, *out.windows[k]]
             for k in cells if k not in out.errors}
    if not pilot:
        return
    spent = clock() - began
    per_round = spent / out.rounds if out.rounds else 0.0
    affordable = MAX_ROUNDS if per_round <= 0 else max(0, int((budget - spent) / per_round))
    needs = {}
    for key, windows in pilot.items():
        figure = quoted_figure(windows)
        medians = [w.median(figure) for w in windows]
        needs[key] = processes_needed(medians, target).processes if len(medians) >= 2 \
            else processes
    count = min(max([processes, *needs.values()]), affordable, MAX_ROUNDS)
    out.pilot_rounds = out.rounds
    for key in out.windows:
        out.windows[key] = [msgspec.structs.replace(w, pilot=True) for w in out.windows[key]]
    say(f"--target-noise ±{100 * target:g} %: the pilot's spread asks for "
        f"{max(needs.values())} processes; {count} fresh round(s)"
        + ("" if count >= max(needs.values()) else
           f" (what the budget of {budget:g} s leaves)")
        + "; the verdicts use only those")
    if count < 2:
        for key in pilot:
            out.stops[key] = Stop(True, BUDGET, 0, math.inf, None, needs[key])
        return
    _rounds(out, cells, {k: count for k in pilot}, tag, seed, say, on_round, round_runner, gpu,
            stage=" (fresh)")
    elapsed = clock() - began
    for key in pilot:
        fresh = [w for w in out.windows[key] if not w.pilot]
        figure = quoted_figure(fresh)
        medians = [w.median(figure) for w in fresh]
        if len(medians) < 2:
            continue
        stop = stopping_rule(medians, target, elapsed_s=elapsed, budget_s=budget,
                             min_samples=2)
        reason = REACHED if stop.half_width <= target else (
            BUDGET if count < needs[key] else UNREACHABLE)
        out.stops[key] = dataclasses.replace(stop, stop=True, reason=reason)
        if reason == REACHED:
            say(f"  {key}: ±{100 * stop.half_width:.1f} % on {figure.replace('_', ' ')} after "
                f"{stop.samples} fresh processes: target reached")
