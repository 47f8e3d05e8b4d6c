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

import json
import os
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable

#: the category of a kernel record in the trace torch.profiler exports (the kernel table's)
KERNEL = "kernel"


def kernel_counts(trace: dict) -> dict[str, int]:
    """Kernel name -> launches, from an exported chrome trace: complete events of category
    ``kernel``; memcpy, memset and CPU records are left out, as the kernel table leaves them."""
    counts = Counter(
        str(e.get("name"))
        for e in trace.get("traceEvents", [])
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == KERNEL
    )
    return dict(sorted(counts.items()))


def why_not(use_cuda: bool, capture: str) -> str | None:
    if not use_cuda:
        return "no CUDA device (no kernels)"
    if capture != "torch":
        return f"--capture {capture}: an outside profiler owns CUPTI"
    return None


def record(fn: Callable, inputs: tuple, sync: Callable[[], None]) -> dict[str, int]:
    """One call of ``fn(*inputs)`` with CUDA kernel activity only; its kernels by name, read
    from the trace that session exports (the names as the profiled steps' trace writes them;
    Kineto's in-memory events differ between torch versions)."""
    import torch

    from profiler.collect.device import inductor_left_unimported

    # "Profiler clears events at the end of each cycle"
    with warnings.catch_warnings(), inductor_left_unimported():
        warnings.simplefilter("ignore", UserWarning)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn(*inputs)
            sync()
    handle, path = tempfile.mkstemp(prefix="infer-profiler-untraced-", suffix=".json")
    os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            return kernel_counts(json.load(f))
    finally:
        os.unlink(path)
