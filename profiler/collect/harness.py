"""Collection: one run, top-down. The only code that touches the GPU is under profiler.collect.

run(config) -> RunResult: under the run's folder lock, build the model, count its FLOPs (one
forward pass), then the phases of profiler.collect.window in order, for the run's workload
(profiler.collect.workloads: what one step is, how it is timed and checked): prepare (and, with
--cuda-graphs, the capture of the step: profiler.collect.cuda_graphs), warm-up, the timed window
(its record: profiler.analysis.timed_window.TimedWindow), GPU compute and enqueue time in a
short window after it (profiler.collect.gpu_time), the profiled steps, the backend's own
measurements after both windows, the numeric check against the FP32 eager reference,
latency.csv and the workload's files, and --repeat-runs' windows in fresh processes
(profiler.collect.repeat_window). Everything is written into hidden staging folders and moved
into runs/<run>/ and tb_logs/<run>/ only when the run succeeded.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import torch
from rich.console import Console

from profiler import runs, signals, units
from profiler.collect import (
    backends,
    bytecode,
    cuda_graphs,
    engine_cache,
    flops,
    gpu_time,
    graph_capture,
    metadata,
    models,
    numerics,
    repeat_window,
    target_noise,
    timing,
    untraced,
    window,
)
from profiler.collect.device import (
    HAS_NVTX,
    NVTX_DOMAIN,
    name as device_name,
    nvtx_range,
    out_of_memory_kind,
    set_math_flags,
    sync,
)
from profiler.collect.workloads.forward import Forward
from profiler.collect.workloads.generate import Generate
from profiler.collect.workloads.protocol import RunContext, Workload
from profiler.errors import OutOfMemory, UserError
from profiler.fsutil import (
    clean_leftovers,
    folder_lock,
    is_committed,
    remove_bare,
    replace_dirs,
    staging_dir,
    write_text_atomic,
)
from profiler.runs import model_source, phases
from profiler.runs.config import RunConfig
from profiler.runs.noise_floor import cpu_kind, read_floor
from profiler.runs.phases import Phases
from profiler.runs.result import GpuCompute, RunResult
from profiler.runs.samples import ConfigSamples, ProcessWindow, processes_text, spread_of_runs

#: --workload name -> what one step is, how it is timed and checked
WORKLOADS: dict[str, Callable[[RunContext], Workload]] = {"forward": Forward, "generate": Generate}


def run(
    config: RunConfig,
    quiet: bool = False,
    *,
    console: Console | None = None,
    command_line: list[str] | None = None,
    started: float | None = None,
) -> RunResult:
    """Run one configuration end to end and return the result written to runs/<run>/result.json.

    The run holds the write lock of runs/<run>/ and tb_logs/<run>/ throughout (a second run of
    the same name refuses with one line); under it, it first removes what killed runs left in
    runs/ and tb_logs/, then checks the destination. Running out of memory and the failures of
    a --model package.module:function are one-line errors. The result's timing records
    where the seconds went (profiler.runs.phases). ``command_line``: the command result.json
    records (default: this process's); ``started``: when the process began loading modules
    (perf_counter), the start of the imports phase (None: no imports phase). ``console``: where
    the progress lines and bars go (stderr, the command's output sink's); none without one, or
    ``quiet``."""
    if config.nproc > 1:  # (`run` starts the ranks: profiler.collect.ranks)
        raise UserError(
            f"--nproc {config.nproc} runs with `profile.py run`, which starts the ranks; "
            "a run in this process is one rank"
        )
    began = time.perf_counter()
    metadata.prefetch()  # git and nvidia-smi answer while the run goes on
    timer = Phases()
    imports_s = phases.imports_s(began, started)
    if imports_s is not None:
        timer.add("imports", imports_s)
    backend = backends.get(config.backend)
    use_cuda = torch.cuda.is_available()
    reason = backend.unavailable_reason(use_cuda)
    if reason:
        raise UserError(f"backend {backend.name} cannot run here: {reason}")
    if config.cuda_graphs:
        cuda_graphs.check(config, backend, use_cuda)
    runs.check_separate_roots(config.runs_dir, config.tb_dir)
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    with (
        folder_lock(run_dir, tb_run_dir, what="run"),
        models.user_model_errors(config.model),
        _memory_errors(config),
    ):
        for folder in (config.runs_dir, config.tb_dir):
            clean_leftovers(folder)
        runs.check_destination(config)
        progress = window.Progress(quiet, console)
        return _run(
            config, backend, use_cuda, progress, timer, began - (imports_s or 0.0), command_line
        )


def _run(
    config: RunConfig,
    backend,
    use_cuda: bool,
    progress: window.Progress,
    timer: Phases,
    began: float,
    command_line: list[str] | None,
) -> RunResult:
    """``began``: the perf_counter the run's wall time counts from (imports included)."""
    device = torch.device("cuda" if use_cuda else "cpu")
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    stages: list[Path] = []
    try:
        run_stage = _staged(stages, run_dir)
        tb_stage = _staged(stages, tb_run_dir)
        result = measure(
            config,
            backend,
            device,
            use_cuda,
            progress,
            timer,
            began,
            command_line,
            run_stage,
            tb_stage,
        )
        runs.check_destination(config)  # again: a writer that ignored the lock (an older version)
        with signals.deferred():  # a signal does not cut the moves in half
            # one change: a SIGKILL between the two leaves what the next command finishes
            replace_dirs([(tb_stage, tb_run_dir), (run_stage, run_dir)])
            if not result.trace.files:  # --capture cuda-profiler-api: no trace folder
                remove_bare(tb_run_dir)  # (none of the run this one replaced either)
    finally:
        for stage in stages:
            if not is_committed(stage):  # (after the commit: the next command's to finish)
                shutil.rmtree(stage, ignore_errors=True)
    return result


def measure(
    config: RunConfig,
    backend,
    device,
    use_cuda: bool,
    progress: window.Progress,
    timer: Phases,
    began: float,
    command_line: list[str] | None,
    run_stage: Path,
    tb_stage: Path,
    *,
    adapt: Callable | None = None,
    workload_of: Callable[[RunContext], Workload] | None = None,
    write: bool = True,
) -> RunResult:
    """Build the model, run the phases (``collect``) into the staging folders and return the
    result, written as ``run_stage``/result.json unless ``write`` is False. ``adapt(model,
    device)``: what the built model becomes before its workload sees it (a rank's tensor-parallel
    shard: profiler.collect.tensor_parallel), or None; ``workload_of``: the workload it runs
    (default: --workload's, WORKLOADS)."""
    precision_flags = set_math_flags(config)
    context, workload, roofline_inputs = _build(
        config, backend, device, use_cuda, progress, timer, adapt, workload_of
    )
    built_s = timer.seconds["build"]
    metadata.settle()  # no git or nvidia-smi beside the backend and the measured windows
    bytecode.stop_precompile()  # nor a background compilation (profiler.collect.bytecode)
    collected = collect(workload, context, progress, run_stage, tb_stage, timer)
    _check_error(config, backend, collected)
    with timer("write"):
        result = _result(
            config,
            backend,
            device,
            use_cuda,
            workload,
            collected,
            built_s,
            precision_flags,
            roofline_inputs,
            command_line,
        )
        if write:
            runs.write_result(run_stage, result)
    # written again with the phases, the first writing included (the same few ms again)
    result = _with_phases(result, timer, time.perf_counter() - began)
    if write:
        runs.write_result(run_stage, result)
    return result


def _build(
    config: RunConfig,
    backend,
    device,
    use_cuda: bool,
    progress: window.Progress,
    timer: Phases,
    adapt: Callable | None = None,
    workload_of: Callable[[RunContext], Workload] | None = None,
) -> tuple[RunContext, Workload, dict | None]:
    """Build the model and its workload (bad models and weights fail here, before any writing);
    with the roofline's inputs where the workload counts FLOPs."""
    with timer("build"):
        model, inputs = models.build(config, device)
        if adapt is not None:
            model = adapt(model, device)
    context = RunContext(
        config,
        backend,
        model,
        inputs,
        device,
        use_cuda,
        progress.say,
        progress.warn,
        # (under --capture cuda-profiler-api nsys or ncu trace: no torch.profiler of ours)
        profile_captures=config.capture == "torch",
    )
    # refuses what it cannot measure
    workload = (workload_of or WORKLOADS[config.workload])(context)
    # the run's first line, once what was asked for is built (a bad model, weights or length is
    # the one error line), before its FLOPs are counted and its backend prepared
    progress.say(
        f"[bold]{config.model} {backend.name} bs{config.batch_size}{workload.label}"
        f"[/bold] on {device_name(use_cuda)}"
    )
    roofline_inputs = None
    if workload.counts_flops:  # FLOPs of one forward pass
        with timer("flops"), progress.phase("counting FLOPs"):
            counted = _flop_count(config, model, inputs)
            roofline_inputs = flops.roofline_inputs(
                model, inputs, backend.precision, config.batch_size, counted
            )
    return context, workload, roofline_inputs


def _check_error(config: RunConfig, backend, collected: Collected) -> None:
    """Refuse a run whose output is further from the FP32 reference than --max-rel-error."""
    if config.max_rel_error is not None and "skipped" not in collected.numerics:
        why = numerics.exceeds(collected.numerics, config.max_rel_error)
        if why:
            raise UserError(
                f"{backend.name} on {config.model} bs{config.batch_size}: {why} "
                "against the FP32 eager reference; nothing was written"
            )


@dataclass
class Collected:
    """What the phases of one run measured, before it becomes a RunResult."""

    prepare_s: float
    first_call_s: float
    timed: window.Timed
    output: object
    activities: list
    trace_files: list[str]
    notes: dict
    artifacts: list[str]
    numerics: dict
    repeat_spread: runs.RepeatSpread | None
    target: runs.TargetNoise | None = None
    gpu_compute: GpuCompute | None = None
    untraced_kernels: dict[str, int] | None = None


def collect(
    workload: Workload,
    context: RunContext,
    progress: window.Progress,
    run_stage: Path,
    tb_stage: Path,
    timer: Phases,
) -> Collected:
    """The phases in order (profiler.collect.window), for any workload: prepare, warm-up,
    timed, profile, after windows, numerics, the files, repeat windows; each one's seconds
    added to ``timer``."""
    config, backend, use_cuda = context.config, context.backend, context.use_cuda
    workload.before_prepare(timer)
    step, prepare_s, first_call_s = window.prepare(
        workload, use_cuda, progress, graph_capture.for_backend(config, backend.family, use_cuda)
    )
    timer.add("prepare", prepare_s)
    timer.add("first_call", first_call_s)
    if config.cuda_graphs and not workload.captures_graphs:
        with timer("graph_capture"):
            step = cuda_graphs.capture(
                step, backend.name, progress.say, profiled=context.profile_captures
            )
    timed, began = _timed_window(workload, step, config, use_cuda, progress, timer)
    gpu_window = _gpu_time(config, step, timed, use_cuda, progress, timer)
    phase_windows = _phase_windows(workload, timed, use_cuda, timer)
    untraced_kernels = _untraced_call(config, step, use_cuda, progress, timer)
    activities, trace_files, snapshot = window.profile(
        config, step, use_cuda, progress, tb_stage, timer, run_stage
    )
    notes, artifacts = window.after_windows(step, run_stage, timer)
    artifacts = sorted(artifacts + snapshot)  # (run --memory-history's snapshot: a run file)
    with (
        nvtx_range("numerics"),
        timer("numerics"),
        progress.phase("numerics (the output against the FP32 eager reference)"),
    ):
        numeric_check, output = workload.check(step, timed.output)
    with timer("write"):
        window.write_latency_csv(
            run_stage, list(timed.window.latencies_ms), gpu_window.gpu_ms, timed.enqueue_ms
        )
        artifacts = artifacts + workload.write(run_stage, timed.details)
    own = ProcessWindow(
        tuple(timed.window.latencies_ms), gpu_window.gpu_ms, timed.enqueue_ms, phases=phase_windows
    )
    if phase_windows:  # the phases' windows are kept beside the whole one's (processes.csv)
        write_text_atomic(run_stage / runs.PROCESSES_CSV, processes_text(ConfigSamples((own,))))
    spread, reached = _repeat_windows(config, own, timed, progress, run_stage, timer, began)
    return Collected(
        prepare_s,
        first_call_s,
        timed,
        output,
        activities,
        trace_files,
        notes,
        artifacts,
        numeric_check,
        spread,
        reached,
        gpu_window.figures,
        untraced_kernels,
    )


def _phase_windows(
    workload: Workload, timed: window.Timed, use_cuda: bool, timer: Phases
) -> dict[str, ProcessWindow]:
    """The timed window's phases as windows of their own (a generation's TTFT and TPOT), their
    GPU time measured apart on a GPU (its seconds counted as GPU compute)."""
    began = time.perf_counter()
    found = workload.phase_windows(timed.details, use_cuda)
    if found and use_cuda:
        timer.add("gpu_compute", time.perf_counter() - began)
    return found


def _timed_window(
    workload: Workload,
    step,
    config: RunConfig,
    use_cuda: bool,
    progress: window.Progress,
    timer: Phases,
) -> tuple[window.Timed, float]:
    """The warm-up and the timed window (extended to --target-noise); with the perf_counter the
    timed window began at."""
    plan = timing.plan_window(config.iters, config.timed_warmup, config.min_time, use_cuda)
    with timer("warm_up"):
        estimate_ms = window.warm_up(plan, step, use_cuda, progress)
    with timer("timed"):
        began = time.perf_counter()
        timed = window.timed(
            workload, step, plan, estimate_ms, config.batch_size, use_cuda, progress
        )
        if config.target_noise is not None:
            timed = target_noise.extend_window(
                workload, step, timed, config, use_cuda, progress, began
            )
    return timed, began


def _repeat_windows(
    config: RunConfig,
    own: ProcessWindow,
    timed: window.Timed,
    progress: window.Progress,
    run_stage: Path,
    timer: Phases,
    began: float,
) -> tuple[runs.RepeatSpread | None, runs.TargetNoise | None]:
    """Windows in fresh processes (--repeat-runs, --target-noise): their spread, and how near
    the noise target came."""
    spread, reached = None, None
    if config.repeat_runs > 1 and config.target_noise is None:
        with timer("repeat_runs"):
            spread = _repeat_spread(config, own, timed, progress, run_stage)
    if config.target_noise is not None:
        with timer("repeat_runs"):
            windows, reached = target_noise.more_processes(config, own, timed, progress, began)
            spread = _record_windows(
                windows,
                progress,
                run_stage,
                f"--target-noise {units.plain(config.target_noise)}: the run's window,"
                " then windows in fresh processes until the p50 interval "
                "was within it or the budget ran out",
            )
    return spread, reached


def _untraced_call(
    config: RunConfig, step, use_cuda: bool, progress: window.Progress, timer: Phases
) -> dict[str, int] | None:
    """The kernels of one call with no CPU-side tracing (profiler.collect.untraced), or None
    where that cannot be recorded."""
    if untraced.why_not(use_cuda, config.capture) is not None:
        return None
    with nvtx_range("untraced call"), timer("untraced_call"):
        counts = untraced.record(step.fn, step.inputs, lambda: sync(use_cuda))
    progress.say(
        f"  untraced call: {sum(counts.values())} kernel launches of {len(counts)} "
        "names (kernel records only; the profiled steps are checked against it)"
    )
    return counts


def _gpu_time(
    config: RunConfig,
    step,
    timed: window.Timed,
    use_cuda: bool,
    progress: window.Progress,
    timer: Phases,
) -> gpu_time.GpuWindow:
    """GPU time in a window of its own after the timed one, and the timed window's enqueue
    time (profiler.collect.gpu_time); on a CPU or for a generation, why not."""
    reason = gpu_time.why_not(use_cuda, config.workload)
    if reason is not None:
        return gpu_time.GpuWindow(GpuCompute(not_measured=reason))
    with nvtx_range("gpu compute"), timer("gpu_compute"):
        measured = gpu_time.measure(
            step.fn,
            step.inputs,
            len(timed.window.latencies_ms),
            use_cuda,
            config.workload,
            enqueue_ms=timed.enqueue_ms,
        )
    figures = measured.figures
    if figures.not_measured is None:
        progress.say(
            f"  GPU time p50 {units.time(figures.gpu_p50_ms, thousands=False)}, enqueue p50 "
            f"{units.time(figures.enqueue_p50_ms, thousands=False)} ({figures.iterations} "
            "iterations behind "
            f"a sleep kernel, {figures.invalid_iterations} redone)"
        )
    else:
        progress.say(f"  GPU time: not measured ({figures.not_measured})")
    return measured


def _repeat_spread(
    config: RunConfig,
    own: ProcessWindow,
    timed: window.Timed,
    progress: window.Progress,
    run_stage: Path,
) -> runs.RepeatSpread:
    """--repeat-runs: more timed windows in fresh processes, one after another."""
    more = repeat_window.repeat(config, len(own.latency_ms), timed.plan.warmup, progress.say)
    samples = ConfigSamples((own, *more))
    return _record_windows(
        samples,
        progress,
        run_stage,
        f"--repeat-runs {len(samples)}: the run's window, then each repeat "
        "in a fresh process, one after another",
    )


def _record_windows(
    samples: ConfigSamples, progress: window.Progress, run_stage: Path, schedule: str
) -> runs.RepeatSpread:
    """Every window into processes.csv; the spread of their p50s."""
    p50s = samples.medians("latency")
    write_text_atomic(run_stage / runs.PROCESSES_CSV, processes_text(samples))
    spread = spread_of_runs(
        p50s, samples_csv=runs.PROCESSES_CSV, schedule=schedule, samples=samples
    )
    progress.say(
        f"  p50 over {len(p50s)} processes: "
        f"{units.time(min(p50s), thousands=False, labelled=False)} to "
        f"{units.time(max(p50s), thousands=False)} ({units.percent(spread.range_pct_of_median)} "
        "of the median)"
    )
    return spread


def _flop_count(config: RunConfig, model, inputs) -> dict:
    """The FLOP count, from the cache where it may be kept (a built-in model, --cache)."""
    facts = models.build_facts(config, inputs) if models.is_builtin(config) else None
    cache_dir = (
        engine_cache.entries_dir(config.cache_dir, flops.CACHE_KIND) if config.use_cache else None
    )
    return flops.cached_count(model, inputs, facts, cache_dir)


def _with_phases(result: RunResult, timer: Phases, wall_s: float) -> RunResult:
    timing_stats = msgspec.structs.replace(
        result.timing, phases_s=phases.ordered(timer.seconds), wall_s=round(wall_s, 3)
    )
    return msgspec.structs.replace(result, timing=timing_stats)


def _staged(stages: list[Path], final: Path) -> Path:
    """A staging folder for ``final``, remembered in ``stages`` for the clean-up."""
    stages.append(staging_dir(final))
    return stages[-1]


@contextlib.contextmanager
def _memory_errors(config: RunConfig):
    """Running out of GPU or host memory anywhere in the run (building the batch included) is
    one line with "out of memory" in it, which a sweep records as the cell status oom."""
    try:
        yield
    except Exception as error:
        kind = out_of_memory_kind(error)
        if kind is None:
            raise
        asked = re.search(
            r"(?:tried to allocate|requested buffer of size) ([0-9.]+ ?[A-Za-z]*)",
            str(error),
            re.IGNORECASE,
        )
        amount = f"{asked[1]} bytes" if asked and asked[1].isdigit() else asked and asked[1]
        detail = f", tried to allocate {amount}" if asked else ""
        raise OutOfMemory(
            f"{kind} out of memory at batch size {config.batch_size} "
            f"({config.backend}, {config.model}{detail}); try a smaller --bs",
            kind,
        ) from None


def _describe_output(output) -> dict:
    """Consume the output (so no work can be skipped) and record a checksum to spot NaNs."""
    first = numerics.first_tensor(output)
    if first is None:
        return {"type": type(output).__name__}
    checksum = float(first.float().sum().item())
    return {
        "shape": list(first.shape),
        "dtype": str(first.dtype).replace("torch.", ""),
        "checksum": checksum,
        "finite": bool(torch.isfinite(first).all().item()),
    }


def _result(
    config: RunConfig,
    backend,
    device,
    use_cuda: bool,
    workload: Workload,
    c: Collected,
    built_s: float,
    precision_flags: dict,
    roofline_inputs: dict | None = None,
    command_line: list[str] | None = None,
) -> RunResult:
    """Everything measured, as the typed run contract (profiler.runs.result.RunResult)."""
    env = metadata.environment(torch, command_line)
    env["nvtx"] = HAS_NVTX
    run_dir = config.runs_dir / config.run_name
    generation = workload.generation(c.timed.window, c.timed.details)
    facts = _backend_facts(backend, c)
    timing_stats = _timing_stats(c, workload, use_cuda, built_s, env)
    memory = runs.Memory(**c.timed.memory, **_engine_memory(facts.engine_memory))
    return RunResult(
        run_name=config.run_name,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model=config.model,
        batch_size=config.batch_size,
        device=str(device),
        workload=config.workload,
        config=_typed(config.to_dict(), runs.ConfigRecord),
        backend=facts,
        numerics=_typed(c.numerics, runs.Numerics),
        timing=timing_stats,
        memory=memory,
        output=_typed(_describe_output(c.output), runs.OutputInfo),
        profile=_profile_info(config, c, workload),
        trace=_trace_info(config, c),
        latency_csv=str(run_dir / runs.LATENCY_CSV),
        environment=_typed(env, runs.Environment),
        precision=_typed(precision_flags, runs.Precision),
        roofline_inputs=_typed(roofline_inputs, runs.RooflineInputs) if roofline_inputs else None,
        generation=None if generation is None else _typed(generation, runs.Generation),
        gpu_state=c.timed.gpu_state,
        model_source=model_source.of_imported(config.model),
    )


def _backend_facts(backend, c: Collected) -> runs.BackendFacts:
    """The backend's name and precision, and what its preparation noted."""
    notes = dict(c.notes)
    engine_memory = notes.pop("engine_memory", None)
    return runs.BackendFacts(
        name=backend.name,
        family=backend.family,
        precision=backend.precision,
        compile_s=notes.pop("compile_s", None),
        cache_load_s=notes.pop("load_s", None),
        warnings=list(notes.pop("warnings", [])),
        artifacts=c.artifacts,
        engine_memory=None if engine_memory is None else _typed(engine_memory, runs.EngineMemory),
        extra=notes,
    )


def _timing_stats(c: Collected, workload: Workload, use_cuda: bool, built_s: float, env: dict):
    """The timed window's statistics, with the noise target and the machine's noise floor."""
    plan = c.timed.plan
    timing_stats = c.timed.window.timing_stats(
        repeat_runs=c.repeat_spread,
        prepare_s=c.prepare_s,
        first_call_s=c.first_call_s,
        timer="cuda_event" if use_cuda else "perf_counter",
        sync=workload.sync,
        unit=workload.unit,
        warmup_iters=plan.warmup,
        model_build_s=built_s,
        iterations_chosen_by=plan.why,
        min_time_s=plan.min_time_s,
        gpu_compute=c.gpu_compute,
    )
    if c.target is not None and timing_stats.noise is not None:
        timing_stats = msgspec.structs.replace(
            timing_stats, noise=msgspec.structs.replace(timing_stats.noise, target=c.target)
        )
    floor = read_floor((env.get("gpu") or {}).get("name") or (cpu_kind() if not use_cuda else None))
    if floor is not None and timing_stats.noise is not None:
        timing_stats = msgspec.structs.replace(
            timing_stats,
            noise=msgspec.structs.replace(
                timing_stats.noise, machine_floor_cv=floor.between_process_cv
            ),
        )
    return timing_stats


def _profile_info(config: RunConfig, c: Collected, workload: Workload) -> runs.ProfileInfo:
    """How the profiled steps were captured."""
    return runs.ProfileInfo(
        capture=config.capture,
        activities=[a.name for a in c.activities],
        schedule=runs.Schedule(
            wait=config.wait, warmup=config.warmup, active=config.active, repeat=config.repeat
        ),
        steps_run=config.profiled_steps,
        step_span=window.STEP_SPAN,
        nvtx_domain=NVTX_DOMAIN if HAS_NVTX else None,
        step_is=workload.unit,
        phase_spans=workload.phase_spans,
    )


def _trace_info(config: RunConfig, c: Collected) -> runs.TraceInfo:
    """The trace files written, or why an outside profiler records them instead."""
    tb_run_dir = config.tb_dir / config.run_name
    return (
        runs.TraceInfo(
            dir=str(tb_run_dir),
            files=[str(tb_run_dir / f) for f in c.trace_files],
            untraced_kernels=c.untraced_kernels,
        )
        if c.trace_files
        else runs.TraceInfo(
            files=[],
            skipped=f"--capture {config.capture}: an outside profiler (nsys, ncu) "
            "records the active steps",
        )
    )


def _typed(data: dict, struct: type):
    return msgspec.convert(data, struct, strict=False)


def _engine_memory(engine: runs.EngineMemory | None) -> dict:
    """The TensorRT engines' device memory, where the backend recorded it."""
    if engine is None:
        return {}
    return {
        "engine_device_memory_bytes": engine.engine_device_memory_bytes,
        "engine_device_memory_why_not": engine.why_not,
    }
