"""RunAnalysis: everything the profiler knows about one run, read once and derived lazily.

The documented Python API (README, "Python API"). A target is what the command line takes: a run
folder, a run name (looked up under runs/ and tb_logs/), a sweep cell (``<sweep>/<cell>``) or a
bare Kineto trace file. The trace is parsed once, on first use; every other property is a
documented delegation to the module that computes it, cached on first use. Parts that need the
run's result.json (result, headline, noise, roofline) are None for a bare trace. Never imports
torch; renders nothing (profiler.report does).

    >>> run = RunAnalysis("runs/pytorch_fp16_bs8")
    >>> run.kernels.head()          # one row per kernel name
    >>> run.categories              # kernel time by category
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.analysis.advice import Advice, advise
from profiler.analysis.difference import explain_runs
from profiler.analysis.headline import compare_timed, headline_data, window_noise
from profiler.analysis.insight import Insight, ceilinged_roofline, evidence, sweep_table
from profiler.analysis.memory_snapshot import MemorySnapshot, memory_snapshot
from profiler.analysis.records import (
    CompareFigures,
    CompareTimed,
    Explanation,
    Headline,
    WindowNoise,
)
from profiler.analysis.roofline import (
    Roofline,
    cached_ceilings,
    gemm_roofline,
    no_roofline_reason,
    phase_rooflines,
)
from profiler.analysis.verdict import TOLERANCE
from profiler.errors import UserError
from profiler.runs.command_targets import Target, resolve_target
from profiler.runs.layout import (
    GRAPH_CAPTURES,
    RESULT_FILE,
    engine_layer_files,
    ncu_csv_of,
    peaks_dir,
)
from profiler.runs.result import RunResult
from profiler.runs.samples import ConfigSamples
from profiler.trace.diff import Diff, diff, tables
from profiler.trace.graphs import GraphCaptures, attach, read_captures
from profiler.trace.hardware import Agreement, agreement_share, hardware_join, read_ncu_csv
from profiler.trace.load import Trace, load_trace
from profiler.trace.memory import memory_view
from profiler.trace.memory_records import MemoryView
from profiler.trace.modules import ModuleView, module_view
from profiler.trace.rules import RunContext
from profiler.trace.summary import Summary, summarize_trace
from profiler.trace.trt_layers import Attribution, attribute, read_layers


def run_context(result: RunResult, source: Path | None = None) -> RunContext:
    """What a run's result says about its arithmetic (precision, TF32), for the kernel rules."""
    name = source.name if source is not None else RESULT_FILE
    return RunContext(
        precision=result.backend.precision,
        tf32=result.precision.tf32 if result.precision else None,
        source=f"{result.backend.name} run, {name}",
        untraced_kernels=result.trace.untraced_kernels,
    )


