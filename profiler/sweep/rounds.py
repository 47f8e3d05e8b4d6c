"""Between-process samples, interleaved: the rounds behind a sweep's and a compare's
``--processes N`` and ``--target-noise P``.

A **round** is one fresh process (``python -m profiler.collect.repeat_window``) that times every
cell still sampled once, in the order of ``interleaved`` below (A B, then B A ...;
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

**Several GPUs** (``gpus``): the processes of the rounds run at once, one per GPU, each on one
GPU (CUDA_VISIBLE_DEVICES), as many at a time as there are GPUs. A process never spans GPUs, so
two windows that pair (one process) were taken on one GPU and a GPU-to-GPU offset cancels in the
paired design. Whole rounds fill the GPUs; the rounds of a last, partial wave are split into
processes by comparison group (``groups``: the cells a verdict compares, e.g. a sweep's backends
at one batch size), never inside a group (``round_chunks``). Every window records its GPU.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import msgspec
import numpy as np

from profiler import child_env, signals, units
from profiler.analysis import sequential
from profiler.analysis.sampling import (
    BUDGET,
    MIN_SAMPLES,
    REACHED,
    UNREACHABLE,
    Stop,
    processes_needed,
    stopping_rule,
)
from profiler.analysis.verdict import MachineNoise
from profiler.errors import UserError
from profiler.notices import Say
from profiler.runs.config import RunConfig, check_processes, config_to_json
from profiler.runs.samples import ConfigSamples, ProcessWindow, window_of

CHILD = ("-m", "profiler.collect.window_child")  # repeat_window, its bytecode kept
#: the name of a slot that stands for one of a Ray cluster's GPUs (executors.ray.RayRounds)
RAY_SLOT = "ray-"
#: rounds at most under --target-noise (the budget usually ends them first)
MAX_ROUNDS = 50
DEFAULT_BUDGET_S = 600.0


class Turn(NamedTuple):
    """One sample of one cell in the interleaved order."""

    cell: Any
    sample: int  # 0 for the cell's first sample, 1 for its second ...


def interleaved(cells: Sequence[Any], samples: int, seed: int | None = None) -> list[Turn]:
    """``samples`` turns of every cell, one round (each cell once) after another: A B A B ...,
    so that drift of the machine hits every cell alike instead of the cells sampled last.

    With a seed, each round is rotated so that no cell is always first: over every
    ``len(cells)`` consecutive rounds (counted from the first) each cell leads exactly once, in
    an order drawn from the seed. Pure: no clock, no I/O."""
    if samples < 0:
        raise ValueError("samples must be >= 0")
    cells = list(cells)
    n = len(cells)
    if not n:
        return []
    leads = [0] * samples
    if seed is not None:
        rng = np.random.default_rng(seed)
        leads = [int(v) for block in range(0, samples, n) for v in rng.permutation(n)][:samples]
    return [
        Turn(cells[(lead + i) % n], sample) for sample, lead in enumerate(leads) for i in range(n)
    ]


def window_config(config: RunConfig, iters: int, warmup: int) -> dict[str, Any]:
    """A cell's config for a repeat window, as the round's fresh process is handed it
    (config_to_json): the iterations and warm-up its own run timed, no time-chosen window, no
    repeats of its own."""
    return config_to_json(
        dataclasses.replace(config, iters=iters, timed_warmup=warmup, min_time=None, repeat_runs=1)
    )


def run_round(
    cells: list[tuple[str, dict[str, Any]]],
    gpu: str | None = None,
    timeout_s: float | None = None,
    started: Callable[[Any], object] | None = None,
) -> dict[str, dict[str, Any] | str]:
    """One fresh process timing ``cells`` ((key, config JSON)) in order, on ``gpu`` (as
    CUDA_VISIBLE_DEVICES names it; None: the GPUs this process sees): key -> its record
    (``latencies_ms``, ``device``), or the one-line reason the cell gave none. ``started(the
    process)`` as soon as it runs (the caller of several at once stops them on Ctrl-C)."""
    asked = {"cells": [{"key": key, "config": config} for key, config in cells]}
    env = child_env()
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    try:  # Ctrl-C, SIGTERM, SIGHUP: the round's process is stopped, not left running
        done = signals.run_child(
            [sys.executable, *CHILD],
            input=json.dumps(asked),
            env=env,
            timeout=timeout_s,
            started=started,
        )
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = (
            expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        )
        stderr, code = (
            f"the round ran past {units.time(timeout_s, 's', decimals=0, thousands=False)}",
            None,
        )
    found: dict[str, dict[str, Any] | str] = {}
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # something the libraries printed
        if isinstance(record, dict) and record.get("key") in dict(cells):
            found[record["key"]] = (
                record if record.get("latencies_ms") else record.get("error", "no result")
            )
    why = (stderr.strip().splitlines() or [f"exit status {code}"])[-1]
    for key, _ in cells:
        found.setdefault(key, f"the round's process ended before this cell: {why}")
    return found


def round_chunks(rounds: int, gpus: int, groups: int) -> list[int]:
    """Into how many processes each of ``rounds`` rounds is split on ``gpus`` GPUs: whole
    rounds fill the full waves (a process pays the interpreter, torch and a compiler's first
    compile once: on an H100, about 22 s of a 12-config round's 54, docs/gpu/h100/scaling);
    the rounds of the last, partial wave are split over the GPUs it would leave idle, never
    into more processes than the round's comparison groups (a group is one process's work: its
    windows pair). 5 rounds on 4 GPUs: [1, 1, 1, 1, 4]; on 2: [1, 1, 1, 1, 2]; 2 on 4: [2, 2];
    on one GPU every round whole."""
    if rounds < 1:
        return []
    left = rounds % gpus if gpus > 1 else 0
    split = max(1, min(groups, gpus // left)) if left else 1
    return [1] * (rounds - left) + [split] * left


def split_round(turn: list[str], groups: dict[str, str], chunks: int) -> list[list[str]]:
    """A round's cells (in their interleaved order) in ``chunks`` processes, whole comparison
    groups each (a cell without a group is a group of its own), the groups dealt out largest
    first to the process with the fewest cells; each process keeps the round's order."""
    by_group: dict[str, list[str]] = {}
    for key in turn:
        by_group.setdefault(groups.get(key, key), []).append(key)
    if chunks <= 1 or len(by_group) <= 1:
        return [list(turn)]
    bins: list[list[str]] = [[] for _ in range(min(chunks, len(by_group)))]
    for members in sorted(by_group.values(), key=len, reverse=True):
        min(bins, key=len).extend(members)
    position = {key: i for i, key in enumerate(turn)}
    return [sorted(b, key=position.__getitem__) for b in bins if b]


