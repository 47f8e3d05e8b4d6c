"""Every command against bad input: a non-zero exit, one stderr line (two at most, with a hint),
no traceback, and nothing new or changed in runs/ and tb_logs/.

Each case is one row of CASES: an id, the command line (``{name}`` is replaced by the path of
an input built in the scratch folder), and the inputs it needs. A defect found later is a new
row. The commands run in-process (fast); SUBPROCESS_CASES repeat a few through a fresh
interpreter, as a user starts them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from .conftest import FIXTURES, run_python

H200 = FIXTURES / "h200"
TRACE = H200 / "tb_logs" / "pytorch_fp16_bs8" / "resnet50.1795313772163769478.pt.trace.json.gz"
TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
]
LONG_NAME = "a" * 300
BEYOND_64_BITS = "99999999999999999999999"


def _good_text() -> bytes:
    return gzip.decompress(TRACE.read_bytes())


def _state_dict_with_int_keys(path: Path) -> None:
    import torch

    torch.save({1: torch.zeros(1)}, path)


#: inputs a case can ask for: name -> how to build it at a path
INPUTS = {
    "good.pt.trace.json": lambda p: p.write_bytes(_good_text()),
    "empty.json": lambda p: p.write_bytes(b""),
    "trunc.json": lambda p: p.write_bytes(_good_text()[:5000]),
    "trunc.json.gz": lambda p: p.write_bytes(TRACE.read_bytes()[:3000]),
    "binary.json": lambda p: p.write_bytes(bytes(range(256)) * 16),
    "utf16.json": lambda p: p.write_bytes(json.dumps({"traceEvents": []}).encode("utf-16")),
    "notgzip.json.gz": lambda p: p.write_bytes(b'{"traceEvents": []}'),
    "no_events.json": lambda p: p.write_text(json.dumps({"other": 1})),
    "list.json": lambda p: p.write_text("[1, 2]"),
    "nested.json": lambda p: p.write_bytes(
        b'{"traceEvents":[' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    ),
    "afile": lambda p: p.write_bytes(b""),
    "notraces": lambda p: (p.mkdir(), (p / "readme.txt").write_text("x")),
    "badjson_run": lambda p: (p.mkdir(), (p / "result.json").write_text("{not json")),
    "nonstr_files_run": lambda p: (
        p.mkdir(),
        (p / "result.json").write_text(json.dumps({"trace": {"files": [None, 3]}})),
    ),
    "str_files_run": lambda p: (
        p.mkdir(),
        (p / "result.json").write_text(json.dumps({"trace": {"files": "abc"}})),
    ),
    "missing_files_run": lambda p: (
        p.mkdir(),
        (p / "result.json").write_text(json.dumps({"trace": {"files": ["nowhere.pt.trace.json"]}})),
    ),
    "intkeys.pt": _state_dict_with_int_keys,
}

CASES = [
    # summarize
    ("summarize-missing", ["summarize", "no/such/trace.json"]),
    ("summarize-empty", ["summarize", "{empty.json}"]),
    ("summarize-truncated", ["summarize", "{trunc.json}"]),
    ("summarize-truncated-gzip", ["summarize", "{trunc.json.gz}"]),
    ("summarize-binary", ["summarize", "{binary.json}"]),
    ("summarize-utf16", ["summarize", "{utf16.json}"]),
    ("summarize-not-gzip", ["summarize", "{notgzip.json.gz}"]),
    ("summarize-no-events", ["summarize", "{no_events.json}"]),
    ("summarize-list", ["summarize", "{list.json}"]),
    ("summarize-nested-D23", ["summarize", "{nested.json}"]),
    ("summarize-no-traces", ["summarize", "{notraces}"]),
    ("summarize-bad-result-json", ["summarize", "{badjson_run}"]),
    ("summarize-nonstr-trace-files-D21", ["summarize", "{nonstr_files_run}"]),
    ("summarize-str-trace-files", ["summarize", "{str_files_run}"]),
    ("summarize-missing-trace-files", ["summarize", "{missing_files_run}"]),
    ("summarize-unknown-view", ["summarize", "{good.pt.trace.json}", "--view", "bogus"]),
    ("summarize-negative-top", ["summarize", "{good.pt.trace.json}", "--top", "-1"]),
    ("summarize-out-is-a-file", ["summarize", "{good.pt.trace.json}", "--out", "{afile}"]),
    # compare
    ("compare-missing", ["compare", "no_such_run", "{good.pt.trace.json}"]),
    ("compare-truncated", ["compare", "{trunc.json}", "{good.pt.trace.json}"]),
    ("compare-nested-D23", ["compare", "{good.pt.trace.json}", "{nested.json}"]),
    ("compare-nonstr-trace-files-D21", ["compare", "{nonstr_files_run}", "{good.pt.trace.json}"]),
    (
        "compare-out-is-a-file",
        ["compare", "{good.pt.trace.json}", "{good.pt.trace.json}", "--out", "{afile}"],
    ),
    # plot
    ("plot-missing", ["plot", "no_such_run"]),
    ("plot-truncated", ["plot", "{trunc.json}"]),
    ("plot-nonstr-trace-files-D21", ["plot", "{nonstr_files_run}"]),
    ("plot-out-is-a-file-D10", ["plot", "{good.pt.trace.json}", "--out", "{afile}"]),
    # tb-compat
    ("tb-compat-missing", ["tb-compat", "no_such_run"]),
    ("tb-compat-truncated", ["tb-compat", "{trunc.json}"]),
    ("tb-compat-nested-D23", ["tb-compat", "{nested.json}"]),
    ("tb-compat-list", ["tb-compat", "{list.json}"]),
    ("tb-compat-out-is-a-file-D10", ["tb-compat", "{good.pt.trace.json}", "--out", "{afile}"]),
    # run
    ("run-bs-beyond-64-bits-D18", ["run", *TINY, "--bs", BEYOND_64_BITS]),
    ("run-name-300-chars-D19", ["run", *TINY, "--name", LONG_NAME]),
    ("run-name-escapes", ["run", *TINY, "--name", "../x"]),
    ("run-int-key-weights-D22", ["run", *TINY, "--weights", "{intkeys.pt}"]),
    ("run-missing-weights", ["run", *TINY, "--weights", "nope.pt"]),
    ("run-runs-dir-is-a-file-D10", ["run", *TINY, "--runs-dir", "{afile}"]),
    ("run-runs-dir-is-tb-dir-D2", ["run", *TINY, "--runs-dir", "tb_logs", "--tb-dir", "tb_logs"]),
    (
        "run-runs-dir-is-tb-dir-spelled-apart-D2",
        ["run", *TINY, "--runs-dir", "runs", "--tb-dir", "./runs/"],
    ),
    ("run-unknown-backend", ["run", *TINY, "--backend", "nope"]),
    ("run-unknown-compile-mode", ["run", *TINY, "--compile-mode", "bogus"]),
    ("run-bs-not-a-number", ["run", *TINY, "--bs", "abc"]),
    # sweep
    (
        "sweep-name-300-chars-D19",
        ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1", "--name", LONG_NAME],
    ),
    (
        "sweep-name-escapes",
        ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1", "--name", "../x"],
    ),
    ("sweep-unknown-backend", ["sweep", *TINY, "--backends", "nope", "--bs", "1"]),
    ("sweep-bs-zero", ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "0"]),
    (
        "sweep-bs-beyond-64-bits-D18",
        ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", BEYOND_64_BITS],
    ),
    (
        "sweep-runs-dir-is-tb-dir-D2",
        [
            "sweep",
            *TINY,
            "--backends",
            "pytorch_fp32",
            "--bs",
            "1",
            "--runs-dir",
            "runs",
            "--tb-dir",
            "runs",
        ],
    ),
    # ncu, nsys: not installed here, or refused before anything runs
    (
        "ncu-bs-beyond-64-bits",
        ["ncu", "--bs", BEYOND_64_BITS, "--model", "tests.tiny_models:conv_net"],
    ),
    ("nsys-name-escapes", ["nsys", "--name", "../x", "--model", "tests.tiny_models:conv_net"]),
    # tensorboard
    ("tensorboard-missing-logdir", ["tensorboard", "--logdir", "no/such/folder"]),
    ("tensorboard-bad-port", ["tensorboard", "--logdir", "tb_logs", "--port", "70000"]),
]


def _snapshot(*folders: Path) -> dict:
    """Every file and folder under ``folders`` (hidden ones included) with its content hash."""
    seen = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            key = str(path.relative_to(folder.parent))
            seen[key] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return seen


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A scratch folder holding real runs/ and tb_logs/ (the H200 fixtures) to guard."""
    shutil.copytree(H200 / "runs", tmp_path / "runs")
    shutil.copytree(H200 / "tb_logs", tmp_path / "tb_logs")
    (tmp_path / "in").mkdir()
    return tmp_path


