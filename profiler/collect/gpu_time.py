"""GPU time beside latency: trtexec's split of one call into the device's work (GPU time, launch
gaps excluded) and the host's time to launch it (enqueue), measured without the profiler in a
window of its own after the timed one, as many iterations as the timed window (result.json:
``timing.gpu_compute``; per iteration in latency.csv and processes.csv).

Method, per iteration, all on the current CUDA stream (a call queued behind a blocking kernel,
as NVBench's blocking-kernel method does; unlike NVBench's "cold" time the L2 cache is not
flushed between calls: the figure is hot-L2, at warm clocks):

1. ``torch.cuda._sleep(cycles)``: a kernel that spins the stream for a number of SM cycles;
2. a start CUDA event, recorded behind the sleep;
3. the call, with no synchronize inside;
4. ``start.query()`` right after the call returns: still False means the GPU was still sleeping
   when the host had launched all of the call's work, so the call's kernels and copies queued
   up behind the sleep and then ran back to back;
5. an end event, then a synchronize: end - start is the GPU time of that call, the host's
   launch gaps excluded (the device's own few microseconds between queued kernels stay in it).

The sleep is sized from the enqueue time: ``SLEEP_FACTOR`` x the median enqueue time of the
timed window (without one, of three plain calls, perf_counter, synchronized after each), never
below ``FLOOR_MS``, never above ``CAP_MS``; cycles per ms are measured once by timing a sleep of
one ms at the device's rated clock with CUDA events (so the conversion is the clock the SM
really runs at). An attempt whose start event had already completed when the call returned is
redone (the sleep was too short: the GPU waited for the host): it is counted in
``invalid_iterations``, the sleep grows (to twice the longer of the sleep and that enqueue time)
and the iteration is tried again, ``TRIES`` times at most (then back to the base sleep, which
grows only when more than one iteration in ``REBASE_EVERY`` was redone). When the first
iteration fails all its tries, the call waits for the GPU inside (a host synchronize, a
``.item()``, a pageable copy: its enqueue time grows with the sleep), and the figures are "not
measured: the call waits for the GPU inside (host sync)".

Enqueue is the host's time to return from the call in the *timed* window (perf_counter around
the call, inside the CUDA event pair, no synchronize inside): the GPU there runs the call as it
does for a caller. The host's time to return from the call behind the sleep is kept apart
(``held_enqueue_p50_ms``): launching onto a stream that holds queued work costs the host more
than launching onto an idle one (on the H100, eager ResNet50: docs/gpu/h100/verdicts), which is
why an enqueue measured behind the sleep read 12-25 % above the timed latency.

Cost: one extra window of as many iterations as the timed one; each iteration costs one sleep
kernel (about SLEEP_FACTOR x the enqueue time) plus the call and a synchronize. Only on a CUDA
GPU, for --workload forward (one generation enqueues for as long as it runs; holding the GPU
that long per generation costs more than the timed window).

Limits: work the call launches on streams other than the current one, without joining them
back to it, is outside the events (ONNX Runtime's own stream, for one). A call that launches
more kernels than CUDA's launch queue holds blocks the host until the GPU drains it, so it reads
as a host sync. The sleep keeps the SM clock up; the call's kernels then run at the clock the
sleep left, not at the clock an idle GPU starts from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profiler.analysis.timed_window import percentile
from profiler.runs.result import GpuCompute
from profiler.runs.workloads import workload as workload_facts

#: the window: as many iterations as the timed window, at most this many
MAX_ITERATIONS = 10_000
#: the sleep: SLEEP_FACTOR x the enqueue time, at least FLOOR_MS and at most CAP_MS (a short
#: sleep is redone grown, so the factor trades redone iterations against sleeping time)
SLEEP_FACTOR = 1.5
#: the base sleep grows when more than one iteration in this many was redone
REBASE_EVERY = 10
FLOOR_MS = 0.2
CAP_MS = 2000.0
#: attempts of one iteration before it is given up (the first one: the call syncs inside)
TRIES = 3
#: the calibration sleep: one ms at the device's rated clock
CALIBRATION_MS = 1.0

METHOD = (
    "CUDA events around one call queued behind a torch.cuda._sleep kernel (its work runs "
    "back to back, launch gaps excluded), as many iterations as the timed window; "
    "enqueue: perf_counter around the call in the timed window, no sync inside"
)
NO_GPU = "no GPU"
FORWARD_ONLY = "measured for --workload forward only"
HOST_SYNC = "the call waits for the GPU inside (host sync)"


# ---- pure parts: sizing the sleep, one window's accounting, the summary ----------------------


def choose_sleep_ms(
    enqueue_ms: float,
    factor: float = SLEEP_FACTOR,
    floor_ms: float = FLOOR_MS,
    cap_ms: float = CAP_MS,
) -> float:
    """How long to hold the stream for a call that enqueues in ``enqueue_ms``."""
    if not enqueue_ms > 0:  # NaN or nothing measured: the floor
        return floor_ms
    return min(cap_ms, max(floor_ms, factor * enqueue_ms))


def grown_sleep_ms(sleep_ms: float, enqueue_ms: float, cap_ms: float = CAP_MS) -> float:
    """The next sleep after one that ended before the call was enqueued: twice the longer of
    the sleep and the enqueue time seen."""
    return min(cap_ms, 2.0 * max(sleep_ms, enqueue_ms))


def cycles_per_ms(cycles: int, measured_ms: float, rated_khz: float) -> float:
    """SM cycles per ms from a sleep of ``cycles`` that took ``measured_ms`` on the device; the
    rated clock (kHz = cycles per ms) when the measurement is unusable."""
    if measured_ms > 0 and cycles > 0:
        return cycles / measured_ms
    return float(rated_khz)


def sleep_cycles(sleep_ms: float, per_ms: float) -> int:
    """The cycles torch.cuda._sleep spins for ``sleep_ms`` (at least one)."""
    return max(1, int(round(sleep_ms * per_ms)))


@dataclass(frozen=True)
class Attempt:
    """One call behind one sleep: its enqueue and device times (ms), and whether the start event
    was still pending when the call returned (the measurement holds only then)."""

    enqueue_ms: float
    gpu_ms: float
    held: bool


@dataclass
class Tally:
    """One window's valid figures and its invalid attempts."""

    gpu_ms: list[float] = field(default_factory=list)
    enqueue_ms: list[float] = field(default_factory=list)
    invalid: int = 0
    host_sync: bool = False
    sleep_ms: float = 0.0  # the longest sleep that held


