"""The timed window: per-iteration latency with CUDA events (GPU) or perf_counter (CPU), and how
many iterations. Each iteration is synchronized, so a latency is what one request of that batch
waits; the window's statistics and noise are profiler.analysis.timed_window.TimedWindow's."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiler import units
from profiler.analysis.timed_window import percentile


def clock() -> float:
    """Seconds on the host's monotonic clock (one place, so a test can give a fake one)."""
    return time.perf_counter()


def time_iterations(
    fn: Callable[..., Any],
    inputs: tuple,
    iters: int,
    use_cuda: bool,
    on_iteration: Callable[[], None] | None = None,
    enqueue: list[float] | None = None,
    deadline: Deadline | None = None,
) -> tuple[list[float], Any]:
    """Run ``fn(*inputs)`` ``iters`` times (with ``deadline``, until it says stop); return
    per-iteration milliseconds and the last output.

    GPU: a CUDA event pair around each call and a synchronize on the end event, so each figure is
    device-side time from the first launch to the last kernel's end; with ``enqueue``, the
    host's time to return from each call (perf_counter, inside the event pair, no synchronize)
    is appended to it. CPU: perf_counter around each call. The caller warms up first.
    """
    latencies: list[float] = []
    pairs: list = []
    output = None
    if use_cuda:
        import torch

        torch.cuda.synchronize()
    began = clock()
    for done in range(1, iters + 1):
        if use_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            pairs.append((start, end))
            start.record()
            called = clock()
            output = fn(*inputs)
            returned = clock()
            end.record()
            if enqueue is not None:
                enqueue.append((returned - called) * 1000.0)
            end.synchronize()
        else:
            called = clock()
            output = fn(*inputs)
            latencies.append((clock() - called) * 1000.0)
        if on_iteration:
            on_iteration()
        if deadline is not None and deadline.reached(done, clock() - began):
            break
    if use_cuda:
        latencies = [start.elapsed_time(end) for start, end in pairs]
    return latencies, output


# ---- how many iterations: fixed counts on a GPU, a time budget on a CPU ----------------------
#
# GPU defaults are unchanged: 20 warm-up and 100 timed iterations. A CPU is 100-1000x slower on
# the same model (ResNet50 bs8: about a second per call on 2 cores), so its defaults are 2
# warm-up iterations and a time budget, CPU_MIN_TIME_S. With a budget (--min-time, or the CPU
# default) the window is timed against a deadline: the host clock is read after each
# synchronized iteration and the window stops once the budget has passed and at least
# MIN_TIME_ITERS_LOW iterations were timed (at most MIN_TIME_ITERS_HIGH), however fast or slow
# the calls are. The warm-up's estimate of one call only sizes the progress bar.
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
        """The fixed count, or what the budget should allow at ``estimate_ms`` a call."""
        if self.iters is not None:
            return self.iters
        assert self.min_time_s is not None  # no count: a budget (window_plan)
        return iterations_for_budget(estimate_ms, self.min_time_s)

    @property
    def deadline(self) -> Deadline | None:
        """With a time budget, when the timed window stops; None for a fixed count."""
        if self.iters is not None:
            return None
        assert self.min_time_s is not None  # no count: a budget (window_plan)
        return Deadline(self.min_time_s)

    def done(self, seconds: float) -> str:
        """How a budgeted window ended: ``--min-time 5 s: stopped after 5.0 s``."""
        return f"{self.why}: stopped after {units.time(seconds, 's', decimals=1, thousands=False)}"


@dataclass(frozen=True)
class Deadline:
    """A budgeted window stops after ``seconds`` once ``floor`` iterations were timed, or at
    ``cap`` iterations."""

    seconds: float
    floor: int = MIN_TIME_ITERS_LOW
    cap: int = MIN_TIME_ITERS_HIGH

    def reached(self, iterations: int, elapsed_s: float) -> bool:
        return iterations >= self.cap or (iterations >= self.floor and elapsed_s >= self.seconds)


def plan_window(
    iters: int | None, timed_warmup: int | None, min_time_s: float | None, use_cuda: bool
) -> WindowPlan:
    """What was asked for, else the device's defaults (see the policy above)."""
    warmup = timed_warmup if timed_warmup is not None else (GPU_WARMUP if use_cuda else CPU_WARMUP)
    if iters is not None:
        return WindowPlan(warmup, iters, None, f"--iters {iters}")
    if min_time_s is not None:
        return WindowPlan(warmup, None, min_time_s, f"--min-time {units.plain(min_time_s)} s")
    if use_cuda:
        return WindowPlan(warmup, GPU_ITERS, None, f"GPU default: {GPU_ITERS} iterations")
    why = f"CPU default: --min-time {units.plain(CPU_MIN_TIME_S)} s"
    return WindowPlan(warmup, None, CPU_MIN_TIME_S, why)


def iterations_for_budget(estimate_ms: float, min_time_s: float) -> int:
    """ceil(budget / estimate), bounded to [MIN_TIME_ITERS_LOW, MIN_TIME_ITERS_HIGH]."""
    if estimate_ms <= 0:
        return MIN_TIME_ITERS_HIGH
    wanted = math.ceil(min_time_s * 1000.0 / estimate_ms)
    return max(MIN_TIME_ITERS_LOW, min(MIN_TIME_ITERS_HIGH, wanted))


def warm_up(
    fn: Callable[..., Any],
    inputs: tuple,
    plan: WindowPlan,
    use_cuda: bool,
    on_iteration: Callable[[], None] | None = None,
) -> float:
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
        return {"peak_allocated_bytes": None, "peak_reserved_bytes": None, "scope": "n/a (CPU)"}
    import torch

    torch.cuda.synchronize()
    return {
        "peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
        "scope": "timed window (torch.cuda.reset_peak_memory_stats before, "
        "max_memory_allocated/reserved after); memory TensorRT allocates outside "
        "PyTorch's allocator is not included",
    }
