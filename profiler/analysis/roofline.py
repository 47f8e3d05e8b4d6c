"""Roofline of a run: how close one inference runs to the GPU's measured ceilings.

Pure functions over plain data (result.json's ``timing`` and ``roofline_inputs``, the peaks JSON
written by ``profile.py peaks``, a trace's shaped operators); never imports torch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import msgspec
import numpy as np
import pandas as pd

from profiler.analysis.records import RooflineBound, RooflineFigures, plain
from profiler.runs.result import RunResult
from profiler.trace.load import KIND, Trace, load_trace, read_bytes

#: Dense (no sparsity) datasheet ceilings, TFLOP/s (TOPS for INT8) per matmul data type and
#: memory bandwidth in GB/s: a labelled fallback when `profile.py peaks` has not measured the GPU,
#: and the source of the dense ratios advice projects with (``dense_ratio``). Rows are matched by
#: the first key contained in the GPU's name, most specific first: "NVIDIA H100 NVL" takes the
#: NVL row, "NVIDIA H100 80GB HBM3" the SXM one. NVIDIA quotes the Tensor Core figures with
#: sparsity; the dense ones are half.
DATASHEET: tuple[tuple[str, dict[str, Any]], ...] = (
    # NVIDIA H200 NVL (nvidia.com/en-us/data-center/h200, H200 NVL column): FP32 60, TF32 835,
    # FP16/BF16 1,671, FP8 3,341, INT8 3,341 (sparse, halved here), 4.8 TB/s
    (
        "H200 NVL",
        {
            "fp32": 60.0,
            "tf32": 417.5,
            "fp16": 835.5,
            "bf16": 835.5,
            "fp8": 1670.5,
            "int8": 1670.5,
            "bandwidth_gbs": 4800.0,
            "document": "NVIDIA H200 datasheet, H200 NVL column",
        },
    ),
    # NVIDIA H200 datasheet (SXM): 4.8 TB/s; compute as H100 SXM; sparsity figures halved
    (
        "H200",
        {
            "fp32": 67.0,
            "tf32": 494.7,
            "fp16": 989.4,
            "bf16": 989.4,
            "fp8": 1978.9,
            "int8": 1978.9,
            "bandwidth_gbs": 4800.0,
            "document": "NVIDIA H200 datasheet, H200 SXM column",
        },
    ),
    # NVIDIA H100 NVL (nvidia.com/en-us/data-center/h100, H100 NVL column): FP32 60, TF32 835,
    # FP16/BF16 1,671, FP8 3,341, INT8 3,341 (sparse, halved here), 3.9 TB/s
    (
        "H100 NVL",
        {
            "fp32": 60.0,
            "tf32": 417.5,
            "fp16": 835.5,
            "bf16": 835.5,
            "fp8": 1670.5,
            "int8": 1670.5,
            "bandwidth_gbs": 3900.0,
            "document": "NVIDIA H100 datasheet, H100 NVL column",
        },
    ),
    # NVIDIA H100 Tensor Core GPU datasheet, PCIe column; sparsity figures halved
    (
        "H100 PCIe",
        {
            "fp32": 51.2,
            "tf32": 378.0,
            "fp16": 756.0,
            "bf16": 756.0,
            "fp8": 1513.0,
            "int8": 1513.0,
            "bandwidth_gbs": 2000.0,
            "document": "NVIDIA H100 datasheet, H100 PCIe column",
        },
    ),
    # NVIDIA H100 Tensor Core GPU datasheet, SXM column (H100 80GB HBM3); sparsity halved
    (
        "H100",
        {
            "fp32": 67.0,
            "tf32": 494.7,
            "fp16": 989.4,
            "bf16": 989.4,
            "fp8": 1978.9,
            "int8": 1978.9,
            "bandwidth_gbs": 3350.0,
            "document": "NVIDIA H100 datasheet, H100 SXM column",
        },
    ),
    # NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column; no FP8 on Ampere
    (
        "A100",
        {
            "fp32": 19.5,
            "tf32": 156.0,
            "fp16": 312.0,
            "bf16": 312.0,
            "fp8": None,
            "int8": 624.0,
            "bandwidth_gbs": 2039.0,
            "document": "NVIDIA A100 datasheet, A100 80GB SXM column",
        },
    ),
    # NVIDIA L4 Tensor Core GPU datasheet; sparsity figures halved
    (
        "L4",
        {
            "fp32": 30.3,
            "tf32": 60.0,
            "fp16": 121.0,
            "bf16": 121.0,
            "fp8": 242.5,
            "int8": 242.5,
            "bandwidth_gbs": 300.0,
            "document": "NVIDIA L4 datasheet",
        },
    ),
    # NVIDIA L40S datasheet; sparsity figures halved
    (
        "L40S",
        {
            "fp32": 91.6,
            "tf32": 183.0,
            "fp16": 362.0,
            "bf16": 362.0,
            "fp8": 733.0,
            "int8": 733.0,
            "bandwidth_gbs": 864.0,
            "document": "NVIDIA L40S datasheet",
        },
    ),
)

MATMUL_KEYS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")

#: the bytes a roofline counts: what one batch must at least read and write, not the traffic the
#: run moved (caches re-read, activations spill), so the bandwidth figures are lower bounds
MIN_BYTES_LABEL = "minimum bytes (weights + inputs + outputs)"
MIN_GBS = "≥ GB/s (minimum bytes)"
MIN_PCT_BANDWIDTH = "≥ % of bandwidth"


@dataclass(frozen=True)
class Ceilings:
    device: str
    matmul_tflops: dict[str, float | None]
    bandwidth_gbs: float | None
    source: str  # "measured (<file>)" or "datasheet (<row>), not measured"
    #: where each ceiling comes from (MATMUL_KEYS and "bandwidth"): measured by `peaks` with
    #: the kernel named, or the datasheet's row
    sources: dict[str, str] = field(default_factory=dict)


#: how `peaks` measures each ceiling (profiler.collect.measured_peaks), for caches that do not say
PEAKS_KERNELS = {
    "fp32": "torch.mm (cuBLAS, FP32)",
    "tf32": "torch.mm with TF32 (cuBLAS)",
    "fp16": "torch.mm (cuBLAS)",
    "bf16": "torch.mm (cuBLAS)",
    "fp8": "torch._scaled_mm (cuBLASLt)",
    "int8": "torch._int_mm (cuBLASLt IMMA; B column-major)",
    "bandwidth": "a device-to-device copy",
}


def datasheet_row(gpu_name: str) -> tuple[str, dict[str, Any]] | None:
    """The (key, row) of DATASHEET for a GPU name, or None when no row matches."""
    for key, row in DATASHEET:
        if key.lower() in gpu_name.lower():
            return key, row
    return None


def int8_reaches_tensor_cores(peaks: dict[str, Any]) -> bool:
    """The cached INT8 figure was measured with a column-major B (``peaks`` from schema 2):
    torch._int_mm reaches the IMMA Tensor Core kernels only then; with a row-major B cuBLASLt
    falls back to a slow path (127 TOPS on an H100 SXM, 6.4 % of the 1,979 dense)."""
    detail = (peaks.get("matmul_detail") or {}).get("int8") or {}
    return bool(detail.get("b_layout") == "column-major")


#: the prefix `peaks` gives a CPU's name in its cache
#: (profiler.collect.measured_peaks.machine_facts)
CPU_PEAKS_PREFIX = "CPU "


def ceilings_from_peaks(peaks: dict[str, Any], where: str = "") -> Ceilings:
    """The ceilings in a peaks JSON written by ``profile.py peaks``. An INT8 figure measured
    off the Tensor Cores (an older cache) bounds nothing: the datasheet's stands in, labelled."""
    device = peaks["machine"]["device"]
    matmul = {k: peaks["matmul_tflops"].get(k) for k in MATMUL_KEYS}
    detail = peaks.get("matmul_detail") or {}
    file = f" ({where})" if where else ""
    if device.startswith(CPU_PEAKS_PREFIX):  # torch.mm and a copy in host memory
        sources = {k: f"measured by peaks{file} with torch.mm on the CPU" for k in MATMUL_KEYS}
        sources["bandwidth"] = f"measured by peaks{file} with a copy in host memory"
        return Ceilings(
            device=device,
            matmul_tflops=matmul,
            bandwidth_gbs=peaks["copy"]["gb_per_s"],
            source=f"measured{file}",
            sources=sources,
        )
    sources = {
        k: f"measured by peaks{file} with {(detail.get(k) or {}).get('kernel') or PEAKS_KERNELS[k]}"
        for k in MATMUL_KEYS
    }
    sources["bandwidth"] = f"measured by peaks{file} with {PEAKS_KERNELS['bandwidth']}"
    if matmul.get("int8") is not None and not int8_reaches_tensor_cores(peaks):
        found = datasheet_row(device)
        matmul["int8"] = found[1]["int8"] if found else None
        sources["int8"] = (
            f"datasheet ({found[0]}), not measured: {found[1]['document']}, dense; "
            if found
            else "none: "
        ) + "the cached INT8 figure used a row-major B, off the Tensor Cores (peaks --refresh)"
    return Ceilings(
        device=device,
        matmul_tflops=matmul,
        bandwidth_gbs=peaks["copy"]["gb_per_s"],
        source=f"measured{file}",
        sources=sources,
    )


