"""Sweep workers on the CPU: a worker process runs many cells; crashes, kills and timeouts in a
cell are recorded and the worker replaced; no state leaks from one cell into the next; two
(stand-in) GPUs each get a worker and never two cells at once; --gpus errors are one line."""

import gzip
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from .conftest import ROOT, stop_sweep_when
from .test_sweep import FAST

# two stand-in GPUs: the sweep sees GPUs 0 and 1 (CUDA_VISIBLE_DEVICES), and each worker's
# torch finds no CUDA device on a CPU machine, so `--gpus 0,1` runs on any machine
NO_GPUS = {"CUDA_VISIBLE_DEVICES": "0,1"}


def _cells(workdir: Path, name: str) -> dict:
    return json.loads((workdir / "runs" / name / "sweep.json").read_text())["cells"]


def _env(**changes: str) -> dict:
    env = dict(os.environ, COLUMNS="200", **changes)
    env.pop("PYTHONPATH", None)
    return env


def _sweep(
    workdir: Path,
    model: str,
    bs: str,
    *extra: str,
    name: str = "s",
    backends: str = "pytorch_fp32",
    env: dict | None = None,
):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "sweep",
            "--backends",
            backends,
            "--bs",
            bs,
            "--model",
            f"tests.tiny_models:{model}",
            *FAST,
            # one window per cell: these tests are about the workers, and
            # the fake GPUs would otherwise bring the default 3 processes
            "--processes",
            "1",
            "--name",
            name,
            *extra,
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(**(env or {})),
    )
    return done, _cells(workdir, name)


@pytest.fixture(scope="module")
def misbehaving(tmp_path_factory):
    """One sweep of tests.tiny_models:misbehaves (bs 1 hangs, 2 os._exit, 3 segfault, 4 SIGKILL,
    5 runs) with --cell-timeout 12 (a fresh worker's imports and a cell fit in it on a busy
    machine; every cell but the first starts a fresh worker): (its folder, the finished
    process, its cells by batch size)."""
    workdir = tmp_path_factory.mktemp("misbehaving")
    done, cells = _sweep(workdir, "misbehaves", "1,2,3,4,5", "--cell-timeout", "12")
    return workdir, done, {n: cells[f"pytorch_fp32_bs{n}_misbehaves"] for n in range(1, 6)}


def test_crashes_and_kills_are_recorded_and_the_worker_replaced(misbehaving):
    workdir, done, cells = misbehaving
    assert done.returncode == 0, done.stderr
    exited, segfault, killed, fine = (cells[n] for n in (2, 3, 4, 5))
    assert exited["status"] == "failed" and exited["exit_code"] == 0
    assert {c["kind"] for c in (exited, segfault, killed)} == {"died"} and fine["kind"] == "ok"
    assert "exited with status 0 during the cell" in exited["reason"]
    assert segfault["status"] == "failed" and segfault["reason"] == "worker killed by SIGSEGV"
    assert killed["status"] == "failed"
    assert killed["reason"] == "worker killed by SIGKILL (host out of memory?)"
    assert fine["status"] == "ok"
    assert (workdir / "runs" / "s" / "pytorch_fp32_bs5_misbehaves" / "result.json").is_file()
    # each death took its worker with it: four cells, four worker processes
    assert len({c["worker"] for c in (exited, segfault, killed, fine)}) == 4
    assert "[3/5] pytorch_fp32 bs 3: failed: worker killed by SIGSEGV" in done.stderr
    for folder in (workdir / "runs" / "s", workdir / "tb_logs" / "s"):
        assert [p.name for p in folder.iterdir() if p.name.startswith(".") and p.is_dir()] == []


def test_a_cell_past_its_timeout_is_stopped_and_the_next_runs_on_a_new_worker(misbehaving):
    workdir, done, cells = misbehaving
    assert done.returncode == 0, done.stderr
    hung, fine = cells[1], cells[5]
    assert hung["status"] == "timeout" and "--cell-timeout 12 s" in hung["reason"]
    assert fine["status"] == "ok" and fine["worker"] != hung["worker"]
    assert cells[2]["worker"] != hung["worker"]  # the next cell: a new worker
    for folder in (workdir / "runs" / "s", workdir / "tb_logs" / "s"):
        assert [p.name for p in folder.iterdir() if p.name.startswith(".") and p.is_dir()] == []
    assert not (workdir / "runs" / "s" / "pytorch_fp32_bs1_misbehaves").exists()


