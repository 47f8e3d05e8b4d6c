"""GPU compute and enqueue time (profiler.collect.gpu_time): the sleep's size, one window's
accounting (invalid attempts redone, a host sync recognised, no time budget), the summary, the
method's wiring on a simulated device (a virtual timeline: nothing is timed), result.json's
record and the headline's line. The GPU figures themselves need a GPU run."""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgspec
import pytest

from profiler import runs
from profiler.collect import gpu_time
from profiler.collect.gpu_time import Attempt, Tally
from profiler.runs.result import GpuCompute
from tests.conftest import FIXTURES

RUN = FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"


# ---- sizing the sleep ------------------------------------------------------------------------


def test_the_sleep_is_one_and_a_half_enqueue_times_within_its_floor_and_cap():
    assert gpu_time.SLEEP_FACTOR == 1.5
    assert gpu_time.choose_sleep_ms(1.5) == pytest.approx(2.25)
    assert gpu_time.choose_sleep_ms(0.01) == gpu_time.FLOOR_MS
    assert gpu_time.choose_sleep_ms(float("nan")) == gpu_time.FLOOR_MS
    assert gpu_time.choose_sleep_ms(0.0) == gpu_time.FLOOR_MS
    assert gpu_time.choose_sleep_ms(10 * gpu_time.CAP_MS) == gpu_time.CAP_MS


def test_a_sleep_that_was_too_short_grows_past_the_enqueue_time_seen():
    assert gpu_time.grown_sleep_ms(1.0, 3.0) == pytest.approx(6.0)
    assert gpu_time.grown_sleep_ms(4.0, 3.0) == pytest.approx(8.0)
    assert gpu_time.grown_sleep_ms(gpu_time.CAP_MS, 1.0) == gpu_time.CAP_MS


def test_cycles_come_from_the_measured_clock_else_the_rated_one():
    # 1,980,000 kHz rated; the sleep of that many cycles took 2 ms: the SM ran at half of it
    assert gpu_time.cycles_per_ms(1_980_000, 2.0, 1_980_000) == pytest.approx(990_000)
    assert gpu_time.cycles_per_ms(1_980_000, 0.0, 1_980_000) == 1_980_000
    assert gpu_time.sleep_cycles(2.0, 990_000) == 1_980_000
    assert gpu_time.sleep_cycles(0.0, 990_000) == 1


# ---- one window's accounting -----------------------------------------------------------------


def call(enqueue_ms: float, gpu_ms: float, log: list | None = None):
    """A call that enqueues in ``enqueue_ms`` (a float, or a list consumed one per attempt) and
    keeps the device busy ``gpu_ms``: it holds when the sleep outlasts its enqueue."""

    def attempt(sleep_ms: float) -> Attempt:
        enqueue = enqueue_ms.pop(0) if isinstance(enqueue_ms, list) else enqueue_ms
        if log is not None:
            log.append(sleep_ms)
        return Attempt(enqueue, gpu_ms, held=sleep_ms > enqueue)

    return attempt


def test_a_window_of_valid_attempts():
    tally = gpu_time.run_window(call(0.5, 2.0), 10, 0.5)
    assert (len(tally.gpu_ms), tally.invalid, tally.host_sync) == (10, 0, False)
    assert tally.gpu_ms == [2.0] * 10 and tally.enqueue_ms == [0.5] * 10
    assert tally.sleep_ms == pytest.approx(0.75)


def test_a_sleep_that_ended_too_early_is_counted_and_redone_longer():
    sleeps = []
    # the estimate said 0.3 ms, the call then enqueues in 1.0 ms: the first sleep (0.45) is
    # short; the next is twice the longer of the sleep and the enqueue seen
    tally = gpu_time.run_window(call(1.0, 2.0, sleeps), 5, 0.3)
    assert tally.invalid == 2 and len(tally.gpu_ms) == 5 and not tally.host_sync
    # the second iteration starts from the base sleep again; redone twice within
    # REBASE_EVERY iterations, the base grows to the sleep that held
    assert sleeps == pytest.approx([0.45, 2.0, 0.45, 2.0, 2.0, 2.0, 2.0])
    assert tally.sleep_ms == pytest.approx(2.0)


def test_one_slow_enqueue_lengthens_that_iteration_only():
    sleeps = []
    # a host hiccup (3 ms) at the fourth iteration, then the call's usual 0.5 ms again
    enqueues = [0.5] * 3 + [3.0] + [0.5] * 7
    tally = gpu_time.run_window(call(enqueues, 2.0, sleeps), 10, 0.5)
    assert tally.invalid == 1 and len(tally.gpu_ms) == 10
    assert sleeps == pytest.approx([0.75] * 3 + [0.75, 6.0] + [0.75] * 6)
    assert tally.sleep_ms == pytest.approx(6.0)  # the longest sleep that held


