"""Hostile sweeps, round 5 (issue 47 points 3 and 4; ../shared/reliability/defects-round5.md):
a Ray sweep's rounds stopped by SIGTERM or SIGHUP exit by that signal and name it (R5-8); an
`advise --try` trial checks its own paths for symlinks before its first cell (R5-11); cells a
killed round process dropped end the sweep with a warning (R5-12); a cell sweep.json lists as
running while no sweep runs it reads as not finished, and says so (R5-18). CPU only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import types
from pathlib import Path

import pytest

from .conftest import stop_sweep_when
from .test_hostile_round4_advise import (  # the tiny run and the advice of round 4's tests
    TRIAL,
    advised,
    made,
    one_line,
    run_here,
    snapshot,
)

__all__ = ["advised", "made", "run_here"]  # (fixtures: imported for these tests)

TINY = ["--model", "tests.tiny_models:conv_net", "--iters", "3", "--timed-warmup", "0"]
TINY += ["--active", "1"]


def _lines(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{word}:")]


# ---- R5-8: Ray's rounds stopped by a signal ------------------------------------------------


class _Ray:
    """What RayRounds asks of Ray; ``get`` is where the signal lands, and Ray hands any stop
    back as a bare KeyboardInterrupt, without the signal's number."""

    class exceptions:  # noqa: N801 (Ray's name)
        class GetTimeoutError(Exception):
            pass

        class RayError(Exception):
            pass

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.cancelled: list = []

    def remote(self, **options):
        return lambda fn: types.SimpleNamespace(remote=lambda cells: "the task")

    def nodes(self) -> list:
        return [{"Alive": True}]

    def cluster_resources(self) -> dict:
        return {"CPU": 2.0}

    def cancel(self, ref, force: bool = False) -> None:
        self.cancelled.append(ref)

    def get(self, ref, timeout=None):
        try:
            os.kill(os.getpid(), self.signum)  # (its handler raises here, in this thread)
            signal.pause()
        except BaseException:
            raise KeyboardInterrupt from None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_ray_round_stopped_by_a_signal_is_stopped_by_that_signal(signum):
    """R5-8: during a Ray sweep's rounds, SIGTERM ended the sweep as Ctrl-C (exit 130)."""
    from profiler import signals
    from profiler.sweep.executors.ray import RayRounds

    ray = _Ray(signum)
    rounds = RayRounds(ray, {"num_cpus": 1})
    with signals.as_interrupts(), pytest.raises(KeyboardInterrupt) as stopped:
        rounds([("a", {})])
    assert isinstance(stopped.value, signals.Terminated), repr(stopped.value)
    assert stopped.value.signum == signum and signals.exit_code(stopped.value) == 128 + signum
    assert ray.cancelled == ["the task"]


def test_a_stopped_sweep_names_the_signal(tmp_path):
    """R5-8: "interrupted: sweep stopped; ..." did not say by what; now it does, as every
    other command's line."""

    def running(cells: dict) -> bool:
        return any(cell.get("status") == "running" for cell in cells.values())

    args = ["--backends", "pytorch_fp32", "--bs", "1,2", "--model", "tests.tiny_models:slow"]
    code, stderr, _ = stop_sweep_when(
        [*args, "--iters", "3", "--timed-warmup", "0"], tmp_path, "named", running, signal.SIGTERM
    )
    assert code == 143, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("interrupted: sweep stopped;") and "stopped by SIGTERM" in last, last


# ---- R5-11: a trial's own paths, checked before its first cell --------------------------------


def _trial_of_ours(tmp_path: Path) -> Path:
    """The trial folder as `advise --try` leaves it after a first call: marked, with logs/."""
    from profiler.sweep.trial_cells import _make_ours

    folder = tmp_path / "runs" / TRIAL
    _make_ours(folder)
    (folder / "logs").mkdir()
    return folder


def _workers_symlink(folder: Path, outside: Path) -> None:
    (folder / "logs" / "workers").symlink_to(outside)


def _cell_log_symlink(folder: Path, outside: Path) -> None:
    (folder / "logs" / "pytorch_fp32_bs2_baseline.log").symlink_to(outside / "x.log")


def _page_symlink(folder: Path, outside: Path) -> None:
    (folder / "report.html").symlink_to(outside / "page.html")


@pytest.mark.parametrize(
    "plant", [_workers_symlink, _cell_log_symlink, _page_symlink], ids=["workers", "log", "page"]
)
def test_a_trial_refuses_a_symlink_among_its_paths_before_any_cell(
    cli, run_here, advised, tmp_path, plant
):
    """R5-11: `logs/workers` as a symlink was followed (the workers' log written outside);
    report.html as one was refused only after every cell had run."""
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = _trial_of_ours(tmp_path)
    plant(folder, outside)
    before = snapshot(folder)
    done = cli("advise", run_here, "--try", "--resume")
    one_line(done, "is a symlink")
    assert list(outside.iterdir()) == []
    assert snapshot(folder) == before  # no cell ran, nothing was written
    assert not (tmp_path / "tb_logs" / TRIAL).exists() or not any(
        p for p in (tmp_path / "tb_logs" / TRIAL).iterdir() if not p.name.startswith(".")
    )


