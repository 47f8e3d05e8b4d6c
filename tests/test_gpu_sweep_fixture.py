"""The committed H100 sweep (tests/fixtures/h100_sweep): plot, report and summarize run on a real
GPU sweep from the repository, and its cells are typed."""

from __future__ import annotations

import json

import pytest

from .conftest import FIXTURES

SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
CELLS = ("pytorch_fp16_bs1", "pytorch_fp16_bs8", "ttrt_fp16_bs1", "ttrt_fp16_bs8")


def test_every_cell_finished_as_a_typed_job():
    cells = json.loads((SWEEP / "sweep.json").read_text())["cells"]
    assert sorted(cells) == sorted(CELLS)
    assert {(c["status"], c["kind"]) for c in cells.values()} == {("ok", "ok")}


def test_plot_and_report_of_a_gpu_sweep_from_the_repository(cli, tmp_path):
    pytest.importorskip("matplotlib")
    done = cli("plot", str(SWEEP), "--out", str(tmp_path / "plots"))
    assert done.code == 0, done.stderr
    assert {"latency.png", "speedup.png", "roofline.png"} <= {
        p.name for p in (tmp_path / "plots").iterdir()
    }
    done = cli("report", str(SWEEP), "--out", str(tmp_path / "sweep.html"))
    assert done.code == 0, done.stderr
    page = (tmp_path / "sweep.html").read_text()
    assert all(cell.split("_bs")[0] in page for cell in CELLS)


def test_a_cell_summarizes_with_its_timed_window(cli):
    done = cli("summarize", str(SWEEP / "ttrt_fp16_bs8"), "--view", "overview")
    assert done.code == 0, done.stderr
    assert "Timed window" in done.stdout and "NVIDIA H100" in done.stdout
