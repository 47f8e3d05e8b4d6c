"""The commands that time configs against each other: `sweep` (a backend x batch-size matrix),
`compare` (two runs) and `advise` (a run's advice, and with --try its experiments).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import typer

from profiler.cli.guard import exit_with, user_errors
from profiler.cli.options import (
    COMMIT_OPTION,
    HISTORY_OPTION,
    fresh_process_option,
    run_options,
)
from profiler.cli.output import Output
from profiler.commands import parse_budget
from profiler.runs.manifest import SWEEP_SETS

#: compare --view (profiler.report.sections.COMPARE_VIEWS)
CompareView = Literal["answer", "timed", "diff", "full"]


# sweep, compare and advise are over 60 lines: tables of option declarations (typer)
@user_errors
@run_options(skip=tuple(SWEEP_SETS), helps={"iters": "Timed iterations per cell."}, lists=True)
def sweep(
    options: dict[str, Any],
    backends: str = typer.Option(
        ..., "--backends", help="Comma-separated backends, e.g. pytorch_fp32,ttrt_fp32,ttrt_fp16."
    ),
    batch_sizes: str = typer.Option(
        ..., "--bs", help="Comma-separated batch sizes, e.g. 1,8,16,32."
    ),
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
    fixed_rounds: bool = typer.Option(
        False,
        "--fixed-rounds",
        help="Every cell takes all --processes rounds. By default the rounds are sequential: "
        "after the second round, a cell whose verdicts against the baseline are decided (GPU "
        "time where measured) at p < 0.005 leaves the rounds (Haybittle-Peto; the last round "
        "judges at the usual 5 %), so clear results cost fewer processes.",
    ),
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
    history: Path | None = HISTORY_OPTION,
    commit: str | None = COMMIT_OPTION,
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
    from profiler.commands.history import add_after, checked_commit
    from profiler.runs.config import keyed
    from profiler.sweep import plan as sweep_module

    plan = sweep_module.plan(
        backends,
        batch_sizes,
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
        fixed_rounds=fixed_rounds,
    )
    if commit is not None:  # (refused before the sweep, not after it)
        checked_commit(commit)
    sink = Output(json=json_out)
    status = sweep_command.run(plan, sink, only_decided=only_decided)
    if status == 0:
        add_after(history, [plan.sweep_dir], commit, sink)
    exit_with(status)


@user_errors
def compare(
    a: str = typer.Argument(
        ..., help="Run A (before): a run name, <sweep>/<cell>, a run folder or a trace file."
    ),
    b: str = typer.Argument(..., help="Run B (after), the same kinds of target."),
    top: int = typer.Option(15, "--top", help="Rows per table (0 = all)."),
    view: CompareView = typer.Option(
        "answer",
        "--view",
        metavar="<view>",
        help="What to print: answer (the verdicts, why B differs and the largest changes, on "
        "one screen), timed (the processes, the recorded runs and the config fields that "
        "differ), diff (categories, kernels, operators, top gains and losses) or full (all of "
        "them and each run's advice; -v too).",
    ),
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
    samples: Path | None = typer.Option(
        None,
        "--samples",
        help="Judge A and B again on the windows an earlier `compare --processes` kept in this "
        "folder (processes_A.csv, processes_B.csv; it names the folder), without timing again.",
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
    config (the host's enqueue reaches its GPU time, or its latency is 1.1x
    its GPU time or more) or one near the launch bound has a noisy latency:
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
        view=view,
        out=out,
        sink=Output(json=json_out),
        processes=processes,
        target_noise=target_noise,
        budget_s=parse_budget(budget),
        same_within=same_within,
        trust_model=trust_model,
        samples=samples,
    )


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

    exit_with(
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
