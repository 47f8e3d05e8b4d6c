"""One run's roofline and advice, gathered from its folder: result.json, trace summary, ncu.csv,
TensorRT layer files and, for a sweep cell, the sweep's benchmark.csv. Never imports torch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .advice import Advice, Evidence, advise, read_trt_layers
from .roofline import Roofline, ceilings_for, load_peaks, result_roofline
from .summary import Summary, Target


@dataclass
class Insight:
    roofline: Roofline | None
    advice: list[Advice]
    ceilings_source: str


def peaks_folder() -> Path:
    """Where `profile.py peaks` caches its measurements (beside the engine cache)."""
    from ..engine_cache import default_dir

    return default_dir().parent / "peaks"


def read_result(target: Target) -> dict | None:
    if target.result_json is None:
        return None
    try:
        return json.loads(target.result_json.read_text())
    except (OSError, ValueError):
        return None


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


def ncu_join(summary: Summary, run_folder: Path) -> pd.DataFrame | None:
    """The kernel table joined with the run folder's ncu.csv, when there is one."""
    from .hardware import find_ncu_csv, hardware_join, read_ncu_csv

    path = find_ncu_csv(str(run_folder))
    return hardware_join(summary.kernels.table, read_ncu_csv(path)) if path else None


def insight(target: Target, summary: Summary, peaks_dir: Path | None = None,
            ncu: pd.DataFrame | None = None, flops_table: dict | None = None) -> Insight:
    result = read_result(target)
    if result is not None:
        result = with_flops(result, flops_table)
    run_folder = target.result_json.parent if target.result_json else None
    roofline, source = None, "no result.json"
    if result is not None:
        gpu = ((result.get("environment") or {}).get("gpu") or {}).get("name") or ""
        found = load_peaks(peaks_folder() if peaks_dir is None else peaks_dir, gpu)
        ceilings = ceilings_for(result, found[0] if found else None,
                                str(found[1]) if found else "")
        roofline = result_roofline(result, ceilings)
        source = ceilings.source if ceilings else "no ceilings for this GPU"
    if ncu is None and run_folder is not None:
        ncu = ncu_join(summary, run_folder)
    sweep = sweep_table(run_folder) if run_folder else None
    ev = evidence(summary, result, run_folder, roofline, ncu, sweep)
    return Insight(roofline=roofline, advice=advise(ev), ceilings_source=source)
