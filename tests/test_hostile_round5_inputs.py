"""Hostile inputs, round 5 (issue 47 points 2 and 4; ../shared/reliability/defects-round5.md):
re-timing runs the model file it checked, compiled from the checked bytes (R5-6), and names an
identical file at another path as such (R5-9); untrusted files are read with size caps before
they are parsed and their non-finite numbers are refused or shown as such, never a traceback
(result.json R5-7, R5-16; processes.csv and latency.csv R5-13, R5-14; a trace R5-15; a noise
floor R5-10). CPU only; in-process, from the H200 fixture runs and tiny runs of a module made
here."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shutil
import sys
from pathlib import Path

import pytest

from profiler.runs import phases

from .conftest import ROOT, invoke

# the H200 copies and floors these tests start from are round 4's
from .test_hostile_round4_inputs import _floor, _lines, _one_process_pair, pair

__all__ = ["pair"]  # (a fixture: imported for these tests)

FAST = ["--iters", "3", "--timed-warmup", "0", "--active", "1"]

# ---- R5-6, R5-9: the file that was checked is what runs -----------------------------------

GOOD = (
    "import torch\n\n\ndef tiny(batch_size=1):\n"
    "    return torch.nn.Linear(4, 4), torch.randn(batch_size, 4)\n"
)


def _evil(canary: Path) -> str:
    """Other code, of GOOD's length: it leaves ``canary`` when it runs."""
    code = (
        f"import pathlib; pathlib.Path({str(canary)!r}).touch()\nimport torch\n"
        "def tiny(batch_size=1):\n    return torch.nn.Linear(4, 4), torch.randn(batch_size, 4)\n"
    )
    return code


