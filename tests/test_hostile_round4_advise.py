"""Hostile testing, round 4 (issue 33): `advise --try` writes only into a trial folder it made,
on the results and the trace side (R4-1, R4-2), its workers' logs go under it (R4-3), it exits
non-zero when the baseline or every experiment failed (R4-10), and re-timing imports a
package.module:function model only from the file its run recorded, or with --trust-model
(R4-14). Then point 1's walk: every command that writes a folder, against a folder that is not
its own. Reproductions: ../shared/reliability/defects-round4.md.

On a CPU no advice rule fires on a tiny run: the advice is replaced through the seam
tests/test_advise.py uses. One tiny run is made per module and copied into each test."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, invoke_in

TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--iters",
    "3",
    "--timed-warmup",
    "0",
    "--active",
    "1",
]
RUN = "pytorch_fp32_bs2_conv_net"
TRIAL = f"advise_{RUN}"
BASELINE = "pytorch_fp32_bs2_baseline"
CELL = "pytorch_fp32_bs3_batch_size-3"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A folder holding runs/<RUN> and tb_logs/<RUN>: the tiny conv net at bs 2, on the CPU (a
    run in this process)."""
    folder = tmp_path_factory.mktemp("made")
    done = invoke_in(folder, "run", *TINY, "--bs", "2")
    assert done.code == 0, done.stderr
    return folder


@pytest.fixture
def run_here(made, tmp_path) -> str:
    """The tiny run copied into this test's folder (the cli fixture's current folder)."""
    for root in ("runs", "tb_logs"):
        shutil.copytree(made / root, tmp_path / root)
    return f"runs/{RUN}"


@pytest.fixture
def advised(monkeypatch):
    """Advice that names two experiments runnable here (--bs 3, --bs 4)."""
    import profiler.commands.advise as command
    from profiler.analysis import experiments
    from profiler.analysis.advice import Advice

    monkeypatch.setitem(
        experiments.EXPERIMENTS,
        "batch-headroom",
        lambda config: [
            ("--bs 3", {"batch_size": 3}, "a test"),
            ("--bs 4", {"batch_size": 4}, "a test"),
        ],
    )
    monkeypatch.setattr(
        command,
        "advice_of",
        lambda side: [
            Advice(
                "batch-headroom",
                "t",
                "",
                {
                    "throughput_by_bs": [(1, 100.0), (2, 150.0)],
                    "growth": 0.5,
                    "from_bs": 1,
                    "to_bs": 2,
                },
                "",
            )
        ],
    )


def snapshot(folder: Path) -> dict:
    """Every path under ``folder`` (symlinks not followed) -> its content or kind."""
    if not os.path.lexists(folder):
        return {}
    if os.path.islink(folder):
        return {".": f"-> {os.readlink(folder)}"}
    if Path(folder).is_file():
        return {".": Path(folder).read_bytes()}
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        key = str(path.relative_to(folder))
        found[key] = (
            f"-> {os.readlink(path)}"
            if path.is_symlink()
            else "folder"
            if path.is_dir()
            else path.read_bytes()
        )
    return found


def one_line(done, fragment: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), done
    assert fragment in lines[0], lines[0]
    return lines[0]