class RunAnalysis:
    """One run (or bare trace): its summary, result, headline, noise, roofline, advice, ncu
    join and TensorRT layers.

    ``target``: a run folder, run name, sweep cell or trace file (as `summarize` takes it), or
    a resolved profiler.runs.command_targets.Target. ``peaks_dir``: where `profile.py peaks` cached
    measured ceilings (default: its cache; None-like empty folder means datasheet only).
    ``flops_table``: roofline inputs for runs that did not record them (`report --flops`).
    ``ncu``: an ncu.csv to join instead of the one in the run folder.
    ``breakdown``: whose step-breakdown definitions the summary uses, this tool's ("tool") or
    the TensorBoard plugin's ("plugin"); trace.breakdown.BREAKDOWN_DEFINITIONS.
    Raises profiler.errors.UserError when the target does not exist or holds no trace."""

    def __init__(
        self,
        target: str | Path | Target,
        *,
        peaks_dir: Path | None = None,
        flops_table: dict[str, Any] | None = None,
        ncu: Path | None = None,
        breakdown: str = "tool",
    ):
        self.name = str(target.path if isinstance(target, Target) else target)
        self.target = target if isinstance(target, Target) else resolve_target(str(target))
        self._peaks_dir = peaks_dir
        self.flops_table = flops_table
        self._ncu = ncu
        self.breakdown = breakdown

    def __repr__(self) -> str:
        return f"RunAnalysis({self.name!r})"

    # ---- what was found on disk --------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The trace this analysis summarizes (the newest when the run holds several)."""
        return self.target.path

    @property
    def note(self) -> str | None:
        """Which of several traces was picked, when there was a choice."""
        return self.target.note

    @property
    def result(self) -> RunResult | None:
        """The run's result.json (profiler.runs.result.RunResult); None for a bare trace."""
        return self.target.result

    @property
    def result_json(self) -> Path | None:
        return self.target.result_json

    @property
    def run_folder(self) -> Path | None:
        """The folder holding result.json (runs/<run>/); None for a bare trace."""
        return self.result_json.parent if self.result_json is not None else None

    @property
    def peaks_dir(self) -> Path:
        return peaks_dir() if self._peaks_dir is None else self._peaks_dir

    # ---- the trace -------------------------------------------------------------------------

    @cached_property
    def trace(self) -> Trace:
        """The parsed Kineto trace (profiler.trace.load.Trace), parsed once; the kernels of its
        CUDA graph replays attributed to operators where the run recorded its graphs'
        captures (graph_captures.json: profiler.trace.graphs)."""
        trace = load_trace(self.path)
        captures = self.graph_captures
        if captures is not None:
            attach(trace, captures)
        return trace

    @cached_property
    def graph_captures(self) -> GraphCaptures | None:
        """The CUDA graphs the run captured, each node with its operator (the run folder's
        graph_captures.json); None without one."""
        folder = self.run_folder
        path = folder / GRAPH_CAPTURES if folder is not None else None
        return read_captures(path) if path is not None and path.is_file() else None

    @cached_property
    def context(self) -> RunContext | None:
        """The run's precision and TF32 setting as the kernel rules read them."""
        return run_context(self.result, self.result_json) if self.result is not None else None

    @cached_property
    def summary(self) -> Summary:
        """profiler.trace.summary.Summary: kernels, categories, overview, operators, phases."""
        return summarize_trace(self.trace, self.context, self.breakdown)

    @property
    def kernels(self) -> pd.DataFrame:
        """One row per kernel name: name, category, calls, total_us, share_pct, tensor_core ..."""
        return self.summary.kernels.table

    @property
    def categories(self) -> pd.DataFrame:
        """One row per kernel category: kernels, calls, total_us, share_pct, tensor_core_pct."""
        return self.summary.kernels.categories

    @property
    def operators(self) -> pd.DataFrame:
        """One row per CPU operator: calls, CPU times and the kernel time it launched."""
        return self.summary.overview.operators

    @property
    def steps(self) -> pd.DataFrame:
        """One row per profiled step: its span, breakdown, kernels and idle gaps."""
        return self.summary.overview.steps

    # ---- the timed window (result.json) ------------------------------------------------------

    @cached_property
    def headline(self) -> Headline | None:
        """Timed figures, noise, memory and config (profiler.analysis.headline.headline_data)."""
        if self.result is None:
            return None
        overview = self.summary.overview
        steps = overview.steps
        busy = float(steps["gpu_busy_us"].mean()) if len(steps) else None
        return headline_data(self.result, self.result_json, overview.mean_step_us, busy)

    @cached_property
    def noise(self) -> WindowNoise | None:
        """The timed window's noise (profiler.analysis.headline.window_noise)."""
        if self.result is None:
            return None
        return window_noise(self.result, self.result_json)

    # ---- roofline and advice -----------------------------------------------------------------

    @cached_property
    def _roofline(self) -> tuple[Roofline | None, str]:
        return ceilinged_roofline(self.result, self.peaks_dir, self.flops_table)

    @property
    def roofline(self) -> Roofline | None:
        """Achieved rates against the GPU's ceilings (None without result.json's FLOPs)."""
        return self._roofline[0]

    @property
    def ceilings_source(self) -> str:
        """Where the roofline's ceilings came from (measured peaks file or datasheet row)."""
        return self._roofline[1]

    @cached_property
    def phase_rooflines(self) -> list[tuple[str, str, Roofline]]:
        """A generation's prefill and decode step against the GPU's ceilings: (phase, the
        timed figure it is taken at, roofline) (profiler.analysis.roofline.phase_rooflines);
        [] for other runs and bare traces."""
        if self.result is None:
            return []
        return phase_rooflines(self.result, cached_ceilings(self.result, self.peaks_dir))

    @property
    def roofline_missing(self) -> str | None:
        """Why there is no roofline, one line (None when there is one)."""
        return no_roofline_reason(self.result, self.flops_table) if self.roofline is None else None

    @cached_property
    def advice(self) -> list[Advice]:
        """The advice rules that fired (profiler.analysis.advice), each with its evidence."""
        run_ncu = ncu_csv_of(str(self.run_folder)) if self.run_folder else None
        ncu = (
            self.hardware
            if run_ncu is not None and run_ncu == self.ncu_csv
            else (self._join(run_ncu) if run_ncu is not None else None)
        )
        sweep = sweep_table(self.run_folder) if self.run_folder else None
        return advise(
            evidence(self.summary, self.result, self.run_folder, self.roofline, ncu, sweep)
        )

    @property
    def insight(self) -> Insight:
        """Roofline, advice and ceilings source together (what the views print)."""
        return Insight(self.roofline, self.advice, self.ceilings_source, self.roofline_missing)

    def gemms(self) -> pd.DataFrame:
        """Per GEMM/convolution shape (traces recorded with --record-shapes): calls, FLOPs, GPU
        time, TFLOP/s and share of the peak (profiler.analysis.roofline.gemm_roofline)."""
        return gemm_roofline(self.path, self.roofline.peak_tflops if self.roofline else None)

    @cached_property
    def modules(self) -> ModuleView | None:
        """Time per nn.Module as a hierarchy (profiler.trace.modules); None for a trace without
        nn.Module events (recorded without --with-stack)."""
        return module_view(self.trace)

    # ---- Nsight Compute ----------------------------------------------------------------------

    @cached_property
    def ncu_csv(self) -> Path | None:
        """The ncu.csv joined: the one given, else the run's (runs/<run>/ncu.csv[.gz])."""
        return self._ncu if self._ncu is not None else ncu_csv_of(self.name)

    def _join(self, csv: Path) -> pd.DataFrame:
        return hardware_join(self.kernels, read_ncu_csv(csv))

    @cached_property
    def hardware(self) -> pd.DataFrame | None:
        """The kernel table joined with ncu.csv's measurements (profiler.trace.hardware), None
        without ncu.csv."""
        return self._join(self.ncu_csv) if self.ncu_csv is not None else None

    @cached_property
    def agreement(self) -> Agreement | None:
        """How often the kernel-name rules agree with the hardware counters."""
        return agreement_share(self.hardware) if self.hardware is not None else None

    # ---- TensorRT ----------------------------------------------------------------------------

    @cached_property
    def layers(self) -> list[Attribution]:
        """One profiler.trace.trt_layers.Attribution per TensorRT engine of the run (its
        engine_layers_<i>.json with the profiled kernels attributed); [] when there are none."""
        pairs = engine_layer_files(self.run_folder) if self.run_folder is not None else []
        return [attribute(read_layers(layers, times), self.trace) for layers, times in pairs]

    @cached_property
    def layer_times(self) -> pd.DataFrame | None:
        """TensorRT's own per-layer times (engine_layer_times_*.json): name, averageMs,
        percentage, ... one row per layer; None when the run wrote none."""
        if self.run_folder is None:
            return None
        rows = []
        for path in sorted(self.run_folder.glob("engine_layer_times_*.json")):
            try:
                rows += json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        return pd.DataFrame(rows) if rows else None

    @cached_property
    def memory(self) -> MemoryView | None:
        """Memory over time from the trace's [memory] events: each device's curve and peak, the
        operators' table (profiler.trace.memory.memory_view, the TensorBoard plugin's Memory
        view); None for a trace recorded without --profile-memory."""
        return memory_view(self.trace)

    @cached_property
    def memory_snapshot(self) -> MemorySnapshot | None:
        """run --memory-history's snapshot replayed: the peak of allocated memory and the stacks
        live at it (profiler.analysis.memory_snapshot); None for a run recorded without it."""
        return memory_snapshot(self.result, self.run_folder)