def test_two_hiccups_far_apart_leave_the_base_sleep_alone():
    sleeps = []
    hiccups = {3, 3 + 2 * gpu_time.REBASE_EVERY + 5}
    enqueues = []
    for i in range(40):
        enqueues += [3.0, 0.5] if i in hiccups else [0.5]
    tally = gpu_time.run_window(call(enqueues, 2.0, sleeps), 40, 0.5)
    assert tally.invalid == 2 and len(tally.gpu_ms) == 40
    assert sleeps[-1] == pytest.approx(0.75) and max(sleeps) == pytest.approx(6.0)
    assert sum(s > 1 for s in sleeps) == 2  # only the two redone attempts slept longer


def test_a_call_that_waits_for_the_gpu_inside_is_a_host_sync():
    sleeps = []

    def syncing(sleep_ms: float) -> Attempt:  # the host waits out the sleep and the work
        sleeps.append(sleep_ms)
        return Attempt(sleep_ms + 2.0, 2.0, held=False)

    tally = gpu_time.run_window(syncing, 50, 2.0)
    assert tally.host_sync and tally.invalid == gpu_time.TRIES and not tally.gpu_ms
    assert len(sleeps) == gpu_time.TRIES and sleeps == sorted(sleeps)  # each try longer
    record = gpu_time.summarise(tally)
    assert record.not_measured == gpu_time.HOST_SYNC
    assert record.gpu_p50_ms is None and record.invalid_iterations == gpu_time.TRIES


def test_a_later_iteration_that_fails_every_try_is_skipped_not_a_host_sync():
    # valid, then TRIES attempts that do not hold (a hiccup), then valid again
    held = [True] + [False] * gpu_time.TRIES + [True, True]

    def flaky(sleep_ms: float) -> Attempt:
        return Attempt(0.5, 1.0, held=held.pop(0))

    tally = gpu_time.run_window(flaky, 4, 0.5)
    assert not tally.host_sync and len(tally.gpu_ms) == 3 and tally.invalid == gpu_time.TRIES


def test_the_window_takes_every_iteration_asked_with_no_time_budget():
    import inspect

    calls = []

    def slow(sleep_ms: float) -> Attempt:  # however long each takes: no clock is read
        calls.append(sleep_ms)
        return Attempt(0.5, 1.0 + len(calls) / 1000, held=True)

    tally = gpu_time.run_window(slow, 250, 0.5)
    assert len(tally.gpu_ms) == 250 == len(calls) and tally.invalid == 0
    assert tally.gpu_ms == sorted(tally.gpu_ms)  # in the order taken, one per iteration
    assert "budget_s" not in inspect.signature(gpu_time.run_window).parameters


def test_the_summary_is_p50_and_p90_of_the_valid_iterations():
    tally = Tally(
        gpu_ms=[5.0, 1.0, 3.0, 2.0, 4.0],
        enqueue_ms=[0.5, 0.1, 0.3, 0.2, 0.4],
        invalid=2,
        sleep_ms=1.23456,
    )
    record = gpu_time.summarise(tally)
    assert (record.gpu_p50_ms, record.gpu_p90_ms) == (3.0, pytest.approx(4.6))
    # no timed window's enqueue given: the held calls' own
    assert (record.enqueue_p50_ms, record.enqueue_p90_ms) == (0.3, pytest.approx(0.46))
    assert record.held_enqueue_p50_ms == 0.3
    assert (record.iterations, record.invalid_iterations, record.not_measured) == (5, 2, None)
    assert record.sleep_ms == pytest.approx(1.2346) and record.method == gpu_time.METHOD


def test_enqueue_comes_from_the_timed_window_and_the_held_one_is_kept_apart():
    tally = Tally(gpu_ms=[5.0, 1.0, 3.0, 2.0, 4.0], enqueue_ms=[0.5, 0.1, 0.3, 0.2, 0.4])
    record = gpu_time.summarise(tally, [0.22, 0.18, 0.2, 0.21, 0.19, 0.2, 0.2])
    assert record.enqueue_p50_ms == pytest.approx(0.2)
    assert record.enqueue_p90_ms == pytest.approx(0.214)
    assert record.held_enqueue_p50_ms == 0.3  # behind the sleep: launching costs more there
    assert record.gpu_p50_ms == 3.0 and record.iterations == 5


def test_why_not_measured():
    assert gpu_time.why_not(False, "forward") == "no GPU"
    assert gpu_time.why_not(False, "generate") == "no GPU"
    assert gpu_time.why_not(True, "generate") == gpu_time.FORWARD_ONLY
    assert gpu_time.why_not(True, "forward") is None
    # as many iterations as the timed window, up to MAX_ITERATIONS
    assert gpu_time.window_iterations(100) == 100
    assert gpu_time.window_iterations(7) == 7
    assert gpu_time.window_iterations(0) == 1
    assert gpu_time.window_iterations(10 * gpu_time.MAX_ITERATIONS) == gpu_time.MAX_ITERATIONS


