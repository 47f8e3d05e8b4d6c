"""`advise`: the experiments each rule names, the plan's ranking, and --try on the CPU with a tiny
model (cells beside the re-run baseline, a failed experiment recorded as such, the budget of
cells, resume)."""

import json
from pathlib import Path

import msgspec
import pytest

from profiler.analysis import experiments
from profiler.analysis.advice import Advice
from profiler.analysis.experiments import plan, promise
from profiler.cli.documents import Advise
from profiler.commands import parse_budget
from profiler.errors import UserError

from .conftest import ROOT, default_signals

FIXTURE_RUN = ROOT / "tests" / "fixtures" / "h100_sweep" / "runs" / "gpu_sweep" / "pytorch_fp16_bs8"
FP32 = {
    "backend": "pytorch_fp32",
    "batch_size": 8,
    "tf32": False,
    "memory_format": "auto",
    "workload": "forward",
    "cuda_graphs": False,
}


def advice(rule, **figures):
    """Advice as a rule returns it; ``projected_speedup`` is the rule's projection (a bound for
    memory-bound, an estimate otherwise: profiler.analysis.advice)."""
    kind = (
        ("bound" if rule == "memory-bound" else "estimate")
        if "projected_speedup" in figures
        else None
    )
    return Advice(rule=rule, title=rule, action="", figures=figures, source="", projection=kind)


def changes(p):
    return [e.changes for e in p.experiments]


def test_each_rule_names_its_experiments():
    launch = plan([advice("launch-bound", idle_share=0.5, projected_speedup=2.0)], FP32)
    assert changes(launch) == [
        {"cuda_graphs": True},
        {"backend": "inductor_fp32"},
        {"backend": "ttrt_fp32"},
    ]  # cheapest first at one promise
    assert all(e.promise == pytest.approx(2.0) for e in launch.experiments)
    fp32 = plan([advice("fp32-cuda-cores", matrix_share=0.8)], FP32)
    assert {tuple(c.items()) for c in changes(fp32)} == {
        (("tf32", True),),
        (("backend", "pytorch_bf16"),),
        (("backend", "pytorch_fp16"),),
    }
    batch = plan([advice("batch-headroom", growth=0.4)], FP32)
    assert changes(batch) == [{"batch_size": 16}, {"batch_size": 32}]
    memory = plan([advice("memory-bound", speedup_bound=3.0, projected_speedup=3.0)], FP32)
    assert {"memory_format": "channels_last"} in changes(memory)
    assert {"backend": "pytorch_fp16"} in changes(memory)
    layers = plan([advice("trt-fp32-layers")], {**FP32, "backend": "ttrt_fp16"})
    assert layers.experiments == [] and "per layer" in layers.without["trt-fp32-layers"]


def test_the_conv_nets_channels_last_is_tried_on_are_the_models_of_that_name():
    from profiler.collect.models import CONV_MODELS

    assert experiments.CONV_MODELS == CONV_MODELS


def test_a_change_two_rules_name_is_one_experiment_with_the_larger_promise():
    both = plan(
        [
            advice("launch-bound", idle_share=0.5, projected_speedup=2.0),
            advice("memory-bound", speedup_bound=4.0, projected_speedup=4.0),
        ],
        FP32,
    )
    inductor = [e for e in both.experiments if e.changes == {"backend": "inductor_fp32"}]
    assert len(inductor) == 1 and inductor[0].rules == ("launch-bound", "memory-bound")
    assert inductor[0].promise == pytest.approx(4.0) and inductor[0].promise_kind == "bound"
    graphs = [e for e in both.experiments if e.changes == {"cuda_graphs": True}]
    assert graphs[0].promise == pytest.approx(2.0) and graphs[0].promise_kind == "estimate"
    # FP32 to FP16 halves the minimum bytes: that experiment's bound is twice
    half = [e for e in both.experiments if e.changes == {"backend": "pytorch_fp16"}]
    assert half[0].promise == pytest.approx(8.0) and half[0].promise_kind == "bound"


def test_what_the_run_already_does_is_no_experiment():
    done = plan(
        [advice("fp32-cuda-cores", matrix_share=0.8)],
        {**FP32, "backend": "pytorch_bf16", "tf32": True},
    )
    assert {"tf32": True} not in changes(done)
    assert {"backend": "pytorch_bf16"} not in changes(done)