def test_a_trial_with_its_own_paths_passes_the_check(tmp_path):
    """The control: the same folder without the link passes the check."""
    from profiler.sweep.trial_cells import _check_trial_paths

    folder = _trial_of_ours(tmp_path)
    (folder / "logs" / "workers").mkdir()
    (folder / "logs" / "workers" / "cpu.log").write_text("a log\n")
    (folder / "report.html").write_text("<html></html>\n")
    _check_trial_paths(folder, "advise --try")


# ---- R5-12: a round process killed -----------------------------------------------------------


def test_cells_a_killed_round_dropped_end_the_sweep_with_a_warning(cli, tmp_path, monkeypatch):
    """R5-12: the round's process SIGKILLed (as the OOM killer would): every cell "leaves the
    rounds", and the sweep said "sampling took 2 s" and exited 0 without a warning, although
    no cell got the processes asked for. Then --resume times them again."""
    from profiler.sweep import rounds

    def killed(cells, gpu=None, timeout_s=None, started=None):
        return {
            key: "the round's process ended before this cell: exit status -9" for key, _ in cells
        }

    real = rounds.run_round
    monkeypatch.setattr(rounds, "run_round", killed)
    args = ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1,2", "--processes", "2"]
    done = cli(*args, "--name", "kr")
    assert done.code == 0, done
    warnings = _lines(done.stderr, "warning")
    assert len(warnings) == 1, done.stderr
    assert "2 of 2 cell(s)" in warnings[0] and "exit status -9" in warnings[0]
    assert "--resume" in warnings[0]
    monkeypatch.setattr(rounds, "run_round", real)
    again = cli(*args, "--name", "kr", "--resume")
    assert again.code == 0, again
    assert "round 1" in again.stderr and not _lines(again.stderr, "warning"), again.stderr


# ---- R5-18: a cell listed as running by a sweep that is gone --------------------------------


@pytest.fixture
def orphaned(cli, tmp_path) -> tuple[Path, str]:
    """A sweep of two cells whose sweep.json lists the second as running, its folder gone: what
    a sweep stopped by a full disk leaves when sweep.json cannot be written again."""
    done = cli("sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1,2", "--name", "gone")
    assert done.code == 0, done
    sweep = tmp_path / "runs" / "gone"
    cell = "pytorch_fp32_bs2_conv_net"
    manifest = json.loads((sweep / "sweep.json").read_text())
    manifest["cells"][cell].update(status="running", kind=None, reason=None, finished=None)
    (sweep / "sweep.json").write_text(json.dumps(manifest))
    shutil.rmtree(sweep / cell)
    shutil.rmtree(tmp_path / "tb_logs" / "gone" / cell)
    return sweep, cell


def test_report_reads_a_running_cell_whose_sweep_is_gone_as_not_finished(cli, orphaned, tmp_path):
    """R5-18: the cell read as "running" for ever after the sweep that ran it had ended."""
    sweep, cell = orphaned
    done = cli("report", str(sweep), "--out", str(tmp_path / "r.html"))
    assert done.code == 0, done
    notes = _lines(done.stderr, "note")
    assert any(cell in n and "no sweep is running it" in n for n in notes), done.stderr
    page = (tmp_path / "r.html").read_text()
    assert "not finished: its sweep ended without recording how" in page


def test_summarize_of_that_cell_says_it_did_not_finish(cli, orphaned):
    sweep, cell = orphaned
    done = cli("summarize", str(sweep / cell))
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done.stderr
    assert "did not finish" in lines[0] and "sweep --resume" in lines[0], lines[0]


def test_resume_runs_that_cell_again_and_says_why(cli, orphaned):
    sweep, cell = orphaned
    args = ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1,2", "--name", "gone"]
    done = cli(*args, "--resume")
    assert done.code == 0, done
    notes = _lines(done.stderr, "note")
    assert any(cell in n and "no sweep is running it" in n for n in notes), done.stderr
    cells = json.loads((sweep / "sweep.json").read_text())["cells"]
    assert cells[cell]["status"] == "ok"
    assert (sweep / cell / "result.json").is_file()


def test_a_live_sweeps_running_cell_is_left_as_it_is(tmp_path):
    """The control: while a sweep holds the folder's lock, its running cell stays running."""
    from profiler.fsutil import folder_lock
    from profiler.runs.manifest import RUNNING, SweepCell, SweepManifest, settle_running

    sweep = tmp_path / "runs" / "live"
    sweep.mkdir(parents=True)
    manifest = SweepManifest(options={}, cells={"c": SweepCell("b", 1, status=RUNNING)})
    with folder_lock(sweep, what="sweep"):
        assert settle_running(sweep, manifest) == []
    assert manifest.cells["c"].status == RUNNING
    assert settle_running(sweep, manifest) == ["c"]
    assert manifest.cells["c"].status == "interrupted"
