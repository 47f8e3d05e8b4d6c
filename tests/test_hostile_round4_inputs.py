"""Hostile inputs of round 4 (issue 33; ../shared/reliability/defects-round4.md): processes.csv
read as untrusted input (R4-4, R4-9), an upper bound on --processes (R4-5), re-timing refused up
front where this machine cannot run a config (R4-7), a noise floor that is none or does not
read (R4-8, R4-11), `noise` that checks it can keep the floor before it measures (R4-12), and
one --budget for every command (R4-13). CPU only; in-process, from the H200 and H100 fixture
runs, except where a row says otherwise."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import msgspec
import pytest

from profiler.analysis.records import Verdict
from profiler.errors import UserError
from profiler.report.sentences import verdict_method

from .conftest import FIXTURES

H200 = FIXTURES / "h200"
H100_SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
HUGE = "99999999999999999999999"
TINY = ["--model", "tests.tiny_models:conv_net"]


def _lines(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{word}:")]


@pytest.fixture
def floors(tmp_path, monkeypatch) -> Path:
    """This test's noise-floor folder (beside its own engine cache, never shared)."""
    monkeypatch.setenv("INFER_PROFILER_CACHE", str(tmp_path / "cache" / "engines"))
    return tmp_path / "cache" / "noise"


def _copy_run(name: str, to: Path, latency_ms: float | None = None, **changes) -> Path:
    """A copy of an H200 fixture run; with ``latency_ms``, its window holds that time only (a
    one-process run of that p50); ``changes``: dotted result.json keys -> values."""
    folder = to / name
    shutil.copytree(H200 / "runs" / name, folder)
    data = json.loads((folder / "result.json").read_text())
    if latency_ms is not None:
        (folder / "latency.csv").write_text(
            "iteration,latency_ms\n" + "".join(f"{i},{latency_ms}\n" for i in range(20))
        )
        data["timing"]["p50_ms"] = latency_ms
    for dotted, value in changes.items():
        *parents, key = dotted.split(".")
        place = data
        for part in parents:
            place = place[part]
        place[key] = value
    (folder / "result.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """Two one-process runs (copies of the H200 fixtures), in the folder their traces are named
    from."""
    a = _copy_run("pytorch_fp16_bs8", tmp_path / "runs")
    b = _copy_run("ttrt_fp16_bs8", tmp_path / "runs")
    monkeypatch.chdir(H200)  # where the runs' trace names are relative to
    return a, b


# ---- R4-4, R4-9: processes.csv is untrusted input -------------------------------------------


def _rows(*values) -> str:
    return "process,iteration,latency_ms\n" + "".join(
        f"{p},{i},{v}\n" for p, window in enumerate(values) for i, v in enumerate(window)
    )


#: id -> (processes.csv's bytes, what the one warning says of it)
PROCESSES_CSV = {
    # R4-4: a ValueError traceback in the verdict (or exit 2 without the run's own figures)
    "nan": (_rows(["nan", "nan"], ["nan", "nan"]), "'nan' is not a time"),
    "inf": (_rows(["inf", "inf"], ["inf", "inf"]), "'inf' is not a time"),
    "1e308": (_rows(["1e308", "1e308"], ["1e308", "1e308"]), "'1e308' is not a time"),
    "subnormal": (_rows(["5e-324"], ["5e-324"]), "'5e-324' is not a time"),
    "negative": (_rows(["-1", "-1"], ["-1", "-1"]), "'-1' is not a time"),
    "zero": (_rows(["0", "0"], ["0", "0"]), "'0' is not a time"),
    # R4-4: _csv.Error: field larger than field limit (131072), a traceback
    "huge-field": (_rows(["1" * 200_000]), "csv.Error: field larger than field limit"),
    "long-field": (_rows(["1" * 300]), "latency_ms field is 300 characters long"),
    "nul-byte": ("process,iteration,latency_ms\n0,0,5.8\x00\n", "could not convert"),
    "not-utf8": (b"process,iteration,latency_ms\n0,0,5.8\xff\xfe\n", "UnicodeDecodeError"),
    "extra-fields": ("process,iteration,latency_ms\n0,0,5.8,9,9\n", "more fields than"),
    "no-columns": ("a,b\n1,2\n", "no process and latency_ms columns"),
    # R4-9: five processes near 50 ms beside a result.json of one near 5.8 ms: used unsaid
    "more-processes": (
        _rows(*[[v] for v in (50, 51, 52, 49, 50)]),
        "it holds 5 process(es), result.json records 1",
    ),
    "other-median": (
        _rows([50, 51, 49]),
        "process 0's median is 50 ms, result.json records 5.79069 ms",
    ),
}


@pytest.mark.parametrize("json_out", [False, True], ids=["tables", "json"])
@pytest.mark.parametrize("content, fragment", PROCESSES_CSV.values(), ids=PROCESSES_CSV.keys())
def test_hostile_processes_csv_is_one_warning_and_not_used(cli, pair, content, fragment, json_out):
    a, b = pair
    path = a / "processes.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = cli("compare", str(a), str(b), *(["--json"] if json_out else []))
    assert done.code == 0, done
    assert "Traceback" not in done.stderr + done.stdout
    warnings = [w for w in _lines(done.stderr, "warning") if "processes.csv" in w]
    assert len(warnings) == 1, done.stderr
    assert f"{path} is not used" in warnings[0] and fragment in warnings[0], warnings[0]
    assert "the run's own timed window" in warnings[0]
    if json_out:  # strict JSON, the verdict over the run's own window (one process)
        timed = json.loads(done.stdout)["timed"]
        assert timed["processes_a"]["processes"] == 1
        assert timed["verdict"]["processes_a"] == 1


@pytest.mark.parametrize("case", ["nan", "1e308", "huge-field", "more-processes"])
def test_report_of_two_runs_says_it_once_too(cli, pair, tmp_path, case):
    """R4-4: `report A B` raised the same ValueError."""
    a, b = pair
    content, fragment = PROCESSES_CSV[case]
    (a / "processes.csv").write_text(content)
    done = cli("report", str(a), str(b), "--out", str(tmp_path / "r.html"))
    assert done.code == 0, done
    warnings = [w for w in _lines(done.stderr, "warning") if "processes.csv" in w]
    assert len(warnings) == 1 and fragment in warnings[0], done.stderr
    assert (tmp_path / "r.html").is_file()


def test_a_processes_csv_that_agrees_is_used_without_a_word(cli, pair):
    """The control: the run's own window as processes.csv (what result.json records) is read."""
    a, b = pair
    window = [line.split(",")[1] for line in (a / "latency.csv").read_text().splitlines()[1:]]
    (a / "processes.csv").write_text(_rows(window))
    done = cli("compare", str(a), str(b), "--json")
    assert done.code == 0 and not _lines(done.stderr, "warning"), done
    assert json.loads(done.stdout)["timed"]["processes_a"]["processes"] == 1


def test_a_sweep_cell_with_a_hostile_processes_csv(cli, tmp_path, monkeypatch):
    """R4-4 in a sweep's table (`report` of a sweep): the cell's verdict from its own window,
    one warning."""
    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    (sweep / "ttrt_fp16_bs8" / "processes.csv").write_text(_rows(["nan"], ["nan"]))
    monkeypatch.chdir(tmp_path)
    done = cli("report", str(sweep), "--out", str(tmp_path / "r.html"))
    assert done.code == 0, done
    warnings = [w for w in _lines(done.stderr, "warning") if "processes.csv" in w]
    assert len(warnings) == 1 and "ttrt_fp16_bs8" in warnings[0], done.stderr


@pytest.mark.parametrize(
    "text, fragment",
    [("1e308", "is not a time"), ("nan", "is not a time"), ("1" * 300, "characters long")],
)
def test_a_hostile_latency_csv_is_a_user_error(tmp_path, text, fragment):
    from profiler.runs.samples import read_own_window

    (tmp_path / "latency.csv").write_text(f"iteration,latency_ms\n0,{text}\n")
    with pytest.raises(UserError, match=f"not a latency.csv.*{fragment}"):
        read_own_window(tmp_path / "latency.csv")


# ---- R4-5: --processes has an upper bound ---------------------------------------------------


def _h200(name: str) -> str:
    return str(H200 / "runs" / name)


#: id -> a command line that must be one error line naming --processes (or --repeat-runs)
PROCESS_COUNTS = {
    # OverflowError: cannot fit 'int' into an index-sized integer (a traceback)
    "compare-huge": [
        "compare",
        _h200("pytorch_fp16_bs8"),
        _h200("ttrt_fp16_bs8"),
        "--processes",
        HUGE,
    ],
    "compare-1001": [
        "compare",
        _h200("pytorch_fp16_bs8"),
        _h200("ttrt_fp16_bs8"),
        "--processes",
        "1001",
    ],
    "noise-huge": ["noise", "--processes", HUGE, *TINY, "--iters", "3"],
    "sweep-huge": ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1", "--processes", HUGE],
    "advise-huge": ["advise", _h200("pytorch_fp16_bs8"), "--try", "--processes", HUGE],
    "run-repeat-runs": ["run", *TINY, "--repeat-runs", "1001"],
}


@pytest.mark.parametrize("args", PROCESS_COUNTS.values(), ids=PROCESS_COUNTS.keys())
def test_process_counts_have_an_upper_bound(cli, tmp_path, monkeypatch, args):
    from profiler.sweep import rounds

    monkeypatch.setattr(rounds, "sample", lambda *a, **k: pytest.fail("a round ran"))
    done = cli(*args)
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done
    assert lines[0].startswith("error: --") and "is too large (at most 1000" in lines[0]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "tb_logs").exists()