def datasheet_ceilings(gpu_name: str) -> Ceilings | None:
    """The datasheet row for a GPU name, or None when no row matches."""
    found = datasheet_row(gpu_name)
    if found is None:
        return None
    key, row = found
    where = f"datasheet ({key}), not measured: {row['document']}, dense"
    return Ceilings(
        device=gpu_name,
        matmul_tflops={k: row[k] for k in MATMUL_KEYS},
        bandwidth_gbs=row["bandwidth_gbs"],
        source=f"datasheet ({key}), not measured",
        sources={k: where for k in (*MATMUL_KEYS, "bandwidth")},
    )


def dense_ratio(gpu_name: str, key: str, against: str = "fp32") -> float | None:
    """The datasheet's dense ``key`` rate over its ``against`` rate for this GPU (FP16 against
    FP32: 14.8 on an H100 SXM), None without a row."""
    found = datasheet_row(gpu_name or "")
    if found is None or not found[1].get(key) or not found[1].get(against):
        return None
    return float(found[1][key]) / float(found[1][against])


def ceilings_words(ceilings: Ceilings | None, key: str) -> str:
    """Where the two ceilings a roofline at ``key`` meets come from, in one phrase."""
    if ceilings is None:
        return "no ceilings"
    compute, bandwidth = ceilings.sources.get(key), ceilings.sources.get("bandwidth")
    if not compute or not bandwidth:
        return ceilings.source
    if compute == bandwidth:
        return compute
    prefix = f"measured by peaks{ceilings.source[len('measured') :]} with "
    if compute.startswith(prefix) and bandwidth.startswith(prefix):
        return (
            f"{ceilings.source}: {key} with {compute[len(prefix) :]}, bandwidth with "
            f"{bandwidth[len(prefix) :]}"
        )
    return f"{key}: {compute}; bandwidth: {bandwidth}"


