"""A trace file -> every table, as plain data. (Which file a command-line TARGET means is
profiler.runs.result' business: analysis takes paths, never folder conventions.)"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.columns import give_back_memory
from profiler.trace.graphs import GraphSummary, graph_note, graph_summary
from profiler.trace.kernels import KernelSummary, kernel_rows, kernel_summary
from profiler.trace.load import KINDS, Trace, load_trace
from profiler.trace.overview import Overview, overview
from profiler.trace.phase_kernels import PhaseSummary, has_phase_spans, phase_summary
from profiler.trace.rules import RunContext
from profiler.trace.step_kernels import step_kernels, step_warnings


@dataclass
class Summary:
    trace_path: Path
    schema: str
    devices: list[dict[str, Any]]
    event_counts: dict[str, int]
    kernels: KernelSummary
    overview: Overview
    notes: list[str] = field(default_factory=list)
    #: events left out of the figures because their values cannot be real: reason -> count
    excluded_events: dict[str, int] = field(default_factory=dict)
    #: one line saying so (None when nothing was left out); views print it as a warning
    warning: str | None = None
    #: every warning line: that one, and the profiled steps' kernel checks (trace/step_kernels)
    warnings: list[str] = field(default_factory=list)
    #: per-phase split when the trace holds generation phase spans (trace/phase_kernels.py),
    #: else None
    phases: PhaseSummary | None = None
    #: the trace's CUDA graph replays and how much of their kernel time carries an operator
    #: (trace/graphs.py), else None
    graphs: GraphSummary | None = None

    def to_dict(self, top: int = 0) -> dict[str, Any]:
        k, o = self.kernels, self.overview
        data: dict[str, Any] = json_safe(
            {
                "trace": str(self.trace_path),
                "schema": self.schema,
                "devices": self.devices,
                "event_counts": self.event_counts,
                "tensor_cores": {
                    "kernel_time_us": k.total_kernel_us,
                    "tensor_core_us": k.tensor_core_us,
                    "tensor_core_share_pct": 100 * k.tensor_core_share,
                    "unknown_us": k.tensor_core_unknown_us,
                    "gemm_conv_us": k.matrix_us,
                    "gemm_conv_tensor_core_us": k.matrix_tensor_core_us,
                    "tensor_core_share_of_gemm_conv_pct": 100 * k.tensor_core_share_of_matrix,
                },
                "overview": {
                    "steps": len(o.steps),
                    "mean_step_us": o.mean_step_us,
                    "steps_window_us": [o.steps_window[0], o.steps_window[1]],
                    "dropped_tail_steps": o.dropped_tail_steps,
                    "breakdown_mean_us_per_step": o.breakdown_us,
                    "breakdown_definitions": o.definitions,
                    "devices": [asdict(d) for d in o.devices],
                    "per_step": _records(o.steps),
                },
                "categories": _records(k.categories),
                "kernels": _records(k.table if not top else k.table.head(top)),
                "operators": _records(o.operators if not top else o.operators.head(top)),
                "notes": self.notes,
                "warnings": self.warnings,
                "excluded_events": self.excluded_events,
                **({"phases": self.phases.to_dict(top)} if self.phases is not None else {}),
                **({"graphs": self.graphs.to_dict()} if self.graphs is not None else {}),
            }
        )
        return data


def summarize_trace(
    trace: Trace, context: RunContext | None = None, breakdown: str = "tool"
) -> Summary:
    """Every table of a trace; ``breakdown``: whose step-breakdown definitions, "tool" or
    "plugin" (trace.breakdown.BREAKDOWN_DEFINITIONS)."""
    rows = kernel_rows(trace)
    kernels = kernel_summary(trace, rows, context)
    category_of = dict(zip(kernels.table["name"], kernels.table["category"]))
    # (mapped once per name, then looked up per kernel: a Series of every kernel's name is
    # slow to build on a trace of hundreds of thousands of kernels)
    category_of_name = pd.Series(trace.names).map(category_of).to_numpy()
    categories = (
        category_of_name[rows["name_id"].to_numpy()]
        if len(rows)
        else pd.Series([], dtype=object).to_numpy()
    )
    ov = overview(trace, rows, categories, breakdown)
    # (np.unique's counts, in its order, without sorting every event's kind)
    counts: npt.NDArray[np.intp] = np.bincount(
        trace.events["kind"].to_numpy(), minlength=len(KINDS)
    )
    event_counts = {KINDS[k]: int(n) for k, n in enumerate(cast(list[int], counts.tolist())) if n}
    graphs = graph_summary(trace)
    notes = list(ov.notes) + list(kernels.notes) + ([graph_note(graphs)] if graphs else [])
    if context is not None:
        notes.append(
            f"run context: precision {context.precision}, TF32 "
            f"{'on' if context.tf32 else 'off'} ({context.source}); used only for "
            "kernels whose names carry no data type"
        )
    untraced = context.untraced_kernels if context is not None else None
    warnings = (
        [w for w in [trace.excluded_warning] if w]
        + list(ov.warnings)
        + step_warnings(step_kernels(trace, rows, ov.steps), untraced)
    )
    devices = [asdict(d) for d in trace.devices.values()]
    give_back_memory()  # (what the overview freed, before the phases' kernel tables)
    phases = phase_summary(trace, context=context, rows=rows) if has_phase_spans(trace) else None
    return Summary(
        trace_path=trace.path,
        schema=trace.schema,
        devices=devices,
        event_counts=event_counts,
        kernels=kernels,
        overview=ov,
        notes=notes,
        excluded_events=dict(trace.excluded),
        warning=trace.excluded_warning,
        warnings=warnings,
        phases=phases,
        graphs=graphs,
    )


def summarize(
    path: Path | str, context: RunContext | None = None, breakdown: str = "tool"
) -> Summary:
    return summarize_trace(load_trace(path), context, breakdown)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dict(orient="records") if len(frame) else []


def json_safe(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN to None."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
