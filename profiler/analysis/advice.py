"""Measured advice: rules over a run's numbers, each with the figures it saw.

Rules are data (``RULES``): an id, what to try, where the idea and threshold come from, and a
pure check over ``Evidence`` that returns the figures it saw (numbers, from which the gain it
projects follows) and what a sweep measured for the action, or None when the rule does not fire.
Never imports torch; the figures are worded by profiler.report.advice_view.

Each rule that projects a speedup writes it as ``figures["projected_speedup"]`` and names, in
its ``Projection``, the formula and whether the figure is a **bound** (no change the rule tries
can beat it, derived from what the change cannot alter) or an **estimate** (what the measured
figures suggest, which a change may beat). The formula stands beside each rule below.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import pandas as pd

from profiler.analysis.records import MeasuredAlternative, ProjectionKind
from profiler.analysis.roofline import Roofline, dense_ratio


@dataclass
class Evidence:
    """The numbers the rules read; any of them may be missing (None)."""

    backend: str
    precision: str
    batch_size: int | None = None
    gpu_name: str = ""
    compute_capability: str | None = None
    p50_ms: float | None = None
    step_us: float | None = None  # mean profiled step
    gpu_busy_us: float | None = None  # kernel-covered time per step
    kernels_per_step: float | None = None
    kernel_us: float | None = None  # kernel time per step
    gemm_conv_us: float | None = None
    gemm_conv_tensor_core_us: float | None = None
    #: kernel table joined with ncu (hardware.hardware_join), when ncu.csv exists
    ncu: pd.DataFrame | None = None
    #: TensorRT engine inspector layers (engine_layers_*.json "Layers"), when present
    trt_layers: list[dict[str, Any]] | None = None
    roofline: Roofline | None = None
    #: the sweep's benchmark.csv rows, when the run is a sweep cell
    sweep: pd.DataFrame | None = None
    #: the run ran on the CPU (its own levers: the CPU rules)
    on_cpu: bool = False
    #: this machine's CPU computes BF16 natively (AVX-512 BF16, AMX, Arm's BF16); None: unknown
    cpu_bf16: bool | None = None


@dataclass
class Advice:
    rule: str
    title: str
    action: str
    #: the numbers the rule saw, by name (each rule's own; report.advice_view words them)
    figures: dict[str, Any]
    source: str
    #: what the sweep measured for the action: backend -> its cell at the same batch size
    measured: dict[str, MeasuredAlternative] = field(default_factory=dict)
    #: "bound" or "estimate" (the rule's Projection), None when the rule projects no number
    projection: ProjectionKind | None = None


BOUND: ProjectionKind = "bound"
ESTIMATE: ProjectionKind = "estimate"

#: what a rule's check returns when it fires: the figures it saw and what a sweep measured for
#: the action (Advice.figures and .measured); None when it does not fire
Fired: TypeAlias = tuple[dict[str, Any], dict[str, MeasuredAlternative]] | None


@dataclass(frozen=True)
class Projection:
    """How a rule projects its speedup: ``kind`` BOUND or ESTIMATE, and the formula."""

    kind: ProjectionKind
    formula: str


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    action: str
    source: str
    check: Callable[[Evidence], Fired]
    projection: Projection | None = None


def _sweep_cell(ev: Evidence, backend: str) -> pd.Series | None:
    if ev.sweep is None or ev.batch_size is None:
        return None
    rows = ev.sweep[(ev.sweep["backend"] == backend) & (ev.sweep["bs"] == ev.batch_size)]
    rows = rows[rows.get("status", "ok") == "ok"] if "status" in rows else rows
    return rows.iloc[0] if len(rows) else None


def _measured_alternatives(ev: Evidence, backends: list[str]) -> dict[str, MeasuredAlternative]:
    """p50 of other backends at the same batch size in the sweep, and their speedup over this."""
    here = _sweep_cell(ev, ev.backend)
    base = float(here["p50_ms"]) if here is not None else ev.p50_ms
    found: dict[str, MeasuredAlternative] = {}
    for name in backends:
        cell = _sweep_cell(ev, name)
        if cell is not None and name != ev.backend and base:
            found[name] = MeasuredAlternative(
                p50_ms=round(float(cell["p50_ms"]), 4),
                speedup=round(base / float(cell["p50_ms"]), 2),
            )
    return found


#: GPU idle share of the profiled step above which the run is called launch-bound. Eager
#: PyTorch at small batches leaves the GPU waiting on the host's kernel launches (PyTorch CUDA
#: graphs docs, "CUDA Graphs" note; the TensorBoard plugin uses "GPU utilization low").
IDLE_SHARE = 0.40

#: launch-bound: latency / GPU time, the timed p50 over the kernel time per profiled step (the
#: step with every launch gap removed, the kernels unchanged) = 1 / (1 - idle share). An
#: estimate, not a bound: the backends it tries fuse and replace kernels (TensorRT 7.25x and
#: Inductor max-autotune 5.63x against 5.35x on the H200 fixtures), and kernels replayed in a
#: CUDA graph ran shorter than in the profiled step (6.40x against 6.37x on an H100,
#: docs/gpu/h100/advise).
LAUNCH_BOUND = Projection(
    ESTIMATE, "latency / GPU time: the timed p50 over the kernel time per profiled step"
)


def _launch_bound(ev: Evidence) -> Fired:
    """Idle share of the timed p50 (kernel time per profiled step against the timed latency,
    since the profiler itself slows the host), else of the profiled step."""
    if not ev.step_us or not ev.gpu_busy_us:  # no GPU work (a CPU run): nothing to launch
        return None
    step_ms = ev.p50_ms if ev.p50_ms else ev.step_us / 1e3
    idle = max(0.0, 1.0 - ev.gpu_busy_us / 1e3 / step_ms)
    if idle < IDLE_SHARE:
        return None
    figures = {
        "idle_share": idle,
        "of_timed_p50": bool(ev.p50_ms),
        "step_ms": step_ms,
        "kernel_ms_per_step": ev.gpu_busy_us / 1e3,
        "profiled_idle_share": 1 - ev.gpu_busy_us / ev.step_us,
        "kernels_per_step": ev.kernels_per_step or None,
        "p50_floor_ms": step_ms * (1 - idle),
        "projected_speedup": 1 / max(1e-6, 1 - idle),
    }
    fam = ev.backend.split("_")[-1]
    return figures, _measured_alternatives(ev, [f"ttrt_{fam}", f"inductor_{fam}"])


#: below this share of GEMM/conv kernel time in Tensor Core kernels an FP32 run is on CUDA cores.
TC_SHARE = 0.10

#: fp32-cuda-cores: the GEMM/conv share m of kernel time moved at the datasheet's dense ratio r
#: of the precision tried against FP32 (FP16/BF16: 14.8x on an H100 SXM; --tf32: 7.4x;
#: profiler.analysis.roofline.DATASHEET), the rest unchanged: 1 / ((1 - m) + m / r). An
#: estimate, not a bound: FP32 kernels run below the FP32 peak, so the moved kernels can gain
#: more than the ratio of peaks, and a half-precision backend changes the other kernels too.
PRECISION = Projection(
    ESTIMATE,
    "Amdahl on kernel time: the GEMM/conv share at the datasheet's "
    "dense ratio of the precision tried to FP32",
)


def amdahl(share: float, ratio: float) -> float:
    """The speedup of a whole whose ``share`` runs ``ratio`` times faster."""
    return 1 / ((1 - share) + share / ratio)


def _fp32_on_cuda_cores(ev: Evidence) -> Fired:
    cc = float(ev.compute_capability) if ev.compute_capability else 0.0
    if ev.precision != "fp32" or cc < 7.0 or not ev.gemm_conv_us or not ev.kernel_us:
        return None
    share_tc = (ev.gemm_conv_tensor_core_us or 0.0) / ev.gemm_conv_us
    matrix_share = ev.gemm_conv_us / ev.kernel_us
    if share_tc >= TC_SHARE or matrix_share < 0.2:
        return None
    figures = {
        "matrix_share": matrix_share,
        "tensor_core_share": share_tc,
        "gpu": ev.gpu_name,
        "compute_capability": ev.compute_capability,
    }
    ratios = {k: dense_ratio(ev.gpu_name, k) for k in ("fp16", "tf32")}
    if ratios["fp16"]:
        figures.update(
            dense_ratio_fp16=ratios["fp16"],
            dense_ratio_tf32=ratios["tf32"],
            projected_speedup=amdahl(matrix_share, ratios["fp16"]),
        )
    family = ev.backend.rsplit("_", 1)[0]
    return figures, _measured_alternatives(ev, [f"{family}_fp16", f"{family}_bf16"])


#: achieved occupancy (ncu sm__warps_active) below which a top kernel counts as low. Tensor Core
#: GEMM/conv kernels are left out: Hopper's warpgroup MMA kernels run few, large blocks by
#: design (CUTLASS 3 kernel schedules), so their occupancy says little.
LOW_OCCUPANCY_PCT = 25.0
LOW_OCCUPANCY_SHARE = 0.05


def _low_occupancy(ev: Evidence) -> Fired:
    if ev.ncu is None or "hw_achieved_occupancy_pct" not in ev.ncu:
        return None
    total = ev.ncu["total_us"].sum()
    top = ev.ncu.sort_values("total_us", ascending=False).head(10)
    top = top[top["hw_achieved_occupancy_pct"].notna()]
    designed_low = top["category"].isin(["GEMM", "convolution"]) & (top["tensor_core"] == "yes")
    low = top[~designed_low & (top["hw_achieved_occupancy_pct"] < LOW_OCCUPANCY_PCT)]
    if not len(low) or not total:
        return None
    share = low["total_us"].sum() / total
    if share < LOW_OCCUPANCY_SHARE:
        return None
    worst = low.iloc[0]
    return {
        "low_kernels": len(low),
        "top_kernels": len(top),
        "share": share,
        "below_pct": LOW_OCCUPANCY_PCT,
        "largest": str(worst["name"]),
        "largest_category": worst["category"],
        "largest_occupancy_pct": float(worst["hw_achieved_occupancy_pct"]),
    }, {}


#: throughput growth from one batch size to the next above which the GPU still has headroom.
HEADROOM_GROWTH = 0.10
#: batch-headroom: 1 + the throughput growth of the sweep's last batch step. An estimate: the
#: next step may grow by more or less than the last.
HEADROOM = Projection(ESTIMATE, "1 + the throughput growth of the sweep's last batch step")


def _batch_headroom(ev: Evidence) -> Fired:
    if ev.sweep is None:
        return None
    rows = ev.sweep[(ev.sweep["backend"] == ev.backend)]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    rows = rows.sort_values("bs")
    if len(rows) < 2:
        return None
    last, before = rows.iloc[-1], rows.iloc[-2]
    growth = float(last["throughput_per_s"]) / float(before["throughput_per_s"]) - 1
    if growth < HEADROOM_GROWTH:
        return None
    return {
        "throughput_by_bs": [(int(r.bs), float(r.throughput_per_s)) for r in rows.itertuples()],
        "growth": growth,
        "from_bs": int(before["bs"]),
        "to_bs": int(last["bs"]),
        "projected_speedup": 1 + growth,
    }, {}


def _trt_fp32_layers(ev: Evidence) -> Fired:
    if not ev.trt_layers or ev.precision not in ("fp16", "bf16", "fp8", "int8"):
        return None
    computing = [
        layer for layer in ev.trt_layers if layer.get("LayerType") not in ("signal", "wait")
    ]
    fp32 = [
        layer["Name"]
        for layer in computing
        if any(
            str(o.get("Format/Datatype", "")).startswith("Float") for o in layer.get("Outputs", [])
        )
    ]
    torch_fallback = [
        layer["Name"] for layer in computing if "pytorch" in str(layer.get("LayerType", "")).lower()
    ]
    if not fp32 and not torch_fallback:
        return None
    return {
        "fp32_layers": len(fp32),
        "layers": len(computing),
        "pytorch_layers": len(torch_fallback),
    }, {}


#: below this share of the measured copy bandwidth a memory-bound run is "far from bandwidth".
FAR_FROM_BANDWIDTH = 0.5
#: memory-bound: bytes at the measured bandwidth, the timed p50 over the time the minimum bytes
#: (weights + inputs + outputs) take at the bandwidth ceiling = 100 / % of bandwidth. A bound:
#: a change that keeps the precision moves at least those bytes, at no more than the ceiling
#: (a switch to half precision halves them: its bound is twice, experiments.promise). It
#: assumes the weights are read from device memory each call (a cache that held them all
#: across calls would move fewer bytes).
MEMORY_BOUND = Projection(
    BOUND,
    "bytes at the measured bandwidth: the timed p50 over the "
    "minimum bytes' time at the bandwidth ceiling",
)


def _memory_bound_far(ev: Evidence) -> Fired:
    r = ev.roofline
    if r is None or r.bound != "memory" or r.pct_of_bandwidth is None:
        return None
    if r.pct_of_bandwidth >= 100 * FAR_FROM_BANDWIDTH:
        return None
    if _launch_bound(ev) is not None:  # an idle GPU: launches hold it, not memory
        return None
    return {
        "intensity": r.intensity,
        "ridge": r.ridge,
        "achieved_gbs": r.achieved_gbs,
        "pct_of_bandwidth": r.pct_of_bandwidth,
        "peak_gbs": r.peak_gbs,
        "speedup_bound": 100 / max(r.pct_of_bandwidth, 1e-9),
        "projected_speedup": 100 / max(r.pct_of_bandwidth, 1e-9),
    }, {}


#: where the CPU rules' levers come from
CPU_GUIDE = "PyTorch performance tuning guide, CPU-specific optimizations"


def _cpu_run(ev: Evidence) -> Fired:
    """Any CPU run: the CPU's compilers and layout (its experiments leave out what it runs)."""
    return ({"on_cpu": True}, {}) if ev.on_cpu else None


