"""The timed window: per-iteration latency with CUDA events (GPU) or perf_counter (CPU), and how
many iterations. Each iteration is synchronized, so a latency is what one request of that batch
waits; the window's statistics and noise are profiler.analysis.noise.TimedWindow's."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from profiler.analysis.noise import percentile

def time_iterations(fn: Callable[..., Any], inputs: tuple, iters: int, use_cuda: bool,
                    on_iteration: Callable[[], None] | None = None,
                    enqueue: list[float] | None = None) -> tuple[list[float], Any]:
    """Run ``fn(*inputs)`` ``iters`` times; return per-iteration milliseconds and the last output.

    GPU: a CUDA event pair around each call and a synchronize on the end event, so each figure is
    device-side time from the first launch to the last kernel's end; with ``enqueue``, the
    host's time to return from each call (perf_counter, inside the event pair, no synchronize)
    is appended to it. CPU: perf_counter around each call. The caller warms up first.
    """
    latencies: list[float] = []
    output = None
    if use_cuda:
        import torch

        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(iters)]
        torch.cuda.synchronize()
        clock = time.perf_counter
        for start, end in pairs:
            start.record()
            began = clock()
            output = fn(*inputs)
            returned = clock()
            end.record()
            if enqueue is not None:
                enqueue.append((returned - began) * 1000.0)
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


# ---- how many iterations: fixed counts on a GPU, a time budget on a CPU ----------------------
#
# GPU defaults are unchanged: 20 warm-up and 100 timed iterations. A CPU is 100-1000x slower on
# the same model (ResNet50 bs8: about a second per call on 2 cores), so its defaults are 2
# warm-up iterations and a time budget, CPU_MIN_TIME_S. With a budget (--min-time, or the CPU
# default), the policy is do_bench's: estimate one call from the synchronized warm-up calls (one
# extra timed call when there is no warm-up), convert the budget to iterations, and bound them
# to [MIN_TIME_ITERS_LOW, MIN_TIME_ITERS_HIGH].
GPU_ITERS = 100
GPU_WARMUP = 20
CPU_WARMUP = 2
CPU_MIN_TIME_S = 5.0
MIN_TIME_ITERS_LOW = 5
MIN_TIME_ITERS_HIGH = 10_000


@dataclass(frozen=True)
class WindowPlan:
    """The timed window's warm-up count and either a fixed count or a time budget."""

    warmup: int
    iters: int | None  # None: chosen from min_time_s after the warm-up
    min_time_s: float | None
    why: str

    def iterations(self, estimate_ms: float) -> int:
        if self.iters is not None:
            return self.iters
        return iterations_for_budget(estimate_ms, self.min_time_s)


def plan_window(iters: int | None, timed_warmup: int | None, min_time_s: float | None,
                use_cuda: bool) -> WindowPlan:
    """What was asked for, else the device's defaults (see the policy above)."""
    warmup = timed_warmup if timed_warmup is not None else (GPU_WARMUP if use_cuda else CPU_WARMUP)
    if iters is not None:
        return WindowPlan(warmup, iters, None, f"--iters {iters}")
    if min_time_s is not None:
        return WindowPlan(warmup, None, min_time_s, f"--min-time {min_time_s:g} s")
    if use_cuda:
        return WindowPlan(warmup, GPU_ITERS, None, f"GPU default: {GPU_ITERS} iterations")
    return WindowPlan(warmup, None, CPU_MIN_TIME_S,
                      f"CPU default: --min-time {CPU_MIN_TIME_S:g} s")


def iterations_for_budget(estimate_ms: float, min_time_s: float) -> int:
    """ceil(budget / estimate), bounded to [MIN_TIME_ITERS_LOW, MIN_TIME_ITERS_HIGH]."""
    if estimate_ms <= 0:
        return MIN_TIME_ITERS_HIGH
    wanted = math.ceil(min_time_s * 1000.0 / estimate_ms)
    return max(MIN_TIME_ITERS_LOW, min(MIN_TIME_ITERS_HIGH, wanted))


def warm_up(fn: Callable[..., Any], inputs: tuple, plan: WindowPlan, use_cuda: bool,
            on_iteration: Callable[[], None] | None = None) -> float:
    """Run the warm-up calls; return the median call in ms (the budget's estimate), timed only
    when a budget needs it (one extra timed call when the warm-up count is 0)."""
    if plan.iters is not None:
        for _ in range(plan.warmup):
            fn(*inputs)
            if on_iteration:
                on_iteration()
        return float("nan")
    latencies, _ = time_iterations(fn, inputs, max(plan.warmup, 1), use_cuda, on_iteration)
    return percentile(sorted(latencies), 50)


# ---- peak memory of the timed window -----------------------------------------------------------

def reset_peak_memory(use_cuda: bool) -> None:
    if use_cuda:
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_memory(use_cuda: bool) -> dict:
    """Peak bytes allocated and reserved by PyTorch's caching allocator since the reset."""
    if not use_cuda:
        return {"peak_allocated_bytes": None, "peak_reserved_bytes": None,
                "scope": "n/a (CPU)"}
    import torch

    torch.cuda.synchronize()
    return {"peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
            "scope": "timed window (torch.cuda.reset_peak_memory_stats before, "
                     "max_memory_allocated/reserved after); memory TensorRT allocates outside "
                     "PyTorch's allocator is not included"}
