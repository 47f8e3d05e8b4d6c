"""Hostile signals, round 4 (issue 33 point 4, R4-6): one signal rule for every long command.

SIGINT, SIGTERM and SIGHUP, sent to a long command once it has started a child process, stop
the children (none is left running), leave nothing half-written, print one line and exit
130/143/129: `run --repeat-runs`, `sweep`, `compare --processes`, `noise`, `advise --try`,
`ncu` and `nsys` (a stand-in for the tool on PATH that runs the command it wraps, as the real
ones do). Real processes, real signals; tiny models. Every command gets SIGTERM; SIGINT and
SIGHUP go to a subset whose children differ (rounds, workers, a tool's group): all three take
one path (profiler.signals), and Ctrl-C of `sweep` and `advise --try`, SIGHUP of `run` are
tested in tests/test_sweep.py, tests/test_advise.py and tests/test_signals_and_locks.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import ROOT, default_signals

PROFILE = str(ROOT / "profile.py")
FAST = ["--iters", "3", "--timed-warmup", "0", "--active", "1"]
SLOW = ["--model", "tests.tiny_models:slow", *FAST]  # 0.3 s a call: a child outlives the signal

#: advise's advice replaced through the seam tests/test_advise.py uses (none fires on a CPU)
ADVISE = """
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

#: a stand-in for ncu or nsys: runs the profile.py command it wraps (in its own process, as
#: the tools do), answers ncu's --query-metrics with nothing
TOOL = f"""#!{sys.executable}
import subprocess, sys
args = sys.argv[1:]
if "--query-metrics" in args:
    sys.exit(0)
start = next(i for i, a in enumerate(args) if a.endswith("profile.py")) - 1
sys.exit(subprocess.call(args[start:]))
"""


def _repeat_window(argv: list[str]) -> bool:
    return "profiler.collect.window_child" in argv  # repeat_window, its bytecode kept


def _worker(argv: list[str]) -> bool:
    return any("profiler.sweep.worker" in a for a in argv)


def _run_under_tool(argv: list[str]) -> bool:  # the harness, started by the stand-in tool
    return len(argv) > 2 and argv[1] == PROFILE and "cuda-profiler-api" in argv


def _first_run(argv: list[str]) -> bool:  # ncu's ordinary run, before the tool
    return len(argv) > 2 and argv[1:3] == [PROFILE, "run"] and "cuda-profiler-api" not in argv


#: command -> (its arguments after `python`, the child it must have started when signalled)
COMMANDS = {
    "run": (
        [
            PROFILE,
            "run",
            "--model",
            "tests.tiny_models:conv_net",
            "--bs",
            "1",
            "--name",
            "rr",
            "--repeat-runs",
            "3",
            *FAST,
        ],
        _repeat_window,
    ),
    "sweep": (
        [PROFILE, "sweep", "--backends", "pytorch_fp32", "--bs", "1,2", *SLOW, "--name", "sw"],
        _worker,
    ),
    "compare": (
        [PROFILE, "compare", "pytorch_fp32_bs1_s", "pytorch_fp32_bs2_s", "--processes", "2"],
        _repeat_window,
    ),
    "noise": (
        [PROFILE, "noise", "--processes", "3", "--model", "tests.tiny_models:slow", "--iters", "3"],
        _repeat_window,
    ),
    "advise": (
        ["-c", ADVISE, "advise", "runs/pytorch_fp32_bs2_s", "--try", "--processes", "1"],
        _worker,
    ),
    "ncu": ([PROFILE, "ncu", "--bs", "2", "--name", "s", "--reuse", *SLOW], _run_under_tool),
    # its first run (the kernel table) shows its output to the user: the one line is ncu's
    "ncu-first-run": ([PROFILE, "ncu", "--bs", "2", "--name", "f", *SLOW], _first_run),
    "nsys": ([PROFILE, "nsys", "--bs", "2", "--name", "n", *SLOW], _run_under_tool),
}

#: seconds from the child's start to the signal (0.3 else): ncu's first run is stopped while
#: it still imports, before its own handlers are in place (it must end without a traceback)
DELAY = {"ncu-first-run": 0.6}

CASES = [
    *((name, signal.SIGTERM) for name in COMMANDS),
    ("compare", signal.SIGINT),
    ("ncu", signal.SIGINT),
    ("noise", signal.SIGHUP),
    ("advise", signal.SIGHUP),
    ("nsys", signal.SIGHUP),
]


