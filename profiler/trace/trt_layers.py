"""TensorRT layers of a run (trtexec --dumpProfile parity) and the profiled kernels attributed to
them. Pure functions over the run's engine_layers_<i>.json (engine inspector, detailed
verbosity) and engine_layer_times_<i>.json (the engine profiler, TREX format), and a parsed
Trace; never imports torch.

Attribution, by launch order checked against tactic names:

1. Engine kernels are the kernel launches whose launching operator is
   ``tensorrt::execute_engine``, ordered by correlation id (launch order; TensorRT enqueues its
   layers in engine order, across its auxiliary streams too, so launch order is layer order
   where start times on different streams are not).
2. Each layer launches one kernel, except ``signal`` and ``wait`` layers (events between the
   engine's streams), which launch none. The engine kernels are cut into calls of that many
   kernels and matched position by position.
3. The order is accepted only when the count divides evenly and, in every call, each layer whose
   TacticName is a kernel name (Myelin ``__myl_*`` kgen kernels) meets a kernel of exactly that
   name. Otherwise only those name matches are attributed, and the rest is listed as not
   attributed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.kernels import kernel_rows
from profiler.trace.load import Trace

NO_KERNEL_TYPES = ("signal", "wait")
ENGINE_OPERATOR = "execute_engine"
MIN_COVERAGE = 0.90
#: the columns of a layer table that the layers view shows and exports
LAYER_COLUMNS = [
    "layer",
    "type",
    "precision",
    "tactic",
    "ms_per_call",
    "share_pct",
    "kernel",
    "profiled_us_per_call",
]


def _precision(layer: dict[str, Any]) -> str:
    ports = layer.get("Outputs") or layer.get("Inputs") or []
    return ", ".join(sorted({str(p.get("Format/Datatype", "")) for p in ports})) or "-"


def read_layers(layers_path: Path, times_path: Path | None) -> pd.DataFrame:
    """One row per layer in engine order: layer, type, precision, tactic, and from the engine
    profiler the time per call (ms), the total over its iterations (ms) and the share (%)."""
    data = json.loads(Path(layers_path).read_text())
    layers = data["Layers"] if isinstance(data, dict) else data
    frame = pd.DataFrame(
        {
            "layer": [str(layer.get("Name", "")) for layer in layers],
            "type": [str(layer.get("LayerType", "")) for layer in layers],
            "precision": [_precision(layer) for layer in layers],
            "tactic": [str(layer.get("TacticName", "")) for layer in layers],
            "stream": [layer.get("StreamId", 0) for layer in layers],
        }
    )
    if times_path is not None:
        times = pd.DataFrame(json.loads(Path(times_path).read_text()))
        times = times.rename(
            columns={
                "name": "layer",
                "averageMs": "ms_per_call",
                "timeMs": "total_ms",
                "percentage": "share_pct",
            }
        )
        frame = frame.merge(
            times[["layer", "ms_per_call", "total_ms", "share_pct"]], on="layer", how="left"
        )
    return frame


@dataclass
class Attribution:
    """Profiled kernels matched to layers; ``layers`` gains kernel, profiled_us_per_call."""

    layers: pd.DataFrame
    method: str
    engine_kernel_us: float
    attributed_us: float
    calls: int
    not_attributed: pd.DataFrame  # kernel, calls, total_us
    outside_engine: pd.DataFrame  # kernels not launched by execute_engine
    notes: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.attributed_us / self.engine_kernel_us if self.engine_kernel_us else 0.0


def engine_kernels(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(engine kernels in launch order, other kernels): name, dur_us, correlation."""
    rows = kernel_rows(trace)
    names = trace.names[rows["name_id"].to_numpy()]
    ops = np.where(
        rows["operator_id"].to_numpy() >= 0,
        trace.names[np.maximum(rows["operator_id"].to_numpy(), 0)],
        "",
    )
    frame = pd.DataFrame(
        {
            "kernel": names,
            "dur_us": rows["dur"].to_numpy(dtype=float),
            "correlation": rows["correlation"].to_numpy(),
            "operator": ops,
        }
    )
    in_engine = frame["operator"].str.contains(ENGINE_OPERATOR, regex=False)
    engine = frame[in_engine].sort_values("correlation", kind="stable").reset_index(drop=True)
    return engine, frame[~in_engine].reset_index(drop=True)


def attribute(layers: pd.DataFrame, trace: Trace) -> Attribution:
    """Match the profiled engine kernels to layers (the rule is in the module doc)."""
    engine, outside = engine_kernels(trace)
    launching = layers[~layers["type"].isin(NO_KERNEL_TYPES)]
    per_call = len(launching)
    calls = len(engine) // per_call if per_call else 0
    assigned: npt.NDArray[np.integer[Any]] = np.full(len(engine), -1)
    method = "launch order, checked against tactic names"
    if (
        per_call
        and calls
        and len(engine) == calls * per_call
        and _order_holds(engine["kernel"].to_numpy(), launching, calls)
    ):
        assigned = np.tile(launching.index.to_numpy(), calls)
    else:
        method = "tactic names only (launch order did not line up with the layers)"
        by_tactic = {t: i for i, t in zip(launching.index, launching["tactic"]) if _is_kernel(t)}
        assigned = engine["kernel"].map(by_tactic).fillna(-1).astype(int).to_numpy()
        calls = max(calls, 1)
    engine = engine.assign(layer_index=assigned)
    matched = engine[engine["layer_index"] >= 0]
    per_layer = matched.groupby("layer_index").agg(
        kernel=("kernel", "first"), profiled_us=("dur_us", "sum")
    )
    table = layers.join(per_layer)
    table["profiled_us_per_call"] = table["profiled_us"] / calls
    table = table.drop(columns=["profiled_us"])
    missed = engine[engine["layer_index"] < 0]
    return Attribution(
        layers=table,
        method=method,
        engine_kernel_us=float(engine["dur_us"].sum()),
        attributed_us=float(matched["dur_us"].sum()),
        calls=calls,
        not_attributed=_by_kernel(missed),
        outside_engine=_by_kernel(outside),
    )


def _is_kernel(tactic: str) -> bool:
    return tactic.startswith("__myl_")


def _order_holds(kernels: npt.NDArray[np.object_], launching: pd.DataFrame, calls: int) -> bool:
    tactics = launching["tactic"].to_numpy()
    expected = [(pos, t) for pos, t in enumerate(tactics) if _is_kernel(t)]
    per_call = len(tactics)
    return all(kernels[c * per_call + pos] == t for c in range(calls) for pos, t in expected)


def _by_kernel(frame: pd.DataFrame) -> pd.DataFrame:
    if not len(frame):
        return pd.DataFrame({"kernel": [], "calls": [], "total_us": []}).astype(
            {"calls": int, "total_us": float}
        )
    grouped = frame.groupby("kernel").agg(calls=("dur_us", "size"), total_us=("dur_us", "sum"))
    return grouped.sort_values("total_us", ascending=False).reset_index()
