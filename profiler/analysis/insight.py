"""One run's roofline and advice, gathered from what the caller found for it: result.json's JSON
object, the trace summary, ncu.csv, the TensorRT layer files in the run folder and, for a sweep
cell, the sweep's benchmark.csv. Never imports torch; resolving a target (profiler.runs.result) and
where the peaks cache lives are the caller's business."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from profiler.analysis.advice import Advice, Evidence, advise, read_trt_layers
from profiler.analysis.roofline import (Roofline, ceilings_for, load_peaks, no_roofline_reason,
                                        result_roofline)
from profiler.trace.summary import Summary


@dataclass
class Insight:
    roofline: Roofline | None
    advice: list[Advice]
    ceilings_source: str
    #: why there is no roofline, one line (None when there is one)
    roofline_missing: str | None = None


def sweep_table(run_folder: Path) -> pd.DataFrame | None:
    """The benchmark.csv of the sweep a run folder belongs to (runs/<sweep>/<cell>/)."""
    csv = run_folder.parent / "benchmark.csv"
    if not csv.is_file():
        return None
    try:
        return pd.read_csv(csv)
    except (OSError, ValueError, pd.errors.ParserError):
        return None


def evidence(summary: Summary, result: dict | None, run_folder: Path | None,
             roofline: Roofline | None, ncu: pd.DataFrame | None = None,
             sweep: pd.DataFrame | None = None) -> Evidence:
    result = result or {}
    backend = result.get("backend") or {}
    gpu = ((result.get("environment") or {}).get("gpu") or {})
    steps = summary.overview.steps
    k = summary.kernels
    device = summary.devices[0] if summary.devices else {}
    cc = gpu.get("compute_capability") or (
        f"{device['compute_major']}.{device['compute_minor']}"
        if device.get("compute_major") is not None else None)
    return Evidence(
        backend=backend.get("name", ""), precision=backend.get("precision", ""),
        batch_size=result.get("batch_size"), gpu_name=gpu.get("name") or device.get("name", ""),
        compute_capability=cc, p50_ms=(result.get("timing") or {}).get("p50_ms"),
        step_us=float(steps["step_us"].mean()) if len(steps) else None,
        gpu_busy_us=float(steps["gpu_busy_us"].mean()) if len(steps) else None,
        kernels_per_step=float(steps["kernels"].mean()) if len(steps) else None,
        kernel_us=k.total_kernel_us, gemm_conv_us=k.matrix_us,
        gemm_conv_tensor_core_us=k.matrix_tensor_core_us, ncu=ncu,
        trt_layers=read_trt_layers(run_folder) if run_folder else None,
        roofline=roofline, sweep=sweep)


def with_flops(result: dict, flops_table: dict | None) -> dict:
    """``result`` with ``roofline_inputs`` taken from a table written by
    scripts/roofline_inputs.py (keys ``<precision>_bs<N>``) when the run did not record them."""
    if result.get("roofline_inputs") or not flops_table:
        return result
    key = f"{(result.get('backend') or {}).get('precision')}_bs{result.get('batch_size')}"
    found = flops_table.get("roofline_inputs", {}).get(key)
    if found is None or flops_table.get("model") != result.get("model"):
        return result
    return {**result, "roofline_inputs": {**found, "from": "--flops table"}}


def ncu_join(summary: Summary, ncu_csv: Path) -> pd.DataFrame:
    """The kernel table joined with an ncu.csv's measurements."""
    from profiler.trace.hardware import hardware_join, read_ncu_csv

    return hardware_join(summary.kernels.table, read_ncu_csv(ncu_csv))


def insight(result: dict | None, run_folder: Path | None, summary: Summary,
            peaks_dir: Path | None = None, ncu: pd.DataFrame | None = None,
            flops_table: dict | None = None) -> Insight:
    """Roofline and advice of one run. ``result``: its result.json as a JSON object (None for a
    bare trace); ``peaks_dir``: where measured peaks are cached (None: datasheet only);
    ``ncu``: the kernel table joined with ncu.csv (ncu_join), when there is one."""
    if result is not None:
        result = with_flops(result, flops_table)
    roofline, source = None, "no result.json"
    if result is not None:
        gpu = ((result.get("environment") or {}).get("gpu") or {}).get("name") or ""
        found = load_peaks(peaks_dir, gpu) if peaks_dir is not None else None
        ceilings = ceilings_for(result, found[0] if found else None,
                                str(found[1]) if found else "")
        roofline = result_roofline(result, ceilings)
        source = ceilings.source if ceilings else "no ceilings for this GPU"
    sweep = sweep_table(run_folder) if run_folder else None
    ev = evidence(summary, result, run_folder, roofline, ncu, sweep)
    missing = no_roofline_reason(result, flops_table) if roofline is None else None
    return Insight(roofline=roofline, advice=advise(ev), ceilings_source=source,
                   roofline_missing=missing)
