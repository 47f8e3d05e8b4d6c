"""Per GPU, over the steps' window: GPU utilization, estimated SM efficiency, achieved and
theoretical occupancy, idle gaps; and the plugin's GPU-utilization counter track.

As the PyTorch profiler TensorBoard plugin defines them (its docs/gpu_utilization.md and
gpu_metrics_parser.py), implemented independently here, and equal to the plugin's figures on its
sample traces:

- GPU utilization = time with at least one kernel running, inside the steps / steps time;
- est. SM efficiency = sum over time of min(sum of concurrent kernels' blocks per SM, 1),
  inside the steps / steps time;
- est. achieved occupancy = kernel-time-weighted mean of Kineto's ``est. achieved occupancy %``
  over the kernels inside the steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.intervals import covered, merge
from profiler.trace.load import KIND, Trace


@dataclass
class DeviceMetrics:
    device: int
    name: str
    gpu_utilization_pct: float
    est_sm_efficiency_pct: float | None
    est_achieved_occupancy_pct: float | None  # Kineto's per-kernel estimate, time-weighted
    theoretical_occupancy_pct: float | None  # ours, time-weighted over the same kernels
    busy_us: float
    idle_gaps: int
    idle_total_us: float
    idle_largest_us: float
    idle_median_us: float


def _device_of(rows: pd.DataFrame | _Columns, trace: Trace) -> npt.NDArray[np.signedinteger[Any]]:
    dev: npt.NDArray[np.signedinteger[Any]] = np.asarray(rows["device"])
    if (dev < 0).any():  # old traces without args.device: the pid is the device
        pids = np.array([trace.threads[t][0] for t in np.asarray(rows["thread"])], dtype=object)
        fallback = np.array([p if isinstance(p, int) else -1 for p in pids], dtype=np.int64)
        dev = np.where(dev >= 0, dev, fallback)
    return dev


def sm_efficiency_ranges(
    starts: npt.NDArray[np.float64],
    ends: npt.NDArray[np.float64],
    blocks_per_sm: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Step function of min(sum of concurrent blocks per SM, 1): (seg_start, seg_end, value)."""
    valid = blocks_per_sm > 0
    s, e, v = starts[valid], ends[valid], blocks_per_sm[valid]
    if len(s) == 0:
        return np.array([]), np.array([]), np.array([])
    times = np.concatenate([s, e])
    deltas = np.concatenate([v, -v])
    del s, e, v
    # starts before ends at equal times: every start comes before every end in ``times``, so
    # a stable sort keeps them so (np.lexsort((is_end, times))'s order, without the key)
    order = np.argsort(times, kind="stable")
    times = times[order]
    deltas = deltas[order]
    del order
    level = np.cumsum(deltas, out=deltas)  # (in place: the same running sum)
    seg_s, seg_e, val = times[:-1], times[1:], level[:-1]
    keep = (seg_e > seg_s) & (val > 1e-9)
    return seg_s[keep], seg_e[keep], np.minimum(val[keep], 1.0)


