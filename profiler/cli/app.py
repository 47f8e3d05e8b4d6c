"""Command line: parses arguments and hands them on; no logic lives here.

Heavy modules (torch, the harness) are imported inside the commands that need them, so
``summarize`` and ``--help`` start fast and work on machines without torch.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import typing
from pathlib import Path

import typer

from profiler import notices, signals
from profiler.cli.options import (
    HelpCommand,
    OneLineErrors,
    OneLineUsage,
    fresh_process_option,
    run_options,
)
from profiler.cli.output import VERBOSITY, Output
from profiler.commands import parse_budget
from profiler.commands.summarize import VIEWS as VIEW_NAMES, View
from profiler.errors import Interrupted, UserError, os_error_line
from profiler.runs.config import PANEL_OUTPUT
from profiler.runs.manifest import SWEEP_SETS

VIEW_HELP = f"Which tables to print: {', '.join(VIEW_NAMES)}."

# run options that ncu and nsys set themselves (the run under them needs these values); ncu
# turns cuDNN's autotuner off in both of its runs: the autotuner times candidate kernels, ncu
# serializes and replays them, so under ncu it picked other kernels than in the run whose trace
# the measurements are joined to (ResNet50 eager FP16 on an H100: 52 % of kernel time joined)
NCU_SETS = ("capture", "cudnn_benchmark")
NSYS_SETS = ("capture", "repeat")

app = typer.Typer(
    cls=OneLineUsage,
    add_completion=True,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Kernel-level profiling for GPU inference.\n\n"
    "[b]run[/b] profiles one model x backend x batch size and writes a TensorBoard trace under "
    "tb_logs/ and timed results under runs/. [b]summarize[/b] turns any PyTorch profiler (Kineto) "
    "trace into kernel, Tensor Core, occupancy and step-time tables. [b]sweep[/b] runs a backend x "
    "batch-size matrix with speedups; [b]compare[/b] diffs two runs kernel by kernel; [b]plot[/b] "
    "draws a sweep or a run.\n\nTables fit the terminal (narrow ones leave out minor columns); "
    "output to a pipe or a file is $COLUMNS wide when set, else 160.",
)


#: -q/--quiet and -v/--verbose, taken by every command (and before it: `profile.py -q run ...`)
QUIET_HELP = "No progress or notes on stderr; warnings, errors and the results stay."
VERBOSE_HELP = (
    "More on stderr: the files each target resolved to, a run's full config, and "
    "the traceback under an error line."
)


def _print_version(value: bool) -> None:
    if value:
        from profiler import package_version

        typer.echo(f"{prog_name()} (infer-profiler) {package_version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    verbose: bool = typer.Option(False, "-v", "--verbose", help=VERBOSE_HELP),
) -> None:
    """Kernel-level profiling for GPU inference."""
    try:
        _set_verbosity(quiet, verbose)
    except UserError as error:
        _say(f"error: {error}")
        raise typer.Exit(2) from None


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def _say(line: str) -> None:
    """One line on stderr: a newline or another control character in it (from an argument or
    a file name) is written escaped, so nothing can forge a second ``error:`` line."""
    line = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], line)
    try:
        typer.echo(line, err=True)
    except OSError:  # stderr gone (a closed terminal sent SIGHUP): the exit status remains
        pass


def _set_verbosity(quiet: bool, verbose: bool) -> None:
    if quiet and verbose:
        raise UserError("-q/--quiet and -v/--verbose exclude each other")
    VERBOSITY["level"] = -1 if quiet else 1 if verbose else 0


def user_errors(command):
    """Turn a UserError into one line on stderr and exit status 2 (with -v, the traceback
    after it); Ctrl-C into status 130. The command also takes -q/--quiet and -v/--verbose
    (profiler.cli.output.Output reads them)."""

    @functools.wraps(command)
    def wrapper(*args, quiet: bool = False, verbose: bool = False, **kwargs):
        try:
            if quiet or verbose:  # else as given before the command (main_options)
                _set_verbosity(quiet, verbose)
            with notices.told(_say, quiet=lambda: VERBOSITY["level"] < 0):
                return _file_errors_as_user_errors(command, args, kwargs)
        except UserError as error:
            _say(f"error: {error}")
            if VERBOSITY["level"] > 0:
                _traceback(error)
            raise typer.Exit(2) from None
        except BrokenPipeError:  # `| head`: the reader has what it wanted, nothing to say
            _stdout_to_devnull()
            raise typer.Exit(0) from None
        except Interrupted as stop:
            _say(f"interrupted: {stop}")
            raise typer.Exit(stop.exit_code) from None
        except KeyboardInterrupt as stop:  # Ctrl-C; SIGTERM and SIGHUP inside as_interrupts()
            by = "" if signals.describe(stop) == "Ctrl-C" else f" by {signals.describe(stop)}"
            if not signals.quiet_stop():  # else the parent that stopped us says it
                _say(f"interrupted{by}: nothing was written for the unfinished run")
            raise typer.Exit(signals.exit_code(stop)) from None
        finally:  # the next command called in this process starts from the default
            VERBOSITY["level"] = 0

    signature = inspect.signature(command)
    added = [
        inspect.Parameter(
            "quiet",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
        ),
        inspect.Parameter(
            "verbose",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(False, "-v", "--verbose", help=VERBOSE_HELP),
        ),
    ]
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *added])
    wrapper.__annotations__ = {**typing.get_type_hints(command), "quiet": bool, "verbose": bool}
    del wrapper.__wrapped__  # typer reads __signature__, not the undecorated command
    return wrapper


def _stdout_to_devnull() -> None:
    """After the reader of stdout left: what is still buffered goes nowhere, so that exiting
    (which flushes stdout) raises no second BrokenPipeError."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor (a test's)
        pass


