"""Hostile signals and concurrency (issue 24, floor: sweep): a sweep killed outright, and a
--resume over cells damaged meanwhile. Real processes, real signals; tiny models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, default_signals

FAST = ["--iters", "2", "--timed-warmup", "0", "--active", "1"]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), "sweep", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
            ):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_sweep_killed_outright_takes_its_worker_with_it(tmp_path):
    """NEW-5: after kill -9 of the sweep, its worker ran on (parent 1) and wrote its cell after
    a --resume had recorded it failed. Now the worker gets SIGINT and stops its cell."""
    sweep = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "sweep",
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1,2",
            "--model",
            "tests.tiny_models:slow",
            "--iters",
            "30",
            "--timed-warmup",
            "0",
            "--active",
            "1",
            "--name",
            "k9",
        ],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=default_signals,
    )
    manifest = tmp_path / "runs" / "k9" / "sweep.json"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                cells = json.loads(manifest.read_text())["cells"]
            except (OSError, ValueError):
                cells = {}
            if any(c["status"] == "running" for c in cells.values()):
                break
            assert time.monotonic() < deadline and sweep.poll() is None, "never got running"
            time.sleep(0.05)
        workers = _children(sweep.pid)
        assert workers
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
        deadline = time.monotonic() + 60
        while any(_alive(w) for w in workers):
            assert time.monotonic() < deadline, "the worker runs on without its sweep"
            time.sleep(0.1)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        for worker in _children(sweep.pid):
            os.kill(worker, signal.SIGKILL)
    # the cell running when the sweep died was stopped, and the worker took no other: no cell
    # folder was written after the sweep was gone (a worker still starting up when its SIGINT
    # came ignored it, then ran the cell it had been handed)
    assert not [
        c
        for c in (tmp_path / "runs" / "k9").iterdir()
        if c.is_dir() and c.name.startswith("pytorch_fp32")
    ]


_DYING_SWEEP = """
import os, subprocess, sys
worker = subprocess.Popen([sys.executable, "-m", "profiler.sweep.worker"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          env=dict(os.environ, INFER_PROFILER_SWEEP_PID=str(os.getpid())))
worker.stdin.write(sys.argv[1].encode() + b"\\n")
worker.stdin.flush()
print(worker.pid, flush=True)
os._exit(0)  # the sweep is gone before its worker, still starting, has read the cell
"""


def test_a_worker_whose_sweep_is_gone_runs_no_cell(tmp_path):
    """A worker handed a cell by a sweep that died while the worker started (its SIGINT came
    while ignored, between cells) leaves without running it: no cell folder appears after the
    sweep is gone, and a --resume never finds one it did not run."""
    import msgspec

    from profiler.runs.config import RunConfig, config_to_json
    from profiler.sweep.cell import CellJob

    job = CellJob(
        name="orphan",
        log_path=str(tmp_path / "orphan.log"),
        config=config_to_json(
            RunConfig(
                model="tests.tiny_models:conv_net",
                batch_size=1,
                iters=2,
                timed_warmup=0,
                active=1,
                runs_dir=tmp_path / "runs",
                tb_dir=tmp_path / "tb",
            )
        ),
    )
    env = _env()
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", _DYING_SWEEP, msgspec.json.encode(job).decode()],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 60
    while _alive(worker):
        assert time.monotonic() < deadline, "the orphaned worker runs on"
        time.sleep(0.1)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_stop_between_cells_interrupts_the_cell_handed_over_next(tmp_path):
    """A worker's SIGINT between cells (the sweep stopping it while its next cell was already in
    the pipe) is remembered: that cell is answered interrupted and not run; the reply of the cell
    before is whole."""
    import msgspec

    from profiler.runs.config import RunConfig, config_to_json
    from profiler.sweep.cell import CellJob, CellOutcome

    def job(bs: int) -> bytes:
        return (
            msgspec.json.encode(
                CellJob(
                    name=f"bs{bs}",
                    log_path=str(tmp_path / f"bs{bs}.log"),
                    config=config_to_json(
                        RunConfig(
                            model="tests.tiny_models:conv_net",
                            batch_size=bs,
                            iters=2,
                            timed_warmup=0,
                            active=1,
                            image_size=16,
                            runs_dir=tmp_path / "runs",
                            tb_dir=tmp_path / "tb",
                        )
                    ),
                )
            )
            + b"\n"
        )

    env = _env()
    env.update(PYTHONPATH=str(ROOT), INFER_PROFILER_SWEEP_PID=str(os.getpid()))
    worker = subprocess.Popen(
        [sys.executable, "-m", "profiler.sweep.worker"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        preexec_fn=default_signals,
    )
    try:
        worker.stdin.write(job(1))
        worker.stdin.flush()
        first = msgspec.json.decode(worker.stdout.readline(), type=dict)["outcome"]
        worker.send_signal(signal.SIGINT)  # between cells: the handler is in place
        time.sleep(0.5)  # let it arrive before the next cell is read
        worker.stdin.write(job(2))
        worker.stdin.close()
        second = msgspec.convert(
            msgspec.json.decode(worker.stdout.readline(), type=dict)["outcome"], CellOutcome
        )
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    assert first["status"] == "ok", first
    assert second.kind == "interrupted" and second.status == "interrupted", second
    assert (tmp_path / "runs" / "pytorch_fp32_bs1_conv_net").is_dir()
    assert not (tmp_path / "runs" / "pytorch_fp32_bs2_conv_net").exists()
    assert not (tmp_path / "bs2.log").exists()  # never begun


def _truncate(cell: Path, tb: Path) -> None:
    (cell / "result.json").write_text('{"trunc')


def _future(cell: Path, tb: Path) -> None:
    data = json.loads((cell / "result.json").read_text())
    data["schema"] = 99
    (cell / "result.json").write_text(json.dumps(data))


def _trace_gone(cell: Path, tb: Path) -> None:
    for trace in tb.iterdir():
        trace.unlink()


#: damage -> done to one cell between a sweep and its --resume; each must be run again (NEW-8)
DAMAGE = {"truncated-result": _truncate, "future-schema": _future, "trace-gone": _trace_gone}


def test_resume_runs_damaged_cells_again(tmp_path):
    grid = [
        "--backends",
        "pytorch_fp32",
        "--bs",
        "1,2,3,4",
        "--model",
        "tests.tiny_models:conv_net",
        *FAST,
        "--name",
        "rc",
    ]
    assert _sweep(tmp_path, *grid).returncode == 0
    cells = sorted(
        p
        for p in (tmp_path / "runs" / "rc").iterdir()
        if p.is_dir() and p.name.startswith("pytorch_fp32")
    )
    damaged = dict(zip(DAMAGE, cells))
    for kind, cell in damaged.items():
        DAMAGE[kind](cell, tmp_path / "tb_logs" / "rc" / cell.name)
    done = _sweep(tmp_path, *grid, "--resume")
    assert done.returncode == 0, done.stderr
    said = (done.stdout + done.stderr).splitlines()
    skipped = [line for line in said if "done before, skipped" in line]
    assert len(skipped) == 1 and "bs 4" in skipped[0], said  # only the intact cell
    assert any("3 cell(s) run, 1 skipped" in line for line in said), said
    manifest = json.loads((tmp_path / "runs" / "rc" / "sweep.json").read_text())
    from profiler.runs.result import read_result

    for name, cell in manifest["cells"].items():
        assert cell["status"] == "ok"
        result = read_result(tmp_path / "runs" / "rc" / name / "result.json")
        assert all(Path(tmp_path, f).is_file() for f in result.trace.files)


#: a stand-in for ncu or nsys on PATH: (its shell body, the exit status, what the output says)
TOOLS = {
    # fails after writing part of its report
    "ncu-failing": (
        "ncu",
        'while [ $# -gt 0 ]; do [ "$1" = --export ] && echo part > "$2.ncu-rep";'
        ' shift; done; echo "==ERROR== something broke" >&2; exit 1',
        2,
        "ncu did not write a report: ==ERROR== something broke",
    ),
    # killed while a process it started (as nsys starts the profiled run) holds its output
    "nsys-killed": (
        "nsys",
        "sleep 300 & echo $! > child.pid; kill -9 $$",
        1,
        "nsys wrote no report (killed by SIGKILL)",
    ),
}


@pytest.mark.parametrize("tool, body, code, fragment", TOOLS.values(), ids=TOOLS.keys())
def test_a_failing_or_killed_tool_is_one_line_and_leaves_no_staging(
    tmp_path, tool, body, code, fragment
):
    """Issue 24 point 4, the CPU part: ncu / nsys failing or killed (a fake on PATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / tool).chmod(0o755)
    env = _env()
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop(tool.upper(), None)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            tool,
            "--model",
            "tests.tiny_models:conv_net",
            "--bs",
            "2",
            *FAST,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == code, done.stderr
    assert fragment in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert sum(line.startswith("error:") for line in done.stderr.splitlines()) == (code == 2)
    assert not [p for p in (tmp_path / "runs").iterdir() if "partial" in p.name]
    assert not list((tmp_path / "runs").glob("*/ncu.ncu-rep"))  # no half-written report kept
    if (tmp_path / "child.pid").exists():  # what the killed tool started was ended with it
        child = int((tmp_path / "child.pid").read_text())
        assert (
            not Path(f"/proc/{child}").exists()
            or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
        )


