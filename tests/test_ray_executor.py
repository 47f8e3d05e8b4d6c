"""sweep --executor ray on the CPU, on a Ray instance of 2 CPUs started by this module: a sweep
through the CLI end to end (a failing cell, --resume, the results brought home through the
object store), and the executor itself with stand-in cell runners (a lost worker retried once,
a failing runner never retried, a timeout, Ctrl-C, a shared folder)."""

import csv
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

import pytest

from profiler.fsutil import MARKER  # what the tool leaves in every folder it makes

from .test_sweep import FAST, sweep_cli

ray = pytest.importorskip(
    "ray", reason="Ray is the cluster extra (in dev): pip install '.[cluster]'"
)


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray instance for the module (2 CPUs, its own short temp folder: Ray's socket
    paths have a length limit), shut down at the end. Its GCS address lets a CLI sweep join it."""
    temp = tempfile.mkdtemp(prefix="ray_", dir="/tmp")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    context = ray.init(
        address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp, log_to_driver=False
    )
    for signum, handler in handlers.items():  # ray.init sets its own SIGTERM handler
        signal.signal(signum, handler)
    try:
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


# ---- the CLI, end to end -------------------------------------------------------------------

# bs 3 runs out of (simulated) CUDA memory: the failing cell, recorded and not retried
RAY_GRID = [
    "--backends",
    "pytorch_fp32",
    "--bs",
    "1,3",
    "--model",
    "tests.tiny_models:oom_above_2",
    *FAST,
    "--name",
    "rs",
    "--executor",
    "ray",
]


@pytest.fixture(scope="module")
def ray_sweep(ray_address, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ray_sweep")
    done = sweep_cli(*RAY_GRID, "--ray-address", ray_address, cwd=workdir)
    return workdir, done


def _manifest(workdir: Path) -> dict:
    return json.loads((workdir / "runs" / "rs" / "sweep.json").read_text())


def test_ray_sweep_brings_every_cell_home(ray_sweep):
    workdir, done = ray_sweep
    assert done.returncode == 0, done.stderr
    assert "one Ray task each" in done.stderr
    assert "results brought home through Ray's object store" in done.stderr
    assert "warning: 1 of 2 cells did not finish: pytorch_fp32_bs3_oom_above_2 (oom)" in done.stderr
    sweep, traces = workdir / "runs" / "rs", workdir / "tb_logs" / "rs"
    ok, oom = "pytorch_fp32_bs1_oom_above_2", "pytorch_fp32_bs3_oom_above_2"
    # the run folder, trace and log came back from the worker's temporary folder
    assert json.loads((sweep / ok / "result.json").read_text())["run_name"] == ok
    assert len(list((traces / ok).glob("*.pt.trace.json.gz"))) == 1
    assert "out of memory" in (sweep / "logs" / f"{oom}.log").read_text()
    assert (sweep / "logs" / f"{ok}.log").stat().st_size > 0
    assert not (sweep / oom).exists() and not (traces / oom).exists()
    for folder in (sweep, traces):  # no staging left by the bringing home
        assert [
            p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != MARKER
        ] == []
    cells = _manifest(workdir)["cells"]
    assert cells[ok]["status"] == "ok" and cells[ok]["metrics"]["kernel_us_per_step"] >= 0
    assert cells[oom]["status"] == "oom" and "out of memory" in cells[oom]["reason"]
    for cell in cells.values():  # where each cell ran
        assert cell["node"] == socket.gethostname()
        assert cell["worker"].startswith("ray node ") and cell["gpu"] is None
    with open(sweep / "benchmark.csv") as table:
        rows = {r["bs"]: r for r in csv.DictReader(table)}
    assert rows["1"]["node"] == socket.gethostname() and rows["1"]["status"] == "ok"


def test_ray_sweep_resumes(ray_sweep, ray_address):
    workdir, _ = ray_sweep
    ok = workdir / "runs" / "rs" / "pytorch_fp32_bs1_oom_above_2" / "result.json"
    before = ok.stat().st_mtime_ns
    oom_started = _manifest(workdir)["cells"]["pytorch_fp32_bs3_oom_above_2"]["started"]
    time.sleep(1)  # the manifest's times have whole seconds
    done = sweep_cli(*RAY_GRID, "--ray-address", ray_address, "--resume", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "[1/2] pytorch_fp32 bs 1: done before, skipped (--resume)" in done.stderr
    assert "(1 cell(s) run, 1 skipped)" in done.stderr
    assert ok.stat().st_mtime_ns == before
    cell = _manifest(workdir)["cells"]["pytorch_fp32_bs3_oom_above_2"]
    assert cell["status"] == "oom" and cell["started"] != oom_started


def test_sigterm_stops_a_ray_sweep_and_keeps_its_manifest(ray_address, tmp_path):
    # ray.init installs its own SIGTERM handler; the sweep's must win (SIGTERM acts as Ctrl-C)
    from .conftest import stop_sweep_when

    code, stderr, cells = stop_sweep_when(
        [
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1,2,3",
            "--model",
            "tests.tiny_models:conv_net",
            *FAST,
            "--executor",
            "ray",
            "--ray-address",
            ray_address,
        ],
        tmp_path,
        "term",
        lambda cells: any(c["status"] == "running" for c in cells.values()),
        signal.SIGTERM,
    )
    assert code == 143, stderr
    assert stderr.strip().splitlines()[-1].startswith("interrupted: sweep stopped;")
    assert "running" not in {c["status"] for c in cells.values()}
    stopped = [c for c in cells.values() if c["status"] == "interrupted"]
    assert stopped and all(c["reason"] == "interrupted (SIGTERM)" for c in stopped)
    for folder in (tmp_path / "runs" / "term", tmp_path / "tb_logs" / "term"):
        if folder.is_dir():
            assert [
                p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != MARKER
            ] == []


def test_ray_options_need_ray_executor_and_a_reachable_head(cli):
    done = cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", "--ray-address", "auto")
    assert done.code == 2 and done.stderr.strip() == "error: --ray-address needs --executor ray"
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = cli(
        "sweep",
        "--backends",
        "pytorch_fp32",
        "--bs",
        "1",
        "--executor",
        "ray",
        "--ray-address",
        f"127.0.0.1:{port}",
    )
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: --ray-address 127.0.0.1:{port}: no Ray head answers")
    assert not Path("runs").exists()


def test_without_ray_one_line(tmp_path):
    from .conftest import ROOT, run_python

    script = (
        "import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
        "from profiler.cli.app import main\n"
        "sys.exit(main(['sweep', '--backends', 'pytorch_fp32', '--bs', '1', "
        "'--executor', 'ray']))\n"
    )
    done = run_python(
        "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + script, cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip() == 'error: --executor ray needs Ray: pip install -e ".[cluster]"'
    assert not (tmp_path / "runs").exists()


# ---- the executor with stand-in cell runners -----------------------------------------------
# (module-level functions: the Ray workers import them from this module)


def _option(job, key: str) -> Path:
    """A folder of the job's config (the stand-in runners keep their marks there too)."""
    return Path(job.config[key])


