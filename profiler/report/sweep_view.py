"""The `sweep` command behind the CLI: progress over cells, then the benchmark table."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.markup import escape

from ..errors import Interrupted, UserError
from ..sweep import OK, SweepPlan, grid_cells, run_sweep
from .benchmark import benchmark_table, print_benchmark, write_benchmark
from .console import make_console


def _duration(seconds: float) -> str:
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:.0f} s" if minutes else f"{rest:.1f} s"


@contextlib.contextmanager
def _cell_progress(console: Console, total: int):
    """A progress bar over the cells when stderr is a terminal, per-cell lines either way."""
    def say(text: str) -> None:
        console.print(escape(text), highlight=False, soft_wrap=True)

    if not console.is_terminal:
        yield say, None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("sweep", total=total)
        yield say, lambda: bar.advance(task)


def run(plan: SweepPlan, json_out: bool = False) -> int:
    """Run the sweep; returns the exit status: 0 if at least one cell is ok (a warning lists the
    others), 1 if none is."""
    err = make_console(stderr=True)
    with _cell_progress(err, len(plan.cells)) as (say, advance):
        try:
            outcome = run_sweep(plan, say=say, progress=advance)
        except Interrupted:
            _write_tables(plan, quiet=True)
            raise
    frame, manifest = _write_tables(plan)
    if json_out:
        import json
        import sys

        from .benchmark import benchmark_json

        json.dump(benchmark_json(frame, manifest, plan.sweep_dir), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print_benchmark(frame, manifest, make_console())
    cells = grid_cells(manifest)
    bad = [(name, cell) for name, cell in cells if cell.get("status") != OK]
    err.print(f"sweep took {_duration(outcome.wall_s)} ({outcome.ran} cell(s) run, "
              f"{outcome.skipped} skipped); tables: {plan.sweep_dir}/benchmark.csv and .md",
              highlight=False, soft_wrap=True)
    if bad and len(bad) < len(cells):
        listed = ", ".join(f"{name} ({cell.get('status')})" for name, cell in bad)
        err.print(f"[yellow]warning:[/] {len(bad)} of {len(cells)} cells did not finish: "
                  f"{escape(listed)}; reasons in {escape(str(plan.sweep_dir))}/sweep.json",
                  highlight=False, soft_wrap=True)
    if len(bad) == len(cells):
        first = bad[0][1].get("reason")
        err.print(f"error: all {len(cells)} cells failed (first: {escape(str(first))}); "
                  f"logs in {escape(str(plan.sweep_dir))}/logs/", highlight=False, soft_wrap=True)
        return 1
    return 0


def _write_tables(plan: SweepPlan, quiet: bool = False):
    from ..sweep import read_manifest

    manifest = read_manifest(plan.sweep_dir)
    if manifest is None:
        raise UserError(f"{plan.sweep_dir} lost its manifest during the sweep")
    frame = benchmark_table(plan.sweep_dir, manifest)
    write_benchmark(plan.sweep_dir, frame, manifest)
    return frame, manifest