def matmul_key(precision: str, tf32: bool | None, backend: str = "") -> str:
    """Which matmul ceiling a run's precision meets: FP32 runs with TF32 allowed (and TensorRT
    FP32, which builds TF32 tactics by default) meet the TF32 one."""
    if precision == "fp32" and (tf32 or backend.startswith("ttrt")):
        return "tf32"
    return precision if precision in MATMUL_KEYS else "fp32"


def _finite(value: Any) -> Any:
    """None for a float that is not finite, else the value."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass(frozen=True)
class Roofline:
    flops: float  # per batch
    min_bytes: float  # per batch: weights + inputs + outputs (MIN_BYTES_LABEL)
    seconds: float  # timed p50
    achieved_tflops: float
    achieved_gbs: float  # min_bytes / seconds: the bandwidth used is at least this
    intensity: float  # FLOPs per minimum byte
    peak_tflops: float | None
    peak_gbs: float | None
    ridge: float | None  # intensity where the two ceilings meet
    pct_of_compute: float | None
    pct_of_bandwidth: float | None
    bound: RooflineBound  # "memory" or "compute" (by the roofline), "unknown" without peaks
    pct_of_roof: float | None  # achieved TFLOP/s over the roofline at this intensity
    matmul_key: str
    ceilings_source: str
    backend: str = ""  # the run's backend (the chart marks points by it)

    def record(self) -> RooflineFigures:
        """The roofline as --json prints it: a figure that is not finite becomes None."""
        fields = {k: _finite(v) for k, v in asdict(self).items() if k != "bound"}
        return RooflineFigures(bound=self.bound, **fields)

    def to_dict(self) -> dict[str, Any]:
        return cast("dict[str, Any]", plain(self.record()))


def _pct(value: float, peak: float | None) -> float | None:
    return 100.0 * value / peak if peak else None


def run_roofline(
    roofline_inputs: dict[str, Any],
    p50_ms: float,
    ceilings: Ceilings | None,
    key: str,
    backend: str = "",
) -> Roofline:
    """Achieved rates of one batch from its FLOPs, minimum bytes and timed p50 (the GB/s and
    the share of bandwidth are lower bounds: the run moved at least those bytes)."""
    flops = float(roofline_inputs["flops_per_batch"])
    nbytes = float(roofline_inputs["min_bytes_per_batch"])
    seconds = p50_ms / 1e3
    tflops, gbs = flops / seconds / 1e12, nbytes / seconds / 1e9
    intensity = flops / nbytes if nbytes else float("nan")
    peak = ceilings.matmul_tflops.get(key) if ceilings else None
    bw = ceilings.bandwidth_gbs if ceilings else None
    ridge = peak * 1e12 / (bw * 1e9) if peak and bw else None
    roof = min(peak, intensity * bw / 1e3) if peak and bw else None
    bound: RooflineBound = (
        "unknown" if ridge is None else ("memory" if intensity < ridge else "compute")
    )
    return Roofline(
        flops=flops,
        min_bytes=nbytes,
        seconds=seconds,
        achieved_tflops=tflops,
        achieved_gbs=gbs,
        intensity=intensity,
        peak_tflops=peak,
        peak_gbs=bw,
        ridge=ridge,
        pct_of_compute=_pct(tflops, peak),
        pct_of_bandwidth=_pct(gbs, bw),
        bound=bound,
        pct_of_roof=_pct(tflops, roof),
        matmul_key=key,
        ceilings_source=ceilings_words(ceilings, key),
        backend=backend,
    )


def gpu_name(result: RunResult) -> str:
    """The GPU a run ran on, as result.json names it ("" on a CPU or when not recorded)."""
    return (result.environment.gpu or {}).get("name") or ""


def result_roofline(result: RunResult, ceilings: Ceilings | None) -> Roofline | None:
    """The roofline of a run's result, or None when it holds no ``roofline_inputs``."""
    inputs = result.roofline_inputs
    p50 = result.timing.p50_ms
    if inputs is None or inputs.flops_per_batch is None or not p50:
        return None
    key = matmul_key(
        result.backend.precision,
        result.precision.tf32 if result.precision else None,
        result.backend.name,
    )
    return run_roofline(
        {
            "flops_per_batch": inputs.flops_per_batch,
            "min_bytes_per_batch": inputs.min_bytes_per_batch,
        },
        float(p50),
        ceilings,
        key,
        result.backend.name,
    )


