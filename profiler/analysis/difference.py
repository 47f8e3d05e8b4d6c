"""Why two runs of one config differ, at the kernel level: the same kernels at another SM clock,
different kernels (autotuning — cuDNN's or cuBLAS's heuristics, ``cudnn.benchmark``, Inductor's
max-autotune — picked other algorithms: names added and removed), the same kernels taking longer
at the same clock, or nothing on the GPU at all (the difference is host-side). Torch-free.

Inputs: each run's kernel table (profiler.trace.kernels: one row per kernel name with ``name``,
``calls``, ``total_us``) and the GpuState of its timed window (profiler.runs.gpu_record), which
may be missing or "not recorded".

Rules (constants below):
- different kernels: a kernel name present in one run only holds at least ``KERNEL_SHARE``
  (1 %) of that run's kernel time (smaller ones are listed, not counted);
- another clock: the SM clocks (mean of the readings before and after each window) differ by
  more than ``CLOCK_TOLERANCE`` (2 %);
- kernel time: over the kernels both runs have, B's time per call at A's call counts against
  A's time (so runs that profiled different numbers of steps compare), beyond
  ``KERNEL_TIME_TOLERANCE`` (3 %); at another clock, a compute-bound kernel's time scales with
  clock A / clock B, which the line states beside the measured change;
- host-side: none of the above, while the latencies (``latency_ratio`` = B / A, when given)
  differ by more than ``KERNEL_TIME_TOLERANCE``.

Two runs of different configs (``differs_in``: what differs in the work they ran) get the same
evidence, but its causes are the configs, not autotuning or the machine; ``explain_runs`` finds
``differs_in`` from the two result.json files and is what `compare` prints and puts in --json.
The cause and its evidence are data (records.Difference); profiler.report.sentences says them
in words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from profiler.analysis.headline import differences, gpu_state_figures, gpu_state_of
from profiler.analysis.records import Cause, Difference, Explanation, KernelShare
from profiler.runs.gpu_record import GpuState
from profiler.runs.result import RunResult

if TYPE_CHECKING:  # frames arrive from the caller: a run that prints no diff imports no pandas
    import pandas as pd

KERNEL_SHARE = 0.01
CLOCK_TOLERANCE = 0.02
KERNEL_TIME_TOLERANCE = 0.03
#: kernels named per side in a line (profiler.report.sentences)
LISTED = 5

CLOCK: Final = "clock"
KERNELS: Final = "kernels"
CLOCK_AND_KERNELS: Final = "clock and kernels"
KERNEL_TIME: Final = "kernel time"
HOST: Final = "host"
NONE: Final = "none"


def _by_name(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby("name", sort=False)[["calls", "total_us"]].sum()


def _only_in(one: pd.DataFrame, other: pd.DataFrame) -> list[KernelShare]:
    total = float(one["total_us"].sum())
    rows = one.loc[~one.index.isin(other.index)].sort_values("total_us", ascending=False)
    return [
        KernelShare(str(name), float(us), float(us) / total if total else 0.0)
        for name, us in rows["total_us"].items()
    ]


def _clock(state: GpuState | None) -> float | None:
    return None if state is None or state.not_recorded else state.sm_clock_mhz


def explain_difference(
    kernels_a: pd.DataFrame,
    kernels_b: pd.DataFrame,
    gpu_a: GpuState | None = None,
    gpu_b: GpuState | None = None,
    latency_ratio: float | None = None,
    differs_in: list[str] | None = None,
) -> Difference:
    """Why run B differs from run A (same config, unless ``differs_in`` names what differs in
    the work they ran); see the module doc for the rules. The cause and its evidence; the views
    say it in words (profiler.report.sentences.difference_lines)."""
    a, b = _by_name(kernels_a), _by_name(kernels_b)
    added, removed = _only_in(b, a), _only_in(a, b)
    material = any(k.share >= KERNEL_SHARE for k in added + removed)

    ratio = _common_ratio(a, b)
    clock_a, clock_b = _clock(gpu_a), _clock(gpu_b)
    clock_moved = (
        clock_a is not None and clock_b is not None and abs(clock_b / clock_a - 1) > CLOCK_TOLERANCE
    )
    time_moved = ratio is not None and abs(ratio - 1) > KERNEL_TIME_TOLERANCE
    cause: Cause
    if material and clock_moved:
        cause = CLOCK_AND_KERNELS
    elif material:
        cause = KERNELS
    elif clock_moved:
        cause = CLOCK
    elif time_moved:
        cause = KERNEL_TIME
    elif latency_ratio is not None and abs(latency_ratio - 1) > KERNEL_TIME_TOLERANCE:
        cause = HOST
    else:
        cause = NONE
    return Difference(
        cause,
        added,
        removed,
        ratio,
        clock_a,
        clock_b,
        kernel_time_moved=time_moved,
        latency_ratio=latency_ratio,
        differs_in=list(differs_in or []),
        throttle_reasons_b=list(gpu_b.throttle_reasons) if gpu_b is not None else [],
    )


def _common_ratio(a: pd.DataFrame, b: pd.DataFrame) -> float | None:
    """B's time over A's for the kernels both ran, at A's call counts."""
    common = a.index.intersection(b.index)
    ratio = None
    if len(common):
        ca, cb = a.loc[common], b.loc[common]
        base = float(ca["total_us"].sum())
        ratio = float((cb["total_us"] / cb["calls"] * ca["calls"]).sum()) / base if base else None
    return ratio


