"""run --nproc N: one run over N ranks, started by torch.distributed's elastic launcher (the API
behind ``torchrun``: LaunchConfig and elastic_launch, a standalone rendezvous on this host).

Each rank initialises the process group (NCCL with one GPU per rank, ``cuda:<local rank>``;
gloo on the CPU), builds the model, shards it (profiler.collect.tensor_parallel) and runs the
run's phases (profiler.collect.harness.measure): the same warm-up, timed window, profiled steps
and numeric check on every rank, so their collectives pair up. Every rank writes its trace into
the run's one trace folder, ``<model>.rank<k>.<id>.pt.trace.json[.gz]`` (torch.profiler writes
the trace's ``distributedInfo`` with the rank and world size, as the process group is
initialised), and returns its figures; rank 0's result is the run's, with every rank's figures
and traces in its ``ranks`` block (profiler.runs.result.Ranks); the other ranks' per-iteration
files go under ``ranks/rank<k>/`` in the run folder.

The launcher holds the run's lock and its staging folders, as a run in one process does
(profiler.collect.harness.run), and moves them into place only when every rank succeeded. A
rank that fails stops the others (the elastic agent ends the group) and the run: one line naming
the rank and its error, nothing written.

The ranks run a fixed count of iterations (a count chosen by time could differ between ranks,
one then waiting forever in a collective): --iters, else 100 on a GPU and CPU_ITERS on a CPU;
--min-time is refused, as are --repeat-runs, --target-noise, --cuda-graphs and --capture
cuda-profiler-api.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from profiler import runs, signals, units
from profiler.collect import backends, bytecode, harness, metadata, tensor_parallel, window
from profiler.errors import UserError
from profiler.fsutil import (
    clean_leftovers,
    folder_lock,
    is_committed,
    replace_dirs,
    staging_dir,
)
from profiler.runs.config import RunConfig, config_from_json, config_to_json
from profiler.runs.phases import Phases
from profiler.runs.result import RankFigures, Ranks, RunResult, TraceInfo, read_result

if TYPE_CHECKING:
    import torch

LAUNCHER = (
    "torch.distributed.launcher.api.elastic_launch (torchrun's launcher), standalone "
    "rendezvous on this host"
)
#: the timed generations of each rank on a CPU without --iters (on a GPU: 100, as in one process)
CPU_ITERS = 10
GPU_ITERS = 100
#: the ranks' own folder in the run folder (rank 0's files are the run's own)
RANKS_DIR = "ranks"
#: the backend family the ranks run (eager: the sharded model's DTensor layers as they are)
FAMILY = "pytorch"


def group_backend(use_cuda: bool) -> str:
    """The process group's backend: NCCL on GPUs, gloo on the CPU."""
    return "nccl" if use_cuda else "gloo"


def check(config: RunConfig, use_cuda: bool, gpus: int) -> None:
    """A one-line UserError for what a run over ``config.nproc`` ranks cannot do here."""
    nproc = config.nproc
    tensor_parallel.check(config, nproc)
    family = backends.get(config.backend).family
    if family != FAMILY:
        raise UserError(
            f"--nproc runs the eager pytorch_* backends on its ranks (got {config.backend})"
        )
    refused = {
        "--repeat-runs": config.repeat_runs > 1,
        "--target-noise": config.target_noise is not None,
        "--cuda-graphs": config.cuda_graphs,
        "--capture cuda-profiler-api": config.capture != "torch",
        "--min-time": config.min_time is not None,
    }
    for flag, given in refused.items():
        if given:
            why = (
                ": the ranks run a fixed count (--iters), so that their collectives pair up"
                if flag == "--min-time"
                else ""
            )
            raise UserError(f"--nproc does not take {flag}{why}")
    if use_cuda and nproc > gpus:
        raise UserError(
            f"--nproc {nproc} is more than the {gpus} GPU(s) here: NCCL runs one rank per GPU "
            "(two ranks on one GPU fail with 'Duplicate GPU detected')"
        )


def ranks_config(config: RunConfig, use_cuda: bool) -> RunConfig:
    """The config every rank runs: a fixed count of timed iterations."""
    if config.iters is not None:
        return config
    return dataclasses.replace(config, iters=GPU_ITERS if use_cuda else CPU_ITERS)


