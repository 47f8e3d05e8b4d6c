"""What a workload is: the one seam between the phase pipeline (profiler.collect.window, run in
order by profiler.collect.harness) and what is measured.

A workload says what one step is (``prepare``: a callable and its inputs, built by the backend),
how one timed iteration is timed (``time``), how the result is checked against the FP32 eager
reference (``check``), and what it adds to the run (files, the result's ``generation`` block).
Everything else (warm-up, the timed window and its noise, the profiled steps, the backend's
measurements after the windows, latency.csv, result.json) is the pipeline's, the same for all.
A new workload is a module here implementing this protocol, its name in
profiler.collect.harness.WORKLOADS, and its row of facts in profiler.runs.workloads.WORKLOADS:
what the code that knows only its name asks of it (the run's folder name, the built-in models'
inputs, --cuda-graphs, the GPU-time window, sampling in fresh processes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from profiler.analysis.timed_window import TimedWindow
from profiler.collect.backends.base import Backend, Prepared
from profiler.runs.config import RunConfig
from profiler.runs.phases import Phases
from profiler.runs.samples import ProcessWindow

if TYPE_CHECKING:
    from torch import nn


@dataclass
class RunContext:
    """What every workload of a run is built from."""

    config: RunConfig
    backend: Backend
    model: nn.Module
    inputs: tuple
    device: object  # torch.device
    use_cuda: bool
    say: Callable[[str], None]  # a progress line (nothing when quiet)
    warn: Callable[[str], None]
    #: CUDA graph captures run under the profiler (profiler.collect.graph_capture); off in a
    #: process that only times
    profile_captures: bool = True


class Workload(Protocol):
    #: after the model, backend and batch size in the run's first line ("" or " generate")
    label: str
    #: what the first call of ``prepare``'s step is called ("first call", "first generation")
    first_call: str
    #: what the timed iterations are called ("iterations", "generations")
    iterations: str
    #: what one timed iteration and one profiler step is, when not one forward pass
    unit: str | None
    #: when the device is synchronized
    sync: str
    #: the record_function spans inside a step
    phase_spans: list[str] | None
    #: a FLOP count of one step is meaningful (one forward pass; a roofline applies)
    counts_flops: bool
    #: with --cuda-graphs the workload captures its graph itself (a generation: its decode
    #: step), rather than the harness capturing the whole step
    captures_graphs: bool

    def before_prepare(self, timer: Phases) -> None:
        """Anything to keep before the backend sees the model (e.g. its FP32 weights)."""

    def prepare(self) -> Prepared:
        """One step: ``fn(*inputs)``, built by the backend, with the backend's notes."""

    def time(
        self, step: Prepared, iters: int, use_cuda: bool, tick: Callable[[], None], deadline=None
    ) -> tuple[list[float], object, object]:
        """``iters`` timed steps, fewer when ``deadline`` (profiler.collect.timing.Deadline)
        says stop: (milliseconds per step, per-step details, last output)."""

    def figures(self, window: TimedWindow, details: object) -> str:
        """The timed window's figures on the progress line ("p50 1.234 ms")."""

    def check(self, step: Prepared, output: object) -> tuple[dict, object]:
        """The numeric check against the FP32 eager reference, and the output to describe in
        result.json (``output`` is the timed window's last)."""

    def write(self, run_stage: Path, details: object) -> list[str]:
        """Files of the workload's own written into the run folder; their names."""

    def generation(self, window: TimedWindow, details: object) -> dict | None:
        """The result's ``generation`` block, when the workload generates."""

    def phase_windows(self, details: object, use_cuda: bool) -> dict[str, ProcessWindow]:
        """The timed window's phases as windows of their own figures (a generation's TTFT and
        TPOT, profiler.runs.samples.PHASES), their GPU times measured after it; {} when the
        step has no phases timed apart."""
