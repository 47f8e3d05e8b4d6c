"""Where the kernels go, phase by phase: pure functions of a parsed Trace.

A phase is a ``record_function`` span on a CPU thread with a known name (the generation loop's
``encode``, ``decode``, ``project``, ``prefill``; any names can be asked for). A kernel belongs to
the phase span in which the CPU call that launched it (``cudaLaunchKernel`` / ``cuLaunchKernelEx``,
linked through the correlation id) started: the GPU may run it later, but that span asked for
it. Kernels without a launch record, or launched outside every phase span, are "(no phase)".

Per phase: spans, CPU wall time of the spans, kernel time, launches, Tensor Core share (the kernel
rules, as in ``summarize``), and GPU idle: for each span, its GPU window runs from the span's
start to the later of its end and its last kernel's end; idle is the part of that window with no
kernel of any phase running. Per position: the n-th span of a phase inside one profiler step
(one generation) is position n, so the decode table shows how a step's time grows with the
target length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.intervals import covered_per_window, merge
from profiler.trace.kernels import SUMMARY_COLUMNS, KernelSummary, kernel_rows, kernel_summary
from profiler.trace.load import KIND, Trace
from profiler.trace.rules import RunContext
from profiler.trace.steps import cpu_steps

GENERATION_PHASES = ("encode", "decode", "project", "prefill")
NO_PHASE = "(no phase)"

PHASE_COLUMNS = (
    "phase",
    "spans",
    "wall_us",
    "kernel_us",
    "kernel_share_pct",
    "launches",
    "gpu_window_us",
    "gpu_idle_us",
    "gpu_idle_pct",
    "tensor_core_pct",
)
POSITION_COLUMNS = ("phase", "position", "spans", "mean_wall_us", "mean_kernel_us", "mean_launches")


@dataclass
class PhaseSummary:
    #: one row per phase (and one for kernels outside every phase span); PHASE_COLUMNS
    phases: pd.DataFrame
    #: one row per (phase, position inside a generation); POSITION_COLUMNS
    positions: pd.DataFrame
    #: whether the trace holds GPU kernels at all (a CPU trace has spans and no kernels)
    has_kernels: bool
    #: each phase's kernel table, category table and Tensor Core shares (as ``summarize``
    #: gives the whole trace's), for the phases whose spans launched kernels
    kernels: dict[str, KernelSummary] = field(default_factory=dict)

    def to_dict(self, top: int = 0) -> dict[str, Any]:
        found: dict[str, Any] = {
            "phases": _records(self.phases),
            "positions": _records(self.positions),
            "has_kernels": self.has_kernels,
        }
        if self.kernels:
            found["kernels"] = {
                phase: {
                    "kernel_us": k.total_kernel_us,
                    "tensor_core_share_pct": 100 * k.tensor_core_share,
                    "categories": _records(k.categories),
                    "kernels": _records(k.table.head(top) if top else k.table),
                }
                for phase, k in self.kernels.items()
            }
        return found


def has_phase_spans(trace: Trace, names: Sequence[str] = GENERATION_PHASES) -> bool:
    """Whether any CPU-side annotation carries one of ``names``."""
    wanted = np.flatnonzero(np.isin(trace.names, list(names)))
    ev = trace.events
    return bool(len(wanted)) and bool(
        ((ev["kind"] == KIND["annotation"]) & ev["name_id"].isin(wanted)).any()
    )


def phase_spans(trace: Trace, names: Sequence[str] = GENERATION_PHASES) -> pd.DataFrame:
    """CPU-side spans named in ``names``: phase, start, end, step (the ProfilerStep#N holding
    it, or "") and position (its ordinal among same-named spans of that step)."""
    ev = trace.events
    wanted = np.flatnonzero(np.isin(trace.names, list(names)))
    spans = ev.loc[
        (ev["kind"] == KIND["annotation"]) & ev["name_id"].isin(wanted), ["name_id", "ts", "dur"]
    ]
    frame = pd.DataFrame(
        {
            "phase": trace.names[spans["name_id"].to_numpy()],
            "start": spans["ts"].to_numpy(dtype=float),
            "end": (spans["ts"] + spans["dur"]).to_numpy(dtype=float),
        }
    )
    frame = frame.sort_values("start", kind="stable").reset_index(drop=True)
    steps = cpu_steps(trace)
    step: npt.NDArray[np.object_] = np.full(len(frame), "", dtype=object)
    if len(steps) and len(frame):
        index = (
            np.searchsorted(steps["cpu_start"].to_numpy(), frame["start"].to_numpy(), side="right")
            - 1
        )
        inside = (index >= 0) & (
            frame["start"].to_numpy() <= steps["cpu_end"].to_numpy()[np.clip(index, 0, None)]
        )
        step = np.where(inside, steps["step"].to_numpy()[np.clip(index, 0, None)], "")
    frame["step"] = step
    frame["position"] = frame.groupby(["step", "phase"]).cumcount()
    return frame


def launch_times(trace: Trace, rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Start of the CPU launch call of each kernel row (NaN without one)."""
    ev = trace.events
    launch = ev.loc[
        ev["kind"].isin([KIND["runtime"], KIND["driver"]]) & (ev["correlation"] >= 0),
        ["correlation", "ts"],
    ]
    launch = launch.drop_duplicates("correlation").set_index("correlation")["ts"]
    times: npt.NDArray[np.float64] = rows["correlation"].map(launch).to_numpy(dtype=float)
    return times