def require_layers(run: RunAnalysis) -> list[Attribution]:
    """The run's TensorRT layers, or a UserError saying the target is no TensorRT run."""
    if not run.layers:
        raise UserError(
            f"no engine_layers_*.json in {run.run_folder or 'the target'}: the layers "
            "view needs a TensorRT run folder (a ttrt_* run)"
        )
    return run.layers


@dataclass
class Comparison:
    """Two runs side by side: the trace diff (with the timed window's rows) and the timed
    headline. ``a_label``/``b_label`` name the sides in the tables."""

    a: RunAnalysis
    b: RunAnalysis
    a_label: str
    b_label: str
    #: each side's samples, one window per process, when new ones were taken for this
    #: comparison (compare --processes); None: the ones each run recorded (processes.csv,
    #: latency.csv)
    windows: tuple[ConfigSamples, ConfigSamples] | None = None
    #: the verdicts' equivalence margin (relative: 0.02 for ±2 %)
    tolerance: float = TOLERANCE

    @cached_property
    def diff(self) -> Diff:
        """profiler.trace.diff.Diff of the two summaries; its overview starts with the timed
        p50 and throughput from both result.json files (not from the profiled steps)."""
        found = diff(self.a.summary, self.b.summary, a_label=self.a_label, b_label=self.b_label)
        timed = timed_rows(self.a.result, self.b.result, self.a.noise, self.b.noise)
        if len(timed):
            found.overview = pd.concat([timed, found.overview], ignore_index=True)
        return found

    @cached_property
    def timed(self) -> CompareTimed | None:
        """Both runs' timed figures, speedup, the verdict over processes, memory and differing
        fields (profiler.analysis.headline.compare_timed); None unless both are runs."""
        return compare_timed(
            self.a.result,
            self.b.result,
            self.a.result_json,
            self.b.result_json,
            samples=self.windows,
            tolerance=self.tolerance,
        )

    @cached_property
    def explanation(self) -> Explanation | None:
        """Why B differs from A at the kernel level: the same kernels at another SM clock,
        other kernels (named), the same kernels slower, or host-side
        (profiler.analysis.difference.explain_runs, from both kernel tables and the GPU state of
        both timed windows); None unless both are runs."""
        if self.a.result is None or self.b.result is None:
            return None
        return explain_runs(self.a.result, self.b.result, self.a.kernels, self.b.kernels)

    def figures(self, top: int = 0) -> CompareFigures:
        """What `compare --json` prints (CompareFigures): the timed windows and verdicts, the
        diff's tables as typed rows with the long lists cut to ``top`` rows (0: all), and why B
        differs at the kernel level (nothing to say of two CPU runs)."""
        found = self.diff
        rows = tables(found, top)
        return CompareFigures(
            a=found.a_label,
            b=found.b_label,
            timed=self.timed,
            overview=rows.overview,
            categories=rows.categories,
            kernels=rows.kernels,
            operators=rows.operators,
            cpu_operators=rows.cpu_operators,
            faster_in_b=rows.faster_in_b,
            slower_in_b=rows.slower_in_b,
            notes=rows.notes,
            explanation=None if found.on_cpu else self.explanation,
            totals=rows.totals,
        )