#: a generation's phases, the timed figure each roofline is taken at (the generation block's)
PHASE_FIGURES = {"prefill": ("ttft_ms", "TTFT p50"), "decode": ("tpot_ms", "TPOT p50")}


def phase_rooflines(
    result: RunResult, ceilings: Ceilings | None
) -> list[tuple[str, str, Roofline]]:
    """A decoder-only LM's phases against the ceilings: (phase, the timed figure it is taken
    at, roofline) for the prefill at the TTFT p50 and one decode step at the TPOT p50, from
    the FLOPs and minimum bytes counted for each (result.json
    ``generation.phase_roofline_inputs``); [] without them."""
    generation = result.generation
    if generation is None or not generation.phase_roofline_inputs:
        return []
    key = matmul_key(
        result.backend.precision,
        result.precision.tf32 if result.precision else None,
        result.backend.name,
    )
    found = []
    for phase, (field_name, label) in PHASE_FIGURES.items():
        inputs = generation.phase_roofline_inputs.get(phase)
        timed = getattr(generation, field_name)
        if inputs is None or inputs.flops_per_batch is None or timed is None or not timed.p50:
            continue
        roofline = run_roofline(
            {
                "flops_per_batch": inputs.flops_per_batch,
                "min_bytes_per_batch": inputs.min_bytes_per_batch,
            },
            float(timed.p50),
            ceilings,
            key,
            result.backend.name,
        )
        found.append((phase, label, roofline))
    return found


