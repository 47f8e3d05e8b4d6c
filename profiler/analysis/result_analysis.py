"""ResultAnalysis: what `run` shows of the run it has just written (its RunResult), derived once.

The facade the RUN rows of profiler.report.sections read, as RunAnalysis is summarize's: the
timed window's table (with the window's noise and the memory figures), its tails, a generation's
figures, the numeric check, how the window was timed (the GPU's state and compute), the window's
warnings and spread over processes, the backend's facts and files, and what to run next. Needs
no trace; never imports torch; renders nothing (profiler.report.run_view does).

    >>> run = ResultAnalysis(read_result(Path("runs/pytorch_fp16_bs8")))
    >>> run.window.cv               # the timed window's noise
    >>> run.next_steps              # the commands to run after `run`
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from profiler.analysis.headline import (
    gpu_compute_figures,
    gpu_state_of,
    memory_figures,
    window_noise,
    window_tails,
)
from profiler.analysis.records import GpuComputeFigures, MemoryFigures, TailFigure, WindowNoise
from profiler.runs.gpu_record import GpuState
from profiler.runs.layout import MEMORY_SNAPSHOT, RESULT_FILE
from profiler.runs.result import Generation, Numerics, RunResult


@dataclass(frozen=True)
class ResultTable:
    """The run's one-row table: its result, the noise of its timed window (None: neither
    recorded nor computable from latency.csv) and its memory figures."""

    result: RunResult
    window: WindowNoise | None
    memory: MemoryFigures


@dataclass(frozen=True)
class Tails:
    """The window's p90 and p99 with their intervals, and the window's CV (the figures its
    noise allows)."""

    figures: list[TailFigure]
    cv: float | None


@dataclass(frozen=True)
class GenerationFigures:
    """--workload generate: the generation's timings and the token agreement of its numeric
    check."""

    generation: Generation
    numerics: Numerics | None


@dataclass(frozen=True)
class HowTimed:
    """How the window was timed: the result's phases, iterations and precision, the GPU's state
    around the window (or why not) and its compute figures (None: not measured)."""

    result: RunResult
    gpu_state: GpuState
    gpu_compute: GpuComputeFigures | None


class ResultAnalysis:
    """One RunResult and what is derived from it, each part on first use. ``command``: how the
    user started the program (``infer-profile`` or ``python profile.py``), which the next
    steps are spelled with; ``hints``: whether they are given at all (not with -q);
    ``result_json``: where the result was read from (its latency.csv is looked for beside it
    first), None for the run just written (its folder, as the result names it)."""

    def __init__(
        self,
        result: RunResult,
        command: str = "python profile.py",
        hints: bool = True,
        result_json: Path | None = None,
    ) -> None:
        self.result = result
        self.command = command
        self.hints = hints
        self.result_json = result_json

    @cached_property
    def window(self) -> WindowNoise | None:
        """The timed window's noise: as recorded, else from its latency.csv; None without."""
        return window_noise(self.result, self.result_json)

    @cached_property
    def table(self) -> ResultTable:
        return ResultTable(self.result, self.window, memory_figures(self.result))

    @cached_property
    def tails(self) -> Tails | None:
        """The window's tails from its latency.csv (beside result.json, else where it names
        it); None when the file is not there."""
        found = window_tails(self.result, self.result_json or self.result.run_dir / RESULT_FILE)
        return Tails(found, self.window.cv if self.window else None) if found else None

    @property
    def generation(self) -> GenerationFigures | None:
        generation = self.result.generation
        return None if generation is None else GenerationFigures(generation, self.result.numerics)

    @cached_property
    def how_timed(self) -> HowTimed:
        return HowTimed(self.result, gpu_state_of(self.result), gpu_compute_figures(self.result))

    @cached_property
    def next_steps(self) -> list[str] | None:
        """What to run after `run`, spelled with ``command``; None without ``hints``."""
        return next_steps(self.result, self.command) if self.hints else None


def next_steps(result: RunResult, command: str = "python profile.py") -> list[str]:
    """What to run after `run`: the summary, a layer view for TensorRT, a comparison, each
    spelled with ``command``."""
    run_dir = result.run_dir
    hints = [f"{command} summarize {run_dir}   (timed headline, kernels, step time)"]
    if result.backend.family == "tensorrt":
        hints.append(f"{command} summarize {run_dir} --view layers   (TensorRT layers)")
    if MEMORY_SNAPSHOT in result.backend.artifacts:  # run --memory-history on a GPU
        hints.append(
            f"{command} summarize {run_dir} --view snapshot   (the stacks live at the memory "
            f"peak; {MEMORY_SNAPSHOT} opens at https://pytorch.org/memory_viz)"
        )
    # a backend that runs where this one ran (TensorRT needs a GPU; TorchScript runs anywhere)
    pair = (
        ("ttrt_fp16", "pytorch_fp32")
        if result.environment.gpu
        else ("torchscript_fp32", "pytorch_fp32")
    )
    other = pair[0] if result.backend.name != pair[0] else pair[1]
    # this run's folder name with the other backend (the same batch size, model and --name)
    if run_dir.name.startswith(result.backend.name):
        twin = run_dir.parent / (other + run_dir.name.removeprefix(result.backend.name))
        hints.append(
            f"{command} compare {run_dir} {twin}"
            + ("" if twin.is_dir() else f"   (after running --backend {other})")
        )
    return hints