def test_the_run_under_nsys_is_accepted_by_the_harness(tmp_path):
    """A stand-in nsys that runs the command it wraps (and writes no report): the run under it
    must start and write its result.json (its trace folder once sat inside --runs-dir, and the
    harness refused the nested folders; found on the GPU machine)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text(
        f"#!{sys.executable}\nimport subprocess, sys\n"
        "args = sys.argv[1:]\nstart = next(i for i, a in enumerate(args) if 'python' in a)\n"
        "sys.exit(subprocess.call(args[start:]))\n"
    )
    (bin_dir / "nsys").chmod(0o755)
    env = _env()
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop("NSYS", None)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "profile.py"),
            "nsys",
            "--model",
            "tests.tiny_models:conv_net",
            "--bs",
            "2",
            *FAST,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert "nested" not in said and "nsys wrote no report (exit status 0)" in said, said
    assert (tmp_path / "runs" / "pytorch_fp32_bs2_nsys" / "result.json").is_file()
    assert not [p for p in (tmp_path / "runs").iterdir() if "partial" in p.name]


# ---- a SIGKILL between the folder swaps of a run (NEW-11) ----------------------------------

#: a process that dies (SIGKILL, as the OOM killer or a power cut ends one) right after the
#: os.replace whose destination is argv[1] (or after the argv[1]-th os.replace when a number),
#: then runs the rest of argv as code or as `profile.py ARGS`
_KILLED_AT = """
import os, runpy, signal, sys
mark, count = sys.argv[1], [0]
real = os.replace

