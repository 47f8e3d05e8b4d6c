"""The commands that profile one run: `run`, and `nsys` and `ncu`, which run it under Nsight
Systems or Nsight Compute. Each takes every run option (profiler.cli.options.run_options).

Heavy modules (torch, the harness) are imported inside the commands that need them, so
``--help`` starts fast and works on machines without torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from profiler.cli.guard import command_name, exit_with, user_errors
from profiler.cli.options import COMMIT_OPTION, HISTORY_OPTION, run_options
from profiler.cli.output import Output
from profiler.runs.config import PANEL_OUTPUT

# run options that ncu and nsys set themselves (the run under them needs these values); ncu
# turns cuDNN's autotuner off in both of its runs: the autotuner times candidate kernels, ncu
# serializes and replays them, so under ncu it picked other kernels than in the run whose trace
# the measurements are joined to (ResNet50 eager FP16 on an H100: 52 % of kernel time joined)
NCU_SETS = ("capture", "cudnn_benchmark")
NSYS_SETS = ("capture", "repeat")


@user_errors
@run_options()
def run(
    options: dict[str, Any],
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print the result as JSON on stdout (progress stays on stderr).",
        rich_help_panel=PANEL_OUTPUT,
    ),
    tb_compat: bool = typer.Option(
        False,
        "--tb-compat",
        help="Also write a copy of the trace that torch-tb-profiler reads "
        "right, in tb_logs/<run>_tbcompat/ (see `tb-compat --help`).",
        rich_help_panel=PANEL_OUTPUT,
    ),
    history: Path | None = HISTORY_OPTION,
    commit: str | None = COMMIT_OPTION,
) -> None:
    """Profile one model x backend x batch size: a trace in tb_logs/<backend>_bs<N>/, results in runs/<backend>_bs<N>/.

    Example: [b]python profile.py run --backend pytorch_fp16 --bs 32[/b]
    """
    from profiler.commands.history import add_after, checked_commit
    from profiler.commands.run import run as run_command

    if commit is not None:  # (refused before the run, not after it)
        checked_commit(commit)
    sink = Output(json=json_out)
    done = run_command(options, sink, tb_compat=tb_compat, command=command_name())
    add_after(history, [done], commit, sink)


@user_errors
@run_options(skip=NSYS_SETS, defaults={"name": "nsys"})
def nsys(options: dict[str, Any]) -> None:
    """Run the harness under Nsight Systems over the active profiled steps; parse nsys stats.

    The capture range is cudaProfilerApi (torch.cuda.profiler.start/stop around the active
    steps); `nsys stats` kernel and NVTX summaries are parsed where it works. Every `run`
    option is passed on to that run, but --capture (cuda-profiler-api under nsys) and --repeat
    (1: the capture range is the first cycle).

    nsys is found on PATH, through $NSYS, or in the usual install folders.
    """
    from profiler.commands import tools

    exit_with(tools.nsys(options, Output()))


@user_errors
@run_options(skip=NCU_SETS)
def ncu(
    options: dict[str, Any],
    top: int = typer.Option(
        0,
        "--top",
        help="Profile the K kernels with the most time in the "
        "trace (0 = every kernel of the step, the default).",
    ),
    step: int | None = typer.Option(
        None,
        help="Profiled step to measure (default: the "
        "first active one, step 2 with the default schedule).",
    ),
    launch_count: int = typer.Option(
        500,
        help="At most this many kernel launches profiled (each costs about a quarter of a second).",
    ),
    reuse: bool = typer.Option(
        False,
        "--reuse",
        help="Take the kernel table from the run "
        "folder's existing trace instead of running once without ncu.",
    ),
    chip: str | None = typer.Option(
        None, help="Chip for `ncu --query-metrics` (e.g. gh100; default: the GPU present)."
    ),
) -> None:
    """Nsight Compute on the kernels of one profiled step (Tensor Cores, occupancy).

    Hardware tensor-pipe activity and occupancy beside the kernel table, and where the name
    rules disagree. Every `run` option is passed on to both runs (the run under ncu is
    captured with cuda-profiler-api, and times only 10 iterations after 3 warm-up ones); both
    use cuDNN's heuristics rather than its autotuner, so that they run the same kernels.

    Writes ncu.csv (and ncu.json, ncu.ncu-rep, ncu.log) into runs/<run>/, where `summarize`
    finds it. ncu is found on PATH, through $NCU, or in the usual install folders.
    """
    from profiler.commands import tools

    exit_with(tools.ncu(options, top, step, launch_count, reuse, chip, Output()))
