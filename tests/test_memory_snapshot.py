"""run --memory-history and summarize --view snapshot (profiler.collect.memory_history,
profiler.trace.snapshot, profiler.report.snapshot_view): what a CPU run says and shows, the
recording stopped on every way out of the profiled window, the refusals, and a file that is not
a snapshot; on the snapshots recorded on an H200, the peak against the allocator's own
state, the stacks at it against the sizes the tensors' shapes make, the --json and the report."""

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


# ---- snapshots recorded on an H200 (tests/fixtures/snapshot_h200, its README says how) ------

H200 = ROOT / "tests" / "fixtures" / "snapshot_h200" / "runs"
LLAMA = H200 / "pytorch_fp16_bs1_mh_llama_gen"  # Llama 3.2 1B's shape, bs 1, prompt 32
LLAMA_TINY = H200 / "pytorch_fp16_bs2_mh_llama_tiny_gen"  # bs 2, prompt 32
RESNET50 = H200 / "pytorch_fp16_bs8_mh_resnet50_fp16_bs8"  # FP16 bs 8


def _allocated_by_hand(snapshot: dict) -> tuple[int, int, int]:
    """Allocated bytes at the history's start, its largest and its end on device 0, from the
    allocator's own final state (the segments' active blocks) walked back over the history:
    a second, plain reading to hold the view's replay against."""
    final = sum(
        block["size"]
        for segment in snapshot["segments"]
        if segment["device"] == 0
        for block in segment["blocks"]
        if block["state"].startswith("active")
    )
    deltas = [
        {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)
        for e in snapshot["device_traces"][0]
    ]
    start = final - sum(deltas)
    level = most = start
    for delta in deltas:
        level += delta
        most = max(most, level)
    return start, most, final


@pytest.mark.parametrize("run", [LLAMA, LLAMA_TINY, RESNET50], ids=lambda p: p.name)
def test_the_h200_peak_is_the_allocators_own_state_replayed(run):
    from profiler.trace.snapshot import BEFORE_HISTORY, snapshot_view

    path = run / "memory_snapshot.pickle"
    (device,) = snapshot_view(path).devices
    start, peak, end = _allocated_by_hand(read_snapshot(path))
    assert (device.allocated_at_start_bytes, device.peak_allocated_bytes) == (start, peak)
    assert device.allocated_at_end_bytes == end
    # the stacks live at the peak are the whole of it, the blocks made before the history too
    assert sum(row.bytes for row in device.stacks) == device.peak_allocated_bytes
    assert sum(row.blocks for row in device.stacks) == device.live_blocks
    assert [r.bytes for r in device.stacks] == sorted(
        (r.bytes for r in device.stacks), reverse=True
    )
    before = [r for r in device.stacks if r.frames == [BEFORE_HISTORY]]
    assert [r.bytes for r in before] == [device.before_history_bytes]
    # the timeline keeps the peak, and no point of it is above the peak
    at = device.timeline_event.index(device.peak_event)
    assert device.timeline_allocated_bytes[at] == device.peak_allocated_bytes
    assert max(device.timeline_allocated_bytes) == device.peak_allocated_bytes
    assert device.reserved_at_peak_bytes >= device.peak_allocated_bytes


def test_the_largest_stacks_at_the_h200_peaks_are_the_tensors_their_shapes_make():
    """Sizes checked by hand: the logits of a prefill are batch x prompt x vocabulary x 2
    bytes (FP16), a decode step's batch x 1 x vocabulary x 2; ResNet50's stem convolution writes
    batch x 64 x 112 x 112 x 2 bytes."""
    from profiler.collect.models import LLAMA_SHAPES
    from profiler.trace.snapshot import snapshot_view

    def recorded(run: Path) -> list:
        (device,) = snapshot_view(run / "memory_snapshot.pickle", top=4).devices
        return device.stacks[1:]  # the first: the weights, made before the history

    vocab = LLAMA_SHAPES["llama"].vocab
    prefill, decode, *_ = recorded(LLAMA)
    assert (prefill.bytes, prefill.blocks) == (1 * 32 * vocab * 2, 1)
    assert prefill.frames[0] == "torch/nn/modules/linear.py:134 forward"
    assert any(frame.endswith(" prefill") for frame in prefill.frames)
    assert decode.bytes == 1 * 1 * vocab * 2 and any(f.endswith(" step") for f in decode.frames)
    tiny = recorded(LLAMA_TINY)[0]
    assert tiny.bytes == 2 * 32 * LLAMA_SHAPES["llama-tiny"].vocab * 2
    stem = [row for row in recorded(RESNET50) if row.frames[0].startswith("torch/nn/modules/conv")]
    assert stem[0].bytes == 8 * 64 * 112 * 112 * 2
    # every stack of a device shares the command line's frames: shown once, outermost last
    (device,) = snapshot_view(LLAMA / "memory_snapshot.pickle").devices
    assert device.common_frames[-1] == "profile.py:40 <module>"
    assert not any(f in row.frames for row in device.stacks for f in device.common_frames)