def _attempt(job) -> int:
    """Counts this job's attempts in a file of the test's folder; returns the attempt number."""
    marks = _option(job, "marks") / job.name
    marks.parent.mkdir(parents=True, exist_ok=True)
    with open(marks, "a") as file:
        file.write(f"{os.getpid()}\n")
    return len(marks.read_text().splitlines())


def writes_a_run(job):
    from profiler.sweep.cell import CellOutcome

    _attempt(job)
    run = _option(job, "runs_dir") / job.name
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"cell": job.name, "pid": os.getpid()}))
    trace = _option(job, "tb_dir") / job.name
    trace.mkdir(parents=True)
    (trace / "w.pt.trace.json.gz").write_bytes(b"trace of " + job.name.encode())
    Path(job.log_path).parent.mkdir(parents=True, exist_ok=True)
    Path(job.log_path).write_text(f"log of {job.name}\n")
    return CellOutcome("ok", None, 0, 0.01)


def dies_once(job):
    if not (_option(job, "marks") / job.name).exists():
        _attempt(job)
        os._exit(1)  # the worker process is lost, as when a node goes away
    return writes_a_run(job)


def always_dies(job):
    _attempt(job)
    os._exit(1)


def raises(job):
    _attempt(job)
    raise ValueError("a bug in the runner")


