"""The commands around outside tools: `backends`, `tb-compat`, `tensorboard`, `nsys`, `ncu`.
Each returns the exit status."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.commands.sink import Sink
from profiler.errors import UserError
from profiler.notices import Say

if TYPE_CHECKING:
    from profiler.collect.backends.base import Backend


def backends(sink: Sink) -> int:
    """``sink``: profiler.cli.output.Output, where the table or the --json document go."""
    from profiler.collect.backends import all_backends, cuda_available
    from profiler.commands import NO_TORCH, loading_line, torch_installed
    from profiler.report import run_view
    from profiler.runs.backends import generation_words

    torch_here = torch_installed()
    line = loading_line("to ask it for a GPU") if torch_here else None
    if line and not sink.json:
        sink.note(line)
    cuda = torch_here and cuda_available()
    if torch_here and not sink.json:
        sink.note("checking each backend's libraries (TensorRT, ONNX Runtime, torchao) ...")

    def why_not(backend: Backend) -> str | None:
        return backend.unavailable_reason(cuda) if torch_here else NO_TORCH

    rows = [
        {
            "name": b.name,
            "family": b.family,
            "precision": b.precision,
            "available": why_not(b) is None,
            "why_not": why_not(b),
            "description": b.description,
            "generation": generation_words(b.family_facts),
        }
        for b in all_backends()
    ]
    if sink.json:
        sink.document("backends", {"backends": rows})
    else:
        run_view.print_backends(rows, cuda, sink.console)
    return 0


def tb_compat(target: str, out: Path | None, sink: Sink) -> int:
    """The copies of a run's (or a folder's) traces replace its ``_tbcompat`` folder whole; one
    trace file, or any --out folder, gets its copy beside what is there."""
    from profiler.runs.command_targets import trace_set
    from profiler.runs.layout import compat_dir_for
    from profiler.trace.tb_compat import write_compat_copy, write_compat_folder

    found = trace_set(target)
    if out is not None or found.one_file:
        results = [
            write_compat_copy(trace, compat_dir_for(trace) if out is None else out, unchanged=False)
            for trace in found.traces
        ]
    else:
        folders: dict[Path, list[Path]] = {}
        for trace in found.traces:
            folders.setdefault(compat_dir_for(trace, of_run=found.of_run), []).append(trace)
        results = [
            done
            for folder, traces in folders.items()
            for done in write_compat_folder(traces, folder, unchanged=False)
        ]
    for result in results:
        if result.written is None:
            sink.line(
                f"{result.source}  (nothing to change: the plugin reads it as it is; "
                "no copy written)"
            )
        else:
            changes = (
                ", ".join(f"{k}: {v}" for k, v in result.renamed.items()) or "nothing to change"
            )
            sink.line(f"{result.written}  ({changes})")
    return 0


def tensorboard(logdir: Path, port: int | None, bind_all: bool, sink: Sink) -> int:
    """0 after Ctrl-C; 128 + the signal's number after SIGTERM or SIGHUP."""
    from profiler.fsutil import clean_tree
    from profiler.tools import tensorboard as tb

    sink.warn(
        "the profiler plugin's page loads Google Charts and cdnjs, so it needs the "
        "internet in the browser (offline it stays a spinner); for a file that opens "
        "anywhere use `profile.py report RUN [RUN_B]`"
    )
    clean_tree(logdir)  # staging folders of killed runs would be listed as runs
    served = tb.serve(logdir, port=port, bind_all=bind_all, echo=sink.line)
    if served.server_status:
        raise UserError(
            f"TensorBoard exited with status {served.server_status} (its output: {served.log})"
        )
    return served.exit_code


def nsys(options: dict[str, Any], sink: Sink) -> int:
    from profiler import signals
    from profiler.tools import nsys as nsys_tool

    # Ctrl-C, SIGTERM, SIGHUP: nsys and the run under it stopped, one line, 130/143/129
    with signals.interruptible("nsys", "no report was kept"):
        result = nsys_tool.run(options, echo=sink.note)
    _print_nsys(result, sink.line)
    return 1 if result.get("stats_error") else 0


def _print_nsys(result: dict[str, Any], echo: Say) -> None:
    from profiler.report.fmt import number

    if result.get("stats_error"):
        echo(f"nsys: {result['stats_error']}")
    if result.get("report"):
        echo(f"report: {result['report']}")
    if result.get("qdstrm"):
        echo(f"qdstrm: {result['qdstrm']}")
    if "kernels" in result:
        echo(
            f"{result['kernels']} kernels, {number(result['kernel_time_us'])} µs of "
            f"kernel time in the captured steps: runs/{result['run']}/nsys_kernels.csv"
        )
    echo(f"details: runs/{result['run']}/nsys.json")


def ncu(
    options: dict[str, Any],
    top: int,
    step: int | None,
    launch_count: int,
    reuse: bool,
    chip: str | None,
    sink: Sink,
) -> int:
    from profiler import signals
    from profiler.tools import ncu as ncu_tool

    # Ctrl-C, SIGTERM, SIGHUP: ncu and the run under it stopped, one line, 130/143/129
    with signals.interruptible("ncu", "no report was kept"):
        result = ncu_tool.run(
            options,
            top=top,
            step=step,
            launch_count=launch_count,
            reuse=reuse,
            chip=chip,
            echo=sink.note,
        )
    _print_ncu(result, top, sink)
    return 0


def _print_ncu(result: dict[str, Any], top: int, sink: Sink) -> None:
    from profiler.report.fmt import percent
    from profiler.report.hardware_view import print_hardware
    from profiler.trace.hardware import signature_key

    def short_name(name: str, width: int = 80) -> str:  # template arguments kept: they differ
        key = signature_key(name)
        return key if len(key) <= width else key[: width - 1] + "…"

    print_hardware(result["joined"], result["agreement"], top, sink.console)
    sink.line(f"metrics collected: {', '.join(result['metrics_collected']) or 'none'}")
    if result["metrics_skipped"]:
        sink.line(f"metrics not on this GPU/ncu: {', '.join(result['metrics_skipped'])}")
    missing, extra = result["top_kernels_not_profiled"], result.get("ncu_kernels_not_in_table", [])
    if missing:
        share = result["joined"].set_index("name")["share_pct"]
        sink.line(
            f"{len(missing)} of the top kernels were not seen under ncu (another cuDNN "
            f"algorithm, or past --launch-count): "
            + "; ".join(f"{short_name(n)} ({percent(share.get(n, 0))})" for n in missing[:5])
            + ("; …" if len(missing) > 5 else "")
        )
    if extra:
        sink.line(
            f"{len(extra)} kernel(s) ran under ncu that the trace's table does not hold "
            "(another algorithm in that process): "
            + "; ".join(short_name(n) for n in extra[:5])
            + ("; …" if len(extra) > 5 else "")
        )
    sink.line(
        f"wrote ncu.csv, ncu.ncu-rep, ncu.json, ncu.log to runs/{result['run']}/ "
        "(`summarize` picks ncu.csv up from there)"
    )