def _argv(args: list[str], folder: Path) -> list[str]:
    """``{name}`` -> the path of that input, built under ``folder``."""
    argv = []
    for arg in args:
        if arg.startswith("{") and arg.endswith("}"):
            name = arg[1:-1]
            path = folder / name
            if not path.exists():
                INPUTS[name](path)
            arg = str(path)
        argv.append(arg)
    return argv


def assert_refused(code: int, stderr: str) -> None:
    assert code != 0, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, stderr
    assert any(line.startswith("error: ") for line in lines), stderr


@pytest.mark.parametrize("args", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_in_one_line(scratch, cli, args):
    argv = _argv(args, scratch / "in")
    before = _snapshot(scratch / "runs", scratch / "tb_logs")
    done = cli(*argv)
    assert_refused(done.code, done.stderr)
    assert _snapshot(scratch / "runs", scratch / "tb_logs") == before


def _run_of_another_model(scratch: Path, run_name: str) -> None:
    """runs/<run_name>/ and tb_logs/<run_name>/ hold a ResNet50 run (the H200 fixture)."""
    shutil.copytree(H200 / "runs" / "pytorch_fp32_bs8", scratch / "runs" / run_name)
    shutil.copytree(H200 / "tb_logs" / "pytorch_fp32_bs8", scratch / "tb_logs" / run_name)


def _sweep(scratch: Path, run_name: str) -> None:
    """runs/<run_name>/ is a sweep (a manifest written as `sweep` writes it)."""
    from profiler.runs.manifest import SweepManifest, write_manifest

    (scratch / "runs" / run_name).mkdir()
    write_manifest(
        scratch / "runs" / run_name,
        SweepManifest(
            options={},
            name=run_name,
            model="resnet50",
            backends=["pytorch_fp32"],
            batch_sizes=[1],
            baseline="pytorch_fp32",
        ),
    )


#: a run whose folder is taken by something it must not replace: setup, command, the refusal
OCCUPIED = [
    ("another-model-D27", _run_of_another_model, ["run", *TINY, "--bs", "8"], "holds another run"),
    (
        "another-model-by-name-D27",
        _run_of_another_model,
        ["run", *TINY, "--bs", "8", "--name", "conv_net"],
        "holds another run",
    ),
    ("a-sweep-D1", _sweep, ["run", *TINY, "--bs", "8"], "is a sweep"),
]


@pytest.mark.parametrize(
    "setup, args, says", [c[1:] for c in OCCUPIED], ids=[c[0] for c in OCCUPIED]
)
def test_a_run_never_replaces_what_it_is_not(scratch, cli, setup, args, says):
    """Without --replace, a run whose folder holds another model's run, or a sweep, is refused
    in one line before anything is built; both folders stay as they were."""
    setup(scratch, "pytorch_fp32_bs8_conv_net")  # the tiny model's default run name at --bs 8
    before = _snapshot(scratch / "runs", scratch / "tb_logs")
    done = cli(*args)
    assert_refused(done.code, done.stderr)
    assert says in done.stderr
    assert _snapshot(scratch / "runs", scratch / "tb_logs") == before


SUBPROCESS_CASES = [
    ("summarize-truncated", ["summarize", "{trunc.json}"]),
    ("tb-compat-nested-D23", ["tb-compat", "{nested.json}"]),
    ("run-bs-beyond-64-bits-D18", ["run", *TINY, "--bs", BEYOND_64_BITS]),
]


@pytest.mark.parametrize(
    "args", [c[1] for c in SUBPROCESS_CASES], ids=[c[0] for c in SUBPROCESS_CASES]
)
def test_bad_input_is_refused_in_one_line_by_a_fresh_process(tmp_path, args):
    argv = _argv(args, tmp_path)
    done = run_python(str(FIXTURES.parent.parent / "profile.py"), *argv, cwd=tmp_path, timeout=120)
    assert_refused(done.returncode, done.stderr)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "tb_logs").exists()


