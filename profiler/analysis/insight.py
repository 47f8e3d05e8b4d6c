"""One run's roofline and advice, gathered from what the caller found for it: its RunResult,
the trace summary, ncu.csv, the TensorRT layer files in the run folder and, for a sweep cell, the
sweep's benchmark.csv. Never imports torch; RunAnalysis (profiler.analysis.run_analysis) finds
them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd

from profiler.analysis.advice import Advice, Evidence, advise, read_trt_layers
from profiler.analysis.roofline import (
    Roofline,
    cached_ceilings,
    no_ceilings,
    no_roofline_reason,
    result_roofline,
)
from profiler.runs.result import RooflineInputs, RunResult
from profiler.trace.hardware import hardware_join, read_ncu_csv
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


def evidence(
    summary: Summary,
    result: RunResult | None,
    run_folder: Path | None,
    roofline: Roofline | None,
    ncu: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
) -> Evidence:
    gpu = (result.environment.gpu or {}) if result is not None else {}
    steps = summary.overview.steps
    k = summary.kernels
    device = summary.devices[0] if summary.devices else {}
    cc = gpu.get("compute_capability") or (
        f"{device['compute_major']}.{device['compute_minor']}"
        if device.get("compute_major") is not None
        else None
    )
    return Evidence(
        backend=result.backend.name if result else "",
        precision=result.backend.precision if result else "",
        batch_size=result.batch_size if result else None,
        gpu_name=gpu.get("name") or device.get("name", ""),
        compute_capability=cc,
        p50_ms=result.timing.p50_ms if result else None,
        step_us=float(steps["step_us"].mean()) if len(steps) else None,
        gpu_busy_us=float(steps["gpu_busy_us"].mean()) if len(steps) else None,
        kernels_per_step=float(steps["kernels"].mean()) if len(steps) else None,
        kernel_us=k.total_kernel_us,
        gemm_conv_us=k.matrix_us,
        gemm_conv_tensor_core_us=k.matrix_tensor_core_us,
        ncu=ncu,
        trt_layers=read_trt_layers(run_folder) if run_folder else None,
        roofline=roofline,
        sweep=sweep,
        on_cpu=result is not None and result.device.startswith("cpu"),
        cpu_bf16=cpu_bf16() if result is not None and result.device.startswith("cpu") else None,
    )


#: the CPU flags of native BF16 arithmetic: x86's AVX-512 BF16 and AMX, Arm's BF16 extension
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether this machine's CPU computes BF16 natively, from its flags (Linux); None where
    they cannot be read."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return bool(BF16_FLAGS & set(value.split()))
    return None


def with_flops(result: RunResult, flops_table: dict[str, Any] | None) -> RunResult:
    """``result`` with ``roofline_inputs`` taken from a table written by
    scripts/roofline_inputs.py (keys ``<precision>_bs<N>``) when the run did not record them."""
    if result.roofline_inputs or not flops_table:
        return result
    key = f"{result.backend.precision}_bs{result.batch_size}"
    found = flops_table.get("roofline_inputs", {}).get(key)
    if found is None or flops_table.get("model") != result.model:
        return result
    inputs = msgspec.convert({**found, "from": "--flops table"}, RooflineInputs)
    return msgspec.structs.replace(result, roofline_inputs=inputs)


def ncu_join(summary: Summary, ncu_csv: Path) -> pd.DataFrame:
    """The kernel table joined with an ncu.csv's measurements."""
    return hardware_join(summary.kernels.table, read_ncu_csv(ncu_csv))


def ceilinged_roofline(
    result: RunResult | None,
    peaks_dir: Path | None = None,
    flops_table: dict[str, Any] | None = None,
) -> tuple[Roofline | None, str]:
    """The roofline of a run (None for a bare trace or without FLOPs) and where its ceilings
    came from. ``peaks_dir``: where measured peaks are cached (None: datasheet only);
    ``flops_table``: roofline inputs for runs that did not record them (with_flops)."""
    if result is None:
        return None, "no result.json"
    result = with_flops(result, flops_table)
    ceilings = cached_ceilings(result, peaks_dir)
    return (result_roofline(result, ceilings), ceilings.source if ceilings else no_ceilings(result))


def insight(
    result: RunResult | None,
    run_folder: Path | None,
    summary: Summary,
    peaks_dir: Path | None = None,
    ncu: pd.DataFrame | None = None,
    flops_table: dict[str, Any] | None = None,
) -> Insight:
    """Roofline and advice of one run. ``result``: its result.json (None for a bare trace);
    ``ncu``: the kernel table joined with ncu.csv (ncu_join), when there is one."""
    roofline, source = ceilinged_roofline(result, peaks_dir, flops_table)
    sweep = sweep_table(run_folder) if run_folder else None
    ev = evidence(summary, result, run_folder, roofline, ncu, sweep)
    missing = no_roofline_reason(result, flops_table) if roofline is None else None
    return Insight(
        roofline=roofline, advice=advise(ev), ceilings_source=source, roofline_missing=missing
    )
