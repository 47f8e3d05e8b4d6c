"""run --memory-history and summarize --view snapshot (profiler.collect.memory_history,
profiler.trace.snapshot, profiler.report.snapshot_view): what a CPU run says and shows, the
recording stopped on every way out of the profiled window, the refusals, and a file that is not
a snapshot."""

import io
import json
import pickle
from pathlib import Path

import msgspec
import pytest
import torch
from rich.console import Console

from profiler.cli.documents import SummarizeSnapshot
from profiler.collect import memory_history, window
from profiler.collect.backends.base import Prepared
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from profiler.runs.phases import Phases
from profiler.trace.snapshot import read_snapshot
from tests.conftest import ROOT

CPU = ROOT / "tests" / "fixtures" / "memory_history_cpu"
CPU_RUN = CPU / "runs" / "pytorch_fp32_bs1_cpu_mh"
#: a GPU run recorded without --memory-history
NO_HISTORY = (
    ROOT / "tests" / "fixtures" / "memory_h200" / "runs" / "pytorch_fp16_bs2_mem_llama_tiny_gen"
)


def _config(tmp_path: Path, **options) -> RunConfig:
    chosen = {"memory_history": True, "wait": 0, "warmup": 1, "active": 1, **options}
    return RunConfig(runs_dir=tmp_path / "runs", tb_dir=tmp_path / "tb_logs", **chosen)


def _stages(tmp_path: Path) -> tuple[Path, Path]:
    tb, run = tmp_path / "tb", tmp_path / "run"
    tb.mkdir()
    run.mkdir()
    return tb, run


def test_a_cpu_run_says_in_one_line_that_it_records_no_history_and_still_profiles(tmp_path):
    console = Console(file=io.StringIO(), width=300)
    tb, run = _stages(tmp_path)
    step = Prepared(lambda x: x * 2, (torch.ones(4),))
    activities, traces, files = window.profile(
        _config(tmp_path), step, False, window.Progress(False, console), tb, Phases(), run
    )
    said = console.file.getvalue().splitlines()
    assert [line.strip() for line in said if "--memory-history" in line] == [memory_history.NO_CUDA]
    assert traces and files == [] and not list(run.iterdir())


def test_the_recorded_cpu_run_says_it_has_no_snapshot_and_why(cli):
    done = cli("summarize", str(CPU_RUN), "--view", "snapshot")
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == (
        "no memory snapshot: a CPU run records no allocation history (--memory-history records "
        "the CUDA caching allocator's alone)"
    )
    config = json.loads((CPU_RUN / "result.json").read_text())["config"]
    assert config["memory_history"] is True


def test_the_cpu_runs_json_document_is_typed_and_says_why(cli):
    done = cli("summarize", str(CPU_RUN), "--view", "snapshot", "--json")
    assert done.code == 0, done.stderr
    document = msgspec.json.decode(done.stdout, type=SummarizeSnapshot)
    assert document.schema_id == "infer-profiler/summarize-snapshot/1"
    assert document.file is None and document.devices == []
    assert document.why_none is not None and "CPU run" in document.why_none


def test_a_run_recorded_without_it_is_refused_in_one_line(cli):
    done = cli("summarize", str(NO_HISTORY), "--view", "snapshot")
    assert done.code == 2
    assert "not recorded with --memory-history" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


class _Allocator:
    """What the recorder asked of torch.cuda.memory, in order (this machine has no CUDA)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        monkeypatch.setattr(
            torch.cuda.memory,
            "_record_memory_history",
            lambda enabled, **kw: self.calls.append(f"record {enabled}"),
        )

        def snapshot() -> dict:
            self.calls.append("snapshot")
            return {"segments": [], "device_traces": [[]]}

        monkeypatch.setattr(torch.cuda.memory, "_snapshot", snapshot)


def test_the_recording_spans_the_active_steps_and_the_snapshot_is_written(tmp_path, monkeypatch):
    allocator = _Allocator(monkeypatch)
    steps: list[str] = []

    def fn() -> None:
        steps.append(f"step with {allocator.calls[-1] if allocator.calls else 'nothing'}")

    recorder = memory_history.Recorder(True, window.active_steps(_config(tmp_path, active=2)))
    tb, run = _stages(tmp_path)
    window.profile_with_torch(
        _config(tmp_path, active=2),
        Prepared(fn, ()),
        False,
        window.Progress(True),
        tb,
        recorder=recorder,
    )
    # wait 0, warmup 1, active 2: the recording starts before step 1 and stops after step 2
    assert steps == ["step with nothing", "step with record all", "step with record all"]
    assert allocator.calls == ["record all", "snapshot", "record None"]
    assert recorder.write(run) == ["memory_snapshot.pickle"]
    assert read_snapshot(run / "memory_snapshot.pickle") == {"segments": [], "device_traces": [[]]}


def test_a_step_that_fails_stops_the_recording(tmp_path, monkeypatch):
    allocator = _Allocator(monkeypatch)

    def fn() -> None:
        if allocator.calls:
            raise RuntimeError("the step failed")

    config = _config(tmp_path, active=2)
    tb, _ = _stages(tmp_path)
    recorder = memory_history.Recorder(True, window.active_steps(config))
    with pytest.raises(RuntimeError, match="the step failed"), recorder:
        window.profile_with_torch(
            config, Prepared(fn, ()), False, window.Progress(True), tb, recorder=recorder
        )
    assert allocator.calls == ["record all", "record None"]


def test_a_file_that_is_not_a_snapshot_is_one_line_and_runs_no_code(tmp_path):
    hostile = tmp_path / "memory_snapshot.pickle"
    # unpickling this would call os.system: the reader refuses the global instead
    hostile.write_bytes(b"cos\nsystem\n(S'touch " + str(tmp_path / "ran").encode() + b"'\ntR.")
    with pytest.raises(UserError, match="is not a memory snapshot") as error:
        read_snapshot(hostile)
    assert "refused os.system" in str(error.value) and not (tmp_path / "ran").exists()
    other = tmp_path / "other.pickle"
    other.write_bytes(pickle.dumps({"segments": []}))
    with pytest.raises(UserError, match="no segments and device_traces"):
        read_snapshot(other)


def test_summarize_snapshot_walks_its_rows_alone(cli, monkeypatch):
    from profiler.report import sections

    walked = []
    real = sections.print_sections

    def spy(rows, ctx):
        walked.append(tuple(rows))
        return real(rows, ctx)

    monkeypatch.setattr(sections, "print_sections", spy)
    done = cli("summarize", str(CPU_RUN), "--view", "snapshot")
    assert done.code == 0, done.stderr
    assert walked == [(sections.MEMORY_SNAPSHOT,)] == [sections.summarize_rows("snapshot")]


def test_the_registry_row_reads_its_figure_from_a_run_with_the_option():
    from profiler.analysis.memory_snapshot import MemorySnapshot
    from profiler.analysis.run_analysis import RunAnalysis
    from profiler.report import sections

    figure = sections.MEMORY_SNAPSHOT.read(RunAnalysis(CPU_RUN))
    assert isinstance(figure, sections.MEMORY_SNAPSHOT.figure) and figure.view is None
    assert (
        isinstance(figure, MemorySnapshot)
        and sections.MEMORY_SNAPSHOT.read(RunAnalysis(NO_HISTORY)) is None
    )
