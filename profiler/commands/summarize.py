"""`summarize`: resolve the target, summarize it, join ncu measurements, print, export."""

from __future__ import annotations

import sys
from pathlib import Path

from profiler.errors import UserError
from profiler.runs.targets import resolve_target
from profiler.analysis.target import summarize_target

VIEWS = ("all", "overview", "kernels", "categories", "operators", "layers", "phases")


def run(target: str, view: str = "all", top: int = 20, out: Path | None = None,
        *, sink, ncu: str | None = None, breakdown: str = "tool") -> None:
    """``sink``: profiler.cli.output.Output, where the tables or the --json document go."""
    if view not in VIEWS:
        raise UserError(f"unknown --view {view!r}; choose one of: {', '.join(VIEWS)}")
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    resolved = resolve_target(target)
    if resolved.note:
        print(resolved.note, file=sys.stderr)
    if view == "layers":
        _layers(resolved, out, sink, top)
        return
    summary = summarize_target(resolved, breakdown)
    for warning in summary.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    headline = _headline(resolved, summary)
    joined = agreement = None
    ncu_path = _ncu_csv(target, ncu)
    if ncu_path is not None:
        from profiler.trace.hardware import agreement_share, hardware_join, read_ncu_csv

        print(f"Nsight Compute measurements: {ncu_path}", file=sys.stderr)
        joined = hardware_join(summary.kernels.table, read_ncu_csv(ncu_path))
        agreement = agreement_share(joined)
    if out is not None and out.suffix == ".parquet":
        from profiler.report.export import write_table

        print(f"wrote {write_table(out, summary.kernels.table)}", file=sys.stderr)
    elif out is not None:
        from profiler.fsutil import write_text_atomic
        from profiler.report.export import export

        written = export(summary, out, top=0)
        if joined is not None:
            from profiler.report.hardware_view import export_columns

            write_text_atomic(out / "hardware.csv", export_columns(joined).to_csv(index=False))
            written.append(out / "hardware.csv")
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    found = None
    if resolved.result_json is not None:
        from profiler.commands.report import insight_of

        found = insight_of(resolved, summary)
    if sink.json:
        data = summary.to_dict(top=top)
        if headline is not None:
            from profiler.trace.summary import _clean

            data = {"headline": _clean(headline), **data}
        if found is not None:
            from profiler.report.insight_view import to_dict

            data["insight"] = to_dict(found)
        if joined is not None:
            from profiler.trace.summary import _clean
            from profiler.report.hardware_view import export_columns

            rows = export_columns(joined[joined["rules_vs_hardware"] != "not profiled"])
            data["hardware"] = _clean({"ncu_csv": str(ncu_path), **agreement.to_dict(),
                                       "kernels": rows.to_dict(orient="records")})
        sink.document("summarize", data)
        return
    from profiler.report.tables import print_summary

    console = sink.console
    if headline is not None:
        from profiler.report.headline_view import print_headline

        print_headline(headline, console)
    print_summary(summary, view=view, top=top, console=console)
    if joined is not None and view in ("all", "kernels"):
        from profiler.report.hardware_view import print_hardware

        print_hardware(joined, agreement, top, console)
    if found is not None and view in ("all", "overview"):
        from profiler.report.insight_view import print_insight

        print_insight(found, console)


def _ncu_csv(target: str, ncu: str | None) -> Path | None:
    """--ncu (a CSV, or a run folder holding ncu.csv), else ncu.csv in the target's run folder."""
    from profiler.runs.layout import ncu_csv_of

    if ncu is None:
        return ncu_csv_of(target)
    found = ncu_csv_of(ncu)
    if found is None:
        raise UserError(f"--ncu {ncu}: not a CSV file, nor a run folder with ncu.csv")
    return found


def _headline(resolved, summary) -> dict | None:
    """The run's timed figures, noise, memory and config, when the target is a run folder."""
    if resolved.result is None:
        return None
    from profiler.analysis.headline import headline_data

    return headline_data(resolved.result, resolved.result_json, summary.overview.mean_step_us)


def engine_attributions(run_dir: Path | None, trace) -> list:
    """One trace.trt_layers.Attribution per engine of the run (its engine_layers_<i>.json)."""
    from profiler.runs.layout import engine_layer_files
    from profiler.trace.trt_layers import attribute, read_layers

    pairs = engine_layer_files(run_dir) if run_dir is not None else []
    if not pairs:
        raise UserError(f"no engine_layers_*.json in {run_dir or 'the target'}: the layers view "
                        "needs a TensorRT run folder (a ttrt_* run)")
    return [attribute(read_layers(layers, times), trace) for layers, times in pairs]


def layers_json(attributions: list) -> list[dict]:
    from profiler.trace.trt_layers import LAYER_COLUMNS

    return [{"method": a.method, "calls": a.calls, "engine_kernel_us": a.engine_kernel_us,
             "attributed_us": a.attributed_us, "coverage_pct": 100 * a.coverage,
             "layers": a.layers[LAYER_COLUMNS].to_dict(orient="records"),
             "not_attributed": a.not_attributed.to_dict(orient="records"),
             "outside_engine": a.outside_engine.to_dict(orient="records")}
            for a in attributions]


def _layers(resolved, out: Path | None, sink, top: int) -> None:
    """--view layers: the TensorRT layers of a run with the profiled kernels attributed."""
    from profiler.trace.load import load_trace
    from profiler.trace.summary import _clean
    from profiler.trace.trt_layers import LAYER_COLUMNS

    run_dir = resolved.result_json.parent if resolved.result_json is not None else None
    attributions = engine_attributions(run_dir, load_trace(resolved.path))
    if out is not None:
        from profiler.report.export import write_tables

        written = write_tables(out, {f"layers_{i}": a.layers[LAYER_COLUMNS]
                                     for i, a in enumerate(attributions)})
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if sink.json:
        sink.document("summarize-layers", _clean({"engines": layers_json(attributions)}))
        return
    from profiler.report.layers_view import print_layers

    print_layers(attributions, top, sink.console)