def test_a_new_backend_family_is_planned_from_its_facts_alone(monkeypatch):
    """A family registered only in profiler.runs.backends: every rule's experiments are made
    for a run of it (no KeyError), and its facts (prefix, setup cost, which options it tries)
    drive the plan."""
    from profiler.runs import backends

    toy = backends.Family("toy", "toy_", setup_cost=2.0, tries_cuda_graphs=True)
    monkeypatch.setitem(backends.FAMILIES, "toy", toy)
    for precision in ("fp32", "fp16"):
        monkeypatch.setitem(
            backends.BACKENDS,
            f"toy_{precision}",
            backends.BackendSpec(
                f"toy_{precision}", "toy", precision, "a stand-in", needs_cuda=False
            ),
        )
    rules = [
        advice("launch-bound", idle_share=0.5, projected_speedup=2.0),
        advice("fp32-cuda-cores", matrix_share=0.8),
        advice("batch-headroom", growth=0.4),
        advice("low-occupancy"),
        advice("memory-bound", speedup_bound=3.0, projected_speedup=3.0),
        advice("trt-fp32-layers"),
    ]
    toy_run = {**FP32, "backend": "toy_fp32"}
    made = plan(rules, toy_run)
    assert {"cuda_graphs": True} in changes(made)  # the family tries CUDA graphs
    assert {"memory_format": "channels_last"} not in changes(made)  # ...but not channels_last
    assert {"backend": "toy_fp16"} in changes(made)  # its half precision, by its prefix
    assert experiments.cost({"backend": "toy_fp16"}, FP32) == 2.0
    # a family with no facts at all (a backend registered without a family row) is planned too
    monkeypatch.delitem(backends.FAMILIES, "toy")
    bare = plan(rules, toy_run)
    assert {"cuda_graphs": True} not in changes(bare)
    assert experiments.cost({"backend": "toy_fp16"}, FP32) == 1.0


def test_ranking_is_promise_per_cost():
    ranked = plan(
        [
            advice("launch-bound", idle_share=0.9, projected_speedup=10.0),
            advice("batch-headroom", growth=0.05, projected_speedup=1.05),
        ],
        FP32,
    )
    # cuda graphs (10x projected, cost 1) before a bigger batch (1.05x, cost 2)
    assert ranked.experiments[0].changes == {"cuda_graphs": True}
    # the precision rule: Amdahl at the datasheet's dense ratio of the precision tried (an
    # H100 SXM: FP16 989.4 / FP32 67 = 14.8x, TF32 494.7 / 67 = 7.4x)
    from profiler.analysis.advice import amdahl
    from profiler.analysis.roofline import dense_ratio

    h100 = "NVIDIA H100 80GB HBM3"
    assert dense_ratio(h100, "fp16") == pytest.approx(14.8, abs=0.05)
    fp32 = advice(
        "fp32-cuda-cores",
        matrix_share=1.0,
        dense_ratio_fp16=dense_ratio(h100, "fp16"),
        dense_ratio_tf32=dense_ratio(h100, "tf32"),
        projected_speedup=amdahl(1.0, dense_ratio(h100, "fp16")),
    )
    assert promise(fp32, {"backend": "pytorch_fp16"}, FP32) == pytest.approx(14.77, abs=0.01)
    assert promise(fp32, {"tf32": True}, FP32) == pytest.approx(7.38, abs=0.01)
    assert promise(advice("fp32-cuda-cores", matrix_share=1.0)) == 1.0  # no datasheet row


@pytest.mark.parametrize(
    "text, seconds", [("300", 300), ("90s", 90), ("5m", 300), ("1.5h", 5400), (" 2 min ", 120)]
)
def test_budget_durations(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "five", "-3m", "0", "3d"])
def test_bad_budgets_are_one_line(text):
    with pytest.raises(UserError, match="--budget takes a duration"):
        parse_budget(text)


