"""`compare`: two targets -> a Comparison (profiler.analysis.run_analysis: the Diff with the timed
window's rows from result.json, and the timed headline) -> CSVs or Parquet, terminal tables or
--json."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from profiler import signals, units
from profiler.analysis.rank_run import RankComparison, RankRun, rank_folder
from profiler.analysis.records import plain
from profiler.analysis.run_analysis import Comparison, RunAnalysis
from profiler.commands.sink import Sink
from profiler.errors import UserError
from profiler.notices import Say
from profiler.report.export import write_table, write_tables
from profiler.report.sections import COMPARE_VIEWS, Context, print_sections
from profiler.trace.diff import Diff

if TYPE_CHECKING:
    from profiler.runs.samples import ConfigSamples

#: the note of a run compared with itself
SAME_RUN = (
    "note: A and B are the same run ({path}): its recorded figures are compared with "
    "themselves (with --processes, the fresh processes time one config twice: an A/A "
    "test of this machine's noise)"
)


def load_side(target: str, sink: Sink) -> RunAnalysis:
    """One side of the comparison (a note to ``sink`` when the target held several traces)."""
    side = RunAnalysis(target)
    if side.note:
        sink.note(f"{target}: {side.note}")
    return side


def rank_runs(a: str, b: str) -> RankComparison:
    """Two folders of rank traces, B against A; one line where only one of them is."""
    for target in (a, b):
        if rank_folder(target) is None:
            raise UserError(
                f"{target} is not a folder of rank traces, and the other target is: compare "
                "two folders of rank traces, or two runs or traces"
            )
    return RankComparison(RankRun(a), RankRun(b))


def _compare_ranks(a: str, b: str, sink: Sink, top: int) -> None:
    """Two folders of rank traces, rank by rank and as a whole (COMPARE_RANKS); --json."""
    both = rank_runs(a, b)
    if sink.json:
        sink.document("compare-ranks", plain(both.figures))
        return
    from profiler.report.sections import COMPARE_RANKS

    print_sections(COMPARE_RANKS, Context(both, sink.console, top=top))


def describe(label: str, side: RunAnalysis) -> str:
    """What a target resolved to (-v): its trace and its result.json."""
    return (
        f"{label}: trace {side.summary.trace_path}; result "
        f"{side.result_json or 'none (a bare trace: no timed window)'}"
    )


def run(
    a: str,
    b: str,
    top: int = 15,
    out: Path | None = None,
    *,
    view: str = "answer",
    sink: Sink,
    processes: int | None = None,
    target_noise: float | None = None,
    budget_s: float | None = None,
    same_within: float = 2.0,
    trust_model: bool = False,
    samples: Path | None = None,
) -> Diff | None:
    """``sink``: profiler.cli.output.Output, where the tables or the --json document go.
    ``processes`` / ``target_noise``: time both configs again in fresh processes, interleaved,
    and take both verdicts and every timed figure from those windows (profiler.sweep.rounds);
    the recorded runs' figures then appear only under their own heading; those windows are
    kept (processes_A.csv, processes_B.csv: under ``out``, else a new folder under
    runs/compare/), and ``samples`` (such a folder) judges them again without timing."""
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    if view not in COMPARE_VIEWS:
        raise UserError(f"unknown --view {view!r}; choose one of: {', '.join(COMPARE_VIEWS)}")
    if not 0 <= same_within < 100:
        raise UserError(
            f"--same-within is a percentage from 0 to 100 (got {units.plain(same_within)})"
        )
    if rank_folder(a) is not None or rank_folder(b) is not None:  # folders of rank traces
        _compare_ranks(a, b, sink, top)
        return None
    both = Comparison(load_side(a, sink), load_side(b, sink), a, b, tolerance=same_within / 100)
    for label, side in (("A", both.a), ("B", both.b)):
        sink.detail(describe(label, side))
    if samples is not None:
        if processes is not None or target_noise is not None:
            raise UserError(
                "--samples judges windows already taken: leave out --processes and --target-noise"
            )
        both.windows = kept_windows(samples)
        sink.note(f"A and B judged on the windows kept in {samples} (not timed again)")
    elif processes is not None or target_noise is not None:
        # Ctrl-C, SIGTERM, SIGHUP: the round's process stopped, one line, 130/143/129
        with signals.interruptible("compare", "nothing was written"):
            both.windows = fresh_windows(
                both,
                processes,
                target_noise,
                budget_s,
                sink.note,
                trust_model=trust_model,
                warn=sink.warn,
            )
        folder = keep_windows(both.windows, out)
        sink.note(
            f"kept the windows in {folder} ({KEPT[0]}, {KEPT[1]}): `compare A B --samples "
            f"{folder}` judges them again without timing"
        )
    result = both.diff
    if both.a.path.resolve() == both.b.path.resolve():  # after what can fail: one error line
        sink.note(SAME_RUN.format(path=both.a.path))
    if out is not None:
        written = write_csvs(result, out)
        sink.note(f"wrote {len(written)} files to {out}")
    if sink.json:  # the figures, the diff's tables as typed rows
        sink.document("compare", plain(both.figures(top)))
        return result
    # the verdicts, why B differs and the largest changes on one screen; the timed headline, the
    # diff tables and each run's insight behind --view (all of them with -v)
    rows = COMPARE_VIEWS["full" if sink.verbose and view == "answer" else view]
    print_sections(rows, Context(both, sink.console, top=top))
    return result


#: the files compare --processes keeps A's and B's windows in (processes.csv's columns)
KEPT = ("processes_A.csv", "processes_B.csv")


def keep_windows(windows: tuple[ConfigSamples, ConfigSamples], out: Path | None) -> Path:
    """A's and B's fresh windows written (atomically) under ``out``, else into a new folder under
    runs/compare/; the folder."""
    import time

    from profiler.fsutil import write_text_atomic
    from profiler.runs.samples import processes_text

    folder = out if out is not None else Path("runs") / "compare" / time.strftime("%Y%m%d-%H%M%S")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, side in zip(KEPT, windows, strict=True):
            write_text_atomic(folder / name, processes_text(side))
    except OSError as error:
        raise UserError(
            f"the windows could not be kept in {folder}: {error.strerror or error}"
        ) from None
    return folder


def kept_windows(folder: Path) -> tuple[ConfigSamples, ConfigSamples]:
    """A's and B's windows from a folder keep_windows wrote (read as untrusted files)."""
    from profiler.runs.samples import read_samples

    found = []
    for name in KEPT:
        path = folder / name
        if not path.is_file():
            raise UserError(f"--samples {folder}: no {name} there (compare --processes keeps it)")
        side = read_samples(path)
        if not len(side):
            raise UserError(f"--samples {folder}: {name} holds no window")
        found.append(side)
    return found[0], found[1]


def fresh_windows(
    both: Comparison,
    processes: int | None,
    target_noise: float | None,
    budget_s: float | None,
    say: Say,
    *,
    trust_model: bool = False,
    warn: Say,
) -> tuple[ConfigSamples, ConfigSamples]:
    """New windows of A's and B's configs, interleaved in fresh processes (A B, B A ...). A
    package.module:function model is imported only from the file its run recorded, or with
    ``trust_model`` (profiler.runs.model_source)."""
    from profiler.analysis import sequential
    from profiler.analysis.headline import machine_noise
    from profiler.runs import model_source
    from profiler.runs.samples import ConfigSamples, config_of
    from profiler.runs.workloads import workload
    from profiler.sweep import rounds
    from profiler.sweep.plan import DEFAULT_PROCESSES, check_sampling

    results = _recorded_results(both)
    # the side whose windows cannot be sampled, if one cannot, is the one checked
    sides = sorted({r.workload for r in results.values()}, key=lambda w: (workload(w).sampled, w))
    count = check_sampling(
        processes if processes is not None else DEFAULT_PROCESSES,
        target_noise,
        budget_s,
        "local",
        None,
        sides[0],
    )
    checked = _check_models(results, trust_model, say, warn)
    from profiler.commands import loading_line

    if line := loading_line("to check that both configs can run here"):
        say(line)
    here = runnable_here(both, results)
    cells = {
        label: rounds.window_config(config_of(r), r.timing.iters, r.timing.warmup_iters)
        for label, r in results.items()
    }
    looks = target_noise is None and count > sequential.FIRST_LOOK
    say(
        f"timing A and B again: {'up to ' if looks else ''}{count} fresh "
        f"process{'es' if count > 1 else ''} each, interleaved"
        + (f", more until ±{units.plain(target_noise)} %" if target_noise else "")
        + (" (sequential: they stop once B against A is decided)" if looks else "")
        + f"; here, on {here}"
    )
    with model_source.handed_on(checked):  # the processes compile what was checked
        sampled = rounds.sample(
            cells,
            {},
            count,
            say=say,
            target_noise=None if target_noise is None else target_noise / 100,
            budget_s=budget_s,
            # sequential rounds (profiler.analysis.sequential): they stop once B against A is
            # decided at an interim look
            comparisons=None if target_noise is not None else [("A", "B")],
            machine=machine_noise(*results.values()),  # the looks pair at this machine's rho
        )
    if sampled.errors:
        label, why = next(iter(sampled.errors.items()))
        raise UserError(f"--processes: {label} could not be timed again: {why}")
    return sampled.merged("A", ConfigSamples()), sampled.merged("B", ConfigSamples())


def _recorded_results(both: Comparison) -> dict[str, Any]:
    """A's and B's recorded runs, by label; a side without result.json is refused."""
    results = {}
    for label, side in (("A", both.a), ("B", both.b)):
        if side.result is None:
            raise UserError(
                f"--processes times the configs again: {label} "
                f"({side.path}) is a trace without the run's result.json"
            )
        results[label] = side.result
    return results


def _check_models(results: dict[str, Any], trust_model: bool, say: Say, warn: Say) -> list[Any]:
    """Which code the fresh processes will import: only the file each run recorded, or with
    ``trust_model`` (profiler.runs.model_source); the files checked, for those processes."""
    from profiler.runs import model_source
    from profiler.runs.samples import config_of

    checked = []
    for label, r in results.items():
        model = config_of(r).model
        checked.append(model_source.check(label, model, r.model_source, trust_model, say, warn))
    return checked


def runnable_here(both: Comparison, results: dict[str, Any]) -> str:
    """This machine's device in words, once both configs can be timed on it (profiler.collect
    .here, asked before any process starts); a config it cannot run is one line, as `run`
    says it. A side recorded on another GPU model is named with it."""
    from profiler.collect.here import elsewhere, refusal, this_machine
    from profiler.commands import loading_torch
    from profiler.runs.samples import config_of

    with loading_torch():
        here = this_machine()
    other = []
    for label, result in results.items():
        gpu = (result.environment.gpu or {}).get("name")
        why = refusal(config_of(result), result.device, gpu, here)
        folder = (both.a if label == "A" else both.b).run_folder
        if why is not None:
            raise UserError(f"cannot time {label} again here ({folder}): {why}")
        recorded = elsewhere(result.device, gpu, here)
        if recorded is not None:
            other.append(f"{label} was recorded on {recorded}")
    return here.words + (f" ({'; '.join(other)})" if other else "")


def write_csvs(result: Diff, out: Path) -> list[Path]:
    """The tables as CSVs in the folder ``out``; with ``out`` ending in .parquet, the kernel
    table (the big one, full names) as one Parquet file."""
    if out.suffix == ".parquet":
        return [write_table(out, result.kernels)]
    faster, slower = result.top_changes(0)
    changes = pd.concat(
        [faster.assign(direction="faster in B"), slower.assign(direction="slower in B")],
        ignore_index=True,
    )
    return write_tables(
        out,
        {
            "overview": result.overview,
            "categories": result.categories,
            "kernels": result.kernels,
            "operators": result.operators,
            "cpu_operators": result.cpu_operators,
            "top_changes": changes,
        },
    )