def sleeps(job):
    if job.name == "quick":
        return writes_a_run(job)
    _attempt(job)
    time.sleep(120)
    return writes_a_run(job)


def _jobs(tmp_path: Path, *names: str, timeout_s=None):
    from profiler.sweep.cell import CellJob

    sweep = tmp_path / "runs" / "s"
    return [
        CellJob(
            name=name,
            config={
                "backend": "pytorch_fp32",
                "bs": 1,
                "runs_dir": str(sweep),
                "tb_dir": str(tmp_path / "tb" / "s"),
                "marks": str(tmp_path / "marks"),
            },
            log_path=str(sweep / "logs" / f"{name}.log"),
            timeout_s=timeout_s,
        )
        for name in names
    ]


def _run(jobs, runner, shared_fs: bool = False, on_done=None):
    from profiler.sweep.executors.ray import RayExecutor

    started, done, said = {}, {}, []

    def record_done(job, outcome):
        done[job.name] = outcome
        if on_done:
            on_done(job, outcome)

    executor = RayExecutor(shared_fs=shared_fs, say=said.append, runner=runner)
    executor.run(jobs, lambda job, where: started.setdefault(job.name, where), record_done)
    return started, done, said


def _attempts(tmp_path: Path, name: str) -> int:
    marks = tmp_path / "marks" / name
    return len(marks.read_text().splitlines()) if marks.exists() else 0


def test_results_come_home_through_the_object_store(ray_address, tmp_path):
    started, done, said = _run(_jobs(tmp_path, "a", "b"), writes_a_run)
    assert said[0].startswith("ray: 1 node(s), 0 GPU(s), 2 CPU(s); one task per cell on one CPU")
    for name in ("a", "b"):
        assert done[name].status == "ok" and done[name].node == socket.gethostname()
        assert started[name]["worker"].startswith("ray node ")
        result = json.loads((tmp_path / "runs" / "s" / name / "result.json").read_text())
        # written on the worker in a temporary folder, not in place: it came home
        assert result["cell"] == name and result["pid"] != os.getpid()
        assert (
            tmp_path / "tb" / "s" / name / "w.pt.trace.json.gz"
        ).read_bytes() == b"trace of " + name.encode()
        assert (tmp_path / "runs" / "s" / "logs" / f"{name}.log").read_text() == f"log of {name}\n"
    assert sorted(p.name for p in (tmp_path / "runs" / "s").iterdir() if p.name != MARKER) == [
        "a",
        "b",
        "logs",
    ]