NO_ROOFLINE_INPUTS = (
    "no roofline: the run's result.json has no roofline_inputs (a run older "
    "than FLOP counting: report --flops)"
)


def no_roofline_reason(result: RunResult | None, flops_table: dict[str, Any] | None = None) -> str:
    """One line saying why a target has no roofline: a bare trace has no timed latency, a run
    may lack FLOPs, and a --flops table may have no row for the run."""
    if result is None:
        return "no roofline: a bare trace has no timed latency to set its FLOPs against" + (
            "; --flops applies to run folders (their result.json holds the timed p50)"
            if flops_table
            else "; give a run folder"
        )
    if not result.timing.p50_ms:
        return "no roofline: the run's result.json has no timed p50"
    if flops_table and not (result.roofline_inputs and result.roofline_inputs.flops_per_batch):
        key = f"{result.backend.precision}_bs{result.batch_size}"
        return (
            f"no roofline: the --flops table (model {flops_table.get('model')}) has no row "
            f"{key} for model {result.model}"
        )
    return NO_ROOFLINE_INPUTS


# ---- the chart: one roof per precision present, each point against its own ----------------


@dataclass(frozen=True)
class Roof:
    key: str  # the matmul ceiling's precision key (fp16, tf32 ...)
    peak_tflops: float
    peak_gbs: float
    ridge: float
    #: another roof of the same precision (other ceilings: another GPU), named with its
    #: bandwidth (profiler.report.sentences.roof_name)
    apart: bool = False

    def at(self, intensity: float) -> float:
        """The roof's TFLOP/s at an intensity (FLOP/byte)."""
        return min(self.peak_tflops, intensity * self.peak_gbs / 1e3)


@dataclass(frozen=True)
class ChartPoint:
    label: str
    backend: str
    roof: Roof | None  # the roof it is drawn against (None: no ceilings)
    intensity: float
    achieved_tflops: float


@dataclass(frozen=True)
class RooflineChart:
    """What a roofline chart draws; the views write its labels and title
    (profiler.report.sentences)."""

    roofs: list[Roof]
    points: list[ChartPoint]
    #: where the ceilings come from, folders left out, each once
    sources: list[str]

    @property
    def backends(self) -> list[str]:
        return list(dict.fromkeys(p.backend for p in self.points))


def _short_source(source: str) -> str:
    """A ceilings source without folders: ``measured (/home/u/.cache/.../H100.json)`` ->
    ``measured (H100.json)``."""
    return re.sub(r"(?<![\w.])(?:~|[A-Za-z]:)?[/\\][^\s()]*[/\\]([^\s()/\\]+)", r"\1", source)


