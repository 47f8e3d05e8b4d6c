"""A sweep cell is a typed job run in-process: how it ended comes from what the harness raised
(ok, a user error, CUDA or host out of memory, a crash), never from reading its log."""

from __future__ import annotations

import pytest

from profiler.runs.config import RunConfig, config_to_json
from profiler.sweep.cell import KINDS, CellJob, run_job

FAST = dict(iters=2, timed_warmup=0, active=1, wait=0, warmup=0)


def _job(tmp_path, model: str, batch_size: int = 2) -> CellJob:
    config = RunConfig(
        model=f"tests.tiny_models:{model}",
        batch_size=batch_size,
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb",
        **FAST,
    )
    return CellJob(
        name=config.run_name,
        config=config_to_json(config),
        log_path=str(tmp_path / "logs" / f"{config.run_name}.log"),
    )


@pytest.mark.parametrize(
    "model, batch_size, kind, words",
    [
        ("conv_net", 2, "ok", None),
        ("oom_above_2", 4, "cuda-oom", "CUDA out of memory at batch size 4"),
        ("host_oom_forward", 2, "host-oom", "host out of memory"),
        ("failing", 2, "user-error", "this model fails on purpose"),
        ("builder_raises", 2, "user-error", "boom in the builder"),
    ],
)
def test_a_cell_says_how_it_ended_from_what_was_raised(
    tmp_path, monkeypatch, model, batch_size, kind, words
):
    monkeypatch.chdir(tmp_path)
    job = _job(tmp_path, model, batch_size)
    ended = run_job(job)
    assert (ended.kind, ended.status) == (kind, KINDS[kind]), ended
    if words is None:
        assert ended.reason is None and ended.exit_code == 0
        assert (tmp_path / "runs" / job.name / "result.json").is_file()
    else:
        assert words in ended.reason and ended.exit_code == 2
        assert "\n" not in ended.reason
    log = (tmp_path / "logs" / f"{job.name}.log").read_text()
    assert log.startswith("$ profile.py run --backend pytorch_fp32 --bs")  # what ran, as a command


def test_a_cell_hands_the_harness_its_command_line_and_start(tmp_path, monkeypatch):
    """The command that runs the cell alone and where its imports phase starts reach
    harness.run as arguments; the process's own sys.argv is left as it is."""
    import sys
    import time

    from profiler.collect import harness
    from profiler.errors import UserError

    seen = []

    def fake_run(config, quiet=False, **given):
        seen.append((given, list(sys.argv)))
        raise UserError("stopped at the harness")

    monkeypatch.setattr(harness, "run", fake_run)
    argv = list(sys.argv)
    job = _job(tmp_path, "conv_net")
    run_job(job, process_mark=12.5)
    before = time.perf_counter()
    run_job(job)
    (first, argv_then), (second, _) = seen
    assert argv_then == argv and sys.argv == argv
    log = (tmp_path / "logs" / f"{job.name}.log").read_text()
    assert log.splitlines()[0] == "$ " + " ".join(first["command_line"])
    assert first["command_line"][:4] == ["profile.py", "run", "--backend", "pytorch_fp32"]
    assert first["started"] == 12.5  # the worker's start: the first cell's imports phase
    assert second["started"] >= before  # a later cell's starts with the cell


def test_a_crash_that_is_no_user_error_is_a_crash_with_its_traceback_in_the_log(
    tmp_path, monkeypatch
):
    from profiler.collect import harness

    def broken(config, quiet=False, **given):
        raise ZeroDivisionError("a bug in the harness")

    monkeypatch.setattr(harness, "run", broken)
    job = _job(tmp_path, "conv_net")
    ended = run_job(job)
    assert (ended.kind, ended.status, ended.exit_code) == ("crash", "failed", 1)
    assert ended.reason == "ZeroDivisionError: a bug in the harness"
    assert "Traceback" in (tmp_path / "logs" / f"{job.name}.log").read_text()


@pytest.mark.parametrize(
    "config, words",
    [
        ({"backend": "pytorch_fp32", "bs": 0}, "--bs"),
        ({"backend": "pytorch_fp32", "batch_size": 2}, "not run options: batch_size"),
    ],
)
def test_a_job_that_does_not_make_a_config_is_a_user_error(tmp_path, monkeypatch, config, words):
    monkeypatch.chdir(tmp_path)
    ended = run_job(CellJob(name="x", config=config, log_path=str(tmp_path / "x.log")))
    assert ended.kind == "user-error" and words in ended.reason, ended
    assert not (tmp_path / "runs").exists()