def test_shared_folder_is_written_by_the_cells(ray_address, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative folders are made absolute for the workers
    jobs = _jobs(Path("."), "a")
    for job in jobs:  # the stand-in's own bookkeeping stays in the test's folder
        job.config["marks"] = str(tmp_path / "marks")
    _, done, said = _run(jobs, writes_a_run, shared_fs=True)
    assert "written by the cells into the shared folder" in said[0]
    assert done["a"].status == "ok"
    assert json.loads((tmp_path / "runs" / "s" / "a" / "result.json").read_text())["cell"] == "a"


def test_a_lost_worker_is_retried_once(ray_address, tmp_path):
    _, done, said = _run(
        _jobs(tmp_path, "flaky", "doomed"),
        lambda job: (dies_once if job.name == "flaky" else always_dies)(job),
    )
    assert done["flaky"].status == "ok" and _attempts(tmp_path, "flaky") == 2
    assert (tmp_path / "runs" / "s" / "flaky" / "result.json").is_file()
    assert done["doomed"].status == "failed" and _attempts(tmp_path, "doomed") == 2
    assert done["doomed"].reason.startswith("Ray lost the cell 2 times; last: WorkerCrashedError: ")
    assert "flaky: Ray lost the cell (WorkerCrashedError); running it again" in said


def test_a_failing_runner_is_not_retried(ray_address, tmp_path):
    _, done, _ = _run(_jobs(tmp_path, "bug"), raises)
    assert done["bug"].status == "failed" and _attempts(tmp_path, "bug") == 1
    assert done["bug"].reason == "ValueError: a bug in the runner"


def test_a_cell_past_its_timeout_is_cancelled(ray_address, tmp_path):
    _, done, _ = _run(_jobs(tmp_path, "slow", timeout_s=1.0), sleeps)
    assert done["slow"].status == "timeout"
    assert done["slow"].reason == "no result after --cell-timeout 1 s (Ray task cancelled)"
    assert not (tmp_path / "runs" / "s" / "slow").exists()


def test_ctrl_c_cancels_outstanding_cells_and_keeps_finished_ones(ray_address, tmp_path):
    jobs = _jobs(tmp_path, "quick", "slow", "queued")  # 2 CPUs: "queued" waits for a slot

    def interrupt_after_quick(job, outcome):
        if job.name == "quick":
            deadline = time.monotonic() + 60
            while _attempts(tmp_path, "slow") == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            raise KeyboardInterrupt

    done = {}
    with pytest.raises(KeyboardInterrupt):
        from profiler.sweep.executors.ray import RayExecutor

        def record(job, outcome):
            done[job.name] = outcome
            interrupt_after_quick(job, outcome)

        RayExecutor(say=lambda text: None, runner=sleeps).run(jobs, lambda job, where: None, record)
    assert done["quick"].status == "ok"
    assert (tmp_path / "runs" / "s" / "quick" / "result.json").is_file()
    assert done["slow"].status == "interrupted" and done["slow"].reason == "interrupted (Ctrl-C)"
    # "queued" took the slot "quick" left, or was dropped before it started: never finished
    assert "queued" not in done or done["queued"].status == "interrupted"
    assert not (tmp_path / "runs" / "s" / "queued").exists()


def test_from_the_sweeps_executor_settings():
    from types import SimpleNamespace

    from profiler.sweep.executors.ray import from_settings

    executor = from_settings(SimpleNamespace(options={"address": "auto", "shared_fs": True}))
    assert (executor.address, executor.shared_fs) == ("auto", True)
    assert executor.describe() == "one Ray task each (results in the shared folder)"
    assert from_settings(SimpleNamespace(options={})).address is None


def test_a_gpu_cell_gets_a_fresh_worker_process():
    from profiler.sweep.executors.ray import task_options

    assert task_options({"num_gpus": 1, "num_cpus": 1})["max_calls"] == 1
    assert "max_calls" not in task_options({"num_cpus": 1})  # CPU workers are reused


def test_a_sweeps_rounds_run_as_ray_tasks(ray_address, tmp_path):
    """--processes under --executor ray: the rounds' fresh processes are Ray tasks (on this
    CPU instance one at a time), and each cell's processes.csv holds its run's window and the
    rounds'."""
    done = sweep_cli(
        "--backends",
        "pytorch_fp32",
        "--bs",
        "1,2",
        "--model",
        "tests.tiny_models:conv_net",
        *FAST,
        "--name",
        "rp",
        "--executor",
        "ray",
        "--ray-address",
        ray_address,
        "--processes",
        "2",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "round 2: a fresh process times" in done.stderr
    assert "sampling took" in done.stderr
    for cell in ("pytorch_fp32_bs1_conv_net", "pytorch_fp32_bs2_conv_net"):
        rows = list(csv.DictReader((tmp_path / "runs" / "rp" / cell / "processes.csv").open()))
        assert len({row["process"] for row in rows}) == 3, rows[:3]
