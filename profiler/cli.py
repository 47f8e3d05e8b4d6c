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
        help="resnet50, resnet18, distilbert, transformer, gpt2, or package.module:function returning "
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
    tb_compat: bool = typer.Option(
        False, "--tb-compat", help="Also write a copy of the trace that torch-tb-profiler reads "
        "right, in tb_logs/<run>_tbcompat/ (see `tb-compat --help`)."),
    capture: str = typer.Option(
        "torch", "--capture", help="torch: torch.profiler traces the profiled steps (default). "
        "cuda-profiler-api: no torch.profiler; torch.cuda.profiler.start()/stop() around the "
        "active steps, for nsys/ncu to capture (no trace is written).", rich_help_panel="Profiler"),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse and save compiled TensorRT "
                               "engines (ttrt_* backends).", rich_help_panel="Engine cache"),
    cache_dir: Optional[Path] = typer.Option(
        None, envvar="INFER_PROFILER_CACHE", help="Engine cache folder (default "
        "~/.cache/infer-profiler/engines).", rich_help_panel="Engine cache"),
    workload: str = typer.Option(
        "forward", "--workload", help="forward: one forward pass per step. generate: one greedy "
        "generation per step (transformer: encode, then decode token by token; gpt2: prefill, "
        "then decode with the KV cache); --iters counts generations.", rich_help_panel="Generation"),
    src_len: int = typer.Option(64, "--src-len", help="Source tokens (transformer, --workload "
                                "generate).", rich_help_panel="Generation"),
    prompt_len: int = typer.Option(128, "--prompt-len", help="Prompt tokens (gpt2, --workload "
                                   "generate).", rich_help_panel="Generation"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", help="Tokens generated per "
                                       "sequence, EOS ignored.", rich_help_panel="Generation"),
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
        max_rel_error=max_rel_error, capture=capture, workload=workload, src_len=src_len,
        prompt_len=prompt_len, max_new_tokens=max_new_tokens,
    )
    if tb_compat and capture != "torch":
        raise UserError("--tb-compat needs a trace: leave --capture at torch")
    from . import harness
    from .report import run_view

    result = harness.run(config, quiet=json_out)
    if tb_compat:
        from .trace.tb_compat import write_compat_copy

        for trace in result["trace"]["files"]:
            written = write_compat_copy(Path(trace))
            typer.echo(f"tb-compat copy: {written.written}", err=True)
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
    view: str = typer.Option("all", "--view", help="all, overview, kernels, categories, operators or phases (generation runs: kernels per encode/decode/project or prefill/decode span, and decode step time by position)."),
    top: int = typer.Option(20, "--top", help="Rows per table (0 = all)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write CSV, JSON and Markdown here."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    ncu: Optional[str] = typer.Option(
        None, "--ncu", help="Nsight Compute CSV (`ncu --csv --page raw`) or a run folder with "
        "ncu.csv: adds hardware Tensor Core and occupancy columns and flags kernels where the "
        "name rules disagree. A run folder's ncu.csv is picked up without it."),
) -> None:
    """Kernel, Tensor Core, occupancy and step-time tables from any PyTorch profiler (Kineto) trace.

    Example: [b]python profile.py summarize runs/pytorch_fp16_bs32 --view kernels --top 10[/b]
    """
    from .report import summarize_view

    summarize_view.run(target, view=view, top=top, out=out, json_out=json_out, ncu=ncu)


