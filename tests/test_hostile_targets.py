"""Hostile file-system targets (issue 24, floor: fsutil and runs/ layout): what the tool finds
where it writes. It touches only what it made: staging/old folders carry its marker, clean-up,
replace and lock never follow symlinks, never replace what is not a regular file, and never act
outside the runs/tb roots of the command. One row per target; real files, in-process where the
defect allows, a fresh interpreter where a limit (ulimit) or os._exit needs one."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT

TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
    "--bs",
    "2",
]
RUN = "pytorch_fp32_bs2_conv_net"


# ---- clean-up touches only this tool's folders (NEW-2) -------------------------------------


def test_clean_up_leaves_the_users_look_alike_folders(tmp_path):
    from profiler.fsutil import MARKER, clean_tree

    user = [
        tmp_path / "data" / ".train.old-v1",
        tmp_path / ".downloads.partial-2023",
        tmp_path / "notes" / ".draft.old-backup",
        tmp_path / ".model.old-v1",
    ]
    for folder in user:
        folder.mkdir(parents=True)
        (folder / "important.txt").write_text("precious")
    (tmp_path / "data" / "train").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / ".notes.lock").write_text("my notes\n")  # not a lock of this tool
    ours = tmp_path / ".a_bs1.partial-x1y2"
    ours.mkdir()
    (ours / MARKER).write_text("1 then\n")
    assert clean_tree(tmp_path) == [ours]
    for folder in user:
        assert (folder / "important.txt").read_text() == "precious"
    assert not (tmp_path / "notes" / "draft").exists()
    assert (tmp_path / ".notes.lock").read_text() == "my notes\n"


def test_a_run_leaves_the_users_folders_in_its_runs_dir(cli, tmp_path):
    (tmp_path / "u" / "model").mkdir(parents=True)
    (tmp_path / "u" / ".model.old-v1").mkdir()
    done = cli("run", *TINY, "--runs-dir", "u")
    assert done.code == 0, done
    assert (tmp_path / "u" / ".model.old-v1").is_dir() and (tmp_path / "u" / RUN).is_dir()


# ---- what is at a written path: replaced only when it is a regular file (NEW-3, NEW-4) -----


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _symlink(p: Path) -> None:
    (p.parent / "victim.txt").write_text("victim's data")
    p.symlink_to(p.parent / "victim.txt")


def _folder(p: Path) -> None:
    p.mkdir()


def _device(p: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root (as root the device node was replaced)")
    os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null


NOT_REGULAR = {"fifo": _fifo, "symlink": _symlink, "folder": _folder, "device-node": _device}


@pytest.mark.parametrize("make", NOT_REGULAR.values(), ids=NOT_REGULAR.keys())
def test_an_atomic_write_never_replaces_what_is_not_a_regular_file(tmp_path, make):
    from profiler.errors import UserError
    from profiler.fsutil import write_text_atomic

    target = tmp_path / "out"
    make(target)
    before = os.lstat(target)
    with pytest.raises(UserError, match="this tool replaces only regular files"):
        write_text_atomic(target, "x")
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    if (tmp_path / "victim.txt").exists():
        assert (tmp_path / "victim.txt").read_text() == "victim's data"
    assert sorted(p.name for p in tmp_path.iterdir()) in (["out"], ["out", "victim.txt"])


@pytest.mark.parametrize("make", [_symlink, _fifo, _folder], ids=["symlink", "fifo", "folder"])
def test_the_run_lock_is_never_followed(cli, tmp_path, make):
    """NEW-4: the lock was opened through a planted symlink and its target truncated."""
    (tmp_path / "runs").mkdir()
    make(tmp_path / "runs" / f".{RUN}.lock")
    done = cli("run", *TINY)
    assert done.code == 2 and done.stderr.count("\n") == 1, done
    assert f".{RUN}.lock" in done.stderr.split("error: ")[1], done
    if (tmp_path / "runs" / "victim.txt").exists():
        assert (tmp_path / "runs" / "victim.txt").read_text() == "victim's data"
    assert not (tmp_path / "runs" / RUN).exists()


# ---- what a run replaces (NEW-1, NEW-17) ---------------------------------------------------


def test_a_run_never_replaces_another_runs_trace_folder(cli, tmp_path):
    assert cli("run", *TINY, "--runs-dir", "ra").code == 0
    traces = sorted((tmp_path / "tb_logs" / RUN).iterdir())
    done = cli("run", *TINY, "--runs-dir", "rb")  # results elsewhere, same trace folder
    assert done.code == 2 and "holds traces of another run" in done.stderr, done
    assert sorted((tmp_path / "tb_logs" / RUN).iterdir()) == traces
    assert cli("summarize", f"ra/{RUN}", "--view", "overview").code == 0
    assert cli("run", *TINY, "--runs-dir", "ra").code == 0  # its own trace folder: replaced


def test_a_run_never_replaces_a_sweeps_trace_folder(cli, tmp_path):
    cell = tmp_path / "tb_logs" / RUN / "pytorch_fp32_bs1_conv_net"
    cell.mkdir(parents=True)
    (cell / "x.pt.trace.json").write_text("{}")
    for extra in ([], ["--replace"]):
        done = cli("run", *TINY, "--runs-dir", "elsewhere", *extra)
        assert done.code == 2 and "holds folders" in done.stderr, done
        assert (cell / "x.pt.trace.json").read_text() == "{}"


@pytest.mark.parametrize("root", ["runs", "tb_logs"])
@pytest.mark.parametrize(
    "make",
    [lambda p: p.write_text("my notes"), lambda p: p.symlink_to("/tmp")],
    ids=["file", "symlink"],
)
def test_a_non_folder_at_the_runs_place_is_refused(cli, tmp_path, root, make):
    """NEW-17: a file or symlink there was renamed to a hidden .old- entry for ever."""
    (tmp_path / root).mkdir()
    make(tmp_path / root / RUN)
    done = cli("run", *TINY)
    assert done.code == 2 and "is not a folder" in done.stderr, done
    assert os.path.lexists(tmp_path / root / RUN)
    assert not [p for p in (tmp_path / root).iterdir() if ".old-" in p.name]


# ---- the roots themselves (NEW-18, NEW-19) -------------------------------------------------

ROOTS = {
    "symlink-loop": (["--runs-dir", "loopA"], "cannot be resolved"),
    "runs-inside-tb": (["--runs-dir", f"o/{RUN}", "--tb-dir", "o"], "nested"),
    "tb-inside-runs": (["--runs-dir", "o", "--tb-dir", f"o/{RUN}"], "nested"),
}


@pytest.mark.parametrize("args, fragment", ROOTS.values(), ids=ROOTS.keys())
def test_bad_roots_are_refused_up_front(cli, tmp_path, args, fragment):
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    done = cli("run", *TINY, *args)
    assert done.code == 2 and done.stderr.count("\n") == 1 and fragment in done.stderr, done
    assert not (tmp_path / "o").exists() and not (tmp_path / "tb_logs").exists()


# ---- limits and a process that ends from inside the model (fresh interpreters) -------------


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def test_compare_out_on_a_full_disk_writes_no_file(tmp_path):
    """NEW-20: 3 of 5 CSVs were left. ``ulimit -f 4``: the 14 KB kernels.csv cannot be written."""
    h200 = FIXTURES / "h200"
    done = _shell(
        f"ulimit -f 4; {sys.executable} {ROOT / 'profile.py'} compare "
        f"pytorch_fp16_bs8 pytorch_fp32_bs8 --out {tmp_path / 'cmp'}",
        h200,
    )
    assert done.returncode == 2 and done.stderr.startswith("error: "), done.stderr
    assert list((tmp_path / "cmp").iterdir()) == []


def test_torch_under_a_small_address_space_limit_is_one_line(tmp_path):
    """NEW-21: a 72-line ImportError traceback."""
    done = _shell(
        f"ulimit -v 1500000; {sys.executable} {ROOT / 'profile.py'} run " + " ".join(TINY), tmp_path
    )
    lines = done.stderr.strip().splitlines()
    # (the progress line "loading torch and the harness ..." before it, in a fresh process)
    assert lines[:-1] == ["loading torch and the harness ..."], done.stderr
    assert done.returncode == 2 and "ulimit -v" in lines[-1], done.stderr


def test_os_exit_in_the_models_forward_is_reported_by_the_next_command(tmp_path):
    """Round 1's D17 residue: os._exit(0) in forward exits 0 with no word; the lock it leaves
    records that the run never finished, and the next command says so in one line."""
    exiting = ["--model", "tests.tiny_models:exits_in_forward", *TINY[2:]]
    profile = f"{sys.executable} {ROOT / 'profile.py'}"
    first = _shell(f"{profile} run " + " ".join(exiting), tmp_path)
    assert first.returncode == 0  # nothing can change that from inside the process
    assert not (tmp_path / "runs" / "pytorch_fp32_bs2_exits_in_forward").exists()
    lock = tmp_path / "runs" / ".pytorch_fp32_bs2_exits_in_forward.lock"
    assert lock.read_text().split()[1] == "run"  # the record: a run began and never ended
    nxt = _shell(f"{profile} run " + " ".join(TINY), tmp_path)
    notes = [line for line in nxt.stderr.splitlines() if "did not finish" in line]
    assert nxt.returncode == 0 and len(notes) == 1, nxt.stderr
    assert "pytorch_fp32_bs2_exits_in_forward" in notes[0] and "os._exit" in notes[0]
    assert not lock.exists()


# ---- a disk that fills in the middle of a sweep (NEW-20) -----------------------------------


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a file's write says it: no name


def test_an_atomic_write_on_a_full_disk_names_its_file(tmp_path, monkeypatch):
    """NEW-20: 'error: [Errno 28] No space left on device', no file named."""
    from profiler.fsutil import write_json_atomic

    monkeypatch.setattr(Path, "write_bytes", _no_space)
    with pytest.raises(OSError) as raised:
        write_json_atomic(tmp_path / "sweep.json", {"cells": {}})
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(tmp_path / "sweep.json")
    assert list(tmp_path.iterdir()) == []  # no temp file left


def test_a_cell_whose_log_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """The cell's log is its first write: on a full disk (/dev/full) the cell ends as a user
    error naming the file, not as an exception out of the worker (recorded as 'died')."""
    from profiler.runs.config import RunConfig, config_to_json
    from profiler.sweep.cell import CellJob, run_job

    monkeypatch.chdir(tmp_path)
    config = RunConfig(
        model="tests.tiny_models:conv_net",
        batch_size=2,
        iters=2,
        timed_warmup=0,
        active=1,
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb",
    )
    ended = run_job(
        CellJob(name=config.run_name, config=config_to_json(config), log_path="/dev/full")
    )
    assert (ended.kind, ended.exit_code) == ("user-error", 2), ended
    assert ended.reason == "/dev/full: No space left on device"
    assert not (tmp_path / "runs").exists()


class _FinishingExecutor:
    """Runs every cell at once: its folder is a copy of a real run, its outcome ok."""

    def describe(self) -> str:
        return "in the test"

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir

    def run(self, jobs, on_start, on_done) -> None:
        import shutil

        from profiler.sweep.cell import outcome

        for job in jobs:
            on_start(job, {"gpu": None, "node": "here", "worker": "w0"})
            shutil.copytree(
                FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8", self.sweep_dir / job.name
            )
            on_done(job, outcome("ok", None, 0, 0.5))


@pytest.mark.parametrize("lasting", [False, True], ids=["space-freed", "disk-stays-full"])
def test_a_disk_that_fills_mid_sweep_stops_it_in_one_line(tmp_path, monkeypatch, lasting):
    """NEW-20: the sweep ended with an unnamed OSError, sweep.json still saying a cell was
    running. Now: the cells stop as for Ctrl-C, the manifest is written once more when there
    is room (the staging folders of the stopped cells are gone by then), and one line names
    the file, says what was kept and what --resume does. The manifest is never half-written."""
    from profiler.errors import UserError
    from profiler.runs.manifest import read_manifest
    from profiler.sweep import plan as sweep_plan, record, runner as sweep_run

    monkeypatch.chdir(tmp_path)
    p = sweep_plan.plan("pytorch_fp32", "1,2", {"model": "tests.tiny_models:conv_net"}, name="full")
    monkeypatch.setattr(sweep_run, "make_executor", lambda p: _FinishingExecutor(p.sweep_dir))
    writes = []
    real_write_bytes = Path.write_bytes

    def write_bytes(self, data):
        if self.name.startswith(".sweep.json."):
            writes.append(self.name)
            # the third write (cell 1 done) finds the disk full; the fourth (the stop's
            # record) finds room again unless the disk stays full
            if len(writes) == 3 or (lasting and len(writes) > 3):
                _no_space()
        return real_write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    with pytest.raises(UserError) as raised:
        sweep_run.run_sweep(p, say=lambda line: None)
    line = str(raised.value)
    assert "\n" not in line
    assert line.startswith(f"{p.sweep_dir / 'sweep.json'}: No space left on device"), line
    assert "the sweep stopped" in line and "--resume" in line, line
    cells = read_manifest(p.sweep_dir).cells  # whole, whichever write was the last
    if lasting:  # the last manifest written: cell 1 running, which --resume runs again
        assert cells["pytorch_fp32_bs1_conv_net"].status == "running"
        assert "lists 1 cell(s) as running" in line, line
        assert not record.is_done(
            p.sweep_dir, cells["pytorch_fp32_bs1_conv_net"], "pytorch_fp32_bs1_conv_net"
        )
    else:
        assert cells["pytorch_fp32_bs1_conv_net"].status == "ok"
        assert "1 finished cell(s) kept" in line, line
    assert cells["pytorch_fp32_bs2_conv_net"].status == "pending"
    assert not [n for n in os.listdir(p.sweep_dir) if n.startswith(".sweep.json.")]