def test_a_cells_outcome_is_typed_from_what_the_harness_raised(tmp_path):
    """Through a real worker: the kind and the reason come from the exception (a user error,
    host and CUDA out of memory, a crash), or from the exit status when the worker dies."""
    from profiler.runs.config import RunConfig, config_to_json
    from profiler.sweep.cell import CellJob
    from profiler.sweep.executors import ExecutorSettings
    from profiler.sweep.executors.local import LocalExecutor

    cases = {
        "failing": 1,
        "host_oom_forward": 1,
        "crashes": 1,
        "oom_above_2": 3,
        "misbehaves": 2,
    }  # misbehaves at bs 2: os._exit(0)
    jobs = [
        CellJob(
            name=model,
            log_path=str(tmp_path / "logs" / f"{model}.log"),
            config=config_to_json(
                RunConfig(
                    model=f"tests.tiny_models:{model}",
                    batch_size=bs,
                    iters=2,
                    timed_warmup=0,
                    active=1,
                    runs_dir=tmp_path / "runs",
                    tb_dir=tmp_path / "tb",
                )
            ),
        )
        for model, bs in cases.items()
    ]
    outcomes = {}
    # gpus=[]: one CPU worker runs the cells one after another
    LocalExecutor(ExecutorSettings(gpus=[], log_dir=tmp_path / "logs")).run(
        jobs, lambda job, where: None, lambda job, outcome: outcomes.setdefault(job.name, outcome)
    )
    kinds = {name: (o.kind, o.status, o.exit_code) for name, o in outcomes.items()}
    assert kinds == {
        "failing": ("user-error", "failed", 2),
        "host_oom_forward": ("host-oom", "oom", 2),
        "crashes": ("crash", "failed", 1),
        "oom_above_2": ("cuda-oom", "oom", 2),
        "misbehaves": ("died", "failed", 0),
    }
    assert outcomes["failing"].reason.startswith(
        "--model tests.tiny_models:failing failed: RuntimeError: this model fails on purpose"
    )
    assert outcomes["host_oom_forward"].reason.startswith("host out of memory at batch size 1")
    assert outcomes["oom_above_2"].reason.startswith("CUDA out of memory at batch size 3")
    assert outcomes["crashes"].reason == "Crash: the model crashed on purpose"
    assert "exited with status 0 during the cell" in outcomes["misbehaves"].reason
    # the log keeps what a human reads: the error line, the crash's traceback
    assert (
        "error: --model tests.tiny_models:failing failed"
        in (tmp_path / "logs" / "failing.log").read_text()
    )
    assert "Traceback" in (tmp_path / "logs" / "crashes.log").read_text()


def _cpu_op_names(trace_dir: Path) -> set[str]:
    (trace,) = trace_dir.glob("*.pt.trace.json.gz")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "cpu_op"}