def _env(cache: Path, bin_dir: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NCU", "NSYS")}
    env.update(CUDA_VISIBLE_DEVICES="", INFER_PROFILER_CACHE=str(cache), COLUMNS="200")
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """Two runs of the slow tiny model (bs 1 and 2, --name s): what compare, advise and
    `ncu --reuse` start from; each test works on a copy."""
    root = tmp_path_factory.mktemp("recorded")
    env = _env(root / "cache")
    made = [
        subprocess.Popen(
            [sys.executable, PROFILE, "run", *SLOW, "--bs", str(bs), "--name", "s"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_signals,
        )
        for bs in (1, 2)
    ]
    for process in made:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    return root


class Family:
    """Every process descended from ``pid``, seen while it runs (a descendant whose parent
    died is re-parented, so it is recorded while it still hangs below): (pid, start time)."""

    def __init__(self, pid: int) -> None:
        self.root = pid
        self.seen: dict[tuple[int, str], list[str]] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.is_set():
            self.scan()
            time.sleep(0.02)

    def scan(self) -> None:
        # every process's parent and start time; the command line of the descendants only (50
        # scans a second: reading every process's command line doubled a test's own CPU time)
        parents, starts = {}, {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(stat[1])
            starts[int(entry)] = stat[19].decode()
        below = {self.root}
        changed = True
        while changed:
            changed = False
            for pid, parent in parents.items():
                if parent in below and pid not in below:
                    below.add(pid)
                    changed = True
        for pid in below - {self.root}:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv = [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
            except OSError:
                continue
            start = starts[pid]
            # the latest command line: between fork and exec a child shows its parent's
            if argv or (pid, start) not in self.seen:
                self.seen[(pid, start)] = argv

    def started(self, wanted) -> bool:
        return any(wanted(argv) for argv in list(self.seen.values()))

    def _running(self) -> list[tuple[int, list[str]]]:
        """The descendants still running (a zombie has ended; a reused pid is another's)."""
        found = []
        for (pid, start), argv in self.seen.items():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[19] == start and stat[0] != "Z":
                found.append((pid, argv))
        return found

    def alive(self) -> list[str]:
        return [f"{pid}: {' '.join(argv)[:160]}" for pid, argv in self._running()]

    def kill_all(self) -> None:
        for pid, _ in self._running():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _leftovers(root: Path) -> list[str]:
    """Half-written things: staging folders, temporary files, lock files."""
    marks = (".partial-", "-partial-", ".old-", ".tmp", ".lock")
    return [
        str(p.relative_to(root)) for p in root.rglob("*") if any(mark in p.name for mark in marks)
    ]


@pytest.mark.parametrize(
    "name, signum", CASES, ids=[f"{n}-{signal.Signals(s).name}" for n, s in CASES]
)
def test_a_signal_stops_the_command_its_children_and_says_one_line(
    tmp_path, recorded, name, signum
):
    args, child = COMMANDS[name]
    for folder in ("runs", "tb_logs"):
        shutil.copytree(recorded / folder, tmp_path / folder, symlinks=True)
    bin_dir = None
    tool = name.split("-")[0]
    if tool in ("ncu", "nsys"):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / tool).write_text(TOOL)
        (bin_dir / tool).chmod(0o755)
    cache = tmp_path / "cache"  # the noise floor goes to cache/noise/, beside engines/
    env = _env(cache / "engines", bin_dir)
    if name == "advise":
        env["PYTHONPATH"] = str(ROOT)
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    process = subprocess.Popen(
        [sys.executable, *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    family = Family(process.pid)
    try:
        deadline = time.monotonic() + 120
        while not family.started(child):
            if process.poll() is not None:
                pytest.fail(
                    f"exited {process.returncode} before its child started: {process.stderr.read()}"
                )
            assert time.monotonic() < deadline, "its child never started"
            time.sleep(0.02)
        time.sleep(DELAY.get(name, 0.3))  # the child under way
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=90)
    except BaseException:
        process.kill()
        process.wait()
        family.kill_all()
        raise
    finally:
        family.done.set()
        family.thread.join()
    left = family.alive()
    family.kill_all()  # (a test that fails leaves nothing either)
    assert process.returncode == 128 + signum, stderr
    lines = stderr.strip().splitlines()
    said = [line for line in lines if line.startswith("interrupted")]
    assert len(said) == 1 and lines[-1] == said[0], stderr  # one line, the last
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert left == [], f"left running after {name} ended: {left}"
    assert _leftovers(tmp_path) == []
    after = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    new = sorted(str(p) for p in after - before if not str(p).startswith(("cache", "bin")))
    if name in ("compare", "noise", "nsys", "run", "ncu-first-run"):  # nothing of theirs
        assert new == [], new
    if name == "noise":  # (its folder may be made up front, to check it can keep one)
        assert not (cache / "noise").exists() or not any((cache / "noise").iterdir())
    if name == "ncu":  # its log at most, beside the run it measured; no report
        assert set(new) <= {
            "runs/pytorch_fp32_bs2_s/ncu.log",
            "runs/pytorch_fp32_bs2_s/query-metrics.txt",
        }, new