@dataclass
class Sampled:
    """What the rounds took: per cell its new windows (typed, each with the round it was timed
    in), the error that stopped it, and under --target-noise where its interval stands."""

    windows: dict[str, list[ProcessWindow]]
    errors: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # the device each cell was timed on
    stops: dict[str, Stop] = field(default_factory=dict)
    rounds: int = 0
    #: the fresh processes the rounds took (more than ``rounds`` where a round was split over
    #: several GPUs)
    processes: int = 0
    gpus: tuple[str, ...] = ()  # the GPUs the rounds ran on (CUDA_VISIBLE_DEVICES names)
    wall_s: float = 0.0
    #: --target-noise: the pilot rounds that chose the count (their windows and the ones the
    #: cells had before are flagged pilot, and left out of the verdicts)
    pilot_rounds: int = 0
    #: sequential rounds: the looks taken, and the round after which each cell was decided
    #: (profiler.analysis.sequential; a cell not named went on to the last round)
    looks: int = 0
    settled_after: dict[str, int] = field(default_factory=dict)

    def placed(self) -> str:
        """Where the rounds ran: "GPUs 0,1", or "4 GPUs as Ray tasks" (Ray's slots)."""
        if all(gpu.startswith(RAY_SLOT) for gpu in self.gpus):
            return f"{len(self.gpus)} GPUs as Ray tasks"
        return f"GPUs {','.join(self.gpus)}"

    def schedule(self, cells: int) -> str:
        spread = (
            ""
            if len(self.gpus) < 2
            else (
                f"; {self.processes} processes over {self.placed()} at once, a "
                "comparison group never split"
            )
        )
        return (
            f"interleaved: {self.rounds} round(s) after the run, each a fresh process "
            f"timing {cells} config(s) in turn, the leader rotated{spread}"
        )

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