def test_a_cell_in_a_worker_matches_the_same_cell_run_alone(tmp_path):
    # cell 1 leaves state behind (float64 default dtype, matmul precision, an environment
    # variable, cuDNN autotuner, TF32); cell 2 fails if it finds any of it
    done, cells = _sweep(tmp_path, "leaks_state_at_bs1", "1,2")
    assert done.returncode == 0, done.stderr
    first, second = (cells[f"pytorch_fp32_bs{n}_leaks_state_at_bs1"] for n in (1, 2))
    assert first["status"] == "ok" and second["status"] == "ok", second["reason"]
    assert first["worker"] == second["worker"]  # one worker ran both
    alone_dir = tmp_path / "alone"
    alone_dir.mkdir()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    ran = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "run",
            "--backend",
            "pytorch_fp32",
            "--bs",
            "2",
            "--model",
            "tests.tiny_models:leaks_state_at_bs1",
            *FAST,
        ],
        cwd=alone_dir,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    cell = "pytorch_fp32_bs2_leaks_state_at_bs1"
    in_worker = json.loads((tmp_path / "runs" / "s" / cell / "result.json").read_text())
    alone = json.loads((alone_dir / "runs" / cell / "result.json").read_text())
    assert in_worker["precision"] == alone["precision"]
    assert in_worker["backend"] == alone["backend"]
    assert _cpu_op_names(tmp_path / "tb_logs" / "s" / cell) == _cpu_op_names(
        alone_dir / "tb_logs" / cell
    )
    # the same measurement: the same timer, iterations and recorded switches (a state leak
    # itself fails cell 2: the model checks the process; tests compare no timings, which on a
    # shared 2-core machine differed 24x between two 2-iteration windows)
    for key in ("iters", "iterations_chosen_by", "timer", "sync", "warmup_iters"):
        assert in_worker["timing"].get(key) == alone["timing"].get(key), key
    assert in_worker["timing"]["p50_ms"] > 0 and alone["timing"]["p50_ms"] > 0


def test_the_reset_between_cells_imports_no_compiler_that_no_cell_used(monkeypatch):
    """Deterministic algorithms are put back (warn_only too); where no cell imported Dynamo or
    Inductor the reset calls neither what would import them (1.5 s of each worker's CPU)."""
    import torch

    from profiler.collect import state

    saved = state.snapshot()
    torch.use_deterministic_algorithms(True, warn_only=True)
    state.reset(saved)
    assert not torch.are_deterministic_algorithms_enabled()
    assert not torch.is_deterministic_algorithms_warn_only_enabled()
    called = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *a: called.append(a))
    monkeypatch.setattr(torch.compiler, "reset", lambda: called.append("reset"))
    state.reset(saved)  # Inductor imported here (by the first reset): put back all the same
    assert called == ["reset", (False,)]
    for name in ("_dynamo", "_inductor"):  # as in a worker whose cells compiled nothing
        monkeypatch.delattr(torch, name)
    called.clear()
    state.reset(saved)
    assert called == []


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def test_two_gpus_get_a_worker_each_and_never_two_cells_at_once(tmp_path):
    done, cells = _sweep(
        tmp_path,
        "conv_net",
        "1,2",
        "--gpus",
        "0,1",
        backends="pytorch_fp32,pytorch_bf16",
        env=NO_GPUS,
    )
    assert done.returncode == 0, done.stderr
    assert all(c["status"] == "ok" for c in cells.values())
    by_gpu: dict[str, list] = {}
    for cell in cells.values():
        by_gpu.setdefault(cell["gpu"], []).append(cell)
    assert set(by_gpu) == {"0", "1"}
    for gpu, ran in by_gpu.items():
        ran.sort(key=lambda c: _at(c["started"]))
        assert len({c["worker"] for c in ran}) == 1, gpu  # one worker per GPU, kept
        for before, after in zip(ran, ran[1:]):
            assert _at(after["started"]) >= _at(before["finished"]), gpu
    # the two workers ran at the same time: some cell on one GPU began before the other GPU's
    # first cell ended
    first_ends = {gpu: _at(ran[0]["finished"]) for gpu, ran in by_gpu.items()}
    assert (
        _at(by_gpu["1"][0]["started"]) < first_ends["0"]
        or _at(by_gpu["0"][0]["started"]) < first_ends["1"]
    )
    csv_text = (tmp_path / "runs" / "s" / "benchmark.csv").read_text()
    header = csv_text.splitlines()[0].split(",")
    assert "gpu" in header and "node" in header
    assert {line.split(",")[header.index("gpu")] for line in csv_text.splitlines()[1:]} == {
        "0",
        "1",
    }
    assert "| gpu |" in (tmp_path / "runs" / "s" / "benchmark.md").read_text()
    assert " on gpu 0: ok" in done.stderr and " on gpu 1: ok" in done.stderr