def chart_data(points: Sequence[tuple[str, Roofline | None]]) -> RooflineChart | None:
    """What a roofline chart draws for (label, Roofline) points: one roof per (precision,
    ceilings) present, each point with the roof of its own precision, and its backend; None
    when no point has a roofline."""
    present = [(label, r) for label, r in points if r is not None]
    if not present:
        return None
    roofs: dict[tuple[str, float | None], Roof] = {}
    drawn = []
    for label, r in present:
        roof = None
        if r.peak_tflops and r.peak_gbs and r.ridge is not None:
            roof = roofs.setdefault(
                (r.matmul_key, None), Roof(r.matmul_key, r.peak_tflops, r.peak_gbs, r.ridge)
            )
            if roof != Roof(r.matmul_key, r.peak_tflops, r.peak_gbs, r.ridge):
                # same precision, other ceilings (GPU): a roof of its own, by bandwidth
                roof = roofs.setdefault(
                    (r.matmul_key, round(r.peak_gbs)),
                    Roof(r.matmul_key, r.peak_tflops, r.peak_gbs, r.ridge, apart=True),
                )
        drawn.append(
            ChartPoint(
                label=label,
                backend=r.backend or "?",
                roof=roof,
                intensity=r.intensity,
                achieved_tflops=r.achieved_tflops,
            )
        )
    sources = list(dict.fromkeys(_short_source(r.ceilings_source) for _, r in present))
    return RooflineChart(roofs=list(roofs.values()), points=drawn, sources=sources)


def ceilings_for(
    result: RunResult, peaks: dict[str, Any] | None, where: str = ""
) -> Ceilings | None:
    """Measured ceilings when a peaks JSON for the run's GPU is given, else the datasheet row."""
    gpu = gpu_name(result)
    if peaks is not None and (not gpu or peaks["machine"]["device"] == gpu):
        return ceilings_from_peaks(peaks, where)
    return datasheet_ceilings(gpu) if gpu else None


def on_this_cpu(result: RunResult) -> bool:
    """A CPU run recorded on this machine (whose CPU the peaks cache measured)."""
    import socket

    host = result.environment.hostname
    return result.device.startswith("cpu") and (not host or host == socket.gethostname())


def cached_ceilings(result: RunResult, peaks_dir: Path | None) -> Ceilings | None:
    """The ceilings of a run's GPU: measured ones cached in ``peaks_dir``, else the datasheet's.
    A CPU run recorded on this machine meets the CPU's peaks cached here (no datasheet)."""
    gpu = gpu_name(result)
    found = None
    if peaks_dir is not None and gpu:
        found = load_peaks(peaks_dir, gpu)
    elif peaks_dir is not None and on_this_cpu(result):
        found = load_peaks(peaks_dir, CPU_PEAKS_PREFIX, prefix=True)
    return ceilings_for(result, found[0] if found else None, str(found[1]) if found else "")


def no_ceilings(result: RunResult) -> str:
    """Why a run has no ceilings, in a few words."""
    if gpu_name(result):
        return "no ceilings for this GPU"
    if on_this_cpu(result):
        return "no ceilings for this CPU: `profile.py peaks` measures them"
    return "no ceilings: a CPU run recorded on another machine"


def roofline_of(result: RunResult, peaks_dir: Path | None) -> Roofline | None:
    """The roofline of a run's result against the peaks cached in ``peaks_dir`` for its GPU,
    else the datasheet row; None without ``roofline_inputs``."""
    return result_roofline(result, cached_ceilings(result, peaks_dir))


# ---- per GEMM / convolution, where the trace recorded shapes (--record-shapes) ----------------


def op_flops(name: str, dims: list[Any]) -> float | None:
    """FLOPs of one call from its "Input Dims" (2 per multiply-add), None when not a GEMM or the
    shapes are incomplete: aten::mm [M,K],[K,N]; aten::addmm bias,[M,K],[K,N]; aten::bmm
    [B,M,K],[B,K,N]. Convolutions are left out: their output size needs stride and padding,
    which "Input Dims" does not carry (their FLOPs are in the run's FlopCounterMode count)."""
    try:
        if name == "aten::mm":
            (m, k), (_, n) = dims[0], dims[1]
            return float(2.0 * m * k * n)
        if name == "aten::addmm":
            (m, k), (_, n) = dims[1], dims[2]
            return float(2.0 * m * k * n)
        if name == "aten::bmm":
            (b, m, k), (_, _, n) = dims[0], dims[1]
            return float(2.0 * b * m * k * n)
    except (TypeError, ValueError, IndexError):
        return None
    return None