def sample(
    cells: dict[str, dict[str, Any]],
    have: dict[str, ConfigSamples],
    processes: int,
    *,
    target_noise: float | None = None,
    budget_s: float | None = None,
    seed: int = 0,
    say: Say = print,
    on_round: Callable[[Sampled], None] | None = None,
    round_runner: Callable[..., dict[str, dict[str, Any] | str]] = run_round,
    clock: Callable[[], float] = time.perf_counter,
    gpus: Sequence[str] | None = None,
    groups: dict[str, str] | None = None,
    comparisons: list[tuple[str, str]] | None = None,
    machine: MachineNoise | None = None,
) -> Sampled:
    """Rounds until every cell in ``cells`` (key -> repeat-window config JSON) has
    ``processes`` windows from rounds, counting the round windows among the ``have`` ones (key
    -> its samples: its own run's at least, which pairs with no other cell's and counts for
    none). With ``target_noise`` (relative, 0.02 for ±2 %) the sampling has two stages: a pilot
    (those rounds) estimates each cell's between-process CV of its quoted figure and so the
    processes its interval needs (profiler.analysis.sampling.processes_needed), capped by what
    ``budget_s`` leaves at the pilot's pace; then that many fresh rounds, and the verdicts use
    only those (choosing the count on the samples that are judged would let the noise decide
    when to stop). ``on_round(sampled so far)`` after every process, for recording as they
    come (nothing lost on Ctrl-C). ``gpus``: the GPUs the rounds run on, at once (module doc;
    None: the ones this process sees, recorded as unknown); ``groups``: key -> its comparison
    group, the cells that must share a process when a round is split over GPUs (default: all
    in one). ``round_runner(cells, gpu, started=...)`` runs one process, as ``run_round`` does;
    a record that names its ``gpu`` says where it ran (a Ray task's GPU, when the ``gpus`` are
    the runner's slots), and a handle given to ``started`` that has a ``stop()`` is stopped that
    way on Ctrl-C. ``comparisons`` ((baseline, cell) pairs the verdicts take): the rounds are
    sequential (profiler.analysis.sequential): a look after each round from the second on, and
    a cell whose comparisons are all decided leaves the rounds; ``processes`` rounds at most, or,
    with ``budget_s``, more for the undecided ones while the budget lasts; a look pairs or not
    as the verdicts do, at the rho of ``machine`` (profiler.analysis.verdict.MachineNoise)."""
    check_processes(processes)
    if target_noise is not None and not 0 < target_noise < 1:
        raise UserError(
            "--target-noise must be a percentage between 0 and 100 "
            f"(got {units.plain(100 * target_noise)})"
        )
    keys = list(cells)
    out = Sampled(windows={k: [] for k in keys}, gpus=tuple(gpus or ()))
    began = clock()
    tag = uuid.uuid4().hex[:8]
    # the pilot needs a spread to size the fresh rounds: MIN_SAMPLES windows at least
    pilot = max(processes, MIN_SAMPLES) if target_noise else processes
    # the rounds' windows are the ones that pair: a cell's own run counts for none of them
    wanted = {
        k: max(0, pilot - sum(1 for w in have.get(k, ConfigSamples()).windows if w.round))
        for k in keys
    }
    runner = _Runner(out, cells, tag, say, on_round, round_runner, groups or {})
    if comparisons and not target_noise:
        looks = _Looks(comparisons, machine)
        _sequential(out, runner, have, processes, looks, budget_s, began, seed, say, clock)
        out.wall_s = clock() - began
        return out
    runner.rounds(wanted, seed)
    if target_noise:
        budget = DEFAULT_BUDGET_S if budget_s is None else budget_s
        _second_stage(out, runner, have, processes, target_noise, budget, began, seed, say, clock)
    out.wall_s = clock() - began
    return out


