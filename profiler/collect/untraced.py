"""The kernels of one call made outside the profiled steps: what the steps are checked against.

torch.profiler with CPU activity, record_function spans, shapes or stacks can change what runs
(a full CUPTI buffer drops kernel records silently; a code path that asks whether it is being
profiled; a cuDNN heuristic picking again), and nothing in the trace says so. So, after the
timed window and before the profiled steps, the harness makes one more call of the same step
with only CUDA kernel activity recorded (``torch.profiler.profile(activities=[CUDA])``: no CPU
operators, no spans, no shapes, no stacks), counts its kernels by name, and keeps the counts in
result.json ``trace.untraced_kernels``. The trace analysis (profiler.trace.step_kernels) then
warns, with counts, when a profiled step's kernels differ from that call's.

"Untraced" means: no CPU-side tracing. CUPTI's kernel records are still on during that call, as
they must be to learn the kernels' names at all; the timed window itself ran with no profiler.

Only on a CUDA GPU with ``--capture torch`` (under ``--capture cuda-profiler-api`` an outside
profiler owns CUPTI). Cost: one call and one profiler start/stop, a fraction of a second.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

#: Kineto's activity type of a kernel record (the chrome trace's "cat": "kernel")
KERNEL = "kernel"


def kernel_counts(events: Iterable[Any]) -> dict[str, int]:
    """Kernel name -> launches, from Kineto events (``activity_type()``, ``name()``); memcpy,
    memset and CPU records are left out, as the trace's kernel table leaves them out."""
    counts = Counter(e.name() for e in events if _activity(e) == KERNEL)
    return dict(sorted(counts.items()))


def _activity(event: Any) -> str:
    try:
        return str(event.activity_type())
    except (AttributeError, RuntimeError):
        return ""


def why_not(use_cuda: bool, capture: str) -> str | None:
    if not use_cuda:
        return "no CUDA device (no kernels)"
    if capture != "torch":
        return f"--capture {capture}: an outside profiler owns CUPTI"
    return None


def record(fn: Callable, inputs: tuple, sync: Callable[[], None]) -> dict[str, int]:
    """One call of ``fn(*inputs)`` with CUDA kernel activity only; its kernels by name."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*inputs)
        sync()
    results = getattr(prof.profiler, "kineto_results", None)
    return kernel_counts(results.events() if results is not None else [])