def device_metrics(
    trace: Trace, kernels: pd.DataFrame, window: tuple[float, float]
) -> list[DeviceMetrics]:
    lo, hi = window
    span = hi - lo
    out: list[DeviceMetrics] = []
    if kernels.empty or span <= 0:
        return out
    devices = _device_of(kernels, trace)
    # (only the columns used are filtered: a row filter copies every column it is given)
    gpu_rows = np.flatnonzero(
        np.isin(trace.events["kind"].to_numpy(), [KIND["kernel"], KIND["memcpy"], KIND["memset"]])
    )
    gpu_devices = _device_of(_Columns(trace.events, gpu_rows), trace)
    for device in sorted(set(cast(list[int], devices.tolist()))):
        one = devices == device
        k = _Columns(kernels, None if one.all() else one)
        ks, ke = k["ts"], k["ts"] + k["dur"]
        ms, me = merge(ks, ke)
        busy = covered(ms, me, lo, hi)
        del ms, me
        bps = k["blocks_per_sm"].astype(np.float64, copy=False)
        sm_eff = None
        if np.isfinite(bps).any():
            ss, se, sv = sm_efficiency_ranges(ks, ke, np.nan_to_num(bps, nan=0.0))
            if len(ss):
                clip = np.clip(np.minimum(se, hi) - np.maximum(ss, lo), 0, None)
                sm_eff = 100.0 * float((clip * sv).sum()) / span
        clip_k = np.clip(np.minimum(ke, hi) - np.maximum(ks, lo), 0, None)
        occ = k["kineto_occupancy_pct"].astype(np.float64, copy=False)
        has = np.isfinite(occ) & (occ >= 0) & (clip_k > 0)
        est_occ = float((occ[has] * clip_k[has]).sum() / clip_k[has].sum()) if has.any() else None
        theo = k["theoretical_occupancy_pct"].astype(np.float64, copy=False)
        has_t = np.isfinite(theo) & (clip_k > 0)
        theo_occ = (
            float((theo[has_t] * clip_k[has_t]).sum() / clip_k[has_t].sum())
            if has_t.any()
            else None
        )
        gaps = _idle_gaps(_Columns(trace.events, gpu_rows[gpu_devices == device]), lo, hi)
        props = trace.devices.get(int(device))
        out.append(
            DeviceMetrics(
                device=int(device),
                name=props.name if props else "",
                gpu_utilization_pct=100.0 * busy / span,
                est_sm_efficiency_pct=sm_eff,
                est_achieved_occupancy_pct=est_occ,
                theoretical_occupancy_pct=theo_occ,
                busy_us=busy,
                idle_gaps=int(len(gaps)),
                idle_total_us=float(gaps.sum()),
                idle_largest_us=float(gaps.max()) if len(gaps) else 0.0,
                idle_median_us=float(np.median(gaps)) if len(gaps) else 0.0,
            )
        )
    return out


def _idle_gaps(gpu: _Columns, lo: float, hi: float) -> npt.NDArray[np.floating[Any]]:
    """The idle gaps between GPU activity (kernels, copies, memsets) inside [lo, hi]."""
    starts = gpu["ts"]
    gs: npt.NDArray[np.floating[Any]]
    ge: npt.NDArray[np.floating[Any]]
    gs, ge = merge(starts, starts + gpu["dur"])
    del starts
    inside = (ge > lo) & (gs < hi)
    gs, ge = np.clip(gs[inside], lo, hi), np.clip(ge[inside], lo, hi)
    gaps: npt.NDArray[np.floating[Any]] = gs[1:] - ge[:-1] if len(gs) > 1 else np.array([])
    return gaps[gaps > 0]


class _Columns:
    """A frame's columns as arrays, each taken at ``rows`` (a mask, or None: all) when asked:
    a row filter of the frame would copy every column."""

    def __init__(
        self,
        frame: pd.DataFrame,
        rows: npt.NDArray[np.bool_] | npt.NDArray[np.intp] | None = None,
    ) -> None:
        self.frame, self.rows = frame, rows

    def __getitem__(self, column: str) -> npt.NDArray[Any]:
        values: npt.NDArray[Any] = self.frame[column].to_numpy()
        return values if self.rows is None else values[self.rows]


def utilization_timeline(trace: Trace, device: int | None = None) -> list[tuple[float, float]]:
    """The plugin's GPU-utilization counter track: buckets of a power-of-ten µs (at most 100 of
    them over the recorded span, the last one stretched to its end), each with the busy
    fraction; a final (end, 0) point."""
    lo, hi = trace.span
    kernels = trace.events[trace.events["kind"] == KIND["kernel"]]
    if device is not None:
        kernels = kernels[_device_of(kernels, trace) == device]
    ms, me = merge(kernels["ts"].to_numpy(), (kernels["ts"] + kernels["dur"]).to_numpy())
    length = hi - lo
    size = 1
    while length / size > 100:
        size *= 10
    n = int(length / size)
    edges = [lo + i * size for i in range(n)] + [hi]
    points = []
    for i in range(n):
        a, b = edges[i], edges[i + 1]
        points.append((a, covered(ms, me, a, b) / (b - a)))
    points.append((hi, 0.0))
    return points