#: one process of a round: the round's number, its part (None: the whole round), its cells
_Unit = tuple[int, int | None, list[str]]


@dataclass
class _Runner:
    """Runs the processes of rounds, one per GPU at a time (``sample``'s doc)."""

    out: Sampled
    cells: dict[str, dict[str, Any]]
    tag: str
    say: Callable[[str], None]
    on_round: Callable[[Sampled], None] | None
    round_runner: Callable[..., dict[str, dict[str, Any] | str]]
    groups: dict[str, str]

    def rounds(self, wanted: dict[str, int], seed: int, stage: str = "") -> None:
        """Rounds until each cell has its ``wanted`` new windows (or failed): cell k is in the
        first wanted[k] of them, in the interleaved order."""
        out = self.out
        keys = [k for k in self.cells if k not in out.errors]
        most = max((wanted.get(k, 0) for k in keys), default=0)
        order = interleaved(keys, most, seed=seed + out.rounds)
        gpus: list[str | None] = list(out.gpus) or [None]
        groups = len({self.groups.get(k, k) for k in keys}) if self.groups else 1
        chunks = round_chunks(most, len(gpus), groups)
        units: list[_Unit] = []  # (round number, process in the round, its cells in order)
        for index in range(most):
            turn = [
                t.cell
                for t in order[index * len(keys) : (index + 1) * len(keys)]
                if t.sample < wanted.get(t.cell, 0)
            ]
            if not turn:
                break
            number = out.rounds + index + 1
            parts = split_round(turn, self.groups, chunks[index]) if chunks[index] > 1 else [turn]
            units += [
                (number, part if len(parts) > 1 else None, cells)
                for part, cells in enumerate(parts, start=1)
            ]
        if not units:
            return
        self._run(units, gpus, stage)
        out.rounds = max(number for number, _, _ in units)

    def _take(self, unit: _Unit, gpu: str | None, got: dict[str, Any]) -> None:
        number, part, turn = unit
        out = self.out
        out.processes += 1
        round_id = f"{self.tag}-{number}" + (f".{part}" if part else "")
        for key in turn:
            value = got[key]
            if isinstance(value, str):
                out.errors[key] = value
                self.say(f"  {key}: no sample ({value}); it leaves the rounds")
                continue
            # the GPU the runner placed it on where it says (a Ray task's), else the slot's
            out.windows[key].append(window_of(value, round_id, value.get("gpu") or gpu))
            out.devices[key] = value.get("device") or out.devices.get(key, "")
        if self.on_round is not None:
            self.on_round(out)

    def _announce(self, unit: _Unit, gpu: str | None, stage: str, turn: list[str]) -> None:
        number, part, _ = unit
        named = getattr(self.round_runner, "slot_name", lambda slot: f"GPU {slot}")
        where = "" if gpu is None or len(self.out.gpus) < 2 else f" on {named(gpu)}"
        which = f"{number}.{part}" if part else f"{number}"
        self.say(f"round {which}{stage}: a fresh process{where} times {', '.join(turn)}")

    def _run(self, units: list[_Unit], gpus: list[str | None], stage: str) -> None:
        if len(gpus) == 1:  # one at a time, here: Ctrl-C stops the child in run_child
            for unit in units:
                turn = [k for k in unit[2] if k not in self.out.errors]
                if turn:
                    self._announce(unit, gpus[0], stage, turn)
                    self._take(
                        (unit[0], unit[1], turn),
                        gpus[0],
                        self.round_runner([(k, self.cells[k]) for k in turn], gpus[0]),
                    )
            return
        live: set[Any] = set()  # a Popen, or a runner's own handle (a Ray task's)
        lock = threading.Lock()

        def started(process: object) -> None:
            with lock:
                live.add(process)

        def one(turn: list[str], gpu: str | None) -> dict[str, dict[str, Any] | str]:
            return self.round_runner([(k, self.cells[k]) for k in turn], gpu, started=started)

        free, queue = list(gpus), list(units)
        # each process running: its unit (round, part, cells) and its GPU
        pending: dict[
            concurrent.futures.Future[dict[str, dict[str, Any] | str]], tuple[_Unit, str | None]
        ] = {}
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(gpus))
        try:
            while queue or pending:
                while queue and free:
                    unit = queue.pop(0)
                    turn = [k for k in unit[2] if k not in self.out.errors]
                    if not turn:
                        continue
                    gpu = free.pop(0)
                    self._announce(unit, gpu, stage, turn)
                    pending[pool.submit(one, turn, gpu)] = ((unit[0], unit[1], turn), gpu)
                if not pending:
                    continue
                done, _ = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    unit, gpu = pending.pop(future)
                    free.append(gpu)
                    self._take(unit, gpu, future.result())
        except BaseException:  # Ctrl-C, SIGTERM: every process of the wave is stopped
            with lock:
                running = list(live)
            for process in running:  # a runner's own handle stops itself (a Ray task's)
                stop = getattr(process, "stop", None)
                stop() if stop is not None else signals.stop_child(process)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class _Looks:
    """What a sequential look judges: the (baseline, cell) comparisons, and the machine's rho."""

    comparisons: list[tuple[str, str]]
    machine: MachineNoise | None = None