def _padded(code: str, length: int) -> str:
    return code + "#" * (length - len(code) - 1) + "\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project folder: the package r5six (module m6, GOOD padded to the evil code's length),
    and two runs of r5six.m6:tiny (bs 1 and 2, --name m6), made in this process."""
    root = tmp_path_factory.mktemp("project")
    (root / "r5six").mkdir()
    (root / "r5six" / "__init__.py").write_text("")
    length = max(len(GOOD), len(_evil(root / "PWNED_BY_STALE_PYC"))) + 40
    (root / "r5six" / "m6.py").write_text(_padded(GOOD, length))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.syspath_prepend(str(root))
        patch.syspath_prepend(str(ROOT))
        patch.setenv("INFER_PROFILER_CACHE", str(root / "cache"))
        patch.delenv("COLUMNS", raising=False)
        patch.setattr(phases, "process_mark", None)
        for bs in ("1", "2"):
            done = invoke("run", "--model", "r5six.m6:tiny", *FAST, "--bs", bs, "--name", "m6")
            assert done.code == 0, done.stderr
    sys.modules.pop("r5six.m6", None)
    sys.modules.pop("r5six", None)
    return root


def _compare_in(folder: Path, monkeypatch, *extra: str):
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return invoke("compare", "pytorch_fp32_bs1_m6", "pytorch_fp32_bs2_m6", *extra)


def _bytecode_paths(source: Path) -> list[Path]:
    """Where a child of this suite looks for the module's bytecode (the suite's prefix,
    tests/conftest.py) and where an interpreter without a prefix does (__pycache__)."""
    found = []
    for prefix in (os.environ.get("PYTHONPYCACHEPREFIX"), None):
        saved = sys.pycache_prefix
        sys.pycache_prefix = prefix
        try:
            found.append(Path(importlib.util.cache_from_source(str(source))))
        finally:
            sys.pycache_prefix = saved
    return found


def test_retiming_compiles_the_checked_file_not_a_stale_pyc(project, monkeypatch):
    """R5-6: the check hashed m6.py and the re-timing child imported a cached .pyc whose
    recorded mtime and size matched it, compiled from other code: that code ran. Here the
    round's child of `compare --processes` and `advise --try` (profiler.sweep.rounds.run_round),
    started after the check as they start it."""
    from profiler.runs import model_source
    from profiler.runs.result import read_result
    from profiler.runs.samples import config_of
    from profiler.sweep import rounds

    source = project / "r5six" / "m6.py"
    canary = project / "PWNED_BY_STALE_PYC"
    good, stat = source.read_text(), source.stat()
    evil = _padded(_evil(canary), len(good))
    assert len(evil) == len(good)
    planted = _bytecode_paths(source)
    recorded = read_result(project / "runs" / "pytorch_fp32_bs1_m6")
    config = config_of(recorded)
    monkeypatch.chdir(project)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    said: list[str] = []
    checked = model_source.check(
        "A", config.model, recorded.model_source, False, said.append, print
    )
    assert checked is not None and "the file the run recorded" in said[0]
    try:
        source.write_text(evil)
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        for pyc in planted:
            pyc.parent.mkdir(parents=True, exist_ok=True)
            py_compile.compile(str(source), cfile=str(pyc), doraise=True)
        source.write_text(good)
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        with model_source.handed_on([checked]):
            found = rounds.run_round([("A", rounds.window_config(config, 3, 0))])
    finally:
        source.write_text(good)
        for pyc in planted:
            pyc.unlink(missing_ok=True)
    assert isinstance(found["A"], dict) and found["A"]["latencies_ms"], found
    assert not canary.exists(), "the code that ran is not the code that was checked"
    assert model_source.CHECKED_ENV not in os.environ  # (handed on for the block only)


def test_a_file_changed_after_the_check_is_not_imported(project, monkeypatch, tmp_path):
    """The child reads the file again and hashes what it compiles: bytes changed between the
    check and the import are refused in one line, not run."""
    from profiler.runs import model_source

    source = tmp_path / "r5late.py"
    source.write_text("X = 1\n")
    checked = model_source.ModelSource("r5late", str(source), model_source.digest(source))
    source.write_text("X = 2\n")
    with pytest.raises(model_source.UserError, match="changed after it was checked"):
        model_source.import_checked(checked)
    assert "r5late" not in sys.modules
    source.write_text("X = 1\n")
    assert model_source.import_checked(checked).X == 1
    sys.modules.pop("r5late", None)


def test_an_identical_file_at_another_path_is_named_as_such(project, tmp_path, monkeypatch):
    """R5-9: a moved or copied project was refused as "it changed since", although its file
    has the same SHA-256."""
    moved = tmp_path / "moved"
    shutil.copytree(project, moved, ignore=shutil.ignore_patterns("cache", "__pycache__"))
    done = _compare_in(moved, monkeypatch, "--processes", "1")
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done.stderr
    assert "the same file at another path" in lines[0]
    assert str(project / "r5six" / "m6.py") in lines[0] and "--trust-model" in lines[0]
    assert "it changed since" not in lines[0]


# ---- R5-7, R5-16: result.json ----------------------------------------------------------------


def _with_p50(folder: Path, text: str) -> None:
    path = folder / "result.json"
    raw = path.read_text()
    path.write_text(raw.replace('"p50_ms": ', f'"p50_ms": {text}, "x": ', 1))


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity"])
def test_a_non_finite_timing_is_refused_in_one_line(cli, pair, tmp_path, number):
    """R5-7: a p50 of 1e400 (inf) gave an OverflowError traceback in summarize, compare and
    report (units.number, units.time)."""
    a, b = pair
    _with_p50(a, number)
    for args in (
        ["summarize", str(a)],
        ["compare", str(a), str(b)],
        ["report", str(a), "--out", str(tmp_path / "r.html")],
    ):
        done = cli(*args)  # (an exception that escapes is raised here)
        text = done.stdout + done.stderr
        assert done.code in (0, 2) and "Traceback" not in text, (args, done)
        assert "timing.p50_ms is" in done.stderr and "not a finite number" in done.stderr, args


def test_a_non_finite_figure_is_spelled_as_such():
    from profiler import units

    assert units.time(float("inf"), decimals=None, noise=0.01) == "inf ms"
    assert units.number(float("-inf"), None) == "-inf"
    assert units.number(5.0, None, noise=float("inf")) == "5.0"
    assert units.count(float("inf")) == "inf"


def test_a_huge_result_json_is_refused_before_it_is_parsed(tmp_path):
    from profiler.errors import UserError
    from profiler.runs.result import MAX_RESULT_BYTES, read_result

    path = tmp_path / "result.json"
    with open(path, "wb") as f:
        f.truncate(MAX_RESULT_BYTES + 1)
    with pytest.raises(UserError, match="larger than"):
        read_result(path)
    path.unlink()
    os.mkfifo(path)  # never read (it would wait for a writer)
    with pytest.raises(UserError, match="not a regular file"):
        read_result(path)


def test_report_of_a_run_from_a_newer_version_says_so(cli, pair, tmp_path):
    """R5-16: `report` of a run folder whose result.json has a schema from the future showed
    the trace alone, without a word."""
    a, _ = pair
    data = json.loads((a / "result.json").read_text())
    data["schema"] = 99
    (a / "result.json").write_text(json.dumps(data))
    done = cli("report", str(a), "--out", str(tmp_path / "r.html"))
    assert done.code == 0, done
    warnings = _lines(done.stderr, "warning")
    assert len(warnings) == 1, done.stderr
    assert str(a / "result.json") in warnings[0] and "schema 99" in warnings[0]


# ---- R5-13, R5-14: the sample files --------------------------------------------------------


def test_a_processes_csv_that_is_a_folder_is_one_warning(cli, pair):
    """R5-13: a folder named processes.csv was ignored without the warning the docs promise."""
    a, b = pair
    (a / "processes.csv").mkdir()
    done = cli("compare", str(a), str(b))
    assert done.code == 0, done
    warnings = [w for w in _lines(done.stderr, "warning") if "processes.csv" in w]
    assert len(warnings) == 1 and "a folder" in warnings[0], done.stderr


def test_a_huge_processes_csv_is_refused_before_it_is_read(cli, pair):
    """R5-14: a 4 GiB processes.csv was read in full (52 s) before the csv reader refused
    it. Now its size is checked first (a sparse file here: nothing is written to disk)."""
    from profiler.runs.samples import MAX_SAMPLES_BYTES

    a, b = pair
    with open(a / "processes.csv", "wb") as f:
        f.write(b"process,iteration,latency_ms\n")
        f.truncate(MAX_SAMPLES_BYTES + (16 << 20))
    done = cli("compare", str(a), str(b))
    assert done.code == 0, done
    warnings = [w for w in _lines(done.stderr, "warning") if "processes.csv" in w]
    assert len(warnings) == 1 and f"larger than {MAX_SAMPLES_BYTES >> 20} MiB" in warnings[0]


def test_a_huge_latency_csv_is_refused_in_one_line(cli, pair):
    from profiler.runs.samples import MAX_SAMPLES_BYTES

    a, b = pair
    with open(a / "latency.csv", "wb") as f:
        f.truncate(MAX_SAMPLES_BYTES + (16 << 20))
    done = cli("compare", str(a), str(b))
    last = done.stderr.strip().splitlines()[-1]
    assert done.code == 2 and last.startswith("error: "), done.stderr
    assert "latency.csv" in last and f"larger than {MAX_SAMPLES_BYTES >> 20} MiB" in last


# ---- R5-15: a trace that is not UTF-8 -------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k\xff","ts":1,"dur":2,"pid":0,'
        b'"tid":7}]}',
        '{"traceEvents":[{"ph":"X","cat":"kernel","name":"caf\u00e9","ts":1,"dur":2,"pid":0,'
        '"tid":7}]}'.encode("latin-1"),
    ],
    ids=["xff", "latin-1"],
)
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_a_trace_that_is_not_utf8_reads_with_replacement(cli, tmp_path, content, suffix):
    """R5-15 (a regression of round 3, at 611782a): `summarize` of a trace with a byte that is
    not UTF-8 ended in msgspec's DecodeError traceback (the streaming reader, a67b0d2, reads it
    with U+FFFD; these hold it there, the gzip path too)."""
    import gzip

    path = tmp_path / f"bad{suffix}"
    path.write_bytes(gzip.compress(content) if suffix.endswith(".gz") else content)
    done = cli("summarize", str(path))
    assert done.code == 0, done
    assert "Traceback" not in done.stdout + done.stderr


# ---- R5-10: a floor too small to be one ----------------------------------------------------


@pytest.fixture
def floors(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "cache" / "engines"))
    return tmp_path / "cache" / "noise"


def test_a_floor_below_a_tenth_of_a_percent_is_one_note_and_the_default(
    cli, tmp_path, monkeypatch, floors
):
    """R5-10: a between-process CV of 1e-12 was taken as the floor and shown as "a given floor
    of 0.0 % CV stands in", a verdict taken from it."""
    a, b = _one_process_pair(tmp_path, monkeypatch)
    floors.mkdir(parents=True)
    path = floors / "nvidia_h200.json"
    path.write_text(_floor(between_process_cv=1e-12))
    done = cli("compare", str(a), str(b), "--json")
    assert done.code == 0, done
    notes = _lines(done.stderr, "note")
    assert len(notes) == 1 and str(path) in notes[0] and "is below 0.001" in notes[0], notes
    verdict = json.loads(done.stdout)["timed"]["verdict"]
    assert verdict["floor_source"] == "default", verdict
    assert verdict["noise_floor"] == pytest.approx(0.33)


def test_the_floor_bounds():
    from profiler.runs.noise_floor import MIN_FLOOR_CV, floor_problem

    assert floor_problem(MIN_FLOOR_CV) is None and floor_problem(0.05) is None
    assert "below" in floor_problem(MIN_FLOOR_CV / 2)
    assert "not a spread" in floor_problem(0.0)