def test_summarize_shows_the_h200_peak_and_its_json_is_the_same_figures(cli):
    from profiler.trace.snapshot import snapshot_view

    (device,) = snapshot_view(LLAMA / "memory_snapshot.pickle").devices
    done = cli("summarize", str(LLAMA), "--view", "snapshot", "--top", "3")
    assert done.code == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "GPU 0: peak 2,398.6 MiB allocated at event 7,084 of 9,177" in text
    assert "in 220 blocks" in text and "https://pytorch.org/memory_viz" in text
    assert "torch/nn/modules/linear.py:134 forward" in text
    # a frame a line, each read from the file through the control-character filter alone
    assert "forward?" not in done.stdout
    assert "│ torch/nn/modules/linear.py:134 forward " in done.stdout
    document = cli("summarize", str(LLAMA), "--view", "snapshot", "--top", "3", "--json")
    assert document.code == 0, document.stderr
    figures = msgspec.json.decode(document.stdout, type=SummarizeSnapshot)
    (shown,) = figures.devices
    assert shown.peak_allocated_bytes == device.peak_allocated_bytes == 2_515_154_844
    assert [row.bytes for row in shown.stacks] == [row.bytes for row in device.stacks[:3]]
    assert figures.file is not None and figures.file.endswith("memory_snapshot.pickle")


def test_the_report_holds_the_h200_timeline_offline(tmp_path):
    from profiler.commands.report import run

    page = run(str(RESNET50), None, tmp_path / "page.html").read_text()
    section = page[page.index("memory snapshot (run --memory-history)") :]
    assert "data:image/png;base64" in section  # the timeline, drawn into the page
    assert "https://pytorch.org/memory_viz" in section
    assert "<script src=" not in page  # nothing fetched when the page opens


CHECK = ROOT / "tests" / "fixtures" / "snapshot_check_h200"


def test_a_snapshot_of_known_sizes_peaks_at_what_was_asked_and_torchs_counter_agrees():
    """Allocations of known sizes (tests/fixtures/snapshot_check_h200/README.md): the start and
    end equal torch.cuda.memory_allocated's, the peak is the sizes asked, each stack holds its
    tensors; torch's max_memory_allocated is above the peak by the rest of the one block the
    allocator did not split, which the segment's addresses show."""
    from profiler.trace.snapshot import snapshot_view

    mib = 1 << 20
    facts = json.loads((CHECK / "snapshot_check.json").read_text())
    (device,) = snapshot_view(CHECK / "snapshot_check.pickle").devices
    assert device.allocated_at_start_bytes == facts["allocated_at_start"] == 3 * mib
    assert device.allocated_at_end_bytes == facts["allocated_at_end"] == 40 * mib
    assert device.peak_allocated_bytes == (40 + 4 * 8 + 24) * mib
    shown = {row.frames[0].split()[-1]: (row.bytes, row.blocks) for row in device.stacks}
    assert shown == {
        "weights": (40 * mib, 1),
        "activations": (32 * mib, 4),
        "scratch": (24 * mib, 1),
    }
    assert device.before_history_bytes == 0  # the 3 MiB were freed before the peak
    # the second activation's block runs from its address to the end of its segment
    snapshot = read_snapshot(CHECK / "snapshot_check.pickle")
    allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    second = allocs[2]
    (segment,) = [
        s
        for s in snapshot["segments"]
        if s["address"] <= second["addr"] < s["address"] + s["total_size"]
    ]
    block = segment["address"] + segment["total_size"] - second["addr"]
    assert block - second["size"] == mib
    assert facts["max_allocated"] == device.peak_allocated_bytes + block - second["size"]
