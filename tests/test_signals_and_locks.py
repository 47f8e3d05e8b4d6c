"""Signals, killed runs and two writers at once, with real processes (issue 15, points 2-3).

SIGTERM and SIGHUP stop `run` and `sweep` the way Ctrl-C does (exit 143 and 129; both go through
profiler.signals, so each is sent to one command here); what a SIGKILL
leaves (hidden staging folders) is removed by the next command that writes the folder and is
never taken for a trace; a second process writing the same run or sweep refuses with one line.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, default_signals

SLOW_RUN = [
    "run",
    "--model",
    "tests.tiny_models:slow",
    "--bs",
    "2",
    "--iters",
    "100",
    "--timed-warmup",
    "0",
    "--name",
    "k",
]
RUN = "pytorch_fp32_bs2_k"  # --name k


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, COLUMNS="200")
    env.pop("PYTHONPATH", None)
    return subprocess.Popen(
        [sys.executable, str(ROOT / "profile.py"), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_signals,
    )


def _wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"exited {process.returncode} before {what}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _staging(folder: Path) -> list[str]:
    """Hidden folders: staging (.<run>.partial-*) and replaced runs (.<run>.old-*)."""
    return (
        sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and p.is_dir())
        if folder.is_dir()
        else []
    )


def _finish(process: subprocess.Popen, timeout: float = 60) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()


def _one_error_line(stderr: str, *fragments: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_killed_run_leftovers_are_cleaned_and_a_second_writer_refuses(tmp_path, cli):
    from profiler.fsutil import clean_leftovers
    from profiler.runs.command_targets import resolve_target

    runs, tb = tmp_path / "runs", tmp_path / "tb_logs"
    # a run killed with SIGKILL (the OOM killer, a cell past its grace) leaves its staging
    killed = _start(SLOW_RUN, tmp_path)
    _wait_for(lambda: _staging(runs) and _staging(tb), killed, "the run's staging folders")
    killed.kill()
    _finish(killed)
    leftovers = _staging(runs) + _staging(tb)
    assert leftovers and all(".partial-" in name for name in leftovers)
    # with a complete trace in it, the leftover is still not a trace to summarize
    left_tb = tb / _staging(tb)[0]
    trace = next((FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8").glob("*.pt.trace.json.gz"))
    (left_tb / trace.name).write_bytes(trace.read_bytes())
    with pytest.raises(Exception, match="no trace files"):
        resolve_target(str(tb))

    # the next run of the folder removes the leftovers first, then holds the folder
    first = _start(SLOW_RUN, tmp_path)
    _wait_for(
        lambda: (
            _staging(runs) and set(_staging(runs)).isdisjoint(leftovers) and not left_tb.exists()
        ),
        first,
        "the leftovers to be cleaned",
    )
    live = _staging(runs) + _staging(tb)
    assert clean_leftovers(runs) == [] and clean_leftovers(tb) == []  # a live run's are kept
    assert _staging(runs) + _staging(tb) == live

    # a second run of the same name (here in the test's process, in the same folder) refuses at
    # once, naming the first; it changes nothing
    second = cli(*SLOW_RUN)
    assert second.code == 2
    _one_error_line(
        second.stderr,
        f"runs/{RUN} is being written by process {first.pid} (a run)",
        "another --name",
    )
    assert first.poll() is None and _staging(runs) + _staging(tb) == live

    # SIGHUP (a closed terminal) stops it like Ctrl-C: its staging goes, exit 129 (128 + 1),
    # no traceback; SIGTERM takes the same path with 143 (the sweep test below)
    first.send_signal(signal.SIGHUP)
    _, stderr = _finish(first)
    assert first.returncode == 129, stderr
    assert (
        stderr.strip().splitlines()[-1]
        == "interrupted by SIGHUP: nothing was written for the unfinished run"
    )
    assert "Traceback" not in stderr
    assert [p.name for p in runs.iterdir()] == [] and [p.name for p in tb.iterdir()] == []


def test_sweep_stops_on_sigterm_like_ctrl_c(tmp_path):
    signum, code = signal.SIGTERM, 143
    name = f"sig{os.getpid()}"
    args = [
        "sweep",
        "--model",
        "tests.tiny_models:slow",
        "--backends",
        "pytorch_fp32",
        "--bs",
        "1,2",
        "--iters",
        "100",
        "--timed-warmup",
        "0",
        "--name",
        name,
    ]
    sweep_dir, trace_dir = tmp_path / "runs" / name, tmp_path / "tb_logs" / name
    manifest_path = sweep_dir / "sweep.json"
    sweep = _start(args, tmp_path)
    _wait_for(
        lambda: _staging(sweep_dir) and _staging(trace_dir),
        sweep,
        "the first cell's staging folders",
    )
    # a second sweep of the same folder refuses, and leaves the manifest alone
    before = manifest_path.read_bytes()
    second = _start([*args, "--resume"], tmp_path)
    _, stderr = _finish(second)
    assert second.returncode == 2
    _one_error_line(stderr, f"runs/{name} is being written by process {sweep.pid} (a sweep)")
    assert manifest_path.read_bytes() == before

    sweep.send_signal(signum)
    _, stderr = _finish(sweep)
    assert sweep.returncode == code, stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith("interrupted: sweep stopped; 0 finished cell(s) kept")
    )
    assert "Traceback" not in stderr
    cells = json.loads(manifest_path.read_text())["cells"]
    assert cells["pytorch_fp32_bs1_slow"]["status"] == "interrupted"
    assert (
        cells["pytorch_fp32_bs1_slow"]["reason"] == f"interrupted ({signal.Signals(signum).name})"
    )
    assert cells["pytorch_fp32_bs2_slow"]["status"] == "pending"
    assert (sweep_dir / "benchmark.csv").is_file() and (sweep_dir / "benchmark.md").is_file()
    # the running cell was stopped (not orphaned) and its staging folders are gone
    cell_processes = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and f"runs/{name}".encode() in _cmdline(pid)
    ]
    assert cell_processes == []
    assert _staging(sweep_dir) == [] and _staging(trace_dir) == []
    assert not (tmp_path / "runs" / f".{name}.lock").exists()


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


HOLD = """
import sys, time
from pathlib import Path
from profiler.fsutil import folder_lock, staging_dir
with folder_lock(Path(sys.argv[1]), what="run"):
    print(staging_dir(Path(sys.argv[1])), flush=True)
    time.sleep(60)