def _sequential(
    out: Sampled,
    runner: _Runner,
    have: dict[str, ConfigSamples],
    processes: int,
    looks: _Looks,
    budget_s: float | None,
    began: float,
    seed: int,
    say: Say,
    clock: Callable[[], float],
) -> None:
    """Rounds with a look after each from sequential.FIRST_LOOK on (a wave of rounds on
    several GPUs): the settled cells leave; ``processes`` rounds a cell at most (the rounds'
    windows it had count: a resumed sweep), more within ``budget_s`` for cells still
    undecided."""
    wave = max(1, len(out.gpus))
    most = MAX_ROUNDS if budget_s is not None else processes

    def taken(key: str) -> int:
        before = sum(1 for w in have.get(key, ConfigSamples()).windows if w.round)
        return before + len(out.windows[key])

    def samples() -> dict[str, ConfigSamples]:
        return {
            k: have.get(k, ConfigSamples()) + ConfigSamples(tuple(out.windows[k]))
            for k in runner.cells
        }

    def open_comparisons() -> list[tuple[str, str]]:  # those whose cells both still answer
        return [(a, b) for a, b in looks.comparisons if a not in out.errors and b not in out.errors]

    done = sequential.settled(samples(), open_comparisons(), looks.machine)
    live = [k for k in runner.cells if taken(k) < processes and k not in done]
    while live and (least := min(map(taken, live))) < most:
        step = min(max(sequential.FIRST_LOOK - least, wave, 1), most - least)
        if budget_s is not None and least >= processes:  # past the count: the budget decides
            spent = clock() - began
            pace = spent / out.rounds if out.rounds else 0.0
            if spent + pace * step > budget_s:
                say(f"  the budget of {units.plain(budget_s)} s ends the rounds")
                break
        runner.rounds({k: min(step, most - taken(k)) for k in live}, seed)
        done = sequential.settled(samples(), open_comparisons(), looks.machine)
        leaving = [k for k in live if k in done or k in out.errors or taken(k) >= most]
        live = [k for k in live if k not in leaving]
        out.looks += 1
        decided = [k for k in leaving if k in done and k not in out.errors]
        for key in decided:
            out.settled_after[key] = out.rounds
        if decided and live:
            say(
                f"  look after round {out.rounds}: {', '.join(decided)} decided "
                f"({sequential.RULE}, p < {units.plain(sequential.INTERIM_ALPHA)}); "
                f"{len(live)} cell(s) go on"
            )