class _Event(msgspec.Struct):
    ph: str = ""
    name: str = ""
    cat: str = ""
    dur: float = 0.0
    args: dict[str, Any] = {}


class _File(msgspec.Struct):
    traceEvents: list[_Event] = []


SHAPED_OPS = ("aten::mm", "aten::addmm", "aten::bmm")


def shaped_ops(path: Path | str) -> pd.DataFrame:
    """GEMM operators with recorded shapes, grouped by shape: calls, FLOPs per call, CPU time.
    Empty when the trace was recorded without --record-shapes."""
    events = msgspec.json.decode(read_bytes(Path(path)), type=_File).traceEvents
    rows = []
    for e in events:
        if e.ph == "X" and e.name in SHAPED_OPS and "Input Dims" in e.args:
            dims = e.args["Input Dims"]
            rows.append(
                {
                    "operator": e.name,
                    "input_dims": str(dims),
                    "flops": op_flops(e.name, dims),
                    "cpu_us": e.dur,
                    "external_id": e.args.get("External id"),
                }
            )
    frame = pd.DataFrame(rows, columns=["operator", "input_dims", "flops", "cpu_us", "external_id"])
    return frame


def kernel_roofline(
    ops: pd.DataFrame, kernel_us_by_external_id: dict[int, float], peak_tflops: float | None
) -> pd.DataFrame:
    """Per shaped GEMM: its kernels' GPU time (matched by External id), achieved TFLOP/s and %
    of the matmul ceiling."""
    if not len(ops):
        return pd.DataFrame(
            columns=[
                "operator",
                "input_dims",
                "calls",
                "flops_per_call",
                "gpu_us",
                "tflops",
                "pct_of_peak",
            ]
        )
    ops = ops.assign(gpu_us=ops["external_id"].map(kernel_us_by_external_id).astype(float))
    grouped = (
        ops.groupby(["operator", "input_dims"], sort=False)
        .agg(
            calls=("flops", "size"),
            flops_per_call=("flops", "first"),
            flops=("flops", "sum"),
            gpu_us=("gpu_us", "sum"),
        )
        .reset_index()
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        grouped["tflops"] = np.where(
            grouped["gpu_us"] > 0, grouped["flops"] / (grouped["gpu_us"] * 1e-6) / 1e12, np.nan
        )
    grouped["pct_of_peak"] = 100 * grouped["tflops"] / peak_tflops if peak_tflops else np.nan
    return grouped.drop(columns="flops").sort_values("gpu_us", ascending=False, kind="stable")


def load_peaks(
    folder: Path, gpu_name: str, prefix: bool = False
) -> tuple[dict[str, Any], Path] | None:
    """The cached peaks JSON in ``folder`` measured on a GPU of this name (newest first);
    ``prefix``: on a device whose name starts with ``gpu_name`` (CPU_PEAKS_PREFIX)."""
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            data = json.loads(path.read_text())
            device = data["machine"]["device"]
            if device == gpu_name or (prefix and device.startswith(gpu_name)):
                return data, path
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def kernel_us_by_external_id(trace: Trace) -> dict[int, float]:
    """GPU kernel time per launching operator's External id (Kineto links the two by it)."""
    kernels = trace.events[trace.events["kind"] == KIND["kernel"]]
    if "external_id" not in kernels or not len(kernels):
        return {}
    return cast("dict[int, float]", kernels.groupby("external_id")["dur"].sum().to_dict())


def gemm_roofline(path: Path | str, peak_tflops: float | None) -> pd.DataFrame:
    """Per GEMM shape of a --record-shapes trace: calls, FLOPs per call, GPU time, TFLOP/s."""
    ops = shaped_ops(path)
    if not len(ops):
        return kernel_roofline(ops, {}, peak_tflops)
    return kernel_roofline(ops, kernel_us_by_external_id(load_trace(path)), peak_tflops)
