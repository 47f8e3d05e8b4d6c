"""A sweep given a list of an option's values (--max-new-tokens 16,64): one cell per value,
named and passed on per cell, tabulated with a column of that option, and resumable."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler.analysis.benchmark import benchmark_frame, benchmark_rows
from profiler.analysis.records import BenchmarkCell
from profiler.errors import UserError
from profiler.report.benchmark_view import markdown
from profiler.runs import manifest
from profiler.runs.manifest import SweepCell, SweepManifest
from profiler.sweep import plan as sweep, runner as sweep_run

GENERATE = ["--model", "transformer", "--workload", "generate"]


@pytest.fixture
def commands(monkeypatch) -> list:
    """The cells' typed configs (what a worker runs); every cell stops there."""
    from tests.test_run_options import RecordingExecutor

    seen: list = []
    monkeypatch.setattr(sweep_run, "make_executor", lambda plan: RecordingExecutor(seen))
    return seen


def test_a_list_of_new_tokens_is_one_cell_per_value(cli, commands):
    done = cli(
        "sweep",
        "--backends",
        "pytorch_fp32,pytorch_fp16",
        "--bs",
        "1,8",
        *GENERATE,
        "--max-new-tokens",
        "16,64,256",
        "--src-len",
        "32",
        "--name",
        "g",
    )
    assert len(commands) == 12, done
    configs = commands
    grid = {(c.backend, c.batch_size, c.max_new_tokens) for c in configs}
    assert grid == {
        (b, n, t) for b in ("pytorch_fp32", "pytorch_fp16") for n in (1, 8) for t in (16, 64, 256)
    }
    assert {c.src_len for c in configs} == {32}  # a single value stays one value
    manifest = json.loads(Path("runs/g/sweep.json").read_text())
    assert manifest["options"]["max_new_tokens"] == [16, 64, 256]
    cell = manifest["cells"]["pytorch_fp16_bs8_transformer_gen_new64"]
    assert cell["axis"] == {"max_new_tokens": 64} and cell["batch_size"] == 8
    assert len(manifest["cells"]) == 12
    # each cell's run writes the folder the sweep looks in
    assert {c.run_name for c in configs} == set(manifest["cells"])
    benchmark = Path("runs/g/benchmark.md").read_text()
    assert "`pytorch_fp16` bs 8 max_new_tokens 64: failed" in benchmark


@pytest.mark.parametrize(
    "value, wanted",
    [
        ("16,x", "--max-new-tokens: 'x' is not a whole number"),
        ("16,16", "--max-new-tokens names value 16 twice"),
        ("16,", "--max-new-tokens '16,' has an empty item"),
        ("0,16", "--max-new-tokens must be at least 1 (got 0)"),
    ],
)
def test_bad_lists_are_one_line(cli, commands, value, wanted):
    done = cli(
        "sweep", "--backends", "pytorch_fp32", "--bs", "1", *GENERATE, "--max-new-tokens", value
    )
    assert done.code != 0 and wanted in done.stderr, done
    assert len(done.stderr.strip().splitlines()) == 1 and not commands
    assert not Path("runs").exists()


def test_a_swept_option_may_take_other_values_on_resume(cli, commands):
    base = ["sweep", "--backends", "pytorch_fp32", "--bs", "1", *GENERATE, "--name", "g"]
    cli(*base, "--max-new-tokens", "16,64")
    done = cli(*base, "--max-new-tokens", "16,32", "--resume")
    assert "pass the same options" not in done.stderr, done
    cells = json.loads(Path("runs/g/sweep.json").read_text())["cells"]
    assert {name.rsplit("_", 1)[1] for name in cells} == {"new16", "new32", "new64"}
    # one value for a swept option names no cell by it: another value is another measurement
    cli("sweep", *base[1:-1], "s2", "--max-new-tokens", "16")
    refused = cli("sweep", *base[1:-1], "s2", "--max-new-tokens", "32", "--resume")
    assert refused.code == 2 and "--max-new-tokens 16" in refused.stderr


def _manifest(cells: dict) -> SweepManifest:
    return SweepManifest(
        options={"workload": "generate", "max_new_tokens": [16, 64]},
        model="transformer",
        baseline="pytorch_fp32",
        backends=["pytorch_fp32", "ttrt_fp16"],
        batch_sizes=[8],
        cells=cells,
    )


def test_speedup_compares_cells_with_the_same_values(tmp_path, monkeypatch):
    from profiler.analysis import benchmark

    p50 = {
        ("pytorch_fp32", 16): 40.0,
        ("pytorch_fp32", 64): 160.0,
        ("ttrt_fp16", 16): 20.0,
        ("ttrt_fp16", 64): 40.0,
    }
    cells = {
        sweep.cell_name(b, 8, "transformer", "generate", {"max_new_tokens": t}): SweepCell(
            backend=b, batch_size=8, status="ok", axis={"max_new_tokens": t}
        )
        for b, t in p50
    }
    # results without latency files: the p50 ratio stands alone (no verdict)
    monkeypatch.setattr(
        benchmark,
        "try_read_result",
        lambda path: SimpleNamespace(
            name=path.parent.name,
            output=SimpleNamespace(finite=True),
            latency_csv=str(path.parent / "no_latency.csv"),
            generation=None,
        ),
    )
    monkeypatch.setattr(
        benchmark,
        "_finished",
        lambda manifest, cell, result, samples: BenchmarkCell(
            model=manifest.model,
            device="",
            backend=cell.backend,
            bs=cell.batch_size,
            baseline=manifest.baseline,
            status=cell.status,
            reason="",
            gpu="",
            node="",
            p50_ms=p50[(cell.backend, cell.axis["max_new_tokens"])],
        ),
    )
    manifest = _manifest(cells)
    rows = benchmark_rows(tmp_path, manifest)
    frame = benchmark_frame(rows, manifest)
    assert list(frame.columns[:5]) == ["model", "device", "backend", "bs", "max_new_tokens"]
    speedup = {(r.backend, r.max_new_tokens): r.speedup for r in frame.itertuples()}
    assert speedup == {
        ("pytorch_fp32", 16): 1.0,
        ("pytorch_fp32", 64): 1.0,
        ("ttrt_fp16", 16): 2.0,
        ("ttrt_fp16", 64): 4.0,
    }
    assert "max_new_tokens: 16, 64" in markdown(rows, manifest)


def test_cell_names_and_labels_carry_the_values():
    axis = {"max_new_tokens": 16, "src_len": 32}
    assert (
        manifest.cell_name("ttrt_fp16", 8, "transformer", "generate", axis)
        == "ttrt_fp16_bs8_transformer_gen_new16_src32"
    )
    assert (
        manifest.cell_label("ttrt_fp16", 8, axis)
        == "ttrt_fp16 bs 8 --max-new-tokens 16 --src-len 32"
    )
    assert (
        manifest.short_label(SweepCell(backend="ttrt_fp16", batch_size=8, axis=axis))
        == "ttrt_fp16 bs8 new16 src32"
    )
    with pytest.raises(UserError, match="--seq-len: '8.5' is not a whole number"):
        sweep.parse_axes({"seq_len": "8.5"})