def run(
    config: RunConfig,
    quiet: bool = False,
    *,
    console: Console | None = None,
    command_line: list[str] | None = None,
    started: float | None = None,
) -> RunResult:
    """Run ``config`` over ``config.nproc`` ranks and return rank 0's result with every rank's
    figures (``ranks``), written as runs/<run>/result.json; the ranks' traces in
    tb_logs/<run>/. ``started``: when the process began loading modules (perf_counter)."""
    import torch

    began = time.perf_counter() if started is None else started
    backend = backends.get(config.backend)
    use_cuda = torch.cuda.is_available()
    reason = backend.unavailable_reason(use_cuda)
    if reason:
        raise UserError(f"backend {backend.name} cannot run here: {reason}")
    check(config, use_cuda, torch.cuda.device_count() if use_cuda else 0)
    config = ranks_config(config, use_cuda)
    runs.check_separate_roots(config.runs_dir, config.tb_dir)
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    group = group_backend(use_cuda)
    progress = window.Progress(quiet, console)
    with folder_lock(run_dir, tb_run_dir, what="run"):
        for folder in (config.runs_dir, config.tb_dir):
            clean_leftovers(folder)
        runs.check_destination(config)
        stages: list[Path] = []
        try:
            for final in (run_dir, tb_run_dir):  # (each kept for the clean-up as it is made)
                stages.append(staging_dir(final))
            run_stage, tb_stage = stages
            bytecode.stop_precompile()  # (a forked rank must not hold the compiling child)
            progress.say(
                f"  {config.nproc} ranks ({group}, "
                f"{'one GPU each' if use_cuda else 'on the CPU'}), started by {LAUNCHER}"
            )
            outcomes = launch(
                config,
                group,
                run_stage,
                tb_stage,
                quiet or console is None,
                # (the parent's: a spawned rank's own argv is not the command)
                list(command_line) if command_line is not None else metadata.this_command_line(),
                began,
            )
            result = _assembled(config, group, outcomes, run_stage, tb_run_dir)
            runs.write_result(run_stage, result)
            runs.check_destination(config)
            with signals.deferred():
                replace_dirs([(tb_stage, tb_run_dir), (run_stage, run_dir)])
        finally:
            for stage in stages:
                if not is_committed(stage):
                    shutil.rmtree(stage, ignore_errors=True)
    _say_ranks(result, progress)
    return result


def _say_ranks(result: RunResult, progress: window.Progress) -> None:
    """Each rank's figures and trace, one line a rank (the run's own lines are rank 0's)."""
    for figures in result.ranks.ranks if result.ranks else []:
        phases = ", ".join(
            f"{label} p50 {units.time(value, thousands=False)}"
            for label, value in (("TTFT", figures.ttft_p50_ms), ("TPOT", figures.tpot_p50_ms))
            if value is not None
        )
        traces = ", ".join(Path(name).name for name in figures.trace_files)
        progress.say(f"  rank {figures.rank} ({figures.device}): {phases}; trace {traces}")


def launch(
    config: RunConfig,
    group: str,
    run_stage: Path,
    tb_stage: Path,
    quiet: bool,
    command_line: list[str] | None,
    began: float,
) -> dict[int, dict[str, Any]]:
    """Start the ranks with elastic_launch and wait for them: rank -> what it returned. A rank
    that failed is one UserError naming it and its error (the first to fail, when several
    did)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    launch_config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=config.nproc,
        run_id=f"infer-profiler-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",  # (torchrun --standalone: a free port on this host)
        max_restarts=0,
        monitor_interval=0.1,
        # spawn for CUDA (a forked CUDA context breaks); fork on the CPU, where it spares each
        # rank the imports its parent already made
        start_method="spawn" if group == "nccl" else "fork",
    )
    if group != "nccl":
        _import_model_code()
    args = (config_to_json(config), str(run_stage), str(tb_stage), group, quiet, command_line)
    with _launcher_quiet(), _own_signals():
        try:
            returned = elastic_launch(launch_config, rank_main)(*args, began)
        except ChildFailedError as error:
            raise UserError(failure_line(error)) from None
    return {int(rank): value for rank, value in returned.items()}


@contextlib.contextmanager
def _own_signals():
    """The launcher's agent takes SIGINT, SIGTERM and SIGHUP while the ranks run (it stops them
    and raises its SignalException): that is turned into the interruption the command handles
    (profiler.signals: Ctrl-C, or Terminated for SIGTERM and SIGHUP), and the handlers the
    command had are put back after."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    handled = (signal.SIGINT, *signals.HANDLED)
    saved = {signum: signal.getsignal(signum) for signum in handled}
    try:
        yield
    except SignalException as stop:
        if stop.sigval == signal.SIGINT:
            raise KeyboardInterrupt from None
        raise signals.Terminated(stop.sigval) from None
    finally:
        for signum, handler in saved.items():
            if handler is not None:
                signal.signal(signum, handler)


def failure_line(error: Any) -> str:
    """One line for a ChildFailedError: the first rank to fail and its error."""
    rank, failure = error.get_first_failure()
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    text = str(message or f"exit status {failure.exitcode}").strip()
    first = text.splitlines()[0] if text else f"exit status {failure.exitcode}"
    first = first.removeprefix(f"{UserError.__name__}: ")
    return f"rank {rank} failed: {first}; nothing was written"


@contextlib.contextmanager
def _launcher_quiet():
    """The launcher's own log lines (its start, a failed rank's traceback) held back: the run
    says what failed in one line."""
    prefixes = ("torch.distributed.elastic", "torch.multiprocessing")
    # (each of the launcher's modules has a logger with a level of its own)
    names = [n for n in logging.root.manager.loggerDict if n.startswith(prefixes)]
    loggers = [logging.getLogger(name) for name in {*prefixes, *names}]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _import_model_code() -> None:
    """transformers' Llama, imported once here, before the CPU ranks are forked."""
    with contextlib.suppress(ImportError):
        import transformers.models.llama.modeling_llama  # noqa: F401