def run_window(
    attempt: Callable[[float], Attempt], iterations: int, enqueue_estimate_ms: float
) -> Tally:
    """Up to ``iterations`` valid attempts: each invalid one is counted, its sleep grown and
    tried again (``TRIES`` in all); the first iteration failing every try is a host sync, and
    the window ends there. A grown sleep holds for that iteration's tries only: one slow
    enqueue (a host hiccup) must not lengthen every later iteration; the base sleep grows only
    when more than one iteration in ``REBASE_EVERY`` needed a longer one."""
    tally = Tally()
    base_ms = choose_sleep_ms(enqueue_estimate_ms)
    for index in range(iterations):
        sleep_ms = base_ms
        for _ in range(TRIES):
            got = attempt(sleep_ms)
            if got.held:
                tally.gpu_ms.append(got.gpu_ms)
                tally.enqueue_ms.append(got.enqueue_ms)
                tally.sleep_ms = max(tally.sleep_ms, sleep_ms)
                break
            tally.invalid += 1
            sleep_ms = grown_sleep_ms(sleep_ms, got.enqueue_ms)
            if tally.invalid >= 2 and tally.invalid * REBASE_EVERY > index + 1:
                base_ms = max(base_ms, sleep_ms)
        else:
            if not tally.gpu_ms:
                tally.host_sync = True
                return tally
    return tally


def summarise(tally: Tally, enqueue_ms: list[float] | tuple[float, ...] = ()) -> GpuCompute:
    """p50 and p90 of the valid iterations' GPU times and of the timed window's enqueue times
    (``enqueue_ms``; the held calls' own when the timed window recorded none), with the
    accounting; the reason when nothing valid was measured."""
    if tally.host_sync or not tally.gpu_ms:
        return GpuCompute(invalid_iterations=tally.invalid, method=METHOD, not_measured=HOST_SYNC)
    gpu, held = sorted(tally.gpu_ms), sorted(tally.enqueue_ms)
    enqueue = sorted(enqueue_ms) or held
    return GpuCompute(
        gpu_p50_ms=percentile(gpu, 50),
        gpu_p90_ms=percentile(gpu, 90),
        enqueue_p50_ms=percentile(enqueue, 50),
        enqueue_p90_ms=percentile(enqueue, 90),
        iterations=len(gpu),
        invalid_iterations=tally.invalid,
        sleep_ms=round(tally.sleep_ms, 4),
        method=METHOD,
        held_enqueue_p50_ms=percentile(held, 50),
    )