def _traceback(error: BaseException) -> None:
    """The traceback of a user error and of what it came from (-v: for a bug report)."""
    import traceback

    error.__suppress_context__ = False
    try:
        traceback.print_exception(error, file=sys.stderr)
    except OSError:
        pass


def _file_errors_as_user_errors(command, args, kwargs):
    """A file that cannot be written or read (a read-only or occupied output folder, a full
    disk, a name too long) is the user's environment, not a bug: one line, like a UserError."""
    try:
        return command(*args, **kwargs)
    except BrokenPipeError:  # `| head`: the reader is gone, nothing to say
        raise
    except OSError as error:  # as the shell says it: "<file>: <reason>"
        raise UserError(os_error_line(error)) from None


def _tolerant_output() -> None:
    """Characters the terminal's encoding cannot show (µ, …, unicode paths on an ASCII stdout)
    are escaped instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (stream.encoding or "").lower() not in (
            "utf-8",
            "utf8",
        ):
            stream.reconfigure(errors="replace")


@app.command(cls=OneLineErrors)
@user_errors
@run_options()
def run(
    options,
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
) -> None:
    """Profile one model x backend x batch size: a trace in tb_logs/<backend>_bs<N>/, results in runs/<backend>_bs<N>/.

    Example: [b]python profile.py run --backend pytorch_fp16 --bs 32[/b]
    """
    from profiler.commands.run import run as run_command

    run_command(options, Output(json=json_out), tb_compat=tb_compat, command=command_name())


@app.command(cls=HelpCommand)
@user_errors
def backends(json_out: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the backends, whether each can run on this machine, and why not."""
    from profiler.commands import tools

    tools.backends(Output(json=json_out))


@app.command(cls=OneLineErrors)
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


@app.command("tb-compat", cls=HelpCommand)
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


@app.command(cls=HelpCommand)
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

    _exit(tools.tensorboard(logdir, port, bind_all, Output()))


