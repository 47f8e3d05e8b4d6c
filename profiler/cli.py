"""Command line: parses arguments and hands them on; no logic lives here.

Heavy modules (torch, the harness) are imported inside the commands that need them, so
``summarize`` and ``--help`` start fast and work on machines without torch.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Optional

import typer

from .errors import Interrupted, UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Kernel-level profiling for GPU inference.\n\n"
    "[b]run[/b] profiles one model x backend x batch size and writes a TensorBoard trace under "
    "tb_logs/ and timed results under runs/. [b]summarize[/b] turns any PyTorch profiler (Kineto) "
    "trace into kernel, Tensor Core, occupancy and step-time tables. [b]sweep[/b] runs a backend x "
    "batch-size matrix with speedups; [b]compare[/b] diffs two runs kernel by kernel; [b]plot[/b] "
    "draws a sweep or a run.",
)


def user_errors(command):
    """Turn a UserError into one line on stderr and exit status 2; Ctrl-C into status 130."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        except Interrupted as stop:
            typer.echo(f"interrupted: {stop}", err=True)
            raise typer.Exit(130) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: nothing was written for the unfinished run", err=True)
            raise typer.Exit(130) from None

    return wrapper


@app.command()
@user_errors
def run(
    backend: str = typer.Option("pytorch_fp32", "--backend", "-b",
                                help="Backend to run; `backends` lists them and what each needs."),
    bs: int = typer.Option(8, "--bs", help="Batch size."),
    model: str = typer.Option(
        "resnet50", "--model", "-m",
        help="resnet50, resnet18, distilbert, transformer, or package.module:function returning "
        "(model, example_inputs)."),
    image_size: int = typer.Option(224, help="Image side for vision models."),
    seq_len: int = typer.Option(128, help="Sequence length for text models."),
    seed: int = typer.Option(0, help="Seed for weights and inputs."),
    weights: Optional[Path] = typer.Option(
        None, help="A state dict to load (torch.load with weights_only=True); random weights otherwise."),
    compile_mode: str = typer.Option("default", help="torch.compile mode for inductor_* backends."),
    memory_format: str = typer.Option(
        "auto", help="auto (channels_last for conv nets in fp16/bf16), channels_last or contiguous."),
    tf32: bool = typer.Option(False, "--tf32", help="Allow TF32 for FP32 matmuls and convolutions "
                              "(off by default: FP32 means FP32)."),
    cudnn_benchmark: bool = typer.Option(
        True, "--cudnn-benchmark/--no-cudnn-benchmark",
        help="Let cuDNN autotune convolution algorithms (during prepare and warm-up)."),
    wait: int = typer.Option(1, help="Profiler schedule: steps skipped before each cycle.", rich_help_panel="Profiler"),
    warmup: int = typer.Option(1, help="Profiler schedule: steps traced then discarded.", rich_help_panel="Profiler"),
    active: int = typer.Option(3, help="Profiler schedule: steps recorded per cycle.", rich_help_panel="Profiler"),
    repeat: int = typer.Option(1, help="Profiler schedule: number of cycles (one trace file each).", rich_help_panel="Profiler"),
    record_shapes: bool = typer.Option(False, "--record-shapes", help="Record operator input shapes.", rich_help_panel="Profiler"),
    profile_memory: bool = typer.Option(False, "--profile-memory", help="Record allocations.", rich_help_panel="Profiler"),
    with_stack: bool = typer.Option(False, "--with-stack", help="Record Python stacks.", rich_help_panel="Profiler"),
    with_flops: bool = typer.Option(False, "--with-flops", help="Estimate FLOPs of matmul/conv.", rich_help_panel="Profiler"),
    gzip: bool = typer.Option(True, "--gzip/--no-gzip", help="Write the trace as .json.gz.", rich_help_panel="Profiler"),
    iters: int = typer.Option(100, help="Timed iterations (separate from the profiled steps).", rich_help_panel="Timing"),
    timed_warmup: int = typer.Option(20, help="Untimed iterations before the timed ones.", rich_help_panel="Timing"),
    name: Optional[str] = typer.Option(None, help="Suffix for the run folder: <backend>_bs<N>_<name>."),
    runs_dir: Path = typer.Option(Path("runs"), help="Where run results go."),
    tb_dir: Path = typer.Option(Path("tb_logs"), help="Where TensorBoard traces go."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (progress stays on stderr)."),
    max_rel_error: Optional[float] = typer.Option(
        None, help="Fail the run (exit 2, nothing written) when the output's relative L2 error "
        "against the FP32 eager reference exceeds this; NaN or Inf always fails. Checked for every "
        "backend except pytorch_fp32, which is the reference."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse and save compiled TensorRT "
                               "engines (ttrt_* backends).", rich_help_panel="Engine cache"),
    cache_dir: Optional[Path] = typer.Option(
        None, envvar="INFER_PROFILER_CACHE", help="Engine cache folder (default "
        "~/.cache/infer-profiler/engines).", rich_help_panel="Engine cache"),
) -> None:
    """Profile one model x backend x batch size: a trace in tb_logs/<backend>_bs<N>/, results in runs/<backend>_bs<N>/.

    Example: [b]python profile.py run --backend pytorch_fp16 --bs 32[/b]
    """
    from .config import RunConfig

    config = RunConfig(
        backend=backend, batch_size=bs, model=model, image_size=image_size, seq_len=seq_len,
        seed=seed, weights=weights, compile_mode=compile_mode, memory_format=memory_format,
        tf32=tf32, cudnn_benchmark=cudnn_benchmark, wait=wait, warmup=warmup, active=active, repeat=repeat,
        record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
        with_flops=with_flops, gzip=gzip, iters=iters, timed_warmup=timed_warmup, name=name,
        runs_dir=runs_dir, tb_dir=tb_dir, cache_dir=cache_dir, use_cache=cache,
        max_rel_error=max_rel_error,
    )
    from . import harness
    from .report import run_view

    result = harness.run(config, quiet=json_out)
    if json_out:
        run_view.print_json(result)
    else:
        run_view.print_result(result)


@app.command()
@user_errors
def backends(json_out: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the backends, whether each can run on this machine, and why not."""
    from .backends import all_backends
    from .report import run_view

    run_view.print_backends(all_backends(), json_out=json_out)


@app.command()
@user_errors
def summarize(
    target: str = typer.Argument(
        ..., help="A trace (.json / .json.gz), a run folder under runs/ or tb_logs/, a folder "
        "of traces, or a run name such as pytorch_fp32_bs8."),
    view: str = typer.Option("all", "--view", help="all, overview, kernels, categories or operators."),
    top: int = typer.Option(20, "--top", help="Rows per table (0 = all)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write CSV, JSON and Markdown here."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
) -> None:
    """Kernel, Tensor Core, occupancy and step-time tables from any PyTorch profiler (Kineto) trace.

    Example: [b]python profile.py summarize runs/pytorch_fp16_bs32 --view kernels --top 10[/b]
    """
    from .report import summarize_view

    summarize_view.run(target, view=view, top=top, out=out, json_out=json_out)


@app.command()
@user_errors
def sweep(
    backends: str = typer.Option(
        ..., "--backends", help="Comma-separated backends, e.g. pytorch_fp32,ttrt_fp32,ttrt_fp16."),
    bs: str = typer.Option(..., "--bs", help="Comma-separated batch sizes, e.g. 1,8,16,32."),
    baseline: Optional[str] = typer.Option(
        None, help="Backend the speedups are relative to (default: the first of --backends)."),
    name: Optional[str] = typer.Option(
        None, help="Sweep folder name: runs/<name>/ and tb_logs/<name>/ (default "
        "sweep_<model>)."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the sweep in runs/<name>/: skip the cells that "
        "finished, run the others (same model and run options required)."),
    cell_timeout: Optional[float] = typer.Option(
        None, help="Stop a cell that runs longer than this many seconds (status timeout)."),
    model: str = typer.Option("resnet50", "--model", "-m", help="As for run."),
    image_size: int = typer.Option(224, help="Image side for vision models."),
    seq_len: int = typer.Option(128, help="Sequence length for text models."),
    seed: int = typer.Option(0, help="Seed for weights and inputs."),
    weights: Optional[Path] = typer.Option(None, help="A state dict to load, as for run."),
    compile_mode: str = typer.Option("default", help="torch.compile mode for inductor_* backends."),
    memory_format: str = typer.Option("auto", help="auto, channels_last or contiguous."),
    tf32: bool = typer.Option(False, "--tf32", help="Allow TF32 for FP32 matmuls and convolutions."),
    cudnn_benchmark: bool = typer.Option(True, "--cudnn-benchmark/--no-cudnn-benchmark",
                                         help="Let cuDNN autotune convolution algorithms."),
    wait: int = typer.Option(1, help="Profiler schedule: steps skipped.", rich_help_panel="Profiler"),
    warmup: int = typer.Option(1, help="Profiler schedule: steps traced then discarded.", rich_help_panel="Profiler"),
    active: int = typer.Option(3, help="Profiler schedule: steps recorded per cycle.", rich_help_panel="Profiler"),
    repeat: int = typer.Option(1, help="Profiler schedule: number of cycles.", rich_help_panel="Profiler"),
    record_shapes: bool = typer.Option(False, "--record-shapes", rich_help_panel="Profiler"),
    profile_memory: bool = typer.Option(False, "--profile-memory", rich_help_panel="Profiler"),
    with_stack: bool = typer.Option(False, "--with-stack", rich_help_panel="Profiler"),
    with_flops: bool = typer.Option(False, "--with-flops", rich_help_panel="Profiler"),
    gzip: bool = typer.Option(True, "--gzip/--no-gzip", rich_help_panel="Profiler"),
    iters: int = typer.Option(100, help="Timed iterations per cell.", rich_help_panel="Timing"),
    timed_warmup: int = typer.Option(20, help="Untimed iterations before the timed ones.", rich_help_panel="Timing"),
    max_rel_error: Optional[float] = typer.Option(
        None, help="Fail a cell whose output's relative L2 error vs FP32 eager exceeds this."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse and save compiled "
                               "TensorRT engines.", rich_help_panel="Engine cache"),
    cache_dir: Optional[Path] = typer.Option(None, envvar="INFER_PROFILER_CACHE",
                                             help="Engine cache folder.", rich_help_panel="Engine cache"),
    runs_dir: Path = typer.Option(Path("runs"), help="Where the sweep folder goes."),
    tb_dir: Path = typer.Option(Path("tb_logs"), help="Where the sweep's traces go."),
) -> None:
    """Run a backend x batch-size matrix, one `run` subprocess per cell, and tabulate it.

    A crash or CUDA out-of-memory in one cell is recorded with its reason and the sweep goes on;
    Ctrl-C keeps the finished cells (continue with --resume). Writes runs/<name>/benchmark.csv
    and .md (latency, throughput, speedup vs the baseline, compile time, numeric error, Tensor
    Core share, GPU utilization, status), runs/<name>/sweep.json, and per cell
    runs/<name>/<backend>_bs<N>/ and tb_logs/<name>/<backend>_bs<N>/. Exit status 0 when at
    least one cell finished, 1 when none did.

    Examples:

    [b]python profile.py sweep --backends pytorch_fp32,ttrt_fp32,ttrt_fp16 --bs 1,8,16,32[/b]

    [b]python profile.py sweep --backends pytorch_fp32,pytorch_fp16 --bs 1,8 --name quick --iters 50 --resume[/b]
    """
    from . import sweep as sweep_module
    from .report import sweep_view

    options = {
        "model": model, "image_size": image_size, "seq_len": seq_len, "seed": seed,
        "weights": None if weights is None else str(weights), "compile_mode": compile_mode,
        "memory_format": memory_format, "tf32": tf32, "cudnn_benchmark": cudnn_benchmark,
        "wait": wait, "warmup": warmup, "active": active, "repeat": repeat,
        "record_shapes": record_shapes, "profile_memory": profile_memory,
        "with_stack": with_stack, "with_flops": with_flops, "gzip": gzip, "iters": iters,
        "timed_warmup": timed_warmup, "max_rel_error": max_rel_error, "cache": cache,
        "cache_dir": None if cache_dir is None else str(cache_dir),
    }
    plan = sweep_module.plan(backends, bs, options, name=name, baseline=baseline,
                             runs_dir=runs_dir, tb_dir=tb_dir, resume=resume,
                             cell_timeout_s=cell_timeout)
    code = sweep_view.run(plan)
    if code:
        raise typer.Exit(code)


@app.command()
@user_errors
def compare(
    a: str = typer.Argument(..., help="Run A (before): a run name, <sweep>/<cell>, a run folder "
                            "or a trace file."),
    b: str = typer.Argument(..., help="Run B (after), the same kinds of target."),
    top: int = typer.Option(15, "--top", help="Rows per table (0 = all)."),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Also write overview, categories, kernels, operators and "
        "top_changes CSVs into this folder."),
) -> None:
    """Kernel-level diff of two runs: step and GPU time, categories, kernels, operators.

    Times are per profiled step and delta = B - A. Kernels are matched by full name (the
    unmatched ones of each side are listed); runs that share no kernel name (eager vs TensorRT)
    compare by category and by the operator that launched the kernels.

    Examples:

    [b]python profile.py compare pytorch_fp32_bs8 ttrt_fp16_bs8[/b]

    [b]python profile.py compare sweep_resnet50/pytorch_fp16_bs8 sweep_resnet50/inductor_fp16_bs8 --out diff/[/b]
    """
    from .report import compare_view

    compare_view.run(a, b, top=top, out=out)


@app.command()
@user_errors
def plot(
    target: str = typer.Argument(
        ..., help="A sweep folder (runs/<sweep>, or just <sweep>), or a run: run name, "
        "<sweep>/<cell>, run folder or trace file."),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Folder for the PNGs (default: plots/ inside the sweep or run "
        "folder)."),
) -> None:
    """PNG plots (matplotlib, no display needed).

    A sweep gives latency.png (p50 per backend vs batch size, p90/p99 marks), speedup.png (vs
    the baseline, per batch size), throughput.png and categories.png (kernel time per step by
    category, per cell). A run gives <run>_categories.png.

    Examples:

    [b]python profile.py plot runs/sweep_resnet50[/b]

    [b]python profile.py plot sweep_resnet50/ttrt_fp16_bs8 --out docs/img[/b]
    """
    from .report import plots

    for path in plots.plot(target, out):
        typer.echo(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, prog_name="profile.py")
    except SystemExit as done:
        return int(done.code or 0) if not isinstance(done.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
