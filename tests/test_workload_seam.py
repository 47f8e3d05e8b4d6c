"""The Workload seam (profiler.collect.workloads.protocol): a third workload, defined here, runs
through the same pipeline as forward and generate (profiler.collect.window, in harness order) and
the run's result, files and trace are what that workload said one step is, how it is timed and
how it is checked. Nothing is timed here: only what the pipeline did with the workload."""

import csv
import gzip
import json

import torch

from profiler.analysis.timed_window import TimedWindow
from profiler.collect import harness
from profiler.collect.backends.base import Prepared
from profiler.collect.workloads.protocol import RunContext
from profiler.runs import read_result
from profiler.runs.config import RunConfig
from tests.conftest import ROOT

STEPS = 4  # profiled steps: wait 0 + warmup 1 + active 3


class Halves:
    """One step: the model on each half of the batch, each half in a span of its own; timed per
    step by a counter the workload keeps (a fake clock: 1, 2, 3 ... ms), checked by comparing
    the halves' output with one call on the whole batch."""

    label = " halves"
    first_call = "first pair"
    iterations = "pairs"
    unit = "two half-batch forward passes"
    sync = "after each pair"
    phase_spans = ["first_half", "second_half"]
    counts_flops = False
    captures_graphs = False

    def __init__(self, run: RunContext) -> None:
        self.run = run
        self.calls = {"before_prepare": 0, "prepare": 0, "steps": 0}

    def before_prepare(self, timer) -> None:
        self.calls["before_prepare"] += 1

    def prepare(self) -> Prepared:
        self.calls["prepare"] += 1
        model = self.run.model.to(self.run.device).eval()
        (batch,) = self.run.inputs

        def pair(first, second):
            self.calls["steps"] += 1
            with torch.inference_mode():
                with torch.profiler.record_function("first_half"):
                    a = model(first)
                with torch.profiler.record_function("second_half"):
                    b = model(second)
            return torch.cat([a, b])

        half = batch.size(0) // 2
        self.model, self.batch = model, batch
        return Prepared(fn=pair, inputs=(batch[:half], batch[half:]), notes={"halves": 2})

    def time(self, step, iters, use_cuda, tick, deadline=None):
        latencies, output = [], None
        for i in range(iters):
            output = step.fn(*step.inputs)
            latencies.append(float(i + 1))  # the workload's own clock
            tick()
        return latencies, {"pairs": iters}, output

    def figures(self, window: TimedWindow, details) -> str:
        return f"{details['pairs']} pairs, p50 {window.p50_ms:.1f} ms"

    def check(self, step, output):
        with torch.inference_mode():
            whole = self.model(self.batch)
        equal = bool(torch.allclose(output, whole, atol=1e-5))
        return {
            "skipped": "halves compared with the whole batch",
            "reason": f"equal: {equal}",
        }, output

    def write(self, run_stage, details) -> list[str]:
        (run_stage / "pairs.txt").write_text(f"{details['pairs']}\n")
        return ["pairs.txt"]

    def generation(self, window, details):
        return None

    def phase_windows(self, details, use_cuda):
        return {}


def test_a_third_workload_runs_through_the_same_pipeline(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    built = []

    def halves(run):
        built.append(Halves(run))
        return built[-1]

    monkeypatch.setitem(harness.WORKLOADS, "forward", halves)
    config = RunConfig(
        model="tests.tiny_models:conv_net",
        batch_size=4,
        iters=5,
        timed_warmup=2,
        wait=0,
        warmup=1,
        active=3,
        gzip=True,
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb_logs",
    )
    result = harness.run(config, quiet=True)
    (workload,) = built

    # prepare once, before it whatever the workload keeps; one first call, the warm-up, the
    # timed window and the profiled steps all call the workload's step
    assert workload.calls["before_prepare"] == 1 and workload.calls["prepare"] == 1
    assert workload.calls["steps"] == 1 + 2 + 5 + STEPS

    # the timed window is the workload's times, and its record is built from them
    timing = result.timing
    assert timing.iters == 5 and timing.warmup_iters == 2
    assert (timing.min_ms, timing.p50_ms, timing.max_ms) == (1.0, 3.0, 5.0)
    assert timing.throughput_samples_per_s == 4 * 5 / (15 / 1000.0)
    assert timing.noise.n == 5 and timing.noise.median_ms == 3.0
    assert timing.unit == Halves.unit and timing.sync == Halves.sync
    with open(result.run_dir / "latency.csv", newline="") as handle:
        assert [float(row["latency_ms"]) for row in csv.DictReader(handle)] == [1, 2, 3, 4, 5]

    # checked as the workload checks; its files and the backend's notes land in the run
    assert result.numerics.skipped == "halves compared with the whole batch"
    assert result.numerics.reason == "equal: True"
    assert (result.run_dir / "pairs.txt").read_text() == "5\n"
    assert "pairs.txt" in result.backend.artifacts and result.backend.extra["halves"] == 2
    assert result.roofline_inputs is None and "flops" not in timing.phases_s
    assert result.output.shape == [4, 4]

    # profiled: one step per profiler step, the workload's spans inside each
    assert result.profile.step_is == Halves.unit
    assert result.profile.phase_spans == ["first_half", "second_half"]
    (trace_file,) = result.trace.files
    with gzip.open(trace_file, "rt") as handle:
        names = [e.get("name") for e in json.load(handle)["traceEvents"]]
    assert names.count("inference_step") == 3  # the active steps
    assert names.count("first_half") == names.count("second_half") == 3

    # result.json says what the run returned
    assert read_result(result.run_dir).timing.noise == timing.noise