def _window_cv(noise: WindowNoise | None) -> float:
    return float(noise.cv) if noise is not None and noise.cv is not None else float("nan")


def timed_rows(
    ra: RunResult | None,
    rb: RunResult | None,
    noise_a: WindowNoise | None = None,
    noise_b: WindowNoise | None = None,
) -> pd.DataFrame:
    """The timed window's p50 and throughput from both result.json files (not from the trace,
    whose steps ran under the profiler)."""
    if ra is None or rb is None:
        return pd.DataFrame()
    rows = []
    for key, metric, unit in (
        ("p50_ms", "timed p50 latency (result.json)", "ms"),
        ("throughput_samples_per_s", "timed throughput (result.json)", "samples/s"),
    ):
        x, y = getattr(ra.timing, key), getattr(rb.timing, key)
        if x is not None and y is not None:
            rows.append(
                {
                    "metric": metric,
                    "unit": unit,
                    "a": float(x),
                    "b": float(y),
                    "delta": float(y) - float(x),
                    "change_pct": 100.0 * (y - x) / x if x else float("nan"),
                    # the windows' CVs: a view prints each latency to what they allow
                    "cv_a": _window_cv(noise_a),
                    "cv_b": _window_cv(noise_b),
                }
            )
    return pd.DataFrame(rows)
