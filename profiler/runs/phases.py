"""Where a run's seconds go: wall-clock seconds per phase, in the order the phases ran.

The phases do not overlap, so their sum is at most the run's wall time; the gap is what no phase
covers (the checks and locks before the build, moving the finished folders into place). The
keys, in run order (a phase that did not run is absent):

imports        from the first line of profile.py to the harness's start (the Python modules:
               typer, torch, the profiler). The interpreter's own start-up before that line is
               not covered, and a run started in-process (not through profile.py) has no
               imports phase.
build          models.build: the model (a built-in one made on the run's device) and its inputs
flops          the FLOP count of one forward pass, or its reading from the cache (roofline_inputs;
               not for --workload generate)
prepare        the backend's prepare (export, compile or engine-cache load: result.json's
               backend compile_s / cache_load_s are parts of it)
first_call     the first call (Inductor compiles there)
graph_capture  --cuda-graphs: warm-up calls on a side stream, the capture and a checked replay
warm_up        the untimed warm-up
timed          the timed window
gpu_compute    GPU compute and enqueue time: a short window after the timed one (on a GPU,
               --workload forward; profiler.collect.gpu_time)
untraced_call  one call with CUDA kernel records only, the kernels the profiled steps are checked
               against (on a GPU, --capture torch; profiler.collect.untraced)
profile        the profiled steps (torch.profiler or the cuda-profiler-api window), without
trace_write    torch.profiler's trace handler writing the trace files
after_windows  the backend's own measurements after both windows (TensorRT layer timing)
numerics       the FP32 eager reference: its weights copied to the host (before prepare), its
               output loaded from the cache or computed (its build included), and one more call
repeat_runs    --repeat-runs: the extra timed windows in fresh processes
write          latency.csv, the other CSVs and the first writing of result.json
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

#: when this process began loading modules (time.perf_counter()): set once, by profile.py at
#: its first line; None when the process was started another way. `run` hands it to the harness
#: (profiler.collect.harness.run's ``started``), which claims no imports phase without one
process_mark: float | None = None

ORDER = (
    "imports",
    "build",
    "flops",
    "prepare",
    "first_call",
    "graph_capture",
    "warm_up",
    "timed",
    "gpu_compute",
    "untraced_call",
    "profile",
    "trace_write",
    "after_windows",
    "numerics",
    "repeat_runs",
    "write",
)
LABELS = {
    "first_call": "first call",
    "warm_up": "warm-up",
    "trace_write": "trace write",
    "after_windows": "layer timing",
    "repeat_runs": "repeat runs",
    "graph_capture": "graph capture",
    "gpu_compute": "GPU compute",
    "untraced_call": "untraced call",
}


class Phases:
    """Seconds per phase; ``with phases("timed"): ...`` adds the block's wall time."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)


def imports_s(harness_began: float, started: float | None) -> float | None:
    """Seconds from ``started`` (when the process began loading modules) to ``harness_began``
    (both perf_counter), or None when the start is not known."""
    return None if started is None else max(0.0, harness_began - started)


def ordered(seconds: dict[str, float]) -> dict[str, float]:
    """The phases in run order, each rounded to the millisecond."""
    known = [k for k in ORDER if k in seconds] + [k for k in seconds if k not in ORDER]
    return {k: round(seconds[k], 3) for k in known}