def test_advise_without_try_shows_the_plan(cli):
    done = cli("advise", str(FIXTURE_RUN))
    assert done.code == 0, done.stderr
    assert "launch-bound" in done.stdout and "--cuda-graphs" in done.stdout
    assert "backend ttrt_fp16" in done.stdout and "--try" in done.stdout
    data = json.loads(cli("advise", str(FIXTURE_RUN), "--json").stdout)
    assert data["$schema"] == "infer-profiler/advise/4" and data["rows"] is None
    assert data["plan"][0]["changes"] == {"cuda_graphs": True}
    assert data["plan"][0]["projected_speedup"] > 1


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--budget", "5m"], "go with --try"),
        (["--try", "--budget", "soon"], "--budget takes a duration"),
        (["--try", "--max-cells", "0"], "--max-cells must be 1 or more"),
    ],
)
def test_advise_option_errors_are_one_line(cli, args, fragment):
    done = cli("advise", str(FIXTURE_RUN), *args)
    assert done.code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]


@pytest.fixture
def tiny_run(cli, monkeypatch):
    """A CPU run of the tiny conv net, and advice that names experiments runnable here (a
    bigger batch), one that fails here (TensorRT) and one refused here (CUDA graphs)."""
    done = cli(
        "run",
        "--backend",
        "pytorch_fp32",
        "--bs",
        "2",
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "5",
        "--timed-warmup",
        "1",
        "--active",
        "1",
    )
    assert done.code == 0, done.stderr
    monkeypatch.setitem(
        experiments.EXPERIMENTS,
        "batch-headroom",
        lambda config: [
            ("--bs 4", {"batch_size": 4}, "a test"),
            ("backend ttrt_fp32", {"backend": "ttrt_fp32"}, "a test"),
            ("--cuda-graphs", {"cuda_graphs": True}, "a test"),
        ],
    )
    import profiler.commands.advise as command

    monkeypatch.setattr(
        command,
        "advice_of",
        lambda side: [
            advice(
                "batch-headroom",
                throughput_by_bs=[(1, 100.0), (2, 150.0)],
                growth=0.5,
                from_bs=1,
                to_bs=2,
            )
        ],
    )
    return "runs/pytorch_fp32_bs2_conv_net"


def test_try_runs_the_experiments_beside_the_baseline(cli, tiny_run):
    done = cli("advise", tiny_run, "--try", "--processes", "2", "--json")
    assert done.code == 0, done.stderr
    data = json.loads(done.stdout)
    trial = data["trial"]
    # one promise (1.5x) for all: the cheapest first
    assert [c["label"] for c in trial["cells"]] == [
        "the run as it is",
        "--cuda-graphs",
        "--bs 4",
        "backend ttrt_fp32",
    ]
    # --processes 2: two rounds beside each cell's own run (which pairs with none)
    assert data["baseline"]["status"] == "ok" and data["baseline"]["processes"] == 3
    rows = {r["label"]: r for r in data["rows"]}
    bigger = rows["--bs 4"]
    assert bigger["status"] == "ok" and bigger["processes"] == 3
    assert bigger["figure"] == "per sample" and bigger["verdict"] in (
        "faster",
        "slower",
        "same",
        "undecided",
    )
    assert bigger["low"] <= bigger["speedup"] <= bigger["high"]
    assert bigger["kernels"]["launches_per_step"][0] is not None
    typed = msgspec.convert(data, Advise)  # the published document, read by attribute
    assert typed.trial.cells[2].status == "ok" and typed.rows[0].label == "--bs 4"
    assert typed.rows[0].judgement.speedup == bigger["speedup"]
    # experiments that cannot run here are recorded with their one-line reason, ranked last
    for label in ("backend ttrt_fp32", "--cuda-graphs"):
        assert rows[label]["status"] == "failed" and rows[label]["reason"], rows[label]
    assert data["rows"][0]["label"] == "--bs 4"
    assert "--cuda-graphs" in rows["--cuda-graphs"]["reason"]
    folder = Path("runs/advise_pytorch_fp32_bs2_conv_net")
    assert json.loads((folder / "trial.json").read_text())["cells"][2]["status"] == "ok"
    assert (folder / "pytorch_fp32_bs4_batch_size-4" / "processes.csv").is_file()
    assert (folder / "pytorch_fp32_bs2_baseline" / "processes.csv").is_file()
    # the same table as a self-contained HTML page beside the cells
    page = (folder / "report.html").read_text()
    assert data["report"].endswith("report.html")
    assert "What each experiment measured (ranked)" in page and "--bs 4" in page
    assert "per sample" in page and "failed: " in page and "<script" not in page