@dataclass(frozen=True)
class GpuWindow:
    """The GPU-time window: its summary (result.json) and each valid iteration's GPU time."""

    figures: GpuCompute
    gpu_ms: tuple[float, ...] = ()


def why_not(use_cuda: bool, workload: str | None) -> str | None:
    """Why GPU compute is not measured in this run, or None when it is (``workload`` None: a
    phase of a step, measured whatever the workload)."""
    if not use_cuda:
        return NO_GPU
    if workload is not None and not workload_facts(workload).gpu_time:
        return FORWARD_ONLY
    return None


def window_iterations(timed_iterations: int) -> int:
    return max(1, min(timed_iterations, MAX_ITERATIONS))


# ---- on the GPU -----------------------------------------------------------------------------


def measure(
    fn: Callable[..., Any],
    inputs: tuple,
    timed_iterations: int,
    use_cuda: bool,
    workload: str | None = "forward",
    cuda=None,
    clock: Callable[[], float] = time.perf_counter,
    enqueue_ms: list[float] | tuple[float, ...] = (),
    setup: Callable[[], object] | None = None,
) -> GpuWindow:
    """The GPU-time window after the timed one (see the module doc); on a CPU, or for a
    workload other than forward, only why it was not measured. ``enqueue_ms``: the timed
    window's enqueue times. ``setup``: called and synchronized before each call, outside what
    is measured (the state a call needs: a generation's prefill before one decode step).
    ``cuda`` is torch.cuda (a test passes a simulated device, and its ``clock``)."""
    reason = why_not(use_cuda, workload)
    if reason is not None:
        return GpuWindow(GpuCompute(not_measured=reason))
    if cuda is None:
        import torch

        cuda = torch.cuda
    cuda.synchronize()
    per_ms = _calibrate(cuda)
    # the timed window's median enqueue (one slow call cannot size the sleep of the whole
    # window: on the H100, three plain calls made it 0.9-2.7 s long), else a few plain calls
    estimate = (
        percentile(sorted(enqueue_ms), 50)
        if len(enqueue_ms) >= 3
        else _enqueue_estimate(cuda, fn, inputs, clock, setup=setup)
    )
    tally = run_window(
        _attempt(cuda, fn, inputs, per_ms, clock, setup),
        window_iterations(timed_iterations),
        estimate,
    )
    cuda.synchronize()
    figures = summarise(tally, enqueue_ms)
    return GpuWindow(figures, () if figures.not_measured else tuple(tally.gpu_ms))


def _calibrate(cuda) -> float:
    """SM cycles per ms: a sleep of CALIBRATION_MS at the rated clock, timed with events (twice;
    the second counts, after the first brought the clock up)."""
    rated_khz = cuda.get_device_properties(cuda.current_device()).clock_rate
    cycles = sleep_cycles(CALIBRATION_MS, rated_khz)
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    for _ in range(2):
        start.record()
        cuda._sleep(cycles)
        end.record()
        end.synchronize()
    return cycles_per_ms(cycles, start.elapsed_time(end), rated_khz)


def _enqueue_estimate(cuda, fn, inputs, clock, calls: int = 3, setup=None) -> float:
    """The median host time (ms) of a few plain calls, each synchronized after its timing."""
    times = []
    for _ in range(calls):
        if setup is not None:
            setup()
            cuda.synchronize()
        began = clock()
        fn(*inputs)
        times.append((clock() - began) * 1000.0)
        cuda.synchronize()
    return percentile(sorted(times), 50)


def _attempt(cuda, fn, inputs, per_ms: float, clock, setup=None) -> Callable[[float], Attempt]:
    """One call behind a sleep of ``sleep_ms`` (the method of the module doc); ``setup``
    first, synchronized."""

    def attempt(sleep_ms: float) -> Attempt:
        if setup is not None:
            setup()
            cuda.synchronize()
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        cuda._sleep(sleep_cycles(sleep_ms, per_ms))
        start.record()
        began = clock()
        fn(*inputs)
        enqueue_ms = (clock() - began) * 1000.0
        held = not start.query()
        end.record()
        end.synchronize()
        return Attempt(enqueue_ms, start.elapsed_time(end), held)

    return attempt