def test_isolate_runs_every_cell_in_a_fresh_process_and_the_sweep_never_imports_torch(tmp_path):
    """--isolate: two cells, two worker processes; and the sweep's own process (planning,
    scheduling, the manifest and tables) never imports torch."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from profiler.sweep import plan as sweep, runner\n"
        "p = sweep.plan('pytorch_fp32', '1,2', {'model': 'tests.tiny_models:conv_net', "
        "'iters': 2, 'timed_warmup': 0, 'active': 1}, name='s', isolate=True)\n"
        "outcome = runner.run_sweep(p, say=lambda text: None)\n"
        "cells = outcome.manifest.cells.values()\n"
        "assert [c.status for c in cells] == ['ok', 'ok'], [c.reason for c in cells]\n"
        "assert len({c.worker for c in cells}) == 2, [c.worker for c in cells]\n"
        "assert 'torch' not in sys.modules, 'the sweep imported torch'\n"
    )
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "gpus, visible, fragment",
    [
        ("", None, "--gpus '': give GPU indices"),
        ("0,,1", None, "give GPU indices"),
        ("0,0", "0,1", "names a GPU twice"),
        ("x", None, "'x' is not a GPU index or UUID"),
        ("2", "0,1", "GPU 2 is not visible here (visible: 0,1)"),
        ("0,1", None, "no GPU is visible here"),  # NEW-10: not accepted on a machine without GPUs
        ("\uff10", "0", "is not a GPU index"),  # a fullwidth digit is not an index
    ],
)
def test_bad_gpus_are_one_line(cli, monkeypatch, gpus, visible, fragment):
    if visible is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    done = cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", "--gpus", gpus)
    assert done.code == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines
    assert not Path("runs").exists()


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    from profiler.sweep.executors.local import parse_gpus, visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpus() == ["2", "3"] and parse_gpus(None, visible_gpus()) == ["2", "3"]
    assert parse_gpus("3", ["2", "3"]) == ["3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_gpus() == []
    assert parse_gpus("all", []) == []


def test_unknown_executor_is_one_line(cli):
    done = cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", "--executor", "slurm")
    assert done.code == 2 and "--executor: unknown executor 'slurm'" in done.stderr


def test_sigterm_stops_both_workers_cells_and_keeps_the_finished(tmp_path):
    import signal

    def one_done_and_both_gpus_busy(cells: dict) -> bool:
        running = {c["gpu"] for c in cells.values() if c["status"] == "running"}
        return any(c["status"] == "ok" for c in cells.values()) and running == {"0", "1"}

    code, stderr, cells = stop_sweep_when(
        [
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1,2,3,4,5",
            "--model",
            "tests.tiny_models:slow",
            "--iters",
            "6",
            "--timed-warmup",
            "0",
            "--active",
            "1",
            "--gpus",
            "0,1",
            "--processes",
            "1",
        ],
        tmp_path,
        "stop",
        one_done_and_both_gpus_busy,
        signal.SIGTERM,
        env=_env(**NO_GPUS),
        wait_s=180,
        stop_s=90,
    )
    assert code == 143, stderr
    assert "interrupted: sweep stopped;" in stderr.strip().splitlines()[-1]
    statuses = sorted(c["status"] for c in cells.values())
    # a cell may finish in the moment the signal comes (on a loaded machine both running cells
    # did, once, before a worker remembered a stop that came between being handed its cell and
    # beginning it: tests/test_hostile_signals.py); no cell is left "running", and no cell
    # starts after the signal
    assert statuses.count("interrupted") in (1, 2) or "pending" in statuses, statuses
    assert "ok" in statuses, statuses
    assert set(statuses) <= {"ok", "interrupted", "pending"}, statuses
    for name, cell in cells.items():
        if cell["status"] == "interrupted":
            assert cell["reason"] == "interrupted (SIGTERM)"
            assert not (tmp_path / "runs" / "stop" / name).exists()
        if cell["status"] == "ok":
            assert (tmp_path / "runs" / "stop" / name / "result.json").is_file()
    for folder in (tmp_path / "runs" / "stop", tmp_path / "tb_logs" / "stop"):
        assert [p.name for p in folder.iterdir() if p.name.startswith(".") and p.is_dir()] == []
    # the workers are gone with the sweep
    for cell in cells.values():
        if cell.get("worker"):
            pid = int(cell["worker"].split("pid")[1])
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
