"""The timed window: per-iteration latency with CUDA events (GPU) or perf_counter (CPU), and its
statistics. Each iteration is synchronized, so a latency is what one request of that batch waits."""

from __future__ import annotations

import math
import time
from typing import Any, Callable

PERCENTILES = (50, 90, 95, 99)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on pre-sorted data."""
    if not sorted_values:
        raise ValueError("no values")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def latency_stats(latencies_ms: list[float], batch_size: int) -> dict[str, float]:
    """mean, std (sample), min, p50/p90/p95/p99, max in ms, and throughput in samples/s."""
    n = len(latencies_ms)
    ordered = sorted(latencies_ms)
    mean = sum(ordered) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in ordered) / (n - 1)) if n > 1 else 0.0
    stats = {"mean_ms": mean, "std_ms": std, "min_ms": ordered[0]}
    for q in PERCENTILES:
        stats[f"p{q}_ms"] = percentile(ordered, q)
    stats["max_ms"] = ordered[-1]
    stats["throughput_samples_per_s"] = batch_size * n / (sum(ordered) / 1000.0)
    return stats


def time_iterations(fn: Callable[..., Any], inputs: tuple, iters: int, use_cuda: bool,
                    on_iteration: Callable[[], None] | None = None) -> tuple[list[float], Any]:
    """Run ``fn(*inputs)`` ``iters`` times; return per-iteration milliseconds and the last output.

    GPU: a CUDA event pair around each call and a synchronize on the end event, so each figure is
    device-side time from the first launch to the last kernel's end. CPU: perf_counter around each
    call. The caller warms up first.
    """
    latencies: list[float] = []
    output = None
    if use_cuda:
        import torch

        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(iters)]
        torch.cuda.synchronize()
        for start, end in pairs:
            start.record()
            output = fn(*inputs)
            end.record()
            end.synchronize()
            if on_iteration:
                on_iteration()
        latencies = [start.elapsed_time(end) for start, end in pairs]
    else:
        for _ in range(iters):
            began = time.perf_counter()
            output = fn(*inputs)
            latencies.append((time.perf_counter() - began) * 1000.0)
            if on_iteration:
                on_iteration()
    return latencies, output
