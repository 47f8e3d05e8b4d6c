"""The figures a user quotes, read from a run's result.json: timed latency and throughput, the
noise of the timed window, peak memory, the run's config, and what differs between two runs.
Plain data in, plain data out; never imports torch.

The timed window (result.json "timing") is the measurement: each iteration synchronized, no
profiler attached. A trace's step time is measured under the profiler, which adds its own
overhead; ``overhead_ratio`` is that step time over the timed p50.
"""

from __future__ import annotations

from pathlib import Path

from .noise import noise, read_latency_csv

MIB = 1024 * 1024
NOT_ON_CPU = "n/a (CPU)"
#: the config fields shown in the one-line config of a headline
CONFIG_LINE = ("model", "backend", "batch_size", "image_size", "seq_len", "tf32",
               "memory_format", "compile_mode", "iters", "timed_warmup", "min_time")


def read_result(path: Path) -> dict | None:
    """A result.json as a dict, or None when it is unreadable."""
    import json

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def timed_figures(result: dict) -> dict:
    """p50, p90, p99 (ms), throughput (samples/s), iterations, CV and IQR of the timed window."""
    timing = result.get("timing") or {}
    window = timing.get("noise") or {}
    return {"p50_ms": timing.get("p50_ms"), "p90_ms": timing.get("p90_ms"),
            "p99_ms": timing.get("p99_ms"),
            "throughput_samples_per_s": timing.get("throughput_samples_per_s"),
            "iters": timing.get("iters"), "warmup_iters": timing.get("warmup_iters"),
            "timer": timing.get("timer"), "cv": window.get("cv"),
            "iqr_ms": window.get("iqr_ms"), "noise_warnings": window.get("warnings"),
            "repeat_runs": window.get("repeat_runs")}


def window_noise(result: dict, run_dir: Path | None = None) -> dict | None:
    """The Noise of the timed window: from result.json, else computed from the run's
    latency.csv (runs recorded before noise was)."""
    recorded = (result.get("timing") or {}).get("noise")
    if recorded:
        return recorded
    csv_path = latency_csv(result, run_dir)
    if csv_path is None:
        return None
    return noise(read_latency_csv(csv_path)).to_dict()


def latency_csv(result: dict, run_dir: Path | None) -> Path | None:
    """The run's latency.csv: beside result.json first, else where result.json says."""
    candidates = []
    if run_dir is not None:
        candidates.append(run_dir / "latency.csv")
    if result.get("latency_csv"):
        candidates.append(Path(result["latency_csv"]))
    return next((p for p in candidates if p.is_file()), None)


def memory_figures(result: dict) -> dict:
    """Peak PyTorch-allocator memory of the timed window and the TensorRT engines' device
    memory, in MiB; ``note`` says "n/a (CPU)" on a CPU run and "not recorded" for runs made
    before memory was recorded."""
    memory = result.get("memory")
    on_cpu = str(result.get("device", "")).startswith("cpu")
    if not memory:
        return {"peak_allocated_mib": None, "peak_reserved_mib": None, "engine_mib": None,
                "note": NOT_ON_CPU if on_cpu else "not recorded"}
    return {"peak_allocated_mib": _mib(memory.get("peak_allocated_bytes")),
            "peak_reserved_mib": _mib(memory.get("peak_reserved_bytes")),
            "engine_mib": _mib(memory.get("engine_device_memory_bytes")),
            "note": NOT_ON_CPU if on_cpu else None}


def _mib(value) -> float | None:
    return None if value is None else value / MIB


def overhead_ratio(profiled_step_us: float | None, p50_ms: float | None) -> float | None:
    """Profiled step time / timed p50: how much slower a step runs under the profiler."""
    if not profiled_step_us or not p50_ms:
        return None
    return profiled_step_us / 1000.0 / p50_ms


def config_line(result: dict) -> str:
    config = result.get("config") or {}
    parts = [f"{key}={config[key]}" for key in CONFIG_LINE if config.get(key) is not None]
    device = (result.get("environment") or {}).get("gpu") or {}
    parts.append(f"device={device.get('name') or result.get('device', '?')}")
    return ", ".join(parts)


def flatten(data, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values."""
    if not isinstance(data, dict):
        return {prefix: data}
    flat = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, dict) else {name: value})
    return flat


def differences(ra: dict | None, rb: dict | None) -> list[tuple[str, object, object]]:
    """Every config, backend and environment field whose value differs between two results
    (a field missing on one side shows as None there)."""
    if not ra or not rb:
        return []
    fields = []
    for section in ("config", "precision", "environment"):
        a, b = flatten(ra.get(section) or {}, section), flatten(rb.get(section) or {}, section)
        fields += [(key, a.get(key), b.get(key)) for key in sorted(set(a) | set(b))
                   if a.get(key) != b.get(key)]
    for key in ("backend.name", "backend.precision", "device"):
        a, b = flatten(ra).get(key), flatten(rb).get(key)
        if a != b:
            fields.append((key, a, b))
    return fields


def compare_timed(ra: dict | None, rb: dict | None, dir_a: Path | None,
                  dir_b: Path | None) -> dict | None:
    """Both runs' timed figures, speedup (p50 A / p50 B, as x), the bootstrap verdict on the
    p50 ratio from both latency.csv files, memory, and every differing field."""
    if not ra or not rb or "timing" not in ra or "timing" not in rb:
        return None
    from .noise import p50_ratio

    a, b = timed_figures(ra), timed_figures(rb)
    speedup = a["p50_ms"] / b["p50_ms"] if a["p50_ms"] and b["p50_ms"] else None
    csv_a, csv_b = latency_csv(ra, dir_a), latency_csv(rb, dir_b)
    ratio = None
    if csv_a is not None and csv_b is not None:
        ratio = p50_ratio(read_latency_csv(csv_a), read_latency_csv(csv_b)).to_dict()
    return {"a": a, "b": b, "speedup_x": speedup, "p50_ratio": ratio,
            "noise_a": window_noise(ra, dir_a), "noise_b": window_noise(rb, dir_b),
            "memory_a": memory_figures(ra), "memory_b": memory_figures(rb),
            "config_a": config_line(ra), "config_b": config_line(rb),
            "differences": [{"field": f, "a": x, "b": y} for f, x, y in differences(ra, rb)]}
