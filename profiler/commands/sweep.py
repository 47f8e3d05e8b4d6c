"""`sweep`: run the cells with progress, then write and print the benchmark table; the exit
status says whether any cell finished."""

from __future__ import annotations

from profiler import signals
from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.commands.sink import Sink
from profiler.errors import Interrupted, UserError
from profiler.report.benchmark_view import benchmark_json, write_benchmark
from profiler.report.fmt import wall_time
from profiler.report.sections import SWEEP, Context, print_sections
from profiler.report.sweep_view import cell_progress
from profiler.runs.layout import MANIFEST
from profiler.runs.manifest import OK
from profiler.sweep.plan import SweepPlan
from profiler.sweep.runner import run_sweep


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
    sweep = write_tables(plan)
    if sink.json:
        sink.document(
            "benchmark", benchmark_json(sweep.rows, sweep.manifest, sweep.folder, sweep.offsets)
        )
    else:
        print_sections(SWEEP, Context(sweep, sink.console, only_decided=only_decided))
    cells = sweep.cells
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


def write_tables(plan: SweepPlan) -> SweepAnalysis:
    """benchmark.csv and .md from the sweep folder as it is now (its SweepAnalysis: each cell
    read once for the rows and the GPUs' offsets), and that analysis, for the views."""
    if not (plan.sweep_dir / MANIFEST).is_file():
        raise UserError(f"{plan.sweep_dir} lost its manifest during the sweep")
    sweep = SweepAnalysis(plan.sweep_dir)
    write_benchmark(plan.sweep_dir, sweep.rows, sweep.manifest, sweep.offsets)
    return sweep
