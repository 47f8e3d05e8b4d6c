"""TARGET -> trace file, and trace file -> every table, as plain data."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import UserError
from .kernels import KernelSummary, kernel_rows, kernel_summary
from .load import Trace, load_trace
from .overview import Overview, overview
from .phases import PhaseSummary, has_phase_spans, phase_summary
from .rules import RunContext

TRACE_PATTERNS = ("*.pt.trace.json", "*.pt.trace.json.gz")
LOOSE_PATTERNS = ("*.json", "*.json.gz")


@dataclass
class Target:
    path: Path
    note: str | None = None  # e.g. which of several traces was picked
    result_json: Path | None = None  # the run's result.json, when the target is a run folder
    context: RunContext | None = None  # what that result.json says about the run's arithmetic

    def summary(self) -> "Summary":
        """The trace summarized with the run's context (what every view should show)."""
        return summarize(self.path, self.context)


def resolve_target(target: str, root: Path | None = None) -> Target:
    """A trace file; a run folder (runs/<run>/ with result.json naming its traces); a folder of
    traces; or a run name looked up as runs/<name> then tb_logs/<name> (also a sweep's cell,
    <sweep>/<backend>_bs<N>)."""
    root = Path.cwd() if root is None else root
    path = Path(target).expanduser()
    if not path.exists() and not path.is_absolute() and ".." not in Path(target).parts:
        for base in ("runs", "tb_logs"):
            if (root / base / target).exists():
                path = root / base / target
                break
    if not path.exists():
        raise UserError(f"no such file, folder or run: {target} (looked in runs/ and tb_logs/ "
                        "too)")
    if path.is_file():
        return Target(path)
    candidates = _traces_named_by_result(path, root) or _traces_in_folder(path)
    if not candidates:
        raise UserError(f"no trace files in {path}: expected *.pt.trace.json[.gz] or a "
                        "result.json naming them")
    result = path / "result.json" if (path / "result.json").is_file() else None
    context = run_context(result) if result else None
    if len(candidates) == 1:
        return Target(candidates[0], result_json=result, context=context)
    newest = max(candidates, key=lambda p: p.stat().st_mtime)
    return Target(newest, note=f"{len(candidates)} traces in {path}; using the newest, "
                               f"{newest.name}", result_json=result, context=context)


def run_context(result_path: Path) -> RunContext | None:
    """The backend precision and TF32 switch a run recorded, if ``result_path`` is one."""
    try:
        data = json.loads(result_path.read_text())
        precision = data["backend"]["precision"]
        tf32 = data.get("precision", {}).get("tf32")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return RunContext(precision=precision, tf32=tf32,
                      source=f"{data['backend'].get('name', '?')} run, {result_path.name}")


def _traces_named_by_result(folder: Path, root: Path) -> list[Path]:
    result = folder / "result.json"
    if not result.is_file():
        return []
    try:
        data = json.loads(result.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"{result} is not readable JSON ({error})") from None
    trace = data.get("trace") if isinstance(data, dict) else None
    files = trace.get("files") if isinstance(trace, dict) else None
    if not files:
        return []
    found = []
    for name in files:
        p = Path(name)
        # relative names are relative to where `run` was started: usually the folder that holds
        # runs/, so try the run folder's ancestors too (runs/<run>/, runs/<sweep>/<run>/)
        bases = [root, Path.cwd(), folder, *list(folder.resolve().parents)[:4]]
        for candidate in ([p] if p.is_absolute() else [base / p for base in bases]):
            if candidate.is_file():
                found.append(candidate)
                break
    if not found:
        raise UserError(f"{result} names trace files that do not exist: {', '.join(files)}")
    return found


def _traces_in_folder(folder: Path) -> list[Path]:
    for patterns in (TRACE_PATTERNS, LOOSE_PATTERNS):
        found = sorted({p for pattern in patterns for p in folder.rglob(pattern)
                        if p.is_file() and p.name != "result.json"})
        if found:
            return found
    return []


@dataclass
class Summary:
    trace_path: Path
    schema: str
    devices: list[dict]
    event_counts: dict[str, int]
    kernels: KernelSummary
    overview: Overview
    notes: list[str] = field(default_factory=list)
    #: per-phase split when the trace holds generation phase spans (trace/phases.py), else None
    phases: PhaseSummary | None = None

    def to_dict(self, top: int = 0) -> dict:
        k, o = self.kernels, self.overview
        return _clean({
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
                "devices": [asdict(d) for d in o.devices],
                "per_step": _records(o.steps),
            },
            "categories": _records(k.categories),
            "kernels": _records(k.table if not top else k.table.head(top)),
            "operators": _records(o.operators if not top else o.operators.head(top)),
            "notes": self.notes,
            **({"phases": self.phases.to_dict()} if self.phases is not None else {}),
        })


def summarize_trace(trace: Trace, context: RunContext | None = None) -> Summary:
    rows = kernel_rows(trace)
    kernels = kernel_summary(trace, rows, context)
    category_of = dict(zip(kernels.table["name"], kernels.table["category"]))
    categories = pd.Series(trace.names[rows["name_id"].to_numpy()]).map(category_of) \
        if len(rows) else pd.Series([], dtype=object)
    ov = overview(trace, rows, categories.to_numpy())
    counts = {kind: int(n) for kind, n in zip(*np.unique(
        trace.events["kind"].to_numpy(), return_counts=True))}
    from .load import KINDS
    event_counts = {KINDS[k]: n for k, n in counts.items()}
    notes = list(ov.notes) + list(kernels.notes)
    if context is not None:
        notes.append(f"run context: precision {context.precision}, TF32 "
                     f"{'on' if context.tf32 else 'off'} ({context.source}); used only for "
                     "kernels whose names carry no data type")
    devices = [asdict(d) for d in trace.devices.values()]
    phases = phase_summary(trace, context=context) if has_phase_spans(trace) else None
    return Summary(trace_path=trace.path, schema=trace.schema, devices=devices,
                   event_counts=event_counts, kernels=kernels, overview=ov, notes=notes,
                   phases=phases)


def summarize(path: Path | str, context: RunContext | None = None) -> Summary:
    return summarize_trace(load_trace(path), context)


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records") if len(frame) else []


def _clean(value):
    """JSON-safe: numpy scalars to Python, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
