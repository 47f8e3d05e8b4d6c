"""The `report` command: resolve one or two targets (runs, sweep cells, traces) or a sweep folder,
gather their numbers, roofline and advice, and write one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiler import notices
from profiler.analysis.rank_run import RankComparison, RankRun, rank_folder
from profiler.analysis.run_analysis import Comparison, RunAnalysis
from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.commands.sink import Sink
from profiler.errors import UserError
from profiler.fsutil import read_small, write_text_atomic
from profiler.notices import Say
from profiler.report import html
from profiler.report.pages import target_label
from profiler.report.sections import (
    COMPARE_PAGE,
    COMPARE_RANKS_PAGE,
    RANKS_PAGE,
    RUN_PAGE,
    SWEEP_PAGE,
    Context,
    page,
)
from profiler.runs.layout import RUNS_ROOT
from profiler.runs.manifest import find_sweep


def _analysis(
    target: str,
    peaks_dir: Path | None,
    flops_table: dict[str, Any] | None,
    detail: Say | None = None,
) -> RunAnalysis:
    """The target's analysis, its advice computed (a trace that does not read fails here);
    ``detail`` (-v) is told what it resolved to."""
    run = RunAnalysis(target, peaks_dir=peaks_dir, flops_table=flops_table)
    if run.note:  # several traces, or a result.json that does not read (a newer schema)
        for line in run.note.splitlines():
            if line.startswith("warning: "):
                notices.warn(f"{target}: {line.removeprefix('warning: ')}")
            else:
                notices.note(f"{target}: {line}")
    _ = run.advice
    if detail is not None:
        detail(
            f"{target}: trace {run.summary.trace_path}; result "
            f"{run.result_json or 'none (a bare trace: no timed window)'}"
        )
    return run


def run_page(
    target: str,
    peaks_dir: Path | None = None,
    flops_table: dict[str, Any] | None = None,
    detail: Say | None = None,
) -> html.Page:
    """A run's page: the sections of profiler.report.sections.RUN_PAGE."""
    run = _analysis(target, peaks_dir, flops_table, detail)
    return page(f"Report: {target}", RUN_PAGE, Context(run, label=target_label(target)))


def compare_page(
    a: str,
    b: str,
    peaks_dir: Path | None = None,
    flops_table: dict[str, Any] | None = None,
    detail: Say | None = None,
) -> html.Page:
    """Two runs' page: the sections of profiler.report.sections.COMPARE_PAGE."""
    both = Comparison(
        _analysis(a, peaks_dir, flops_table, detail),
        _analysis(b, peaks_dir, flops_table, detail),
        a,
        b,
    )
    title = f"Comparison: A = {target_label(a)}, B = {target_label(b)}"
    return page(title, COMPARE_PAGE, Context(both))


def sweep_page(
    folder: Path,
    peaks_dir: Path | None = None,
    flops_table: dict[str, Any] | None = None,
    only_decided: bool = False,
) -> html.Page:
    """A sweep's page (profiler.report.sections.SWEEP_PAGE): its table (from its manifest and
    cells' results), plots, and the roofline and advice of every finished cell; with
    ``only_decided`` the table leaves out the cells undecided on both figures (a line counts
    them), as `sweep --only-decided` does."""
    sweep = SweepAnalysis(folder, peaks_dir=peaks_dir, flops_table=flops_table)
    return page(f"Sweep: {folder.name}", SWEEP_PAGE, Context(sweep, only_decided=only_decided))


def rank_page(target: str, target_b: str | None = None) -> html.Page:
    """A folder of rank traces' page (RANKS_PAGE), or two folders' (COMPARE_RANKS_PAGE)."""
    if target_b is None:
        return page(f"Rank traces: {target}", RANKS_PAGE, Context(RankRun(target)))
    for one in (target, target_b):
        if rank_folder(one) is None:
            raise UserError(
                f"{one} is not a folder of rank traces, and the other target is: report "
                "two folders of rank traces, or two runs or traces"
            )
    both = RankComparison(RankRun(target), RankRun(target_b))
    title = f"Rank traces: A = {target}, B = {target_b}"
    return page(title, COMPARE_RANKS_PAGE, Context(both))


def read_flops_table(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    import json

    try:
        table: dict[str, Any] | None = json.loads(read_small(path, 64 << 20, "--flops"))
        return table
    except (ValueError, RecursionError) as error:
        raise UserError(f"--flops {path}: not readable JSON ({error})") from None


def run(
    target: str,
    target_b: str | None,
    out: Path | None,
    peaks_dir: Path | None = None,
    flops: Path | None = None,
    *,
    sink: Sink | None = None,
    only_decided: bool = False,
) -> Path:
    """Write the report; returns its path. ``sink`` (profiler.cli.output.Output) takes the
    warning line when figures are left out (a Python warning without one); ``only_decided``: a
    sweep's table without the cells undecided on both figures (a sweep folder only)."""
    if peaks_dir is not None and peaks_dir.exists() and not peaks_dir.is_dir():
        raise UserError(
            f"--peaks-dir {peaks_dir} is not a folder: give the folder `profile.py "
            "peaks` writes its measurements into"
        )
    flops_table = read_flops_table(flops)
    detail = sink.detail if sink is not None else None
    sweep = find_sweep(target) if target_b is None else None
    if only_decided and sweep is None:
        raise UserError(
            "--only-decided goes with a sweep folder (it hides the sweep table's "
            f"undecided cells); {target} is not one"
        )
    if sweep is not None:
        page = sweep_page(sweep, peaks_dir, flops_table, only_decided)
        default = sweep / "report.html"
    elif rank_folder(target) is not None or (
        target_b is not None and rank_folder(target_b) is not None
    ):
        page = rank_page(target, target_b)
        name = Path(target).name + ("" if target_b is None else f"_vs_{Path(target_b).name}")
        default = Path(RUNS_ROOT, f"report_{name}.html")
    elif target_b is not None:
        page = compare_page(target, target_b, peaks_dir, flops_table, detail)
        default = Path(RUNS_ROOT, f"report_{Path(target).name}_vs_{Path(target_b).name}.html")
    else:
        page = run_page(target, peaks_dir, flops_table, detail)
        default = Path(RUNS_ROOT, f"report_{Path(target).name}.html")
    path = out or default
    try:
        if out is None and sweep is None:  # runs/ (in the current folder), made when missing
            path.parent.mkdir(exist_ok=True)
        write_text_atomic(path, page.render())
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror}") from None
    if html.figures_missing():  # the tables are all there; say once what is not
        (sink.warn if sink is not None else notices.warn)(f"{path}: {html.figures_missing()}")
    return path