def _cpu_bf16(ev: Evidence) -> Fired:
    """An FP32 CPU run on a CPU that computes BF16 natively."""
    if not ev.on_cpu or not ev.cpu_bf16 or ev.precision != "fp32":
        return None
    return {"on_cpu": True, "cpu_bf16": True}, {}


RULES: tuple[Rule, ...] = (
    Rule(
        "launch-bound",
        "GPU idle between kernels (launch-bound)",
        "CUDA graphs (torch.compile mode='reduce-overhead', inductor max-autotune) or TensorRT",
        "GPU idle share of the profiled steps from the trace; CUDA graphs remove per-kernel "
        "launch cost (PyTorch docs, torch.cuda.graphs)",
        _launch_bound,
        LAUNCH_BOUND,
    ),
    Rule(
        "fp32-cuda-cores",
        "FP32 GEMM/conv on CUDA cores on a GPU with Tensor Cores",
        "--tf32, or an fp16/bf16 backend (check the numerics column)",
        "time in Tensor Core kernels, of GEMM/conv kernel time (kernel-name rules, "
        "trace/rules.py); Tensor Cores from compute capability 7.0; dense ratios from the "
        "GPU's datasheet (roofline.DATASHEET)",
        _fp32_on_cuda_cores,
        PRECISION,
    ),
    Rule(
        "low-occupancy",
        "Low achieved occupancy on the top kernels",
        "larger batch, or kernels with fewer registers/shared memory per block",
        "ncu sm__warps_active.avg.pct_of_peak_sustained_active (ncu.csv)",
        _low_occupancy,
    ),
    Rule(
        "batch-headroom",
        "Throughput still rising with batch size",
        "a larger --bs if the latency budget allows",
        "the sweep's throughput_per_s across batch sizes (benchmark.csv)",
        _batch_headroom,
        HEADROOM,
    ),
    Rule(
        "trt-fp32-layers",
        "TensorRT layers left in FP32 or run by PyTorch",
        "check the layer view; mark those layers' precision or give them supported ops",
        "TensorRT engine inspector output (engine_layers_*.json)",
        _trt_fp32_layers,
    ),
    Rule(
        "memory-bound",
        "Memory-bound and far from the memory bandwidth",
        "fuse elementwise work (torch.compile / TensorRT), keep data in half precision",
        "roofline: FLOPs (FlopCounterMode) over minimum bytes vs measured ceilings",
        _memory_bound_far,
        MEMORY_BOUND,
    ),
    Rule(
        "cpu-backends",
        "A CPU run: the CPU's compilers and layout",
        "TorchScript (frozen, oneDNN fusion) or Inductor (torch.compile's generated C++/OpenMP "
        "code); channels-last for a conv net",
        CPU_GUIDE + " (TorchScript freezing and fusion, torch.compile, channels_last)",
        _cpu_run,
    ),
    Rule(
        "cpu-bf16",
        "An FP32 CPU run on a CPU with native BF16",
        "a bf16 backend (check the numerics column)",
        CPU_GUIDE + " (BF16 on AVX-512 BF16 and AMX); the CPU's flags (/proc/cpuinfo)",
        _cpu_bf16,
    ),
    Rule(
        "cpu-threads",
        "A CPU run: the thread count",
        "run again with OMP_NUM_THREADS=N (torch's intra-op threads; fewer than the cores "
        "when other work shares the machine) and compare",
        CPU_GUIDE + " (OMP_NUM_THREADS, torch.set_num_threads)",
        _cpu_run,
    ),
)


def advise(ev: Evidence, rules: tuple[Rule, ...] = RULES) -> list[Advice]:
    found = []
    for rule in rules:
        fired = rule.check(ev)
        if fired is not None:
            figures, measured = fired
            kind = (
                rule.projection.kind
                if rule.projection and figures.get("projected_speedup")
                else None
            )
            found.append(
                Advice(
                    rule=rule.id,
                    title=rule.title,
                    action=rule.action,
                    figures=figures,
                    source=rule.source,
                    measured=measured,
                    projection=kind,
                )
            )
    return found


def read_trt_layers(run_folder: Path) -> list[dict[str, Any]] | None:
    """Every layer of the run's engine inspector files, or None when there are none."""
    layers: list[dict[str, Any]] = []
    for path in sorted(Path(run_folder).glob("engine_layers_*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        layers += data.get("Layers", []) if isinstance(data, dict) else []
    return layers or None