# ---- R4-7: re-timing refuses up front what this machine cannot run --------------------------


def _no_gpu_here():
    import torch

    if torch.cuda.is_available():
        pytest.skip("the refusals of a machine without a GPU")


@pytest.fixture
def no_rounds(monkeypatch):
    from profiler.sweep import rounds

    monkeypatch.setattr(rounds, "sample", lambda *a, **k: pytest.fail("a round ran"))


def test_gpu_runs_are_not_timed_again_on_a_cpu(cli, no_rounds):
    """R4-7: ResNet50 FP16 recorded on an H200 was timed on the CPU, for minutes, unsaid."""
    _no_gpu_here()
    done = cli("compare", _h200("pytorch_fp16_bs8"), _h200("ttrt_fp16_bs8"), "--processes", "2")
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done
    assert (
        lines[0].startswith("error: cannot time A again here")
        and "recorded on cuda (NVIDIA H200)" in lines[0]
        and "no GPU" in lines[0]
    ), lines


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"config.backend": "ttrt_fp16"}, "backend ttrt_fp16 cannot run here"),
        (
            {"config.cuda_graphs": True, "config.backend": "pytorch_fp32"},
            "--cuda-graphs: pytorch_fp32 cannot be captured here",
        ),
    ],
    ids=["missing-extra", "cuda-graphs"],
)
def test_configs_this_machine_cannot_run_are_refused_as_run_refuses(
    cli, tmp_path, monkeypatch, no_rounds, changes, fragment
):
    _no_gpu_here()
    from profiler.collect import backends

    if changes.get("config.backend") == "ttrt_fp16" and backends.get("ttrt_fp16").missing() is None:
        pytest.skip("TensorRT is installed here")
    cpu = {"device": "cpu", "environment.gpu": None, "config.image_size": 16}
    a = _copy_run(
        "pytorch_fp16_bs8", tmp_path / "runs", **cpu, **{"config.backend": "pytorch_fp32"}
    )
    b = _copy_run("ttrt_fp16_bs8", tmp_path / "runs", **cpu, **changes)
    monkeypatch.chdir(H200)
    done = cli("compare", str(a), str(b), "--processes", "2")
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done
    assert lines[0].startswith("error: cannot time B again here") and fragment in lines[0], lines


