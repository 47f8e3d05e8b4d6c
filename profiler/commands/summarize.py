"""`summarize`: a RunAnalysis of the target (summary, headline, ncu join, roofline and advice,
TensorRT layers), printed (the sections of profiler.report.sections.SUMMARIZE that the view
shows) or exported."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from profiler.commands.sink import Sink
from profiler.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

    from profiler.analysis.insight import Insight
    from profiler.analysis.run_analysis import RunAnalysis
    from profiler.trace.hardware import Agreement

View = Literal[
    "all",
    "overview",
    "kernels",
    "categories",
    "operators",
    "layers",
    "phases",
    "definitions",
    "snapshot",
    "modules",
    "memory",
]
VIEWS: tuple[View, ...] = get_args(View)


def run(
    target: str,
    view: str = "all",
    top: int = 20,
    out: Path | None = None,
    *,
    sink: Sink,
    ncu: str | None = None,
    breakdown: str = "tool",
) -> None:
    """``sink``: profiler.cli.output.Output, where the tables or the --json document go."""
    _check_options(view, top)
    _refuse_sweep(target)
    from profiler.analysis.rank_run import rank_folder

    if rank_folder(target) is not None:  # one trace per rank of a distributed run
        _ranks(target, view, out, sink, top)
        return
    ncu_path = _ncu_csv(ncu)
    # here, not at the top: the CLI imports VIEWS, and --help or a usage error needs no pandas
    from profiler.analysis.run_analysis import RunAnalysis

    run = RunAnalysis(target, ncu=ncu_path, breakdown=breakdown)
    if run.note:
        sink.note(run.note)
    if view == "layers":
        _layers(run, out, sink, top)
    elif view == "modules":
        _modules(run, out, sink, top)
    elif view == "memory":
        _memory(run, out, sink)
    elif view == "snapshot":
        _snapshot(run, out, sink, top)
    else:
        _run_view(run, view, out, sink, top)
    if sink.json:  # the view's document is written
        return
    from profiler.report.sections import Context, print_sections, summarize_rows

    print_sections(summarize_rows(view), Context(run, sink.console, top=top))


#: the --view choices of `summarize` that a folder of rank traces shows (all of its figures)
RANK_VIEWS = ("all", "overview")


def _ranks(target: str, view: str, out: Path | None, sink: Sink, top: int) -> None:
    """A folder of rank traces (profiler.analysis.rank_run.RankRun): each rank's figures, the
    straggler and the notes (SUMMARIZE_RANKS), written with --out, printed with --json."""
    if view not in RANK_VIEWS:
        raise UserError(
            f"{target} is a folder of rank traces: --view {view} is a view of one trace; "
            "its view is all (or overview): each rank's figures, the straggler (summarize "
            "one rank's trace for its tables)"
        )
    from profiler.analysis.rank_run import RankRun

    ranks = RankRun(target)
    sink.detail("traces: " + ", ".join(f"rank {i.rank} {p}" for p, i in ranks.traces))
    if out is not None:
        from profiler.report.ranks_view import export_ranks

        sink.note(f"wrote {len(export_ranks(ranks.figures, out))} files to {out}")
    if sink.json:
        from profiler.analysis.records import plain

        sink.document("summarize-ranks", plain(ranks.figures))
        return
    from profiler.report.sections import SUMMARIZE_RANKS, Context, print_sections

    print_sections(SUMMARIZE_RANKS, Context(ranks, sink.console, top=top))


def _run_view(run: RunAnalysis, view: str, out: Path | None, sink: Sink, top: int) -> None:
    """What every view but layers says on stderr, writes with --out and prints with --json."""
    summary = run.summary
    if view == "phases" and summary.phases is None:
        raise UserError(
            f"no generation phases in {run.run_folder or summary.trace_path}: the "
            "phases view needs a --workload generate run (prefill and decode spans)"
        )
    result_json = run.result_json or "none (a bare trace: no timed window)"
    sink.detail(f"trace: {summary.trace_path}; result: {result_json}")
    for warning in summary.warnings:
        sink.warn(warning)
    joined = agreement = None
    if run.ncu_csv is not None:
        sink.note(f"Nsight Compute measurements: {run.ncu_csv}")
        joined, agreement = run.hardware, run.agreement
    if out is not None:
        _write_out(run, out, joined, sink)
    if sink.json:
        found = run.insight if run.result_json is not None else None
        sink.document("summarize", _document(run, top, found, joined, agreement))


def _write_out(run: RunAnalysis, out: Path, joined: pd.DataFrame | None, sink: Sink) -> None:
    """The kernel table as Parquet (``out`` ends in .parquet), else the tables as files in the
    folder ``out``."""
    summary = run.summary
    if out.suffix == ".parquet":
        from profiler.report.export import write_table

        sink.note(f"wrote {write_table(out, summary.kernels.table)}")
        return
    from profiler.fsutil import write_text_atomic
    from profiler.report.export import export

    written = export(
        summary,
        out,
        top=0,
        headline=run.headline,
        insight=run.insight if run.result_json is not None else None,
        more=_snapshot_markdown(run) + _modules_markdown(run) + _memory_markdown(run),
    )
    if joined is not None:
        from profiler.report.hardware_view import export_columns

        write_text_atomic(out / "hardware.csv", export_columns(joined).to_csv(index=False))
        written.append(out / "hardware.csv")
    sink.note(f"wrote {len(written)} files to {out}")


def _document(
    run: RunAnalysis,
    top: int,
    found: Insight | None,
    joined: pd.DataFrame | None,
    agreement: Agreement | None,
) -> dict[str, Any]:
    """The --json document of summarize."""
    summary, headline = run.summary, run.headline
    data = summary.to_dict(top=top)
    # the lists --top cuts, with how many rows each had before the cut
    data["totals"] = {
        "kernels": len(summary.kernels.table),
        "operators": len(summary.overview.operators),
    }
    if headline is not None:
        from profiler.analysis.records import plain
        from profiler.trace.summary import json_safe

        data = {"headline": json_safe(plain(headline)), **data}
    if run.phase_rooflines and "phases" in data:
        from profiler.analysis.records import plain

        data["phases"]["rooflines"] = [
            {"phase": phase, "at": at, "roofline": plain(r.record())}
            for phase, at, r in run.phase_rooflines
        ]
    if found is not None:
        from profiler.report.insight_view import to_dict

        data["insight"] = to_dict(found)
    if joined is not None and agreement is not None:  # both from ncu.csv
        from profiler.report.hardware_view import export_columns
        from profiler.trace.summary import json_safe

        rows = export_columns(joined[joined["rules_vs_hardware"] != "not profiled"])
        data["hardware"] = json_safe(
            {
                "ncu_csv": str(run.ncu_csv),
                **agreement.to_dict(),
                "kernels": rows.to_dict(orient="records"),
            }
        )
    return data


def _memory(run: RunAnalysis, out: Path | None, sink: Sink) -> None:
    """--view memory: memory over time from the trace's [memory] events
    (profiler.trace.memory), written with --out (CSV), printed with --json; a trace without
    them refused in one line."""
    from profiler.trace.memory import NOT_RECORDED

    view = run.memory
    if view is None:
        raise UserError(NOT_RECORDED.format(path=run.path))
    if out is not None:
        from profiler.report.export import write_tables
        from profiler.report.memory_view import memory_tables

        sink.note(f"wrote {len(write_tables(out, memory_tables(view)))} files to {out}")
    if sink.json:
        from profiler.analysis.records import plain

        sink.document("summarize-memory", plain(view))


def _memory_markdown(run: RunAnalysis) -> list[str]:
    """summary.md's memory section, for a run recorded with --profile-memory."""
    from profiler.report.memory_view import memory_markdown, recorded_memory

    figure = recorded_memory(run)
    return memory_markdown(figure) if figure is not None else []