def test_tb_compat_of_a_trace_in_the_current_folder(tmp_path, cli):
    """D12: the copy goes to a folder of its own beside the trace."""
    shutil.copy(TRACE, tmp_path / "x.pt.trace.json.gz")
    done = cli("tb-compat", "x.pt.trace.json.gz")
    assert done.code == 0, done.stderr
    assert (tmp_path / "x_tbcompat" / "x.pt.trace.json.gz").is_file()
    assert "Traceback" not in done.stderr


def test_ascii_stdout_prints_the_tables(tmp_path):
    """D25: µ and … on a stdout that cannot encode them are replaced, not a traceback."""
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    env.pop("PYTHONPATH", None)
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            str(FIXTURES.parent.parent / "profile.py"),
            "summarize",
            str(TRACE),
            "--view",
            "kernels",
            "--top",
            "3",
        ],
        cwd=tmp_path,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"Kernels by total time" in done.stdout


def test_folder_scan_that_fails_is_one_line(cli, monkeypatch, tmp_path):
    """D24: a folder walk raising other than PermissionError (/proc's vanishing entries)."""
    (tmp_path / "walk").mkdir()

    def failing_rglob(self, pattern):
        raise OSError(22, "Invalid argument", "/proc/1/net")

    monkeypatch.setattr(Path, "rglob", failing_rglob)
    done = cli("summarize", str(tmp_path / "walk"))
    assert_refused(done.code, done.stderr)
    assert "cannot search" in done.stderr


