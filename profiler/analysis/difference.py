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
"""

from __future__ import annotations

import msgspec
import pandas as pd

from profiler.analysis.headline import differences, gpu_state_of
from profiler.analysis.records import Difference, Explanation, KernelShare
from profiler.runs.gpu_record import GpuState
from profiler.runs.result import RunResult
from profiler.trace.rules import distinct_short_names

KERNEL_SHARE = 0.01
CLOCK_TOLERANCE = 0.02
KERNEL_TIME_TOLERANCE = 0.03
LISTED = 5  # kernels named per side in a line

CLOCK, KERNELS, CLOCK_AND_KERNELS, KERNEL_TIME, HOST, NONE = (
    "clock",
    "kernels",
    "clock and kernels",
    "kernel time",
    "host",
    "none",
)


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


def _names(kernels: list[KernelShare]) -> str:
    named = ", ".join(f"{k.name} ({100 * k.share:.1f} %)" for k in kernels[:LISTED])
    return named + (f" and {len(kernels) - LISTED} more" if len(kernels) > LISTED else "")


def explain_difference(
    kernels_a: pd.DataFrame,
    kernels_b: pd.DataFrame,
    gpu_a: GpuState | None = None,
    gpu_b: GpuState | None = None,
    latency_ratio: float | None = None,
    differs_in: list[str] | None = None,
) -> Difference:
    """Why run B differs from run A (same config, unless ``differs_in`` names what differs in
    the work they ran); see the module doc for the rules."""
    configs = f"the runs differ in {', '.join(differs_in)}" if differs_in else None
    a, b = _by_name(kernels_a), _by_name(kernels_b)
    added, removed = _only_in(b, a), _only_in(a, b)
    material = [k for k in added + removed if k.share >= KERNEL_SHARE]

    ratio = _common_ratio(a, b)
    clock_a, clock_b = _clock(gpu_a), _clock(gpu_b)
    clocks_known = clock_a is not None and clock_b is not None
    clock_moved = (
        clock_a is not None and clock_b is not None and abs(clock_b / clock_a - 1) > CLOCK_TOLERANCE
    )
    time_moved = ratio is not None and abs(ratio - 1) > KERNEL_TIME_TOLERANCE

    lines = _kernel_lines(material, added, removed, configs)
    lines += _time_lines(clock_a, clock_b, gpu_b, ratio, material, clock_moved, time_moved, configs)
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
        lines.append(
            f"same kernels, same kernel time: the latency difference "
            f"({100 * (latency_ratio - 1):+.1f} %) is host-side (launch overhead, "
            "scheduling, other processes)"
        )
    else:
        cause = NONE
        lines.append(
            "same kernels and kernel time" + (" at the same clock" if clocks_known else "")
        )
    return Difference(cause, lines, added, removed, ratio, clock_a, clock_b)


def _common_ratio(a: pd.DataFrame, b: pd.DataFrame) -> float | None:
    """B's time over A's for the kernels both ran, at A's call counts."""
    common = a.index.intersection(b.index)
    ratio = None
    if len(common):
        ca, cb = a.loc[common], b.loc[common]
        base = float(ca["total_us"].sum())
        ratio = float((cb["total_us"] / cb["calls"] * ca["calls"]).sum()) / base if base else None
    return ratio


def _kernel_lines(
    material: list[KernelShare],
    added: list[KernelShare],
    removed: list[KernelShare],
    configs: str | None,
) -> list[str]:
    """The line on the kernels one run has and the other has not."""
    lines = []
    if material:
        lines.append(
            f"different kernels ({configs or 'autotuning picked other algorithms?'}): "
            "B adds "
            f"{_names(added) or 'none'}; B drops {_names(removed) or 'none'}"
        )
    elif added or removed:
        lines.append(
            f"kernel names differ only in small kernels (< {100 * KERNEL_SHARE:g} % "
            f"of kernel time each): {len(added)} added, {len(removed)} removed"
        )
    return lines


def _time_lines(
    clock_a: float | None,
    clock_b: float | None,
    gpu_b: GpuState | None,
    ratio: float | None,
    material: list[KernelShare],
    clock_moved: bool,
    time_moved: bool,
    configs: str | None,
) -> list[str]:
    """The lines on the SM clock and the time of the kernels both ran."""
    lines = []
    clocks_known = clock_a is not None and clock_b is not None
    if clock_moved and clock_a is not None and clock_b is not None:  # known when it moved
        change = clock_b / clock_a - 1
        reasons = gpu_b.throttle_reasons if gpu_b is not None else []
        line = (
            f"{'same kernels at a ' if not material else ''}"
            f"{'lower' if change < 0 else 'higher'} SM clock in B: {clock_b:.0f} MHz "
            f"against {clock_a:.0f} MHz ({100 * change:+.1f} %)"
        )
        if ratio is not None:
            line += (
                f"; the kernels both ran took {100 * (ratio - 1):+.1f} % (the clock alone "
                f"predicts {100 * (clock_a / clock_b - 1):+.1f} %)"
            )
        if reasons:
            line += f"; throttle reasons in B: {', '.join(reasons)}"
        lines.append(line)
    elif time_moved and ratio is not None:  # known when it moved
        lines.append(
            f"the kernels both ran took {100 * (ratio - 1):+.1f} % in B at "
            f"{'the same clock' if clocks_known else 'an unrecorded clock'}"
            f" ({configs or 'memory, contention or another tenant on the GPU'})"
        )
    if not clocks_known:
        lines.append(
            "SM clock not recorded for "
            + " and ".join(side for side, c in (("A", clock_a), ("B", clock_b)) if c is None)
        )
    return lines


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
    line = short = "; ".join(found.lines)
    names = sorted({k.name for k in found.added + found.removed}, key=len, reverse=True)
    for name, shortened in zip(names, distinct_short_names(names)):
        short = short.replace(name, shortened)
    return Explanation(
        **msgspec.structs.asdict(found),
        line=line,
        short_line=short,
        latency_ratio=latency_ratio,
        same_config=not differs_in,
        differs_in=differs_in,
        gpu_state_a=gpu_a.line(),
        gpu_state_b=gpu_b.line(),
    )