def _check_options(view: str, top: int) -> None:
    """Refuse, in one line, a view that does not exist or a negative --top."""
    if view not in VIEWS:
        raise UserError(f"unknown --view {view!r}; choose one of: {', '.join(VIEWS)}")
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")


def _refuse_sweep(target: str) -> None:
    """A sweep folder holds one run per cell: say so, and what shows it."""
    from profiler.runs.manifest import find_sweep, read_manifest

    sweep = find_sweep(target)
    if sweep is None:
        return
    manifest = read_manifest(sweep)
    cells = sorted(manifest.cells) if manifest is not None else []
    example = Path(target) / (cells[0] if cells else "<cell>")
    table = sweep / "benchmark.md"
    raise UserError(
        f"{target} is a sweep folder: summarize one of its cells (e.g. {example}), "
        f"or see the whole sweep with `report {target}`"
        + (f" (its table: {table})" if table.is_file() else "")
    )


def _ncu_csv(ncu: str | None) -> Path | None:
    """--ncu: a CSV, or a run folder holding ncu.csv (None: the target's own, if any)."""
    from profiler.runs.layout import ncu_csv_of

    if ncu is None:
        return None
    found = ncu_csv_of(ncu)
    if found is None:
        raise UserError(f"--ncu {ncu}: not a CSV file, nor a run folder with ncu.csv")
    return found