def test_a_gpu_model_other_than_the_recorded_one_is_named():
    """Both configs run here: the line that starts the rounds says where, and on what each side
    was recorded when it was another GPU."""
    from profiler.collect.here import Here, elsewhere, refusal
    from profiler.runs.config import RunConfig

    here = Here("NVIDIA H100 80GB HBM3")
    config = RunConfig(backend="pytorch_fp16", batch_size=8)
    assert refusal(config, "cuda", "NVIDIA H200", here) is None
    assert elsewhere("cuda", "NVIDIA H200", here) == "cuda (NVIDIA H200)"
    assert elsewhere("cuda", "NVIDIA H100 80GB HBM3", here) is None
    assert "recorded on the CPU" in refusal(config, "cpu", None, here)
    assert elsewhere("cpu", None, Here(None)) is None


# ---- R4-8, R4-11: a floor that is none is ignored with one note -----------------------------


def _one_process_pair(tmp_path, monkeypatch, **changes):
    """A at 10.0 ms, B at 10.5 ms, one process each, on the H200 (the floor's GPU)."""
    a = _copy_run("pytorch_fp16_bs8", tmp_path / "runs", latency_ms=10.0, **changes)
    b = _copy_run("ttrt_fp16_bs8", tmp_path / "runs", latency_ms=10.5)
    monkeypatch.chdir(H200)
    return a, b


