"""`history check` and `history confirm` (profiler.analysis.change_points, commands/history):
change points found on synthetic series with known steps and none without, the figure that
moved, the kernel-cause table, the gate's exit codes, the Markdown and JUnit outputs, and
confirmation's refusals and verdicts."""

import json
import shutil
import sys
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from profiler.analysis.change_points import Gate, check_series, commits_of, failing, shifts
from profiler.runs.history_store import (
    Confirmation,
    HistoryRecord,
    KernelTime,
    ProcessFigures,
    add_record,
    read_records,
)
from tests.conftest import FIXTURES

pytest.importorskip(
    "otava", reason='history check needs the history extra (pip install -e ".[dev]")'
)

CONFIG = "resnet50 pytorch_fp16 bs8 on NVIDIA H200"


def series(
    commits: int = 30,
    step_at: int | None = 20,
    gpu_step: float = 0.05,
    latency_step: float = 0.0,
    conv_us: float = 0.0,
    seed: int = 0,
    processes: int = 3,
    new_kernel_at: int | None = None,
) -> list[HistoryRecord]:
    """One record per commit c00.. with ``processes`` processes: GPU time 1 ms (CV 0.5 %),
    latency 2 ms (CV 5 %), each times 1 + its step from commit ``step_at`` on; a convolution
    category of 800 µs per step (+ ``conv_us`` after the step) beside an elementwise one."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(commits):
        after = step_at is not None and i >= step_at
        gpu = 1.0 * (1 + gpu_step * after)
        latency = 2.0 * (1 + latency_step * after)
        conv = 800.0 + conv_us * after + rng.normal(0, 2)
        kernels = [KernelTime("conv_kernel_long", "conv", "convolution", 53.0, conv)]
        elementwise = 100.0 + rng.normal(0, 1)
        if new_kernel_at is not None and i >= new_kernel_at:
            kernels.append(KernelTime("extra_add_kernel", "add", "elementwise", 1.0, 30.0))
            elementwise += 30.0
        records.append(
            HistoryRecord(
                run_id=f"r{i:03d}",
                config_key=CONFIG,
                commit=f"c{i:02d}",
                commit_from="--commit",
                created=f"2026-12-01T00:{i:02d}:00+00:00",
                machine="gpu-host",
                gpu="NVIDIA H200",
                driver="580",
                model="resnet50",
                backend="pytorch_fp16",
                batch_size=8,
                workload="forward",
                steps=3,
                source=None,
                config={"backend": "pytorch_fp16", "batch_size": 8, "model": "resnet50"},
                processes=tuple(
                    ProcessFigures(
                        latency * (1 + rng.normal(0, 0.05)),
                        gpu * (1 + rng.normal(0, 0.005)),
                        0.5,
                        None,
                        "0",
                    )
                    for _ in range(processes)
                ),
                categories=(
                    KernelTime("convolution", "convolution", "convolution", 53.0, conv),
                    KernelTime("elementwise", "elementwise", "elementwise", 20.0, elementwise),
                ),
                kernels=tuple(kernels),
            )
        )
    return records


def test_a_known_step_is_found_where_it_is_with_its_size():
    summary, changes = check_series(CONFIG, series(step_at=20, gpu_step=0.05))
    assert summary.commits == 30 and summary.skipped is None
    (change,) = changes
    assert (change.index, change.commit_before, change.commit_after) == (20, "c19", "c20")
    assert change.moved == "gpu_time"  # the latency did not move: found on GPU time alone
    assert change.gpu_time.verdict == "slower"
    assert change.gpu_time.low < 1.05 < change.gpu_time.high
    assert change.latency.verdict != "slower"
    assert (change.commits_before, change.commits_after) == (20, 10)


def test_no_step_no_change_point_and_a_short_series_is_skipped():
    for seed in range(3):
        assert check_series(CONFIG, series(step_at=None, seed=seed))[1] == []
    summary, changes = check_series(CONFIG, series(commits=3, step_at=None))
    assert changes == [] and "3 commit(s): change points need 4 or more" in summary.skipped


def test_both_figures_moving_is_one_change():
    changes = check_series(CONFIG, series(gpu_step=0.05, latency_step=0.5, seed=1))[1]
    (change,) = changes
    assert change.moved == "both" and set(change.p_values) == {"gpu_time", "latency"}
    assert change.latency.verdict == "slower"


def test_the_kernel_cause_names_what_moved_per_step():
    records = series(gpu_step=0.05, conv_us=40.0, new_kernel_at=20)
    (change,) = check_series(CONFIG, records)[1]
    top = change.categories[0]
    assert top.name == "convolution" and 35 < top.delta_us < 45
    assert top.spread_us < 10 and top.commits_before == top.commits_after == 5
    second = change.categories[1]
    assert second.name == "elementwise" and 25 < second.delta_us < 35
    kernels = {k.name: k for k in change.kernels}
    assert kernels["extra_add_kernel"].before_us == 0.0  # absent before (a whole table)
    assert kernels["extra_add_kernel"].after_us == 30.0
    assert (
        kernels["extra_add_kernel"].before_calls == 0
        and kernels["extra_add_kernel"].after_calls == 1
    )
    # no trace on one side: no cause, rather than a wrong one
    commits = commits_of([r.__class__(**{**_fields(r), "steps": None}) for r in records])
    assert shifts(commits[:20], commits[20:], "category") == []


def _fields(record):
    return {f: getattr(record, f) for f in record.__struct_fields__}


def test_the_gate_looks_at_recent_changes_and_lets_a_refuted_one_through():
    records = series(commits=30, step_at=27)
    (change,) = check_series(CONFIG, records, gate=Gate(recent=5))[1]
    assert change.gated and change.regression and failing([change]) == [1]
    assert failing(check_series(CONFIG, records, gate=Gate(max_slowdown=0.08))[1]) == []
    assert failing(check_series(CONFIG, records, gate=Gate(recent=2))[1]) == []
    assert failing(check_series(CONFIG, records, gate=Gate(since="c27"))[1]) == []
    assert failing(check_series(CONFIG, records, gate=Gate(since="c20"))[1]) == [1]
    faster = series(commits=30, step_at=27, gpu_step=-0.05)
    assert failing(check_series(CONFIG, faster)[1]) == []  # an improvement never fails
    same = Confirmation(CONFIG, "c26", "c27", {"gpu_time": {"verdict": "same"}}, "test", "")
    (refuted,) = check_series(CONFIG, records, confirmations=[same])[1]
    assert refuted.confirmed == "refuted" and failing([refuted]) == []
    slower = Confirmation(CONFIG, "c26", "c27", {"gpu_time": {"verdict": "slower"}}, "test", "")
    (kept,) = check_series(CONFIG, records, confirmations=[same, slower])[1]
    assert kept.confirmed == "confirmed" and failing([kept]) == [1]


@pytest.fixture(scope="module")
def kept_db(tmp_path_factory):
    """A history of 30 commits whose GPU time steps up 5 % at c27, built once a module."""
    path = tmp_path_factory.mktemp("history") / "history.sqlite"
    for record in series(commits=30, step_at=27, conv_us=40.0):
        add_record(path, record)
    return path


@pytest.fixture
def db(kept_db, tmp_path):
    """A copy of it for one test (confirm writes to it)."""
    path = tmp_path / "history.sqlite"
    shutil.copyfile(kept_db, path)
    return path


def test_check_exit_codes_lines_markdown_and_junit(cli, db, tmp_path, monkeypatch):
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    md, xml = tmp_path / "check.md", tmp_path / "check.xml"
    done = cli("history", "check", str(db), "--markdown", str(md), "--junit", str(xml))
    assert done.code == 1, done.stderr
    assert "change 1: " + CONFIG + ": c26 -> c27" in " ".join(done.stdout.split())
    gate = [line for line in done.stderr.splitlines() if "gate:" in line]
    assert gate == [
        "error: gate: change 1 is a regression beyond 2 % on GPU time "
        f"({CONFIG}, c26 -> c27: {gate[0].split(': ')[-1].split(', unconfirmed')[0]}, unconfirmed)"
    ]
    text = md.read_text()
    assert "| # | config | commits | moved | GPU time | latency | status |" in text
    assert "**regression**, unconfirmed" in text and "| category | convolution |" in text
    assert summary.read_text() == "earlier step\n" + text  # appended to the step summary
    suite = ET.parse(xml).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    assert suite.find("testcase/failure").get("message").startswith("gate: change 1 is")
    # beyond what the gate allows, or outside its window: exit 0, one gate line
    fine = cli("history", "check", str(db), "--max-slowdown", "8", "--junit", str(xml))
    assert fine.code == 0 and "gate: no regression beyond 8 % on GPU time" in fine.stderr
    assert ET.parse(xml).getroot().get("failures") == "0"
    as_json = cli("history", "check", str(db), "--json", "--recent", "2")
    document = json.loads(as_json.stdout)
    assert as_json.code == 0 and document["$schema"] == "infer-profiler/history-check/1"
    assert document["changes"][0]["gated"] is False and document["failing"] == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["--figure", "power"], "--figure"),
        (["--config", "nope"], "no config 'nope' in"),
        (["--since", "c99"], "--since c99: no such commit in"),
        (["--until", ""], "--until must be one line of 1 to 200 printable characters"),
        (["--until", "c99"], "--until c99: no such commit in"),
        (["--max-slowdown", "120"], "--max-slowdown is a percentage from 0 to 100"),
    ],
)
def test_check_refuses_bad_input_in_one_line(cli, db, args, words):
    done = cli("history", "check", str(db), *args)
    assert done.code == 2 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_add_records_a_run_once_and_refuses_a_bad_commit(cli, tmp_path):
    db = tmp_path / "h.sqlite"
    run = str(FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8")
    first = cli("history", "add", run, "--db", str(db), "--commit", "abc123")
    assert first.code == 0 and "commit abc123 (--commit)" in first.stdout, first.stderr
    again = cli("history", "add", run, "--db", str(db), "--commit", "other")
    assert again.code == 0 and "already" in again.stdout and "commit abc123" in again.stdout
    assert len(read_records(db)) == 1
    bad = cli("history", "add", run, "--db", str(db), "--commit", "two\nlines")
    assert bad.code == 2 and "--commit must be one line" in bad.stderr
    listed = cli("history", "list", str(db))
    assert "resnet50 pytorch_fp16 bs8 on NVIDIA H200" in listed.stdout
    refused = cli("run", "--backend", "pytorch_fp32", "--history", str(db), "--commit", "")
    assert refused.code == 2 and "--commit must be one line" in refused.stderr  # before the run


def test_confirm_refuses_a_built_in_model_without_its_code(cli, db):
    done = cli("history", "confirm", str(db), "--change", "1")
    assert done.code == 2
    assert "resnet50 is a built-in model" in done.stderr and "--a-tree" in done.stderr
    missing = cli("history", "confirm", str(db), "--change", "7")
    assert missing.code == 2 and "no change 7 in" in missing.stderr


FAKE_PROFILE = textwrap.dedent(
    """
    # stands in for a commit's profile.py: `run ... --runs-dir D --name N --json` writes a
    # latency.csv at the level LEVEL (GPU time, ms) and prints its result as `run --json` does
    import json, sys, pathlib, random
    level = float(sys.argv[1]); args = sys.argv[2:]
    folder = pathlib.Path(args[args.index("--runs-dir") + 1]) / args[args.index("--name") + 1]
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["iteration,latency_ms,gpu_ms,enqueue_ms"]
    noise = random.Random(str(folder)).gauss(0, 0.002)
    for i in range(20):
        rows.append(f"{i},{2 * level * (1 + noise)},{level * (1 + noise)},0.4")
    (folder / "latency.csv").write_text("\\n".join(rows) + "\\n")
    result = json.loads(pathlib.Path(sys.argv[0]).with_name("result.json").read_text())
    result["latency_csv"] = str(folder / "latency.csv")
    print(json.dumps(result))
    """
)


def test_confirm_retimes_both_commits_interleaved_and_keeps_the_verdicts(cli, db, tmp_path):
    fake = tmp_path / "fake_profile.py"
    fake.write_text(FAKE_PROFILE)
    (tmp_path / "result.json").write_text(
        (FIXTURES / "h200" / "runs" / "pytorch_fp16_bs8" / "result.json").read_text()
    )
    a = f"{sys.executable} {fake} 1.0"
    b = f"{sys.executable} {fake} 1.05"
    done = cli(
        "history",
        "confirm",
        str(db),
        "--change",
        "1",
        "--a-cmd",
        a,
        "--b-cmd",
        b,
        "--processes",
        "3",
    )
    assert done.code == 0, done.stderr
    assert "re-timing commit c25 (A: --a-cmd" in " ".join(done.stderr.split())  # --reach 1
    assert "B = c28 against A = c25" in done.stdout
    checked = cli("history", "check", str(db))
    assert checked.code == 1 and "confirmed" in checked.stdout
    same = cli(
        "history",
        "confirm",
        str(db),
        "--change",
        "1",
        "--a-cmd",
        a,
        "--b-cmd",
        a,
        "--processes",
        "3",
    )
    assert same.code == 0, same.stderr
    after = cli("history", "check", str(db))
    assert after.code == 0 and "refuted" in after.stdout, after.stdout