def test_on_a_cpu_nothing_of_cuda_is_touched():
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"torch.cuda.{name} called on a CPU run")

    window = gpu_time.measure(lambda: None, (), 100, False, "forward", cuda=Untouchable())
    assert window.figures == GpuCompute(not_measured="no GPU") and window.gpu_ms == ()
    window = gpu_time.measure(lambda: None, (), 100, True, "generate", cuda=Untouchable())
    assert window.figures == GpuCompute(not_measured=gpu_time.FORWARD_ONLY)


# ---- the method on a simulated device --------------------------------------------------------


class SimCuda:
    """One stream on a virtual timeline (ms): kernels queue behind each other, the host pays a
    launch cost per call, events mark the stream, the SM runs at ``real_khz`` (the rated clock
    says ``rated_khz``). Stands in for torch.cuda in gpu_time.measure."""

    def __init__(self, rated_khz: float = 1_980_000, real_khz: float = 1_500_000) -> None:
        self.host = 0.0  # the host's clock
        self.free_at = 0.0  # when the work queued so far ends
        self.rated_khz, self.real_khz = rated_khz, real_khz

    def launch(self, duration_ms: float, launch_ms: float = 0.005) -> None:
        self.host += launch_ms
        self.free_at = max(self.host, self.free_at) + duration_ms

    def clock(self) -> float:
        return self.host / 1000.0

    def synchronize(self) -> None:
        self.host = max(self.host, self.free_at)

    def _sleep(self, cycles: int) -> None:
        self.launch(cycles / self.real_khz)

    def get_device_properties(self, index):
        return SimpleNamespace(clock_rate=self.rated_khz)

    def current_device(self) -> int:
        return 0

    def Event(self, enable_timing: bool = False):
        return SimEvent(self)


class SimEvent:
    def __init__(self, device: SimCuda) -> None:
        self.device, self.at = device, None

    def record(self) -> None:
        self.device.host += 0.002
        self.at = max(self.device.host, self.device.free_at)

    def query(self) -> bool:
        return self.device.host >= self.at

    def synchronize(self) -> None:
        self.device.host = max(self.device.host, self.at)

    def elapsed_time(self, other: SimEvent) -> float:
        return other.at - self.at


def launch_bound(
    device: SimCuda,
    kernels: int = 20,
    launch_ms: float = 0.05,
    kernel_ms: float = 0.01,
    sync: bool = False,
):
    """A call launching ``kernels`` kernels, each ``launch_ms`` of host time and ``kernel_ms`` on
    the device; ``sync``: it waits for the GPU at its end (an .item())."""

    def fn():
        for _ in range(kernels):
            device.launch(kernel_ms, launch_ms)
        if sync:
            device.synchronize()

    return fn


def test_gpu_compute_is_the_work_back_to_back_and_enqueue_the_host_side():
    device = SimCuda()
    fn = launch_bound(device)  # enqueue 1.0 ms, 0.2 ms of kernels: launch-bound
    window = gpu_time.measure(fn, (), 100, True, "forward", cuda=device, clock=device.clock)
    record = window.figures
    assert record.not_measured is None and record.invalid_iterations == 0
    assert record.iterations == 100 == len(window.gpu_ms)  # as long as the timed window
    assert record.gpu_p50_ms == pytest.approx(0.2)  # not the 1 ms the host took to launch it
    assert all(v == pytest.approx(0.2) for v in window.gpu_ms)
    # no timed window's enqueue given: the held calls' own
    assert record.enqueue_p50_ms == pytest.approx(1.0)
    assert record.held_enqueue_p50_ms == pytest.approx(1.0)
    # the sleep was sized from the measured clock (1.5 GHz, rated 1.98): 1.5x the enqueue
    assert 1.4 < record.sleep_ms < 1.6
    timed = gpu_time.measure(
        fn, (), 10, True, "forward", cuda=device, clock=device.clock, enqueue_ms=[0.9] * 10
    ).figures
    assert timed.enqueue_p50_ms == pytest.approx(0.9)  # the timed window's
    assert timed.held_enqueue_p50_ms == pytest.approx(1.0)


def test_a_simulated_call_that_syncs_inside_is_not_measured():
    device = SimCuda()
    window = gpu_time.measure(
        launch_bound(device, sync=True), (), 100, True, "forward", cuda=device, clock=device.clock
    )
    record = window.figures
    assert record.not_measured == gpu_time.HOST_SYNC and window.gpu_ms == ()
    assert record.iterations == 0 and record.invalid_iterations == gpu_time.TRIES


