"""The machine's ceilings, measured: dense matmul rate per data type and device-memory copy
bandwidth. Collection side (imports torch); the analysis side reads the cached JSON.

Method (stated in every result under ``method``): random data on the device; per measurement
``warmup`` untimed calls, then ``repeats`` timed calls, each timed alone (CUDA events on a GPU,
``time.perf_counter`` with the call synchronized on a CPU); the median time gives the rate.
A matmul of n x n by n x n counts 2 n^3 FLOPs; a copy of B bytes moves 2 B (read + write).
Each matmul names the call it times (``kernel``) and, on a GPU, the CUDA kernels one call ran
(``cuda_kernels``, from torch.profiler). INT8 is torch._int_mm with A row-major and B
column-major: cuBLASLt runs its IMMA Tensor Core kernels only with K contiguous in both
operands (a row-major B gave 127 TOPS on an H100 SXM, 6.4 % of the datasheet's 1,979 dense).

Results are cached once per machine, keyed by GPU name, driver and torch version, in
``<cache>/peaks/<key>.json`` (cache: ``$INFER_PROFILER_CACHE``'s parent folder or
``<user cache>/infer-profiler``, beside the engine cache; profiler.runs.layout.cache_dir).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from pathlib import Path

import torch

from profiler.collect import engine_cache, metadata
from profiler.fsutil import write_json_atomic

#: 2: INT8 with a column-major B (b_layout), kernels named; a cache of an older schema is
#: measured again
PEAKS_SCHEMA = 2
GPU_SIZES = {"matmul_n": 8192, "copy_bytes": 1 << 30, "int8_n": 8192}
CPU_SIZES = {"matmul_n": 256, "copy_bytes": 1 << 24, "int8_n": 256}


def default_dir() -> Path:
    """``peaks/`` beside the engine cache's default folder."""
    return engine_cache.peaks_dir()


def machine_facts() -> dict:
    """What the cache is keyed by: the device's name, driver and torch version."""
    gpu = metadata.gpu_facts(torch)
    if gpu is None:
        import platform

        return {
            "device": f"CPU {platform.processor() or platform.machine()}",
            "driver": None,
            "torch": torch.__version__,
            "compute_capability": None,
        }
    return {
        "device": gpu["name"],
        "driver": gpu["driver"],
        "torch": torch.__version__,
        "compute_capability": gpu["compute_capability"],
    }


def cache_path(facts: dict, folder: Path) -> Path:
    key = json.dumps([facts["device"], facts["driver"], facts["torch"]])
    slug = "".join(c if c.isalnum() else "-" for c in facts["device"]).strip("-")[:40]
    return folder / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def _median_seconds(fn, warmup: int, repeats: int, use_cuda: bool) -> float:
    for _ in range(warmup):
        fn()
    if use_cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if use_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
    return statistics.median(times)


def _matmul_case(name: str, n: int, device: torch.device):
    """(callable, why-not) for one data type; why-not is a reason string when unsupported."""
    gen = torch.Generator(device=device).manual_seed(0)
    if name in ("fp32", "tf32", "fp16", "bf16"):
        dtype = {
            "fp32": torch.float32,
            "tf32": torch.float32,
            "fp16": torch.float16,
            "bf16": torch.bfloat16,
        }[name]
        if name == "tf32" and device.type != "cuda":
            return None, "TF32 is a CUDA Tensor Core mode"
        a = torch.randn(n, n, device=device, generator=gen).to(dtype)
        b = torch.randn(n, n, device=device, generator=gen).to(dtype)
        return (lambda: torch.mm(a, b)), None
    if name == "fp8":
        if device.type != "cuda" or not hasattr(torch, "_scaled_mm"):
            return None, "torch._scaled_mm needs a CUDA GPU"
        if torch.cuda.get_device_capability(device) < (8, 9):
            return None, "FP8 matmul needs compute capability 8.9 or newer"
        a = torch.randn(n, n, device=device, generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device, generator=gen).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        return (
            lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        ), None
    if name == "int8":
        if device.type != "cuda" or not hasattr(torch, "_int_mm"):
            return None, "torch._int_mm needs a CUDA GPU"
        return int8_case(n, device, gen), None
    raise ValueError(name)


def int8_case(n: int, device, gen):
    """torch._int_mm of an n x n row-major A by an n x n column-major B (the transpose of a
    contiguous tensor): K contiguous in both, the layout of cuBLASLt's IMMA kernels."""
    a = torch.randint(-64, 64, (n, n), device=device, dtype=torch.int8, generator=gen)
    b = torch.randint(-64, 64, (n, n), device=device, dtype=torch.int8, generator=gen).t()
    return lambda: torch._int_mm(a, b)