@app.command(cls=OneLineErrors)
@user_errors
@run_options(skip=NSYS_SETS, defaults={"name": "nsys"})
def nsys(options) -> None:
    """Run the harness under Nsight Systems over the active profiled steps; parse nsys stats.

    The capture range is cudaProfilerApi (torch.cuda.profiler.start/stop around the active
    steps); `nsys stats` kernel and NVTX summaries are parsed where it works. Every `run`
    option is passed on to that run, but --capture (cuda-profiler-api under nsys) and --repeat
    (1: the capture range is the first cycle).

    nsys is found on PATH, through $NSYS, or in the usual install folders.
    """
    from profiler.commands import tools

    _exit(tools.nsys(options, Output()))


@app.command(cls=OneLineErrors)
@user_errors
@run_options(skip=NCU_SETS)
def ncu(
    options,
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

    _exit(tools.ncu(options, top, step, launch_count, reuse, chip, Output()))


@app.command(cls=OneLineErrors)
@user_errors
@run_options(skip=tuple(SWEEP_SETS), helps={"iters": "Timed iterations per cell."}, lists=True)
def sweep(
    options,
    backends: str = typer.Option(
        ..., "--backends", help="Comma-separated backends, e.g. pytorch_fp32,ttrt_fp32,ttrt_fp16."
    ),
    bs: str = typer.Option(..., "--bs", help="Comma-separated batch sizes, e.g. 1,8,16,32."),
    baseline: str | None = typer.Option(
        None, help="Backend the speedups are relative to (default: the first of --backends)."
    ),
    name: str | None = typer.Option(
        None, help="Sweep folder name: runs/<name>/ and tb_logs/<name>/ (default sweep_<model>)."
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the sweep in runs/<name>/: skip the cells that "
        "finished, run the others (same model and run options required).",
    ),
    cell_timeout: float | None = typer.Option(
        None, help="Stop a cell that runs longer than this many seconds (status timeout)."
    ),
    gpus: str | None = typer.Option(
        None,
        "--gpus",
        help="GPUs to spread the cells over, one worker process each, e.g. "
        "0,1 (default: all visible; without a GPU, one CPU worker).",
    ),
    isolate: bool = typer.Option(
        False,
        "--isolate",
        help="A fresh process per cell instead of a worker per GPU: "
        "slower (imports and CUDA start-up every cell); use it when a cell changes "
        "process-wide state the worker cannot reset (a library's globals, a leaked thread) "
        "or to compare against the worker's numbers.",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where the cells run: local (this machine's GPUs), or ray "
        "(one Ray task per cell, one GPU each, anywhere on a Ray cluster; pip install -e "
        '".[cluster]").',
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="With --executor ray: the cluster to join (auto: the one "
        "`ray start` runs here; host:port); default: start a local Ray instance.",
    ),
    ray_shared_fs: bool = typer.Option(
        False,
        "--ray-shared-fs",
        help="With --executor ray: --runs-dir and --tb-dir have the "
        "same path on every node, so cells write into them directly (default: results come "
        "back through Ray's object store).",
    ),
    processes: int | None = fresh_process_option("processes", "sweep"),
    target_noise: float | None = fresh_process_option("target_noise", "sweep"),
    budget: str | None = fresh_process_option("budget", "sweep"),
    runs_dir: Path = typer.Option(Path("runs"), help="Where the sweep folder goes."),
    tb_dir: Path = typer.Option(Path("tb_logs"), help="Where the sweep's traces go."),
    only_decided: bool = typer.Option(
        False,
        "--only-decided",
        help="Leave out of the printed table the cells undecided on "
        "both figures (counted under it); benchmark.csv, .md and --json keep every cell.",
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print the benchmark table as JSON on stdout (progress stays on stderr).",
    ),
) -> None:
    """Run a backend x batch-size matrix of `run` cells over the GPUs, and tabulate it.

    One worker process per GPU (--gpus) runs its cells one after another, so imports and the
    CUDA context are paid once per GPU; no two cells share a GPU at a time, and the state a cell
    leaves (compiled graphs, allocator, TF32/cuDNN switches) is reset before the next. A crash,
    host or CUDA out-of-memory in one cell is recorded with its reason (the worker replaced) and
    the sweep goes on; Ctrl-C keeps the finished cells (continue with --resume). Each cell's row
    says which GPU ran it. Writes runs/<name>/benchmark.csv
    and .md (latency, throughput, speedup vs the baseline, compile time, numeric error, Tensor
    Core share, GPU utilization, status), runs/<name>/sweep.json, and per cell
    runs/<name>/<backend>_bs<N>/ and tb_logs/<name>/<backend>_bs<N>/. Exit status 0 when at
    least one cell finished, 1 when none did.

    Examples:

    [b]python profile.py sweep --backends pytorch_fp32,ttrt_fp32,ttrt_fp16 --bs 1,8,16,32[/b]

    [b]python profile.py sweep --backends pytorch_fp32,pytorch_fp16 --bs 1,8 --name quick --iters 50 --resume[/b]

    [b]python profile.py sweep --backends pytorch_fp16,ttrt_fp16 --bs 1,8 --model transformer --workload generate --max-new-tokens 16,64,256[/b]

    [b]python profile.py sweep --backends pytorch_fp16,ttrt_fp16 --bs 1,8,16,32 --gpus 0,1[/b]

    [b]python profile.py sweep --backends pytorch_fp32,ttrt_fp16 --bs 1,8,32 --executor ray --ray-address auto[/b]
    """
    from profiler.commands import sweep as sweep_command
    from profiler.runs.config import keyed
    from profiler.sweep import plan as sweep_module

    plan = sweep_module.plan(
        backends,
        bs,
        keyed(options),
        name=name,
        baseline=baseline,
        runs_dir=runs_dir,
        tb_dir=tb_dir,
        resume=resume,
        cell_timeout_s=cell_timeout,
        executor=executor,
        gpus=gpus,
        isolate=isolate,
        ray_address=ray_address,
        ray_shared_fs=ray_shared_fs,
        processes=processes,
        target_noise=target_noise,
        budget_s=parse_budget(budget),
    )
    _exit(sweep_command.run(plan, Output(json=json_out), only_decided=only_decided))


@app.command(cls=HelpCommand)
@user_errors
def compare(
    a: str = typer.Argument(
        ..., help="Run A (before): a run name, <sweep>/<cell>, a run folder or a trace file."
    ),
    b: str = typer.Argument(..., help="Run B (after), the same kinds of target."),
    top: int = typer.Option(15, "--top", help="Rows per table (0 = all)."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Also write overview, categories, kernels, operators and "
        "top_changes CSVs into this folder.",
    ),
    processes: int | None = fresh_process_option("processes", "compare"),
    target_noise: float | None = fresh_process_option("target_noise", "compare"),
    same_within: float = typer.Option(
        2.0,
        "--same-within",
        help="The equivalence margin in %: 'same' when the 90 % "
        "interval of B/A lies within ±this (two one-sided tests); faster/slower only beyond "
        "it.",
    ),
    budget: str | None = fresh_process_option("budget", "compare"),
    trust_model: bool = typer.Option(
        False,
        "--trust-model",
        help="With --processes: import the package.module:function model a "
        "result.json names even when its module is not the file the run recorded (path and "
        "SHA-256), or the run recorded none: that code is imported and run.",
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print the comparison as JSON on "
        "stdout (full kernel names, the timed figures and what "
        "differs).",
    ),
) -> None:
    """Kernel-level diff of two runs: step and GPU time, categories, kernels, operators.

    Two verdicts head it, each faster, slower, the same within ±2 %
    (--same-within) or undecided: latency (what a caller waits) and GPU
    time (the device's work, launch gaps excluded). Each rests on the
    per-process medians of its figure (the process is the sample; processes
    that timed both configs pair up), so it holds against the spread
    between fresh processes, not only inside one window. A launch-bound
    config (the host's enqueue reaches its GPU time) has a noisy latency:
    quote its GPU-time verdict, and see the lever named.

    Times are per profiled step and delta = B - A. Kernels are matched by full name (the
    unmatched ones of each side are listed); runs that share no kernel name (eager vs TensorRT)
    compare by category and by the operator that launched the kernels.

    Examples:

    [b]python profile.py compare pytorch_fp32_bs8 ttrt_fp16_bs8[/b]

    [b]python profile.py compare pytorch_fp32_bs8 pytorch_fp16_bs8 --processes 5[/b]

    [b]python profile.py compare sweep_resnet50/pytorch_fp16_bs8 sweep_resnet50/inductor_fp16_bs8 --out diff/[/b]
    """
    from profiler.commands.compare import run as compare_command

    compare_command(
        a,
        b,
        top=top,
        out=out,
        sink=Output(json=json_out),
        processes=processes,
        target_noise=target_noise,
        budget_s=parse_budget(budget),
        same_within=same_within,
        trust_model=trust_model,
    )


@app.command(cls=HelpCommand)
@user_errors
def advise(
    target: str = typer.Argument(..., help="A run: a run name, <sweep>/<cell> or a run folder."),
    try_them: bool = typer.Option(
        False,
        "--try",
        help="Run the experiments as cells beside the re-run baseline (the "
        "sweep's workers and between-process verdicts) and rank what they measured.",
    ),
    budget: str | None = typer.Option(
        None,
        "--budget",
        help="With --try: stop handing out cells after this long (300, 90s, "
        "5m, 1h); the re-timing rounds of the finished cells follow.",
    ),
    max_cells: int | None = typer.Option(
        None, "--max-cells", help="With --try: at most this many cells, the baseline included."
    ),
    processes: int | None = typer.Option(
        None,
        "--processes",
        help="With --try: timed windows per cell in fresh processes "
        "(default 3 on GPUs, 1 on a CPU).",
    ),
    resume: bool = typer.Option(
        False, "--resume", help="With --try: keep the cells that finished before, run the rest."
    ),
    runs_dir: Path = typer.Option(Path("runs"), help="Where advise_<run>/ goes."),
    tb_dir: Path = typer.Option(Path("tb_logs"), help="Where its traces go."),
    trust_model: bool = typer.Option(
        False,
        "--trust-model",
        help="With --try: import the package.module:function model a "
        "result.json names even when its module is not the file the run recorded (path and "
        "SHA-256), or the run recorded none: that code is imported and run.",
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print the advice, the plan and what was measured as JSON."
    ),
) -> None:
    """The run's advice and the experiments that test it; with --try, measure them.

    Each advice rule names run options that would show it right (launch-bound: --cuda-graphs,
    Inductor, TensorRT; FP32 on CUDA cores: --tf32, BF16, FP16; batch headroom: larger --bs;
    memory-bound: half precision, channels_last, Inductor). --try runs them, most promising per
    cost first, beside the run's own config re-run, then ranks them: speedup with its verdict and
    interval, numeric error, the projected bound beside the measured gain, and what changed in
    the kernels.

    Examples:

    [b]python profile.py advise pytorch_fp32_bs8[/b]

    [b]python profile.py advise pytorch_fp32_bs8 --try --budget 5m[/b]
    """
    from profiler.commands.advise import run as advise_command

    _exit(
        advise_command(
            target,
            try_them=try_them,
            budget=budget,
            max_cells=max_cells,
            processes=processes,
            resume=resume,
            runs_dir=runs_dir,
            tb_dir=tb_dir,
            trust_model=trust_model,
            sink=Output(json=json_out),
        )
    )


@app.command(cls=HelpCommand)
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


@app.command(cls=HelpCommand)
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
        "report_<run>.html, report_<a>_vs_<b>.html, or "
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


@app.command(cls=HelpCommand)
@user_errors
def peaks(
    refresh: bool = typer.Option(False, "--refresh", help="Measure again even if cached."),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Folder for the measurements (default: peaks/ beside the "
        "engine cache: $XDG_CACHE_HOME/infer-profiler/peaks, ~/.cache when unset).",
    ),
    matmul_n: int | None = typer.Option(
        None,
        "--matmul-n",
        help="Matrix side n of the n x n matmuls (default 8192 on a GPU, 256 on a CPU).",
    ),
    copy_mib: int | None = typer.Option(
        None, "--copy-mib", help="Bytes copied per bandwidth measurement, MiB (default 1024 / 16)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the measurement as JSON."),
) -> None:
    """Measure this GPU's ceilings once and cache them (matmul TFLOP/s, memory bandwidth).

    Dense matmul TFLOP/s per data type (FP32, TF32, FP16, BF16, FP8, INT8 where supported) and
    device-memory copy bandwidth.

    The roofline in `report`, `summarize` and `compare` reads them; without a measurement it
    falls back to a labelled datasheet table. On a CPU it measures the CPU (small sizes).
    """
    from profiler.commands.peaks import run as peaks_command

    peaks_command(
        refresh=refresh,
        cache_dir=cache_dir,
        matmul_n=matmul_n,
        copy_mib=copy_mib,
        sink=Output(json=json_out),
    )


@app.command(cls=HelpCommand)
@user_errors
def noise(
    processes: int = typer.Option(
        5, "--processes", help="Fresh processes to time the fixed config in (2 or more)."
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="The fixed config's model (default resnet50 on a GPU, resnet18 on a CPU).",
    ),
    backend: str | None = typer.Option(
        None, "--backend", help="Its backend (default pytorch_fp32)."
    ),
    bs: int | None = typer.Option(
        None, "--bs", help="Its batch size (default 8 on a GPU, 1 on a CPU)."
    ),
    iters: int | None = typer.Option(
        None, "--iters", help="Timed iterations per process (default 100 on a GPU, 20 on a CPU)."
    ),
    save: bool = typer.Option(
        True,
        "--save/--no-save",
        help="Keep the floor for compare and sweep (noise/<gpu>.json beside the engine cache).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the floor as JSON."),
) -> None:
    """Measure this machine's noise floor and the settings that would lower it.

    How much one fixed config's p50 moves inside a timed window and between fresh processes,
    the GPU's clocks around it, the smallest difference a compare can resolve here, and which
    settings would lower it: persistence mode, locked clocks, CPU pinning, CUDA graphs. It
    changes none of them.

    The floor is kept per GPU model; compare and sweep use its between-process spread to judge
    runs timed in one process each.

    Examples:

    [b]python profile.py noise[/b]

    [b]python profile.py noise --processes 8 --model resnet18 --bs 32 --json[/b]
    """
    from profiler.commands.noise import run as noise_command

    noise_command(
        processes=processes,
        model=model,
        backend=backend,
        bs=bs,
        iters=iters,
        save=save,
        sink=Output(json=json_out),
        command=command_name(),
    )


def prog_name() -> str:
    """The name the user typed: ``infer-profile`` for the installed console script, else
    ``profile.py`` (``python profile.py``). Completion scripts are written for this name."""
    invoked = os.path.basename(sys.argv[0] if sys.argv else "")
    return "infer-profile" if invoked.startswith("infer-profile") else "profile.py"


def command_name() -> str:
    """How the user started the program, as hints should spell it: ``infer-profile`` or
    ``python profile.py``."""
    return "infer-profile" if prog_name() == "infer-profile" else "python profile.py"


def main(argv: list[str] | None = None) -> int:
    _tolerant_output()
    try:
        app(args=argv, prog_name=prog_name())
    except SystemExit as done:
        return int(done.code or 0) if not isinstance(done.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