def test_a_simulated_window_is_as_long_as_a_short_timed_window():
    device = SimCuda()
    window = gpu_time.measure(
        launch_bound(device), (), 8, True, "forward", cuda=device, clock=device.clock
    )
    assert window.figures.iterations == 8 == len(window.gpu_ms)


# ---- result.json and the headline ------------------------------------------------------------

MEASURED = GpuCompute(
    gpu_p50_ms=4.081,
    gpu_p90_ms=4.102,
    enqueue_p50_ms=0.912,
    enqueue_p90_ms=0.95,
    iterations=50,
    invalid_iterations=1,
    sleep_ms=2.0,
    method=gpu_time.METHOD,
)


def with_gpu_compute(record: GpuCompute | None):
    result = runs.read_result(RUN)
    return msgspec.structs.replace(
        result, timing=msgspec.structs.replace(result.timing, gpu_compute=record)
    )


@pytest.mark.parametrize("record", [MEASURED, GpuCompute(not_measured="no GPU")])
def test_result_json_round_trip_keeps_gpu_compute(tmp_path, record):
    result = with_gpu_compute(record)
    runs.write_result(tmp_path, result)
    again = runs.read_result(tmp_path)
    assert again.timing.gpu_compute == record
    assert again == result
    written = json.loads((tmp_path / "result.json").read_text())["timing"]["gpu_compute"]
    assert (
        list(written)[-1] == "method"
        if record.not_measured is None
        else written == {"not_measured": "no GPU"}
    )


def test_a_run_recorded_before_gpu_compute_reads_without_it():
    assert runs.read_result(RUN).timing.gpu_compute is None


def test_the_headline_names_gpu_compute_enqueue_and_latency():
    from profiler.analysis.headline import timed_figures
    from profiler.report.headline_view import gpu_compute_line

    timed = timed_figures(with_gpu_compute(MEASURED))
    assert timed.gpu_compute.gpu_p50_ms == 4.081
    line = gpu_compute_line(timed.gpu_compute, timed.p50_ms)
    assert line.startswith(
        "GPU compute p50 4.081 ms, enqueue p50 0.912 ms (host-synchronized latency p50 5.791 ms)"
    )
    assert "launch gaps excluded" in line and "50 iterations" in line and "1 redone" in line
    not_measured = timed_figures(with_gpu_compute(GpuCompute(not_measured=gpu_time.HOST_SYNC)))
    assert (
        gpu_compute_line(not_measured.gpu_compute, 5.791)
        == "GPU compute: not measured (the call waits for the GPU inside (host sync))"
    )
    assert timed_figures(runs.read_result(RUN)).gpu_compute is None
    assert gpu_compute_line(None, 5.791) is None


def test_the_run_view_and_the_headline_table_print_the_line():
    from io import StringIO

    from rich.console import Console

    from profiler.analysis.headline import headline_data
    from profiler.report.headline_view import print_headline
    from profiler.report.run_view import print_result

    out = StringIO()
    print_result(with_gpu_compute(GpuCompute(not_measured="no GPU")), Console(file=out, width=200))
    assert "GPU compute: not measured (no GPU)" in out.getvalue().splitlines()

    out = StringIO()
    print_headline(
        headline_data(with_gpu_compute(MEASURED), RUN / "result.json", None),
        Console(file=out, width=400),
    )
    lines = out.getvalue().splitlines()
    assert any(
        line.startswith(
            "GPU compute p50 4.081 ms, enqueue p50 0.912 ms (host-"
            "synchronized latency p50 5.8 ms)"  # to the figures its window's CV allows
        )
        for line in lines
    ), lines

    out = StringIO()  # a run recorded before: no line at all
    print_headline(
        headline_data(runs.read_result(RUN), RUN / "result.json", None),
        Console(file=out, width=400),
    )
    assert "GPU compute" not in out.getvalue()


def test_the_sleep_comes_from_the_timed_windows_enqueue_not_from_a_few_plain_calls(monkeypatch):
    # plain calls after the timed window that were slow (a host hiccup: 21 ms) size no sleep
    # when the timed window's enqueue times are there
    monkeypatch.setattr(gpu_time, "_enqueue_estimate", lambda *args, **kwargs: 21.0)
    device = SimCuda()
    fn = launch_bound(device)  # enqueue 1.0 ms
    record = gpu_time.measure(
        fn, (), 10, True, "forward", cuda=device, clock=device.clock, enqueue_ms=[1.0] * 10
    ).figures
    assert 1.4 < record.sleep_ms < 1.6 and record.iterations == 10
    alone = gpu_time.measure(fn, (), 10, True, "forward", cuda=device, clock=device.clock).figures
    assert alone.sleep_ms == pytest.approx(31.5, rel=0.05)  # no timed window: the plain calls