def replace(src, dst, *args, **kwargs):
    real(src, dst, *args, **kwargs)
    count[0] += 1
    if (str(count[0]) if mark.isdigit() else os.path.abspath(dst)) == mark:
        os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace
if sys.argv[2] == "-c":
    sys.argv = sys.argv[3:]
    exec(sys.argv[0])
else:
    sys.argv = sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _killed_at(mark: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = _env()
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", _KILLED_AT, mark, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_killed_between_its_two_folder_swaps_loses_nothing(tmp_path, cli):
    """NEW-11: killed right after tb_logs/<run> was replaced, runs/<run> still held the old
    result, naming the old trace, which the next command deleted: both runs lost; summarize
    said "names trace files that do not exist" and the next run refused the trace folder."""
    tiny = ["--model", "tests.tiny_models:conv_net", "--bs", "2", "--name", "kb", *FAST]
    run, runs, tb = "pytorch_fp32_bs2_kb", tmp_path / "runs", tmp_path / "tb_logs"
    assert cli("run", *tiny).code == 0
    (old_trace,) = [n for n in os.listdir(tb / run) if not n.startswith(".")]
    killed = _killed_at(str(tb / run), [str(ROOT / "profile.py"), "run", *tiny], tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (new_trace,) = [n for n in os.listdir(tb / run) if not n.startswith(".")]
    assert new_trace != old_trace  # killed between the swaps: the new trace, the old result
    # the next read finishes what the killed run committed: the new run, whole
    done = cli("summarize", run, "--view", "overview")
    assert done.code == 0, done
    assert new_trace in "".join(done.stdout.split()), done.stdout  # (a long path wraps)
    assert "finished" in done.stderr, done
    named = json.loads((runs / run / "result.json").read_text())["trace"]["files"]
    assert [Path(n).name for n in named] == [new_trace]
    # and the next run replaces it as its own; nothing hidden is left
    assert cli("run", *tiny).code == 0
    for folder in (runs, tb):
        assert [n for n in os.listdir(folder) if n.startswith(".")] == [], os.listdir(folder)


#: a run's two folder swaps by replace_dirs, as the harness does them, for a killed writer
_SWAPS = """
import sys
from pathlib import Path
from profiler.fsutil import folder_lock, replace_dirs, staging_dir
runs, tb = Path("runs"), Path("tb_logs")
with folder_lock(runs / "r", tb / "r", what="run"):
    run_stage, tb_stage = staging_dir(runs / "r"), staging_dir(tb / "r")
    (tb_stage / "new.pt.trace.json").write_text("{}")
    (run_stage / "result.json").write_text('{"trace": {"files": ["tb_logs/r/new.pt.trace.json"]}}')
    replace_dirs([(tb_stage, tb / "r"), (run_stage, runs / "r")])
"""

#: what comes after a killed writer: the next run's clean-up (runs, then tb_logs), a
#: `tensorboard --logdir tb_logs` before any run, or a read of the run
NEXT = {
    "next-run": lambda root: [clean_leftovers(root / "runs"), clean_leftovers(root / "tb_logs")],
    "tensorboard-first": lambda root: [
        clean_tree(root / "tb_logs"),
        clean_leftovers(root / "runs"),
    ],
    "read": lambda root: resolve_target("r", root),
}


def clean_leftovers(folder):
    from profiler.fsutil import clean_leftovers as clean

    return clean(folder)


def clean_tree(folder):
    from profiler.fsutil import clean_tree as clean

    return clean(folder)


def resolve_target(name, root):
    from profiler.runs.command_targets import resolve_target as resolve

    return resolve(name, root)


@pytest.mark.parametrize("next_command", NEXT.values(), ids=NEXT.keys())
@pytest.mark.parametrize("killed_after", range(1, 8))
def test_a_pair_of_swaps_killed_anywhere_is_old_or_new_never_torn(
    tmp_path, killed_after, next_command
):
    """replace_dirs' os.replace calls: 1 the trace folder's READY, 2 the run folder's READY (the
    commit), 3 and 4 tb_logs/r set aside and replaced, 5 and 6 runs/r the same; 7: not
    killed. Killed before the commit the old pair stays; after it, whatever comes next ends
    with the new pair. Either way the result names the trace beside it, and nothing hidden is
    left once a run's clean-up has been."""
    (tmp_path / "runs" / "r").mkdir(parents=True)
    (tmp_path / "tb_logs" / "r").mkdir(parents=True)
    (tmp_path / "tb_logs" / "r" / "old.pt.trace.json").write_text("{}")
    (tmp_path / "runs" / "r" / "result.json").write_text(
        '{"trace": {"files": ["tb_logs/r/old.pt.trace.json"]}}'
    )
    done = _killed_at(str(killed_after), ["-c", _SWAPS], tmp_path)
    assert done.returncode == (0 if killed_after == 7 else -signal.SIGKILL), done.stderr
    next_command(tmp_path)
    clean_leftovers(tmp_path / "runs"), clean_leftovers(tmp_path / "tb_logs")
    expected = "old" if killed_after == 1 else "new"
    (target,) = resolve_target("r", tmp_path).traces
    assert target == tmp_path / "tb_logs" / "r" / f"{expected}.pt.trace.json"
    for folder in ("runs", "tb_logs"):
        assert sorted(os.listdir(tmp_path / folder)) == ["r"], os.listdir(tmp_path / folder)
    assert sorted(n for n in os.listdir(tmp_path / "tb_logs" / "r") if not n.startswith(".")) == [
        f"{expected}.pt.trace.json"
    ]