def _floor(**values) -> str:
    floor = {
        "gpu": "NVIDIA H200",
        "host": "h",
        "measured": "2026-01-01T00:00:00",
        "workload": "w",
        "processes": 5,
        "p50_ms": [10, 10, 10, 10, 10],
        "between_process_cv": 0.01,
        "within_window_cv": 0.01,
        "smallest_resolvable": 0.01,
    }
    return json.dumps({**floor, **values})


#: id -> (noise/nvidia_h200.json: its text, or "folder"; what the one note says)
FLOORS = {
    "negative": (_floor(between_process_cv=-0.5), "between_process_cv -0.5 is not a spread"),
    "zero": (_floor(between_process_cv=0), "between_process_cv 0 is not a spread"),
    "absurd": (_floor(between_process_cv=1e308), "between_process_cv 1e+308 is not a spread"),
    "not-a-number": (_floor(between_process_cv="fast"), "is damaged"),
    # R4-11: a damaged file was ignored without a word
    "truncated": ('{"gpu": ', "is damaged"),
    "a-folder": ("folder", "not a regular file"),
    "a-fifo": ("fifo", "not a regular file"),  # read_bytes waited for a writer, for ever
}


@pytest.mark.parametrize("content, fragment", FLOORS.values(), ids=FLOORS.keys())
def test_a_floor_that_is_none_is_one_note_and_the_default_stands_in(
    cli, tmp_path, monkeypatch, floors, content, fragment
):
    """R4-8: a floor of -0.5 or 0 passed the "far beyond" test for any ratio: one process a
    side 5 % apart was called slower."""
    a, b = _one_process_pair(tmp_path, monkeypatch)
    path = floors / "nvidia_h200.json"
    floors.mkdir(parents=True)
    if content == "folder":
        path.mkdir()
    elif content == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(content)
    done = cli("compare", str(a), str(b), "--json")
    assert done.code == 0, done
    notes = _lines(done.stderr, "note")
    assert len(notes) == 1 and str(path) in notes[0] and fragment in notes[0], done.stderr
    assert "the figure's default floor stands in" in notes[0]
    verdict = json.loads(done.stdout)["timed"]["verdict"]
    assert verdict["verdict"] == "undecided" and verdict["floor_source"] == "default"
    assert verdict["noise_floor"] == pytest.approx(0.33)
    assert verdict["design"] == "floor" and verdict["df"] is None
    said = verdict_method(msgspec.convert(verdict, Verdict))
    assert "a default floor of 33.0 % CV stands in" in said


