"""SweepAnalysis: a sweep folder's manifest, benchmark table (one typed row per cell) and
finished cells, read once.

The sweep-level half of the Python API (profiler.analysis.run_analysis.RunAnalysis is the
run-level one). Never imports torch; renders nothing."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from profiler import notices
from profiler.analysis.benchmark import (
    CellAnalysis,
    benchmark_frame,
    benchmark_rows,
    cell_analyses,
    sweep_gpu_offsets,
)
from profiler.analysis.gpu_offsets import GpuOffset
from profiler.analysis.records import BenchmarkCell
from profiler.analysis.roofline import Roofline, roofline_of
from profiler.analysis.run_analysis import RunAnalysis
from profiler.errors import UserError
from profiler.runs.command_targets import resolve_target
from profiler.runs.layout import MANIFEST, RESULT_FILE, peaks_dir
from profiler.runs.manifest import (
    OK,
    SweepCell,
    SweepManifest,
    grid_cells,
    owner_gone_note,
    read_manifest,
    settle_running,
)
from profiler.runs.result import try_read_result
from profiler.trace.diff import steps_of


def load_sweep(target: Path) -> tuple[Path, SweepManifest]:
    """A sweep folder (or its sweep.json) -> (folder, manifest)."""
    folder = target.parent if target.name == MANIFEST else target
    manifest = read_manifest(folder) if folder.is_dir() else None
    if manifest is None:
        raise UserError(f"{target} is not a sweep folder (no {MANIFEST})")
    orphans = settle_running(folder, manifest)  # a cell whose sweep is gone: not finished
    if orphans:
        notices.note(owner_gone_note(folder, orphans))
    return folder, manifest


class SweepAnalysis:
    """One sweep folder (or its sweep.json). ``peaks_dir`` and ``flops_table`` are passed on
    to each cell's RunAnalysis. Raises UserError when the folder holds no sweep manifest."""

    def __init__(
        self,
        folder: str | Path,
        *,
        peaks_dir: Path | None = None,
        flops_table: dict[str, Any] | None = None,
    ):
        self.folder, self.manifest = load_sweep(Path(folder))
        self._peaks_dir = peaks_dir
        self.flops_table = flops_table

    def __repr__(self) -> str:
        return f"SweepAnalysis({str(self.folder)!r})"

    @cached_property
    def analyses(self) -> list[CellAnalysis]:
        """Every cell of the grid read once (its result.json and windows,
        profiler.analysis.benchmark.cell_analyses): the rows and the GPUs' offsets both come
        from these."""
        return cell_analyses(self.folder, self.manifest)

    @cached_property
    def rows(self) -> list[BenchmarkCell]:
        """One typed row per cell, in sweep order (profiler.analysis.benchmark.benchmark_rows:
        a cell's figures, both speedups with their intervals and verdicts, the benchmark.csv
        columns as fields)."""
        return benchmark_rows(self.folder, self.manifest, cells=self.analyses)

    @cached_property
    def offsets(self) -> list[GpuOffset]:
        """Each GPU's offset from the others on the same configs, with its floor, where the
        cells' windows ran on several GPUs ([] otherwise: profiler.analysis.gpu_offsets)."""
        return sweep_gpu_offsets(self.folder, self.manifest, self.analyses)

    @cached_property
    def benchmark(self) -> pd.DataFrame:
        """The rows as one frame (benchmark_frame: the benchmark.csv columns), for the plots and
        the HTML page's table; the other views walk ``rows``."""
        return benchmark_frame(self.rows, self.manifest)

    @property
    def cells(self) -> list[tuple[str, SweepCell]]:
        """(folder name, manifest cell) of the current grid, in sweep order."""
        return grid_cells(self.manifest)

    def finished(self) -> list[tuple[SweepCell, RunAnalysis]]:
        """Every cell that finished with a result.json and a trace, as a RunAnalysis."""
        found = []
        for name, cell in self.cells:
            if cell.status != OK or not (self.folder / name / RESULT_FILE).is_file():
                continue
            try:
                found.append(
                    (
                        cell,
                        RunAnalysis(
                            self.folder / name,
                            peaks_dir=self._peaks_dir,
                            flops_table=self.flops_table,
                        ),
                    )
                )
            except UserError:
                continue
        return found

    def rooflines(self) -> list[tuple[SweepCell, Roofline | None]]:
        """(cell, roofline from its result.json alone) of every finished cell."""
        peaks = peaks_dir() if self._peaks_dir is None else self._peaks_dir
        points = []
        for name, cell in self.cells:
            result = (
                try_read_result(self.folder / name / RESULT_FILE) if cell.status == OK else None
            )
            if result is not None:
                points.append((cell, roofline_of(result, peaks)))
        return points


def cell_metrics(run_dir: Path) -> dict[str, Any]:
    """Tensor Core share, GPU utilization and kernel time by category of a finished cell's
    trace, summarized with profiler.trace (no torch). A trace that cannot be summarized leaves
    a note instead of stopping the sweep."""
    try:
        summary = RunAnalysis(resolve_target(str(run_dir))).summary
    except UserError as error:
        return {"note": f"trace not summarized: {error}"}
    except Exception as error:  # a bug in the analysis must not end the sweep
        return {"note": f"trace not summarized: {type(error).__name__}: {error}"}
    k, o = summary.kernels, summary.overview
    steps = steps_of(summary)
    return {
        "kernel_us_per_step": k.total_kernel_us / steps,
        "categories_us_per_step": {
            r.category: float(r.total_us) / steps for r in k.categories.itertuples()
        },
        "tensor_core_pct": 100 * k.tensor_core_share if k.total_kernel_us else None,
        "gpu_util_pct": (
            sum(d.gpu_utilization_pct for d in o.devices) / len(o.devices) if o.devices else None
        ),
    }