"""


def test_tensorboard_logdir_is_cleaned_of_dead_writers_leftovers_only(tmp_path):
    """What `tensorboard --logdir` removes first (fsutil.clean_tree): the leftovers of dead
    writers at both levels, never those of a live one, and a replace cut in half is undone."""
    from profiler.fsutil import MARKER, clean_tree

    tb = tmp_path / "tb_logs"
    dead = [tb / ".a_bs1.partial-x1y2", tb / "sw" / ".c_bs2.partial-abc", tb / ".b_bs1.old-99"]
    for folder in dead:
        (folder / "sub").mkdir(parents=True)
        (folder / MARKER).touch()  # made by this tool
    (tb / ".b_bs1.old-99" / "w.pt.trace.json").write_text("{}")  # b_bs1 itself is missing
    (tb / "sw" / ".c_bs2.lock").write_text("12345\n")  # a killed holder's lock file
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    live = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tb / "sw" / "d_bs4")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    try:
        live_staging = Path(live.stdout.readline().strip())
        assert live_staging.is_dir()
        removed = clean_tree(tb)
        assert sorted(removed) == sorted([dead[0], dead[1]])
        assert live_staging.is_dir()  # its writer still runs
        assert (tb / "b_bs1" / "w.pt.trace.json").is_file()  # put back
        assert sorted(p.name for p in tb.iterdir()) == ["b_bs1", "sw"]
        assert not (tb / "sw" / ".c_bs2.lock").exists()  # a dead holder's lock file goes too
    finally:
        live.kill()
        live.wait()
    assert clean_tree(tb) == [live_staging]  # now its writer is dead
    assert list((tb / "sw").iterdir()) == []