@app.command("tb-compat")
@user_errors
def tb_compat_command(
    target: str = typer.Argument(..., help="A trace, a tb_logs/<run>/ or runs/<run>/ folder, or "
                                 "a run name."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for the copies (default: "
                                       "tb_logs/<run>_tbcompat/ beside the run's folder)."),
) -> None:
    """Write a copy of a trace that the TensorBoard plugin (torch-tb-profiler 0.4.3) reads right.

    The plugin drops cuda_runtime and cuda_driver events (Runtime share 0, kernels not linked to
    operators) and reads GPU-side copies of record_function spans as CPU spans (GPU-side
    ProfilerStep#N copies become extra steps). The copy renames those categories; nothing else
    changes. It goes to its own folder, which TensorBoard shows as its own run.
    """
    from .trace.tb_compat import traces_of, write_compat_copy

    for trace in traces_of(target):
        result = write_compat_copy(trace, out)
        changes = ", ".join(f"{k}: {v}" for k, v in result.renamed.items()) or "nothing to change"
        typer.echo(f"{result.written}  ({changes})")


@app.command()
@user_errors
def tensorboard(
    logdir: Path = typer.Option(Path("tb_logs"), "--logdir", help="Folder of runs (tb_logs/)."),
    port: Optional[int] = typer.Option(None, "--port", help="Port (default: a free one)."),
    bind_all: bool = typer.Option(False, "--bind-all", help="Serve on all network interfaces "
                                  "(default: 127.0.0.1 only)."),
) -> None:
    """Start TensorBoard with the PyTorch profiler plugin and print its URL; Ctrl-C stops it.

    Example: [b]python profile.py tensorboard --logdir tb_logs[/b]
    """
    from .tools import tensorboard as tb

    code = tb.serve(logdir, port=port, bind_all=bind_all, echo=typer.echo)
    if code not in (0, -2, 130):
        raise UserError(f"TensorBoard exited with status {code}")


@app.command()
@user_errors
def nsys(
    backend: str = typer.Option("pytorch_fp32", "--backend", "-b", help="Backend to run."),
    bs: int = typer.Option(8, "--bs", help="Batch size."),
    model: str = typer.Option("resnet50", "--model", "-m", help="Model (as for `run`)."),
    name: str = typer.Option("nsys", help="Run folder suffix: runs/<backend>_bs<N>_<name>/."),
    runs_dir: Path = typer.Option(Path("runs"), help="Where run results go."),
) -> None:
    """Run the harness under Nsight Systems over the active profiled steps; parse nsys stats.

    The capture range is cudaProfilerApi (torch.cuda.profiler.start/stop around the active
    steps); `nsys stats` kernel and NVTX summaries are parsed where it works.

    nsys is found on PATH, through $NSYS, or in the usual install folders.
    """
    from .tools import nsys as nsys_tool

    result = nsys_tool.run(backend, bs, model=model, name=name, runs_dir=runs_dir,
                           echo=lambda line: typer.echo(line, err=True))
    nsys_tool.print_result(result, echo=typer.echo)
    if result.get("stats_error"):
        raise typer.Exit(1)


@app.command()
@user_errors
def ncu(
    backend: str = typer.Option("pytorch_fp32", "--backend", "-b", help="Backend to run."),
    bs: int = typer.Option(8, "--bs", help="Batch size."),
    top: int = typer.Option(10, "--top", help="Profile the K kernels with the most time in the "
                            "trace (0 = every kernel of the step)."),
    model: str = typer.Option("resnet50", "--model", "-m", help="Model (as for `run`)."),
    step: Optional[int] = typer.Option(None, help="Profiled step to measure (default: the "
                                       "first active one, step 2 with the default schedule)."),
    launch_count: int = typer.Option(200, help="At most this many kernel launches profiled."),
    name: Optional[str] = typer.Option(None, help="Run folder suffix, as for `run`."),
    reuse: bool = typer.Option(False, "--reuse", help="Take the kernel table from the run "
                               "folder's existing trace instead of running once without ncu."),
    chip: Optional[str] = typer.Option(None, help="Chip for `ncu --query-metrics` (e.g. gh100; "
                                       "default: the GPU present)."),
    runs_dir: Path = typer.Option(Path("runs"), help="Where run results go."),
    tb_dir: Path = typer.Option(Path("tb_logs"), help="Where TensorBoard traces go."),
) -> None:
    """Nsight Compute on the top-K kernels of one profiled step (Tensor Cores, occupancy).

    Hardware tensor-pipe activity and occupancy beside the kernel table, and where the name
    rules disagree.

    Writes ncu.csv (and ncu.json, ncu.ncu-rep, ncu.log) into runs/<run>/, where `summarize`
    finds it. ncu is found on PATH, through $NCU, or in the usual install folders.
    """
    from .tools import ncu as ncu_tool

    result = ncu_tool.run(backend, bs, model=model, top=top, step=step,
                          launch_count=launch_count, name=name, runs_dir=runs_dir,
                          tb_dir=tb_dir, reuse=reuse, chip=chip,
                          echo=lambda line: typer.echo(line, err=True))
    ncu_tool.print_result(result, top=top, echo=typer.echo)


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
    workload: str = typer.Option("forward", "--workload", help="forward or generate, as for "
                                 "run.", rich_help_panel="Generation"),
    src_len: int = typer.Option(64, "--src-len", help="As for run.", rich_help_panel="Generation"),
    prompt_len: int = typer.Option(128, "--prompt-len", help="As for run.",
                                   rich_help_panel="Generation"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", help="As for run.",
                                       rich_help_panel="Generation"),
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
        "workload": workload, "src_len": src_len, "prompt_len": prompt_len,
        "max_new_tokens": max_new_tokens,
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
