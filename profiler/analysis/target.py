"""What the run's result says about its arithmetic, and a target's trace summarized with it."""

from __future__ import annotations

from pathlib import Path

from profiler.runs.layout import RESULT_FILE
from profiler.runs.result import RunResult
from profiler.runs.targets import Target
from profiler.trace.rules import RunContext
from profiler.trace.summary import Summary, summarize


def run_context(result: RunResult, source: Path | None = None) -> RunContext:
    name = source.name if source is not None else RESULT_FILE
    return RunContext(precision=result.backend.precision,
                      tf32=result.precision.tf32 if result.precision else None,
                      source=f"{result.backend.name} run, {name}",
                      untraced_kernels=result.trace.untraced_kernels)


def target_context(target: Target) -> RunContext | None:
    """The run context of a resolved target (None for a bare trace)."""
    return run_context(target.result, target.result_json) if target.result else None


def summarize_target(target: Target, breakdown: str = "tool") -> Summary:
    """The target's trace summarized with the run's context (what every view should show);
    ``breakdown``: whose step-breakdown definitions (trace.overview.BREAKDOWN_DEFINITIONS)."""
    return summarize(target.path, target_context(target), breakdown)
