"""The commands that read what runs wrote: `summarize`, `tb-compat`, `tensorboard`, `plot` and
`report` (any Kineto trace, a run folder or a sweep folder).
"""

from __future__ import annotations

from pathlib import Path

import typer

from profiler.cli.guard import exit_with, user_errors
from profiler.cli.output import Output
from profiler.commands.summarize import VIEWS as VIEW_NAMES, View

VIEW_HELP = f"Which tables to print: {', '.join(VIEW_NAMES)}."


@user_errors
def summarize(
    target: str = typer.Argument(
        ...,
        help="A trace (.json / .json.gz), a run folder under runs/ or tb_logs/, a folder "
        "of traces, or a run name such as pytorch_fp32_bs8.",
    ),
    view: View = typer.Option("all", "--view", metavar="<view>", help=VIEW_HELP),
    top: int = typer.Option(
        20,
        "--top",
        help="Rows per table (0 = all); a longer step table "
        "shows its slowest and fastest steps and their distribution.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Also write CSV, JSON and Markdown here."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    ncu: str | None = typer.Option(
        None,
        "--ncu",
        help="Nsight Compute CSV (`ncu --csv --page raw`) or a run folder with "
        "ncu.csv: adds hardware Tensor Core and occupancy columns and flags kernels where the "
        "name rules disagree. A run folder's ncu.csv is picked up without it.",
    ),
    breakdown: str = typer.Option(
        "tool",
        "--breakdown",
        help="Whose step-breakdown definitions: 'tool' (this tool's: "
        "python_function and user_annotation spans are CPU exec, communication kernels by "
        "name) or 'plugin' (the TensorBoard plugin 0.4.3's, as it reads the tb-compat copy).",
    ),
) -> None:
    """Kernel, Tensor Core, occupancy and step-time tables from any PyTorch profiler (Kineto) trace.

    Example: [b]python profile.py summarize runs/pytorch_fp16_bs32 --view kernels --top 10[/b]
    """
    from profiler.commands.summarize import run as summarize_command

    summarize_command(
        target,
        view=view,
        top=top,
        out=out,
        sink=Output(json=json_out),
        ncu=ncu,
        breakdown=breakdown,
    )


@user_errors
def tb_compat_command(
    target: str = typer.Argument(
        ..., help="A trace, a tb_logs/<run>/ or runs/<run>/ folder, or a run name."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Folder for the copies (default: tb_logs/<run>_tbcompat/ beside the run's folder).",
    ),
) -> None:
    """Write a copy of a trace that the TensorBoard plugin (torch-tb-profiler 0.4.3) reads right.

    The plugin drops cuda_runtime and cuda_driver events (Runtime share 0, kernels not linked to
    operators) and reads GPU-side copies of record_function spans as CPU spans (GPU-side
    ProfilerStep#N copies become extra steps). The copy renames those categories; nothing else
    changes. It goes to its own folder, which TensorBoard shows as its own run.
    """
    from profiler.commands import tools

    tools.tb_compat(target, out, Output())


@user_errors
def tensorboard(
    logdir: Path = typer.Option(Path("tb_logs"), "--logdir", help="Folder of runs (tb_logs/)."),
    port: int | None = typer.Option(None, "--port", help="Port (default: a free one)."),
    bind_all: bool = typer.Option(
        False, "--bind-all", help="Serve on all network interfaces (default: 127.0.0.1 only)."
    ),
) -> None:
    """Start TensorBoard with the PyTorch profiler plugin and print its URL; Ctrl-C stops it.

    Example: [b]python profile.py tensorboard --logdir tb_logs[/b]
    """
    from profiler.commands import tools

    exit_with(tools.tensorboard(logdir, port, bind_all, Output()))


@user_errors
def plot(
    target: str = typer.Argument(
        ...,
        help="A sweep folder (runs/<sweep>, or just <sweep>), or a run: run name, "
        "<sweep>/<cell>, run folder or trace file.",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Folder for the PNGs (default: plots/ inside the sweep or run folder)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the written files as JSON."),
) -> None:
    """PNG plots (matplotlib, no display needed).

    A sweep gives latency.png (p50 per backend vs batch size, p90/p99 marks), speedup.png (vs
    the baseline, per batch size), throughput.png, categories.png (kernel time per step by
    category, per cell) and roofline.png (cells that counted their FLOPs). A run gives
    <run>_categories.png.

    Examples:

    [b]python profile.py plot runs/sweep_resnet50[/b]

    [b]python profile.py plot sweep_resnet50/ttrt_fp16_bs8 --out docs/img[/b]
    """
    from profiler.commands.plot import plot_and_list

    plot_and_list(target, out, Output(json=json_out))


@user_errors
def report(
    target: str = typer.Argument(
        ...,
        help="A run (name, <sweep>/<cell>, folder or trace) or a "
        "sweep folder (runs/<sweep> or <sweep>).",
    ),
    target_b: str | None = typer.Argument(
        None, help="A second run: the report compares TARGET (A) with it (B)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="HTML file to write (default: "
        "runs/report_<run>.html, runs/report_<a>_vs_<b>.html, or "
        "<sweep>/report.html).",
    ),
    flops: Path | None = typer.Option(
        None,
        "--flops",
        help="FLOPs/bytes table from scripts/roofline_inputs.py, for runs "
        "whose result.json has no roofline_inputs (matched by model, precision, batch size).",
    ),
    peaks_dir: Path | None = typer.Option(
        None, "--peaks-dir", help="Folder of `peaks` measurements (default: the peaks cache)."
    ),
    only_decided: bool = typer.Option(
        False,
        "--only-decided",
        help="A sweep folder only: leave out of the page's table the "
        "cells undecided on both figures (counted under it); the figures and advice keep every "
        "cell.",
    ),
) -> None:
    """One self-contained HTML file (no network needed) of a run, two runs or a sweep.

    A run gives its headline timings, noise, roofline, advice, kernel categories, top kernels
    and TensorRT layers; two runs add a kernel diff; a sweep gives the table, plots, roofline
    and advice of every cell.

    Example: [b]python profile.py report pytorch_fp16_bs8 ttrt_fp16_bs8[/b]
    """
    from profiler.commands.report import run as report_command

    sink = Output()
    path = report_command(
        target, target_b, out, peaks_dir, flops, sink=sink, only_decided=only_decided
    )
    sink.line(f"wrote {path}")