def _second_stage(
    out: Sampled,
    runner: _Runner,
    have: dict[str, ConfigSamples],
    processes: int,
    target: float,
    budget: float,
    began: float,
    seed: int,
    say: Say,
    clock: Callable[[], float],
) -> None:
    """--target-noise's fresh rounds, their count chosen from the pilot (``sample``'s doc)."""
    pilot = {
        k: [*have.get(k, ConfigSamples()).windows, *out.windows[k]]
        for k in runner.cells
        if k not in out.errors
    }
    if not pilot:
        return
    spent = clock() - began
    per_round = spent / out.rounds if out.rounds else 0.0
    affordable = MAX_ROUNDS if per_round <= 0 else max(0, int((budget - spent) / per_round))
    needs = _processes_needed(pilot, processes, target)
    count = min(max([processes, *needs.values()]), affordable, MAX_ROUNDS)
    out.pilot_rounds = out.rounds
    for key in out.windows:
        out.windows[key] = [msgspec.structs.replace(w, pilot=True) for w in out.windows[key]]
    say(
        f"--target-noise ±{units.plain(100 * target)} %: the pilot's spread asks for "
        f"{max(needs.values())} processes; {count} fresh round(s)"
        + (
            ""
            if count >= max(needs.values())
            else f" (what the budget of {units.plain(budget)} s leaves)"
        )
        + "; the verdicts use only those"
    )
    if count < 2:
        for key in pilot:
            out.stops[key] = Stop(True, BUDGET, 0, math.inf, None, needs[key])
        return
    runner.rounds({k: count for k in pilot}, seed, stage=" (fresh)")
    _fresh_stops(out, pilot, needs, count, target, budget, clock() - began, say)


def _processes_needed(pilot: dict[str, Any], processes: int, target: float) -> dict[str, Any]:
    """Per cell, the processes its pilot's spread asks for to reach ``target``."""
    needs = {}
    for key, windows in pilot.items():
        figure = quoted_figure(windows)
        medians = [w.median(figure) for w in windows]
        needs[key] = processes_needed(medians, target).processes if len(medians) >= 2 else processes
    return needs


def _fresh_stops(
    out: Sampled,
    pilot: dict[str, Any],
    needs: dict[str, Any],
    count: int,
    target: float,
    budget: float,
    elapsed: float,
    say: Say,
) -> None:
    """Why each cell's fresh rounds stopped: the target reached, the budget, or unreachable."""
    for key in pilot:
        fresh = [w for w in out.windows[key] if not w.pilot]
        figure = quoted_figure(fresh)
        # quoted_figure picks a figure every fresh window measured: no median is None
        medians = cast(list[float], [w.median(figure) for w in fresh])
        if len(medians) < 2:
            continue
        stop = stopping_rule(medians, target, elapsed_s=elapsed, budget_s=budget, min_samples=2)
        reason = (
            REACHED
            if stop.half_width <= target
            else (BUDGET if count < needs[key] else UNREACHABLE)
        )
        out.stops[key] = dataclasses.replace(stop, stop=True, reason=reason)
        if reason == REACHED:
            say(
                f"  {key}: ±{units.percent(100 * stop.half_width)} on "
                f"{figure.replace('_', ' ')} after "
                f"{stop.samples} fresh processes: target reached"
            )