#: RunConfig fields that say how a run is timed, profiled, written or cached, not what work it
#: ran: two runs that differ only in these are two runs of one config
NOT_THE_WORK = frozenset(
    {
        "run_name",
        "name",
        "runs_dir",
        "tb_dir",
        "replace",
        "cache_dir",
        "use_cache",
        "max_rel_error",
        "iters",
        "timed_warmup",
        "min_time",
        "repeat_runs",
        "wait",
        "warmup",
        "active",
        "repeat",
        "gzip",
        "record_shapes",
        "profile_memory",
        "with_stack",
        "with_flops",
        "memory_history",
        "capture",
        "seed",
    }
)
#: environment fields that change which kernels run (the GPU, its driver, the libraries)
ENVIRONMENT_OF_THE_WORK = (
    "environment.gpu.name",
    "environment.gpu.driver",
    "environment.torch",
    "environment.cuda_runtime",
    "environment.cudnn",
    "environment.packages.",
)


def differs_in_work(ra: RunResult, rb: RunResult) -> list[str]:
    """The fields of two runs' result.json that change the work they ran (config, precision,
    device, the GPU and the libraries; not the run's name, iterations or profiler schedule)."""
    found = []
    for key, _, _ in differences(ra, rb):
        section, _, rest = key.partition(".")
        if section == "config" and rest.split(".")[0] not in NOT_THE_WORK:
            found.append(rest)
        elif section in ("precision", "device") or key.startswith(ENVIRONMENT_OF_THE_WORK):
            found.append(key)
    return found


def explain_runs(
    ra: RunResult, rb: RunResult, kernels_a: pd.DataFrame, kernels_b: pd.DataFrame
) -> Explanation:
    """Why run B differs from run A, for `compare` and its --json (Explanation): from each
    run's kernel table (profiler.trace.kernels, from its profiled steps), the GPU state of each
    timed window (result.json; "not recorded" with the reason where it is missing), the timed
    p50 ratio, and what differs in the work they ran."""
    gpu_a, gpu_b = gpu_state_of(ra), gpu_state_of(rb)
    p50_a, p50_b = ra.timing.p50_ms, rb.timing.p50_ms
    latency_ratio = p50_b / p50_a if p50_a and p50_b else None
    differs_in = differs_in_work(ra, rb)
    found = explain_difference(kernels_a, kernels_b, gpu_a, gpu_b, latency_ratio, differs_in)
    return Explanation(
        **msgspec.structs.asdict(found),
        same_config=not differs_in,
        gpu_state_a=gpu_state_figures(ra),
        gpu_state_b=gpu_state_figures(rb),
    )
