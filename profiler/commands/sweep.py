"""`sweep`: run the cells with progress, then write and print the benchmark table; the exit
status says whether any cell finished."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler import signals
from profiler.analysis.benchmark import (
    benchmark_frame,
    benchmark_rows,
    cell_analyses,
    sweep_gpu_offsets,
)
from profiler.commands.sink import Sink
from profiler.errors import Interrupted, UserError
from profiler.report.benchmark_view import (
    benchmark_json,
    print_benchmark,
    print_gpu_offsets,
    write_benchmark,
)
from profiler.report.fmt import wall_time
from profiler.report.sweep_view import cell_progress
from profiler.runs.manifest import OK, SweepManifest, grid_cells
from profiler.sweep.plan import SweepPlan
from profiler.sweep.record import read_manifest
from profiler.sweep.runner import run_sweep

if TYPE_CHECKING:
    import pandas as pd

    from profiler.analysis.gpu_offsets import GpuOffset
    from profiler.analysis.records import BenchmarkCell


def run(plan: SweepPlan, sink: Sink, only_decided: bool = False) -> int:
    """Run the sweep, its table to ``sink`` (profiler.cli.output.Output); returns the exit
    status: 0 if at least one cell is ok (a warning lists the others), 1 if none is."""
    # SIGTERM, SIGHUP: like Ctrl-C (the running cell stopped and recorded, the tables written)
    with (
        signals.as_interrupts(),
        cell_progress(sink.err_console, len(plan.cells), quiet=sink.quiet) as (say, advance),
    ):
        try:
            outcome = run_sweep(plan, say=say, progress=advance)
        except Interrupted:
            write_tables(plan)
            raise
    rows, frame, manifest, offsets = write_tables(plan)
    if sink.json:
        sink.document("benchmark", benchmark_json(rows, manifest, plan.sweep_dir, offsets))
    else:
        print_benchmark(frame, manifest, sink.console, only_decided)
        print_gpu_offsets(offsets, sink.console)
    cells = grid_cells(manifest)
    bad = [(name, cell) for name, cell in cells if cell.status != OK]
    sink.note(
        f"sweep took {wall_time(outcome.wall_s)} ({outcome.ran} cell(s) run, "
        f"{outcome.skipped} skipped); tables: {plan.sweep_dir}/benchmark.csv and .md"
    )
    if bad and len(bad) < len(cells):
        listed = ", ".join(f"{name} ({cell.status})" for name, cell in bad)
        sink.warn(
            f"{len(bad)} of {len(cells)} cells did not finish: {listed}; "
            f"reasons in {plan.sweep_dir}/sweep.json"
        )
    if len(bad) == len(cells):
        sink.error(
            f"all {len(cells)} cells failed (first: {bad[0][1].reason}); "
            f"logs in {plan.sweep_dir}/logs/"
        )
        return 1
    return 0


def write_tables(
    plan: SweepPlan,
) -> tuple[list[BenchmarkCell], pd.DataFrame, SweepManifest, list[GpuOffset]]:
    """benchmark.csv and .md from the manifest as it is now; the typed rows, their frame, the
    manifest and the GPUs' offsets."""
    manifest = read_manifest(plan.sweep_dir)
    if manifest is None:
        raise UserError(f"{plan.sweep_dir} lost its manifest during the sweep")
    cells = cell_analyses(plan.sweep_dir, manifest)  # each cell read once, for both
    rows = benchmark_rows(plan.sweep_dir, manifest, cells=cells)
    frame = benchmark_frame(rows, manifest)
    offsets = sweep_gpu_offsets(plan.sweep_dir, manifest, cells)
    write_benchmark(plan.sweep_dir, frame, manifest, offsets)
    return rows, frame, manifest, offsets