def test_full_disk_while_writing_a_plot_is_one_line_and_leaves_nothing(scratch, cli, monkeypatch):
    """D10, disk full: a stand-in raising ENOSPC from savefig (no tmpfs can be mounted here)."""
    import errno

    from matplotlib.figure import Figure

    def full_disk(self, fname, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(fname))

    monkeypatch.setattr(Figure, "savefig", full_disk)
    out = scratch / "plots"
    done = cli("plot", str(TRACE), "--out", str(out))
    assert_refused(done.code, done.stderr)
    assert "No space left on device" in done.stderr
    assert list(out.iterdir()) == []  # the temp file is gone too


def test_full_disk_while_writing_a_run_is_one_line_and_leaves_nothing(scratch, cli, monkeypatch):
    """D10, disk full in `run`: a stand-in raising ENOSPC when result.json is written (no tmpfs
    can be mounted here); the staging folders go, runs/ and tb_logs/ stay as they were."""
    import errno

    write_bytes = Path.write_bytes

    def full_disk_for_results(self, data):
        if self.name.startswith(".result.json."):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk_for_results)
    before = _snapshot(scratch / "runs", scratch / "tb_logs")
    done = cli("run", *TINY, "--bs", "2")
    assert done.code != 0 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    # progress lines come first; the one error line is the last
    assert len(errors) == 1 and done.stderr.strip().endswith(errors[0]), done.stderr
    assert "No space left on device" in errors[0]
    assert _snapshot(scratch / "runs", scratch / "tb_logs") == before


def test_result_json_naming_non_strings_says_so(scratch, cli):
    """D21: trace.files of nulls and numbers is named as the fault, not a missing trace."""
    argv = _argv(["summarize", "{nonstr_files_run}"], scratch / "in")
    done = cli(*argv)
    assert_refused(done.code, done.stderr)
    assert "trace.files must be a list of file names" in done.stderr