def test_a_floor_recorded_in_result_json_that_is_none(cli, tmp_path, monkeypatch, floors):
    """R4-8: ``timing.noise.machine_floor_cv: -1`` in a run's result.json."""
    noise = json.loads((H100_SWEEP / "ttrt_fp16_bs8" / "result.json").read_text())["timing"][
        "noise"
    ]
    a, b = _one_process_pair(
        tmp_path, monkeypatch, **{"timing.noise": {**noise, "machine_floor_cv": -1}}
    )
    done = cli("compare", str(a), str(b), "--json")
    assert done.code == 0, done
    notes = _lines(done.stderr, "note")
    assert len(notes) == 1 and "machine_floor_cv -1 is not a spread" in notes[0], done.stderr
    assert json.loads(done.stdout)["timed"]["verdict"]["verdict"] == "undecided"


def test_a_floor_that_is_one_is_used_without_a_word(cli, tmp_path, monkeypatch, floors):
    """The control: a measured 1 % floor decides the 5 % difference."""
    a, b = _one_process_pair(tmp_path, monkeypatch)
    floors.mkdir(parents=True)
    (floors / "nvidia_h200.json").write_text(_floor(gpu_time_between_process_cv=-1))
    done = cli("compare", str(a), str(b), "--json")
    assert done.code == 0, done
    verdict = json.loads(done.stdout)["timed"]["verdict"]
    assert verdict["verdict"] == "slower" and verdict["floor_source"] == "given"
    notes = _lines(done.stderr, "note")  # the GPU-time spread alone is left out, and said
    assert len(notes) == 1 and "gpu_time_between_process_cv -1 is not" in notes[0], notes


def test_the_damaged_floor_of_a_sweep_is_said_once(cli, tmp_path, monkeypatch, floors):
    """R4-11 where the floor is read once per cell: one note for the whole table."""
    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    floors.mkdir(parents=True)
    (floors / "nvidia_h100_80gb_hbm3.json").write_text('{"gpu": ')
    monkeypatch.chdir(tmp_path)
    done = cli("report", str(sweep), "--out", str(tmp_path / "r.html"))
    assert done.code == 0, done
    notes = _lines(done.stderr, "note")
    assert len(notes) == 1 and "nvidia_h100_80gb_hbm3.json" in notes[0], done.stderr


@pytest.mark.parametrize("floor", [-0.5, float("nan"), float("inf"), 1e308])
def test_the_verdict_refuses_a_floor_that_is_none(floor):
    """A floor handed to the verdict itself (the Python API): below 0, not finite or beyond
    10 (1000 %) is refused there too (1e308 overflowed the interval)."""
    from profiler.analysis.verdict import compare

    verdict = compare([10.0], [10.5], noise_floor=floor)
    assert verdict.verdict == "undecided" and verdict.floor_source == "default"
    assert verdict.noise_floor == pytest.approx(0.33)
    assert verdict.floor_refused is not None
    assert f"the floor given, {floor!r}, is no spread from 0 to 10" in verdict_method(verdict)


# ---- R4-12: noise checks it can keep the floor before it measures ---------------------------