def test_a_budget_of_cells_or_time_stops_handing_out_cells(tmp_path, monkeypatch):
    """The trial's budget with a stand-in executor (no processes): cells stop being handed out
    after --max-cells cells or once the time is spent; the rest are 'not run'."""
    from profiler.runs.config import RunConfig
    from profiler.sweep import trial_cells
    from profiler.sweep.cell import CellOutcome

    class Instant:
        def __init__(self, settings):
            pass

        def run(self, jobs, on_start, on_done):
            for job in jobs:
                on_start(job, {})
                on_done(job, CellOutcome(status="ok", reason=None, exit_code=0, elapsed_s=1.0))

    monkeypatch.setattr(trial_cells.executors, "get", lambda name: Instant)
    tried = [
        experiments.Experiment(f"--bs {n}", {"batch_size": n}, ("batch-headroom",), "")
        for n in (2, 3, 4)
    ]
    base = RunConfig(model="tests.tiny_models:conv_net", batch_size=1)
    cells = trial_cells.run_trial(
        base, tried, tmp_path / "a", tmp_path / "ta", max_cells=2, processes=1, say=lambda _: None
    )
    assert cells.stopped_by == "cells"
    assert [c.status for c in cells.cells] == ["ok", "ok", "not run", "not run"]
    clock = iter([0.0, 100.0, 100.0, 100.0, 100.0])
    monkeypatch.setattr(trial_cells.time, "perf_counter", lambda: next(clock, 100.0))
    timed = trial_cells.run_trial(
        base, tried, tmp_path / "b", tmp_path / "tb", budget_s=50, processes=1, say=lambda _: None
    )
    assert timed.stopped_by == "budget"
    assert [c.status for c in timed.cells] == ["ok", "not run", "not run", "not run"]
    with pytest.raises(UserError, match="--resume"):  # the folder is there
        trial_cells.run_trial(
            base, tried, tmp_path / "a", tmp_path / "ta", processes=1, say=lambda _: None
        )


PATCH = """
import sys
from profiler.analysis import experiments
from profiler.analysis.advice import Advice
import profiler.commands.advise as command
experiments.EXPERIMENTS["batch-headroom"] = lambda config: [
    ("--bs 3", {"batch_size": 3}, "a test"), ("--bs 4", {"batch_size": 4}, "a test")]
command.advice_of = lambda side: [Advice("batch-headroom", "t", "", {
    "throughput_by_bs": [(1, 100.0), (2, 150.0)], "growth": 0.5, "from_bs": 1, "to_bs": 2}, "")]
from profiler.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_keeps_the_finished_cells_and_resume_finishes(tmp_path, cli):
    """tests.tiny_models:slow (0.3 s a call): the first experiment still runs when Ctrl-C
    comes; the baseline is kept, the experiment is marked interrupted, the rest not run; then
    --resume runs what is left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    made = cli(
        "run",
        "--backend",
        "pytorch_fp32",
        "--bs",
        "2",
        "--model",
        "tests.tiny_models:slow",
        "--iters",
        "2",
        "--timed-warmup",
        "0",
        "--active",
        "1",
    )
    assert made.code == 0, made.stderr
    args = ["advise", "runs/pytorch_fp32_bs2_slow", "--try", "--processes", "1"]
    process = subprocess.Popen(
        [sys.executable, "-c", PATCH, *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    trial = tmp_path / "runs" / "advise_pytorch_fp32_bs2_slow" / "trial.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            cells = json.loads(trial.read_text())["cells"]
        except (OSError, ValueError):
            cells = []
        if cells and cells[0]["status"] == "ok" and cells[1]["status"] == "running":
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    last = stderr.strip().splitlines()[-1]
    assert "advise --try stopped;" in last and "(continue with --resume)" in last
    statuses = [c["status"] for c in json.loads(trial.read_text())["cells"]]
    # the cell running when the signal came is interrupted (on a loaded machine it may have
    # finished first: then the next one was running or not yet handed out)
    assert statuses[0] == "ok" and "interrupted" in statuses or statuses[-1] == "not run", statuses
    assert f"{statuses.count('ok')} finished cell(s) kept" in last
    resumed = subprocess.run(
        [sys.executable, "-c", PATCH, *args, "--resume", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    cells = json.loads(resumed.stdout)["trial"]["cells"]
    assert [c["status"] for c in cells] == ["ok", "ok", "ok"]
    assert cells[0]["reason"] == "kept from before (--resume)"