def rank_main(
    config_data: dict[str, Any],
    run_stage: str,
    tb_stage: str,
    group: str,
    quiet: bool,
    command_line: list[str] | None,
    began: float,
) -> dict[str, Any]:
    """One rank (the launcher's entry point, in a process of its own): the process group, the
    sharded model, the run's phases; its figures and trace files' names."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    config = config_from_json(config_data)
    use_cuda = group == "nccl"
    device = _rank_device(use_cuda, local)
    if rank == 0:
        metadata.prefetch()
    dist.init_process_group(group, device_id=device if use_cuda else None)
    try:
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        own_run = Path(run_stage) / (RANKS_DIR if rank else "") / (f"rank{rank}" if rank else "")
        own_tb = Path(tb_stage) / f".rank{rank}"  # its own: each rank checks its traces alone
        own_run.mkdir(parents=True, exist_ok=True)
        own_tb.mkdir()
        progress = window.Progress(quiet or rank != 0, Console(stderr=True))
        result = harness.measure(
            config,
            backends.get(config.backend),
            device,
            use_cuda,
            progress,
            Phases(),
            began,
            command_line,
            own_run,
            own_tb,
            adapt=lambda model, _device: tensor_parallel.parallelize(model, mesh),
            workload_of=tensor_parallel.TensorParallelGenerate,
            write=rank == 0,
        )
        traces = _moved_up(own_tb, Path(tb_stage), window.worker_name(config), rank)
    finally:
        dist.destroy_process_group()
    return {
        "rank": rank,
        "device": str(device),
        "traces": traces,
        "files_dir": str(own_run.relative_to(run_stage)),
        **_figures(result),
    }


def _rank_device(use_cuda: bool, local: int) -> torch.device:
    """The rank's device: its GPU (made current), or the CPU with one intra-op thread, torchrun's
    default for several processes (OMP_NUM_THREADS=1): the ranks share the cores, and a rank
    forked from a parent that has run OpenMP threads hangs starting a team of its own (libgomp
    across fork)."""
    import torch

    if use_cuda:
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        return device
    torch.set_num_threads(1)
    return torch.device("cpu")


def _figures(result: RunResult) -> dict[str, Any]:
    """What rank 0 prints of each rank: its latency and, of a generation, its TTFT, TPOT and
    tokens/s."""
    generation = result.generation
    return {
        "p50_ms": result.timing.p50_ms,
        "mean_ms": result.timing.mean_ms,
        "iterations": result.timing.iters,
        "ttft_p50_ms": generation.ttft_ms.p50 if generation else None,
        "tpot_p50_ms": generation.tpot_ms.p50 if generation and generation.tpot_ms else None,
        "tokens_per_s": generation.tokens_per_s if generation else None,
    }


def _moved_up(own: Path, folder: Path, worker: str, rank: int) -> list[str]:
    """The rank's finished traces moved from its own folder into the run's one trace folder,
    named ``<worker>.rank<k>.<id>...``; their new names."""
    names = []
    for path in sorted(own.iterdir()):
        name = path.name
        if name.startswith(f"{worker}."):
            name = f"{worker}.rank{rank}.{name[len(worker) + 1 :]}"
        os.replace(path, folder / name)
        names.append(name)
    own.rmdir()
    return names


def _assembled(
    config: RunConfig,
    group: str,
    outcomes: dict[int, dict[str, Any]],
    run_stage: Path,
    tb_run_dir: Path,
) -> RunResult:
    """Rank 0's result (written by rank 0 into the staging folder) with its traces' final
    names and every rank's figures."""
    import msgspec

    result = read_result(run_stage / runs.RESULT_FILE)
    run_dir = config.runs_dir / config.run_name
    figures = [
        RankFigures(
            rank=rank,
            device=outcome["device"],
            trace_files=[str(tb_run_dir / name) for name in outcome["traces"]],
            files_dir=str(run_dir / outcome["files_dir"]),
            p50_ms=outcome["p50_ms"],
            mean_ms=outcome["mean_ms"],
            iterations=outcome["iterations"],
            ttft_p50_ms=outcome["ttft_p50_ms"],
            tpot_p50_ms=outcome["tpot_p50_ms"],
            tokens_per_s=outcome["tokens_per_s"],
        )
        for rank, outcome in sorted((o["rank"], o) for o in outcomes.values())
    ]
    trace = TraceInfo(
        files=figures[0].trace_files,
        dir=str(tb_run_dir),
        untraced_kernels=result.trace.untraced_kernels,
    )
    ranks = Ranks(
        world_size=config.nproc,
        backend=group,
        launcher=LAUNCHER,
        parallelism=tensor_parallel.PARALLELISM,
        ranks=figures,
    )
    return msgspec.structs.replace(result, trace=trace, ranks=ranks)