@pytest.fixture
def no_measure(monkeypatch):
    from profiler.sweep import rounds

    monkeypatch.setattr(rounds, "sample", lambda *a, **k: pytest.fail("noise measured"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def test_noise_refuses_a_floor_folder_it_cannot_write_before_measuring(cli, floors, no_measure):
    floors.parent.mkdir(parents=True)
    floors.write_text("mine")  # <cache>/noise is a file
    done = cli("noise", "--processes", "2", *TINY, "--iters", "3")
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done
    assert f"the noise-floor folder {floors} cannot be written" in lines[0], lines
    assert "--no-save" in lines[0] and floors.read_text() == "mine"


def test_noise_refuses_a_floor_file_that_is_a_symlink_before_measuring(
    cli, tmp_path, floors, no_measure
):
    from profiler.runs.noise_floor import cpu_kind, floor_path

    floors.mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text("mine")
    floor_path(cpu_kind(), floors).symlink_to(tmp_path / "elsewhere.json")
    done = cli("noise", "--processes", "2", *TINY, "--iters", "3")
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1, done
    assert "noise-floor folder" in lines[0] and "is a symlink" in lines[0], lines
    assert (tmp_path / "elsewhere.json").read_text() == "mine"


def test_a_floor_measured_but_not_kept_is_shown_all_the_same(cli, floors, monkeypatch):
    """The write failed after the measurement (the folder went read-only meanwhile): the floor
    is printed, then one line says why it was not kept."""
    from profiler.runs import noise_floor
    from profiler.runs.samples import ProcessWindow
    from profiler.sweep import rounds

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    windows = [ProcessWindow((1.0, 1.1, 1.2)), ProcessWindow((1.1, 1.2, 1.3))]
    monkeypatch.setattr(
        rounds,
        "sample",
        lambda *a, **k: rounds.Sampled(windows={"noise": windows}, devices={"noise": "cpu"}),
    )

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(floors / "cpu.json"))

    monkeypatch.setattr(noise_floor, "write_floor", read_only)
    done = cli("noise", "--processes", "2", *TINY, "--iters", "3")
    assert done.code == 2, done
    assert f"Noise floor of {noise_floor.cpu_kind()}" in done.stdout and "not kept" in done.stdout
    errors = _lines(done.stderr, "error")
    assert len(errors) == 1 and "measured but not kept" in errors[0], done.stderr


# ---- R4-13: --budget takes the same forms on every command ----------------------------------


def test_run_budget_takes_a_duration(cli, monkeypatch):
    """`run --target-noise 2 --budget 5m` was "Input should be a valid number"."""
    import profiler.collect.harness

    seen = []

    def fake_run(config, quiet=False, **given):
        seen.append(config)
        raise UserError("stopped at the harness")

    monkeypatch.setattr(profiler.collect.harness, "run", fake_run)
    for text, seconds in (("5m", 300.0), ("90s", 90.0), ("300", 300.0), ("1h", 3600.0)):
        done = cli("run", *TINY, "--target-noise", "2", "--budget", text)
        assert "stopped at the harness" in done.stderr, done
        assert seen.pop().budget == seconds


#: every command that takes --budget, with what it needs besides
BUDGETED = {
    "run": ["run", *TINY, "--target-noise", "2"],
    "sweep": ["sweep", *TINY, "--backends", "pytorch_fp32", "--bs", "1", "--target-noise", "2"],
    "compare": [
        "compare",
        _h200("pytorch_fp16_bs8"),
        _h200("ttrt_fp16_bs8"),
        "--target-noise",
        "2",
    ],
    "advise": ["advise", _h200("pytorch_fp16_bs8"), "--try"],
}


@pytest.mark.parametrize(
    "budget, fragment",
    [
        ("5x", "--budget takes a duration such as 300, 90s, 5m or 1h (got '5x')"),
        ("9" * 400, "--budget must be at most 1000000 seconds"),
    ],
    ids=["not-a-duration", "beyond-the-limit"],
)
@pytest.mark.parametrize("args", BUDGETED.values(), ids=BUDGETED.keys())
def test_every_budget_is_read_alike(cli, tmp_path, args, budget, fragment):
    done = cli(*args, "--budget", budget)
    lines = done.stderr.strip().splitlines()
    assert done.code == 2 and len(lines) == 1 and fragment in lines[0], done
    assert not (tmp_path / "runs").exists()