def _edit_result(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# ---- R4-1, R4-2: a trial writes only into trial folders it made -----------------------------


def _users_folder(t: Path) -> list[Path]:
    """R4-1's reproduction: a user's advise_<run>/ with a cell-named sub-folder and notes."""
    (t / "runs" / TRIAL / CELL).mkdir(parents=True)
    (t / "runs" / TRIAL / CELL / "mine.txt").write_text("mine")
    (t / "runs" / TRIAL / "notes.txt").write_text("notes")
    return [t / "runs" / TRIAL]


def _sweep_folder(t: Path) -> list[Path]:
    (t / "runs" / TRIAL).mkdir(parents=True)
    (t / "runs" / TRIAL / "sweep.json").write_text('{"cells": {}, "options": {}}')
    return [t / "runs" / TRIAL]


def _symlink(t: Path) -> list[Path]:
    (t / "elsewhere").mkdir()
    (t / "elsewhere" / "mine.txt").write_text("mine")
    (t / "runs" / TRIAL).symlink_to("../elsewhere")
    return [t / "runs" / TRIAL, t / "elsewhere"]


def _cell_in_own_trial(t: Path) -> list[Path]:
    """A trial folder of this tool's (marked) with a user's folder where a cell goes."""
    from profiler.fsutil import MARKER

    (t / "runs" / TRIAL / CELL).mkdir(parents=True)
    (t / "runs" / TRIAL / MARKER).write_text("1 then\n")
    (t / "runs" / TRIAL / "trial.json").write_text('{"folder": "x", "cells": []}')
    (t / "runs" / TRIAL / CELL / "mine.txt").write_text("mine")
    return [t / "runs" / TRIAL]


def _marker_symlink(t: Path) -> list[Path]:
    """A folder whose only entry is a symlink of the marker's name, to a file of the user's."""
    from profiler.fsutil import MARKER

    (t / "victim.txt").write_text("victim")
    (t / "runs" / TRIAL).mkdir(parents=True)
    (t / "runs" / TRIAL / MARKER).symlink_to(t / "victim.txt")
    return [t / "runs" / TRIAL, t / "victim.txt"]


def _trace_side(t: Path) -> list[Path]:
    """R4-2's reproduction: a user's folder where the baseline's traces go."""
    (t / "tb_logs" / TRIAL / BASELINE).mkdir(parents=True)
    (t / "tb_logs" / TRIAL / BASELINE / "mine.txt").write_text("mine")
    return [t / "tb_logs" / TRIAL]


def _trace_symlink(t: Path) -> list[Path]:
    (t / "elsewhere").mkdir()
    (t / "tb_logs" / TRIAL).symlink_to("../elsewhere")
    return [t / "tb_logs" / TRIAL, t / "elsewhere"]


#: id -> (what is planted, the words of the refusal, whether --resume is refused too)
NOT_OURS = {
    "users-folder": (_users_folder, "is not a trial folder of this tool"),
    "sweep-folder": (_sweep_folder, "is a sweep"),
    "symlink": (_symlink, "is a symlink"),
    "cell-named-folder": (_cell_in_own_trial, "was not made by this tool"),
    "marker-symlink": (_marker_symlink, "is not a trial folder of this tool"),
    "trace-side-folder": (_trace_side, "is not a trial folder of this tool"),
    "trace-side-symlink": (_trace_symlink, "is a symlink"),
}


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
@pytest.mark.parametrize("plant, fragment", NOT_OURS.values(), ids=NOT_OURS.keys())
def test_a_trial_never_writes_into_a_folder_it_did_not_make(
    cli, run_here, advised, tmp_path, plant, fragment, resume
):
    """R4-1: with --resume, a user's folder, a sweep or a symlink named advise_<run> took the
    cells (a cell-named sub-folder replaced), trial.json and report.html; R4-2: the trace
    side was never looked at. Now one line, exit 2, and nothing there changed."""
    planted = plant(tmp_path)
    before = {p: snapshot(p) for p in planted}
    done = cli("advise", run_here, "--try", *(["--resume"] if resume else []))
    if fragment == "was not made by this tool" and not resume:  # its own trial: --resume
        fragment = "pass --resume"
    one_line(done, fragment)
    assert {p: snapshot(p) for p in planted} == before
    assert not (tmp_path / "logs").exists()


def test_resume_continues_its_own_trial_and_one_made_before_the_marker(
    cli, run_here, advised, tmp_path
):
    """R4-3 too: the workers' logs went to ./logs/workers/ whatever --runs-dir said, and a file
    named logs in the current folder failed the trial. Now under the trial's logs/; and
    --resume takes its own trial back, marked or (made before the marker) with trial.json."""
    from profiler.fsutil import MARKER

    (tmp_path / "logs").write_text("my notes")  # a file named logs: no longer in the way
    args = ["advise", run_here, "--try", "--runs-dir", "out", "--tb-dir", "outtb"]
    done = cli(*args)
    assert done.code == 0, done
    assert (tmp_path / "logs").read_text() == "my notes"
    trial = tmp_path / "out" / TRIAL
    assert (trial / "logs" / "workers" / "cpu.log").is_file()
    assert (trial / MARKER).is_file() and (tmp_path / "outtb" / TRIAL / MARKER).is_file()
    again = cli(*args)
    one_line(again, "pass --resume")
    resumed = cli(*args, "--resume", "--json")
    assert resumed.code == 0, resumed
    cells = json.loads(resumed.stdout)["trial"]["cells"]
    assert [c["reason"] for c in cells] == ["kept from before (--resume)"] * 3
    for folder in (trial, tmp_path / "outtb" / TRIAL):  # a trial of an older version
        (folder / MARKER).unlink()
    legacy = cli(*args, "--resume")
    assert legacy.code == 0, legacy
    assert (trial / MARKER).is_file() and (tmp_path / "outtb" / TRIAL / MARKER).is_file()


# ---- R4-10: the exit status says when nothing could be measured -----------------------------

ROOTS = {
    "same-folder": (["--runs-dir", "out", "--tb-dir", "out"], "the same folder"),
    "nested": (["--runs-dir", "out", "--tb-dir", f"out/{TRIAL}"], "nested"),
}


@pytest.mark.parametrize("args, fragment", ROOTS.values(), ids=ROOTS.keys())
def test_results_and_traces_in_one_folder_are_refused_up_front(
    cli, run_here, advised, tmp_path, args, fragment
):
    """R4-10: every cell failed on it, the trial exited 0."""
    one_line(cli("advise", run_here, "--try", *args), fragment)
    assert not (tmp_path / "out").exists()


def test_a_cuda_graphs_run_on_a_cpu_is_refused_up_front(
    cli, run_here, advised, tmp_path, monkeypatch
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this machine: no GPU
    _edit_result(
        tmp_path / run_here / "result.json", lambda d: d["config"].update(cuda_graphs=True)
    )
    one_line(cli("advise", run_here, "--try"), "--cuda-graphs")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [RUN]


def test_a_baseline_that_fails_stops_the_trial_with_exit_2(cli, run_here, advised, tmp_path):
    """The run's model now fails (same module, the file it recorded): the baseline fails on a
    user error, the experiments are not run, and the exit status is 2, not 0."""
    _edit_result(
        tmp_path / run_here / "result.json",
        lambda d: d["config"].update(model="tests.tiny_models:failing"),
    )
    done = cli("advise", run_here, "--try", "--json")
    assert done.code == 2, done
    assert "error: the baseline (the run as it is) failed" in done.stderr
    cells = json.loads(done.stdout)["trial"]["cells"]
    assert [c["status"] for c in cells] == ["failed", "not run", "not run"]
    assert json.loads(done.stdout)["trial"]["stopped_by"] == "baseline"


def test_every_experiment_failing_exits_1(cli, run_here, advised, tmp_path):
    """tests.tiny_models:oom_above_2 runs at bs 2 and runs out of memory above it."""
    _edit_result(
        tmp_path / run_here / "result.json",
        lambda d: d["config"].update(model="tests.tiny_models:oom_above_2"),
    )
    done = cli("advise", run_here, "--try")
    assert done.code == 1, done
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("error: every experiment that ran failed (first: --bs 3")
    )


# ---- R4-14: re-timing imports only the model file its run recorded --------------------------


def test_a_run_records_its_models_file(made):
    data = json.loads((made / "runs" / RUN / "result.json").read_text())
    source = ROOT / "tests" / "tiny_models.py"
    assert data["model_source"] == {
        "module": "tests.tiny_models",
        "path": str(source),
        "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
    }


def _stand_in(t: Path) -> Path:
    """R4-14's stand-in module: importing it writes a file."""
    (t / "mypkg").mkdir()
    (t / "mypkg" / "__init__.py").write_text("")
    (t / "mypkg" / "mod.py").write_text(
        "from pathlib import Path\nPath('IMPORTED').write_text('ran')\n"
        "def whatever(**kwargs):\n    raise SystemExit('ran')\n"
    )
    return t / "IMPORTED"


def _named_elsewhere(d: dict) -> None:
    d["config"]["model"] = "mypkg.mod:whatever"


def _named_elsewhere_old(d: dict) -> None:
    d["config"]["model"] = "mypkg.mod:whatever"
    d.pop("model_source")


def _file_changed(d: dict) -> None:
    d["model_source"]["sha256"] = "0" * 64


def _path_changed(d: dict) -> None:
    d["model_source"]["path"] = "/elsewhere/tests/tiny_models.py"


#: id -> (how result.json is changed, the words of the refusal)
FOREIGN = {
    "another-module": (_named_elsewhere, "not the file the run recorded"),
    "no-record": (_named_elsewhere_old, "the run recorded no file for it"),
    "file-changed": (_file_changed, "not the file the run recorded"),
    "path-changed": (_path_changed, "not the file the run recorded"),
}


@pytest.mark.parametrize("command", ["compare", "advise"])
@pytest.mark.parametrize("change, fragment", FOREIGN.values(), ids=FOREIGN.keys())
def test_retiming_refuses_a_model_file_the_run_did_not_record(
    cli, run_here, advised, tmp_path, monkeypatch, command, change, fragment
):
    """R4-14: compare --processes and advise --try imported and called whatever module a
    result.json named. Now one line naming the file and --trust-model; nothing imported."""
    canary = _stand_in(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    _edit_result(tmp_path / run_here / "result.json", change)
    args = (
        ["compare", run_here, run_here, "--processes", "1"]
        if command == "compare"
        else ["advise", run_here, "--try"]
    )
    line = one_line(cli(*args), fragment)
    assert "--trust-model" in line and ("mypkg/mod.py" in line or "tiny_models.py" in line)
    assert not canary.exists() and "mypkg.mod" not in sys.modules
    assert not (tmp_path / "runs" / TRIAL).exists()


def test_trust_model_imports_it_with_a_warning_and_the_recorded_file_is_named(
    cli, run_here, tmp_path
):
    shutil.copytree(tmp_path / "runs" / RUN, tmp_path / "runs" / "old")
    _edit_result(tmp_path / "runs" / "old" / "result.json", lambda d: d.pop("model_source"))
    refused = cli("compare", "runs/old", run_here, "--processes", "1")
    one_line(refused, "A's model tests.tiny_models:conv_net would be imported from")
    done = cli("compare", "runs/old", run_here, "--processes", "1", "--trust-model")
    assert done.code == 0, done
    source = ROOT / "tests" / "tiny_models.py"
    assert (
        f"warning: A's model tests.tiny_models:conv_net would be imported from {source}"
        in done.stderr
    )
    assert (
        f"B's model tests.tiny_models:conv_net: importing {source} (the file the run "
        "recorded" in done.stderr
    )


# ---- point 1: every command that writes a folder, against a folder that is not its own -------


def _sweep_cell_not_ours(t: Path, cli) -> list[str]:
    """A sweep of this tool's, then a user's folder where one of its cells goes."""
    done = cli("sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1", "--name", "sw")
    assert done.code == 0, done
    cell = t / "runs" / "sw" / "pytorch_fp32_bs1_conv_net"
    shutil.rmtree(cell)
    cell.mkdir()
    (cell / "mine.txt").write_text("mine")
    return ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1", "--name", "sw", "--resume"]


def _mkdir(t: Path, relative: str, *, sub: str | None = None) -> None:
    folder = t / relative / (sub or "")
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("mine")


RUN1 = "pytorch_fp32_bs1_conv_net"
SWEEP = ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1,2", "--name", "sw"]

#: id -> (plant(t, cli) -> the command's arguments, the folder planted (relative), the words
#: of the refusal); every command that writes a folder it names itself
WRITERS = {
    "run-results": (
        lambda t, cli: _mkdir(t, f"runs/{RUN1}") or ["run", *TINY, "--bs", "1"],
        f"runs/{RUN1}",
        "holds no readable result.json",
    ),
    "run-traces": (
        lambda t, cli: (
            _mkdir(t, f"tb_logs/{RUN1}", sub="sub")
            or ["run", *TINY, "--bs", "1", "--runs-dir", "r"]
        ),
        f"tb_logs/{RUN1}",
        "holds folders",
    ),
    "sweep-results": (lambda t, cli: _mkdir(t, "runs/sw") or SWEEP, "runs/sw", "already exists"),
    "sweep-results-resume": (
        lambda t, cli: _mkdir(t, "runs/sw") or [*SWEEP, "--resume"],
        "runs/sw",
        "is not a sweep folder",
    ),
    "sweep-traces": (
        lambda t, cli: _mkdir(t, "tb_logs/sw", sub="pytorch_fp32_bs1_conv_net") or SWEEP,
        "tb_logs/sw",
        "which this tool did not make",
    ),
    "sweep-symlink": (
        lambda t, cli: (
            (t / "elsewhere").mkdir() or (t / "runs" / "sw").symlink_to("../elsewhere") or SWEEP
        ),
        "elsewhere",
        "is not a folder",
    ),
    "sweep-cell": (
        _sweep_cell_not_ours,
        "runs/sw/pytorch_fp32_bs1_conv_net",
        "was not made by this tool",
    ),
    "advise-try-results": (
        lambda t, cli: _users_folder(t) and ["advise", f"runs/{RUN}", "--try", "--resume"],
        f"runs/{TRIAL}",
        "is not a trial folder",
    ),
    "advise-try-traces": (
        lambda t, cli: _trace_side(t) and ["advise", f"runs/{RUN}", "--try"],
        f"tb_logs/{TRIAL}",
        "is not a trial folder",
    ),
    "tb-compat": (
        lambda t, cli: _mkdir(t, f"tb_logs/{RUN}_tbcompat") or ["tb-compat", RUN],
        f"tb_logs/{RUN}_tbcompat",
        "not tb-compat copies only",
    ),
    "report-out": (
        lambda t, cli: _mkdir(t, "page.html") or ["report", RUN, "--out", "page.html"],
        "page.html",
        "is a folder",
    ),
}


@pytest.mark.parametrize("plant, planted, fragment", WRITERS.values(), ids=WRITERS.keys())
def test_every_writer_refuses_a_folder_that_is_not_its_own(
    cli, run_here, advised, tmp_path, plant, planted, fragment
):
    """The README's "What the tool owns and touches": a folder a command names itself (a run's,
    a sweep's, a trial's, tb-compat's, a file's place) is written only when it made it."""
    args = plant(tmp_path, cli)
    before = snapshot(tmp_path / planted)
    one_line(cli(*args), fragment)
    assert snapshot(tmp_path / planted) == before
    assert not (tmp_path / "logs").exists()


OUT_FOLDERS = {
    "compare-out": ["compare", RUN, RUN, "--out", "mine"],
    "summarize-out": ["summarize", RUN, "--out", "mine"],
    # a GPU run: a CPU run's trace holds no kernels to plot
    "plot-out": ["plot", str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"), "--out", "mine"],
    # a GPU run: a CPU run's trace has nothing to change, and then no copy is written
    "tb-compat-out": [
        "tb-compat",
        str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8"),
        "--out",
        "mine",
    ],
}


@pytest.mark.parametrize("args", OUT_FOLDERS.values(), ids=OUT_FOLDERS.keys())
def test_an_out_folder_of_the_users_gets_files_beside_its_own(cli, run_here, tmp_path, args):
    """A folder the user names with --out is the user's: the command adds its files there and
    touches nothing else in it."""
    _mkdir(tmp_path, "mine", sub="sub")
    (tmp_path / "mine" / "notes.txt").write_text("notes")
    before = snapshot(tmp_path / "mine")
    done = cli(*args)
    assert done.code == 0, done
    after = snapshot(tmp_path / "mine")
    assert {k: v for k, v in after.items() if k in before} == before
    assert len(after) > len(before)


def test_noise_never_writes_its_floor_through_a_symlink(cli, tmp_path, monkeypatch):
    """The floor file beside the engine cache: a symlink there is refused, its target kept."""
    from profiler.runs.noise_floor import cpu_kind, floor_path

    # a cache of this test's own: the symlink must not outlive it for the worker's next tests
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "cache"))
    path = floor_path(cpu_kind())  # the floor's file for this machine's kind
    path.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "victim.json").write_text("victim")
    path.symlink_to(tmp_path / "victim.json")
    done = cli(
        "noise",
        "--processes",
        "2",
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "3",
        "--bs",
        "1",
    )
    assert done.code == 2 and done.stderr.strip().splitlines()[-1].startswith("error: "), done
    assert (tmp_path / "victim.json").read_text() == "victim" and path.is_symlink()