def attribute(spans: pd.DataFrame, launch_ts: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Index of the innermost span holding each launch time, or -1. Spans of different phases do
    not nest in the generation loop; where they do, the latest-starting one holds the launch."""
    owner = np.full(len(launch_ts), -1, dtype=np.int64)
    if not len(spans):
        return owner
    starts, ends = spans["start"].to_numpy(), spans["end"].to_numpy()
    index = np.searchsorted(starts, launch_ts, side="right") - 1
    ok = (index >= 0) & ~np.isnan(launch_ts)
    ok[ok] = launch_ts[ok] <= ends[index[ok]]
    owner[ok] = index[ok]
    return owner


def phase_summary(
    trace: Trace,
    names: Sequence[str] = GENERATION_PHASES,
    context: RunContext | None = None,
    rows: pd.DataFrame | None = None,
) -> PhaseSummary:
    """The phase and per-position tables of a trace (see the module docstring); ``rows``:
    kernel_rows(trace), when the caller has them."""
    spans = phase_spans(trace, names)
    rows = kernel_rows(trace) if rows is None else rows
    owner = attribute(spans, launch_times(trace, rows)) if len(rows) else np.array([], int)
    # (each kernel's span and end beside the rows, not in a copy of them: a phase's rows are
    # taken once, with every column its kernel tables read)
    end = (rows["ts"] + rows["dur"]).to_numpy()
    spans = _with_kernels(spans, rows, owner, end)
    total_kernel = float(rows["dur"].sum())
    found = [n for n in names if (spans["phase"] == n).any()]
    kernels = {}
    table = []
    for phase in found:
        of_phase = _rows_of(rows, np.isin(owner, spans.index[spans["phase"] == phase]))
        if len(of_phase):
            kernels[phase] = kernel_summary(trace, of_phase, context)
        table.append(
            _phase_row(
                phase,
                spans[spans["phase"] == phase],
                of_phase,
                total_kernel,
                kernels.get(phase),
                has_kernels=len(rows) > 0,
            )
        )
        del of_phase
    outside = _rows_of(rows, owner < 0)
    if len(outside):
        table.append(_outside_row(trace, outside, total_kernel, context))
    del outside
    phases = pd.DataFrame(table, columns=list(PHASE_COLUMNS))
    positions = (
        spans.assign(wall_us=spans["end"] - spans["start"])
        .groupby(["phase", "position"], sort=False)
        .agg(
            spans=("start", "size"),
            mean_wall_us=("wall_us", "mean"),
            mean_kernel_us=("kernel_us", "mean"),
            mean_launches=("launches", "mean"),
        )
        .reset_index()
    )
    return PhaseSummary(
        phases=phases,
        positions=positions[list(POSITION_COLUMNS)],
        has_kernels=len(rows) > 0,
        kernels=kernels,
    )


def _rows_of(rows: pd.DataFrame, where: npt.NDArray[np.bool_]) -> pd.DataFrame:
    """The kernel rows where ``where`` holds (the rows themselves when it holds for all), with
    the columns their kernel tables read (kernels.SUMMARY_COLUMNS): a copy of a phase of a long
    generation is most of the rows."""
    if where.all():
        return rows
    at = np.flatnonzero(where)
    return pd.DataFrame(
        {c: rows[c].to_numpy()[at] for c in SUMMARY_COLUMNS}, index=rows.index[at], copy=False
    )


def _with_kernels(
    spans: pd.DataFrame,
    rows: pd.DataFrame,
    owner: npt.NDArray[np.int64],
    end: npt.NDArray[np.float64],
) -> pd.DataFrame:
    """Each span with its kernels' time and launches (``owner``: each kernel row's span, or
    -1; ``end``: its end), the end of its GPU work and how long the GPU was busy in it."""
    inside = np.flatnonzero(owner >= 0)
    span_kernels = (
        pd.DataFrame(
            {
                "span": owner[inside],
                "dur": rows["dur"].to_numpy()[inside],
                "end": end[inside],
            }
        )
        .groupby("span")
        .agg(kernel_us=("dur", "sum"), launches=("dur", "size"), last_end=("end", "max"))
    )
    spans = spans.join(span_kernels)
    spans[["kernel_us", "launches"]] = spans[["kernel_us", "launches"]].fillna(0.0)
    spans["gpu_end"] = np.fmax(spans["end"].to_numpy(), spans["last_end"].to_numpy())
    busy_starts, busy_ends = merge(rows["ts"].to_numpy(dtype=float), end.astype(float))
    # (the same bits as covered() per span, each summing only the intervals that overlap it)
    spans["busy_us"] = covered_per_window(busy_starts, busy_ends, spans["start"], spans["gpu_end"])
    return spans


def _outside_row(
    trace: Trace, outside: pd.DataFrame, total_kernel: float, context: RunContext | None
) -> dict[str, Any]:
    """The phase table's row of the kernels launched outside every phase span."""
    return {
        "phase": NO_PHASE,
        "spans": 0,
        "wall_us": 0.0,
        "kernel_us": float(outside["dur"].sum()),
        "kernel_share_pct": 100.0 * float(outside["dur"].sum()) / total_kernel,
        "launches": len(outside),
        "gpu_window_us": None,
        "gpu_idle_us": None,
        "gpu_idle_pct": None,
        "tensor_core_pct": _tensor_core_pct(trace, outside, context),
    }