def layers_json(attributions: list[Any]) -> list[dict[str, Any]]:
    from profiler.trace.trt_layers import LAYER_COLUMNS

    return [
        {
            "method": a.method,
            "calls": a.calls,
            "engine_kernel_us": a.engine_kernel_us,
            "attributed_us": a.attributed_us,
            "coverage_pct": 100 * a.coverage,
            "layers": a.layers[LAYER_COLUMNS].to_dict(orient="records"),
            "not_attributed": a.not_attributed.to_dict(orient="records"),
            "outside_engine": a.outside_engine.to_dict(orient="records"),
        }
        for a in attributions
    ]


def _layers(run: RunAnalysis, out: Path | None, sink: Sink, top: int) -> None:
    """--view layers: the TensorRT layers of a run with the profiled kernels attributed (a run
    without them refused), written with --out and printed with --json."""
    from profiler.analysis.run_analysis import require_layers
    from profiler.trace.summary import json_safe
    from profiler.trace.trt_layers import LAYER_COLUMNS

    attributions = require_layers(run)
    if out is not None:
        from profiler.report.export import write_tables

        written = write_tables(
            out, {f"layers_{i}": a.layers[LAYER_COLUMNS] for i, a in enumerate(attributions)}
        )
        sink.note(f"wrote {len(written)} files to {out}")
    if sink.json:
        sink.document("summarize-layers", json_safe({"engines": layers_json(attributions)}))


def _snapshot_markdown(run: RunAnalysis) -> list[str]:
    """summary.md's memory-snapshot section, for a run recorded with --memory-history."""
    figure = run.memory_snapshot
    if figure is None:
        return []
    from profiler.report.snapshot_view import snapshot_markdown

    return snapshot_markdown(figure, top=20)


def _snapshot(run: RunAnalysis, out: Path | None, sink: Sink, top: int) -> None:
    """--view snapshot: run --memory-history's snapshot replayed (a run recorded without it
    refused; a CPU run's says in one line why it has none), written with --out and printed with
    --json."""
    from profiler.analysis.memory_snapshot import NOT_RECORDED

    figure = run.memory_snapshot
    if figure is None:
        raise UserError(NOT_RECORDED.format(target=run.run_folder or run.path))
    if out is not None:
        from profiler.report.snapshot_view import write_snapshot

        written = write_snapshot(figure, out, top)
        sink.note(f"wrote {len(written)} files to {out}")
    if sink.json:
        from profiler.report.snapshot_view import snapshot_document

        sink.document("summarize-snapshot", snapshot_document(figure, top))


def _modules(run: RunAnalysis, out: Path | None, sink: Sink, top: int) -> None:
    """--view modules: time per nn.Module of a trace recorded with --with-stack (a trace
    without nn.Module events refused in one line), written with --out and printed with --json."""
    from profiler.trace.modules import NEEDS_STACKS

    view = run.modules
    if view is None:
        raise UserError(f"{run.run_folder or run.path}: {NEEDS_STACKS}")
    if out is not None:
        from profiler.report.modules_view import write_modules

        written = write_modules(view, out, top)
        sink.note(f"wrote {len(written)} files to {out}")
    if sink.json:
        from profiler.trace.summary import json_safe

        sink.document("summarize-modules", json_safe({"trace": str(run.path), **view.to_dict()}))


def _modules_markdown(run: RunAnalysis) -> list[str]:
    """summary.md's module sections, for a trace recorded with --with-stack."""
    view = run.modules
    if view is None:
        return []
    from profiler.report.modules_view import modules_markdown

    return modules_markdown(view, top=20)