#: the call each matmul times, as the peaks JSON names it
KERNELS = {
    "fp32": "torch.mm (cuBLAS, FP32)",
    "tf32": "torch.mm with TF32 (cuBLAS)",
    "fp16": "torch.mm (cuBLAS)",
    "bf16": "torch.mm (cuBLAS)",
    "fp8": "torch._scaled_mm (cuBLASLt)",
    "int8": "torch._int_mm (cuBLASLt IMMA; A row-major, B column-major)",
}


def cuda_kernels(fn) -> list[str] | None:
    """The CUDA kernels one call of ``fn`` ran (torch.profiler), None when it cannot tell."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = [
            e.name
            for e in prof.events()
            if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
        ]
        return list(dict.fromkeys(names)) or None
    except Exception:  # noqa: BLE001 - naming the kernel is a courtesy; the rate stands
        return None


MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


def _matmul_rate(name: str, n: int, device, warmup: int, repeats: int) -> dict:
    fn, why_not = _matmul_case(name, n, device)
    if fn is None:
        return {"tflops": None, "why_not": why_not}
    use_cuda = device.type == "cuda"
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    try:
        seconds = _median_seconds(fn, warmup, repeats, use_cuda)
        ran = cuda_kernels(fn) if use_cuda else None
    except RuntimeError as error:  # a kernel this build or GPU does not have
        return {"tflops": None, "why_not": str(error).splitlines()[0][:200]}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    found = {
        "tflops": 2 * n**3 / seconds / 1e12,
        "n": n,
        "median_s": seconds,
        "kernel": KERNELS[name],
        "cuda_kernels": ran,
    }
    if name == "int8":
        found["b_layout"] = "column-major"
    return found


def _copy_bandwidth(nbytes: int, device, warmup: int, repeats: int) -> dict:
    src = torch.rand(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    seconds = _median_seconds(lambda: dst.copy_(src), warmup, repeats, device.type == "cuda")
    moved = 2 * src.numel() * src.element_size()
    return {
        "gb_per_s": moved / seconds / 1e9,
        "bytes": src.numel() * src.element_size(),
        "median_s": seconds,
    }


def measure(device: torch.device, sizes: dict, warmup: int = 5, repeats: int = 20) -> dict:
    """Measure every ceiling on ``device`` with the given sizes; plain data, nothing written."""
    matmul = {}
    for name in MATMUL_DTYPES:
        n = sizes["int8_n"] if name == "int8" else sizes["matmul_n"]
        matmul[name] = _matmul_rate(name, n, device, warmup, repeats)
    return {
        "schema": PEAKS_SCHEMA,
        "source": "measured",
        "machine": machine_facts(),
        "method": {
            "data": "random (seeded)",
            "warmup_calls": warmup,
            "repeats": repeats,
            "statistic": "median",
            "timer": "CUDA events" if device.type == "cuda" else "perf_counter",
            "matmul": "n x n by n x n, 2 n^3 FLOPs",
            "copy": "one tensor to another in device memory, 2 x bytes moved (read + write)",
            "sizes": dict(sizes),
        },
        "matmul_tflops": {k: v["tflops"] for k, v in matmul.items()},
        "matmul_detail": matmul,
        "copy": _copy_bandwidth(sizes["copy_bytes"], device, warmup, repeats),
    }


def sizes(matmul_n: int | None = None, copy_mib: int | None = None) -> dict | None:
    """This device's default sizes with the matmul side and copy size asked for; None when
    neither is asked (the cached figures then stand)."""
    if matmul_n is None and copy_mib is None:
        return None
    chosen = dict(GPU_SIZES if torch.cuda.is_available() else CPU_SIZES)
    if matmul_n is not None:
        chosen["matmul_n"] = chosen["int8_n"] = matmul_n
    if copy_mib is not None:
        chosen["copy_bytes"] = copy_mib << 20
    return chosen


def peaks(
    folder: Path | None = None,
    refresh: bool = False,
    sizes: dict | None = None,
    device: str | None = None,
) -> tuple[dict, Path, bool]:
    """Cached ceilings for this machine, measuring them when absent (or ``refresh``).
    Returns (peaks, cache file, measured now)."""
    folder = default_dir() if folder is None else folder
    facts = machine_facts()
    path = cache_path(facts, folder)
    if path.is_file() and not refresh:
        try:
            cached = json.loads(path.read_text())
            if cached.get("schema") == PEAKS_SCHEMA:
                return cached, path, False
        except (OSError, ValueError, AttributeError):
            pass  # unreadable or older cache: measure again
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    chosen = sizes or (GPU_SIZES if dev.type == "cuda" else CPU_SIZES)
    result = measure(dev, chosen)
    write_json_atomic(path, result)
    return result, path, True