def _phase_row(
    phase: str,
    spans: pd.DataFrame,
    rows: pd.DataFrame,
    total_kernel: float,
    kernels: KernelSummary | None,
    has_kernels: bool,
) -> dict[str, Any]:
    kernel_us = float(rows["dur"].sum())
    window = float((spans["gpu_end"] - spans["start"]).sum())
    idle = window - float(spans["busy_us"].sum())
    return {
        "phase": phase,
        "spans": len(spans),
        "wall_us": float((spans["end"] - spans["start"]).sum()),
        "kernel_us": kernel_us,
        "kernel_share_pct": 100.0 * kernel_us / total_kernel if total_kernel else None,
        "launches": len(rows),
        "gpu_window_us": window if has_kernels else None,
        "gpu_idle_us": idle if has_kernels else None,
        "gpu_idle_pct": 100.0 * idle / window if has_kernels and window > 0 else None,
        "tensor_core_pct": 100.0 * kernels.tensor_core_share if kernels is not None else None,
    }


def _tensor_core_pct(trace: Trace, rows: pd.DataFrame, context: RunContext | None) -> float | None:
    if not len(rows):
        return None
    summary = kernel_summary(trace, rows, context)
    return 100.0 * summary.tensor_core_share


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            k: (
                None
                if isinstance(v, float) and np.isnan(v)
                else v.item()
                if isinstance(v, np.generic)
                else v
            )
            for k, v in row.items()
        }
        for row in frame.to_dict("records")
    ]
