"""Sweep executors: where and how a sweep's cells run.

An executor is an object with ``run(jobs, on_start, on_done)``: it runs every ``CellJob``
(profiler.sweep.cell) somewhere, calls ``on_start(job, where)`` when one starts (``where``: gpu,
node, worker) and ``on_done(job, outcome)`` when it ended, both in the sweep's process, which
writes sweep.json after each call. On Ctrl-C (KeyboardInterrupt; SIGTERM and SIGHUP through
profiler.signals) it stops its running cells, reports them interrupted through ``on_done`` and
raises KeyboardInterrupt again; the same when ``on_start`` or ``on_done`` raises SweepStopped
(a KeyboardInterrupt: the sweep cannot go on, e.g. its manifest cannot be written). Every
executor runs cells with ``cellrun.run_job``, so run folders, traces and outcomes look the same
whichever placed them.

Executors are created from the sweep's ``ExecutorSettings`` by name (``sweep --executor``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from profiler.errors import UserError

if TYPE_CHECKING:
    from profiler.sweep.cell import CellJob, OnDone, OnStart


class SweepStopped(KeyboardInterrupt):
    """Raised by the sweep's ``on_start``/``on_done`` when it cannot go on (its manifest cannot
    be written: a full disk). A KeyboardInterrupt, so every executor stops its running cells as
    for Ctrl-C and raises it again; ``why`` is the reason the stopped cells are given."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


#: --executor name -> "module:factory"; the factory takes ExecutorSettings
EXECUTORS = {
    "local": "profiler.sweep.executors.local:LocalExecutor",
    "ray": "profiler.sweep.executors.ray:from_settings",
}


@dataclass
class ExecutorSettings:
    """What the sweep tells an executor."""

    gpus: list[str] | None = None  # None: every visible GPU
    isolate: bool = False  # a fresh process per cell
    #: workers' own logs go into <log_dir>/workers/: the sweep's or trial's folder, always
    #: named (never a default relative to the current folder, which is not the tool's)
    log_dir: Path = field(kw_only=True)
    options: dict[str, Any] = field(
        default_factory=dict
    )  # executor-specific (e.g. a cluster address)


class Executor(Protocol):
    """What the sweep asks of every executor (the module's doc)."""

    def describe(self) -> str: ...

    def run(self, jobs: list[CellJob], on_start: OnStart, on_done: OnDone) -> None: ...


def names() -> list[str]:
    return list(EXECUTORS)


def get(name: str) -> Callable[[ExecutorSettings], Executor]:
    """The factory of executor ``name`` (called with ExecutorSettings)."""
    if name not in EXECUTORS:
        raise UserError(
            f"--executor: unknown executor {name!r} (choose from {', '.join(EXECUTORS)})"
        )
    module, factory = EXECUTORS[name].split(":")
    made: Callable[[ExecutorSettings], Executor] = getattr(importlib.import_module(module), factory)
    return made
