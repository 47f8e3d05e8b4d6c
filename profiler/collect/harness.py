"""Collection: the only code that touches the GPU.

One run goes through four phases, each inside an NVTX range of the harness's domain:
prepare (build, move, compile, first call), warmup, timed (the latency figures), and profile
(torch.profiler with a wait/warmup/active/repeat schedule; or, with --capture cuda-profiler-api,
no torch.profiler but cudaProfilerStart/Stop around the active steps, so that nsys or ncu own
CUPTI and no trace is written). Timing comes before profiling so the
profiler's instrumentation can't leak into the latencies. After both windows come the backend's
own extra measurements (e.g. TensorRT per-layer timing) and the numeric check against the FP32
eager reference (profiler.collect.reference: computed from the measured model's own weights, copied to
the host before prepare, or loaded from the reference cache). Everything is written into hidden staging folders and moved into
runs/<run>/ and tb_logs/<run>/ only when the run succeeded.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import shutil
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch
from rich.markup import escape

import msgspec

from profiler.collect import backends, engine_cache, flops, metadata, models, numerics, timing
from profiler import runs
from profiler.runs import phases
from profiler import signals
from profiler.collect import reference as fp32_reference
from profiler.runs.config import RunConfig, check_path_component
from profiler.errors import UserError
from profiler.fsutil import clean_leftovers, folder_lock, replace_dir, staging_dir, write_text_atomic
from profiler.runs.phases import Phases
from profiler.runs.result import RunResult
from profiler.collect.timing import latency_stats, time_iterations
from profiler.analysis.noise import Noise, noise

NVTX_DOMAIN = "infer-profiler"
# the backend every other one is checked against
REFERENCE_BACKEND = "pytorch_fp32"

try:
    import nvtx as _nvtx
except ImportError:  # recorded in the metadata; ranges are then simply absent
    _nvtx = None


def nvtx_range(message: str):
    if _nvtx is None:
        return contextlib.nullcontext()
    return _nvtx.annotate(message, domain=NVTX_DOMAIN)


def set_math_flags(config: RunConfig) -> dict:
    """FP32 means FP32 unless --tf32: set both TF32 switches explicitly (PyTorch's default lets
    cuDNN use TF32) and report what they read, with cuDNN's autotuner setting."""
    torch.backends.cuda.matmul.allow_tf32 = config.tf32
    torch.backends.cudnn.allow_tf32 = config.tf32
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    return {"tf32": config.tf32, "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark}


class _Progress:
    """Phase lines and a progress bar on stderr; quiet leaves only the phase lines out of stdout."""

    def __init__(self, quiet: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.quiet = quiet

    def say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, highlight=False)

    @contextlib.contextmanager
    def bar(self, label: str, total: int):
        if self.quiet or not self.console.is_terminal:
            yield lambda: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=self.console,
                      transient=True) as progress:
            task = progress.add_task(label, total=total)
            yield lambda: progress.advance(task)


def _sync(use_cuda: bool) -> None:
    if use_cuda:
        torch.cuda.synchronize()


def _worker_name(config: RunConfig) -> str:
    # the TensorBoard plugin reads "<worker>.<span>.pt.trace.json": no dots in the worker name
    return re.sub(r"[^A-Za-z0-9_-]", "_", config.model) or "worker"


def _out_of_memory_types() -> tuple:
    kinds = [getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)]
    return tuple(k for k in kinds if k is not None)


# torch's CPU allocator raises a plain RuntimeError: "... DefaultCPUAllocator: can't allocate
# memory: you tried to allocate N bytes. Error code 12 (Cannot allocate memory)"
_HOST_OOM = re.compile(r"can't allocate memory|Cannot allocate memory")


def out_of_memory_kind(error: BaseException) -> str | None:
    """"CUDA" or "host" when ``error`` is running out of that memory, else None."""
    if isinstance(error, _out_of_memory_types()):
        return "CUDA"
    if isinstance(error, MemoryError) or (
            isinstance(error, RuntimeError) and _HOST_OOM.search(str(error))):
        return "host"
    return None


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
        asked = re.search(r"tried to allocate ([0-9.]+ ?[A-Za-z]*)", str(error), re.IGNORECASE)
        detail = f", tried to allocate {asked[1]}" if asked else ""
        raise UserError(f"{kind} out of memory at batch size {config.batch_size} "
                        f"({config.backend}, {config.model}{detail}); try a smaller --bs") \
            from None


def _release_cuda_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _first_tensor(output) -> torch.Tensor | None:
    tensors = [output] if isinstance(output, torch.Tensor) else [
        t for t in (output if isinstance(output, (tuple, list)) else []) if isinstance(t, torch.Tensor)]
    return tensors[0].detach() if tensors else None


def _describe_output(output) -> dict:
    """Consume the output (so no work can be skipped) and record a checksum to spot NaNs."""
    first = _first_tensor(output)
    if first is None:
        return {"type": type(output).__name__}
    checksum = float(first.float().sum().item())
    return {"shape": list(first.shape), "dtype": str(first.dtype).replace("torch.", ""),
            "checksum": checksum, "finite": bool(torch.isfinite(first).all().item())}


def run(config: RunConfig, quiet: bool = False) -> RunResult:
    """Run one configuration end to end and return the result written to runs/<run>/result.json.

    The run holds the write lock of runs/<run>/ and tb_logs/<run>/ throughout (a second run of
    the same name refuses with one line); under it, it first removes what killed runs left in
    runs/ and tb_logs/, then checks the destination. Running out of memory and the failures of
    a --model package.module:function are one-line errors. The result's timing records
    where the seconds went (profiler.runs.phases)."""
    began = time.perf_counter()
    metadata.prefetch()  # git and nvidia-smi answer while the run goes on
    timer = Phases()
    imports_s = phases.imports_s(began)
    if imports_s is not None:
        timer.add("imports", imports_s)
    backend = backends.get(config.backend)
    use_cuda = torch.cuda.is_available()
    reason = backend.unavailable_reason(use_cuda)
    if reason:
        raise UserError(f"backend {backend.name} cannot run here: {reason}")
    runs.check_separate_roots(config.runs_dir, config.tb_dir)
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    with folder_lock(run_dir, tb_run_dir, what="run"), models.user_model_errors(config.model), \
            _memory_errors(config):
        for folder in (config.runs_dir, config.tb_dir):
            clean_leftovers(folder)
        runs.check_destination(config)
        return _run(config, backend, use_cuda, quiet, timer, began - (imports_s or 0.0))


def _run(config: RunConfig, backend, use_cuda: bool, quiet: bool, timer: Phases,
         began: float) -> RunResult:
    """``began``: the perf_counter the run's wall time counts from (imports included)."""
    device = torch.device("cuda" if use_cuda else "cpu")
    progress = _Progress(quiet)
    precision_flags = set_math_flags(config)

    with timer("build"):  # bad models and weights fail here, before any writing
        model, inputs = models.build(config, device)
    built_s = timer.seconds["build"]
    # FLOPs of one forward pass: a generation's work is not one forward, so none is claimed
    roofline_inputs = None
    if config.workload != "generate":
        with timer("flops"):
            counted = _flop_count(config, model, inputs)
            roofline_inputs = flops.roofline_inputs(model, inputs, backend.precision,
                                                    config.batch_size, counted)

    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    stages: list[Path] = []
    try:
        run_stage = _staged(stages, run_dir)
        tb_stage = _staged(stages, tb_run_dir)
        collect = _collect
        if config.workload == "generate":  # one greedy generation per step
            from profiler.collect.workloads import generate
            collect = generate.collect
        metadata.settle()  # no git or nvidia-smi beside the backend and the measured windows
        collected = collect(config, backend, model, inputs, device, use_cuda, progress,
                            run_stage, tb_stage, timer)
        if config.max_rel_error is not None and "skipped" not in collected.numerics:
            why = numerics.exceeds(collected.numerics, config.max_rel_error)
            if why:
                raise UserError(f"{backend.name} on {config.model} bs{config.batch_size}: {why} "
                                "against the FP32 eager reference; nothing was written")
        with timer("write"):
            result = _result(config, backend, device, use_cuda, collected, built_s,
                             precision_flags, roofline_inputs)
            runs.write_result(run_stage, result)
        # written again with the phases, the first writing included (the same few ms again)
        result = _with_phases(result, timer, time.perf_counter() - began)
        runs.write_result(run_stage, result)
        runs.check_destination(config)  # again: a writer that ignored the lock (an older version)
        with signals.deferred():  # a signal does not cut the moves in half
            if result.trace.files:  # no trace with --capture cuda-profiler-api: keep tb_logs/
                replace_dir(tb_stage, tb_run_dir)
            replace_dir(run_stage, run_dir)
    finally:
        for stage in stages:
            shutil.rmtree(stage, ignore_errors=True)
    return result


def _flop_count(config: RunConfig, model, inputs) -> dict:
    """The FLOP count, from the cache where it may be kept (a built-in model, --cache)."""
    facts = models.build_facts(config, inputs) if models.is_builtin(config) else None
    cache_dir = engine_cache.entries_dir(config.cache_dir, flops.CACHE_KIND) \
        if config.use_cache else None
    return flops.cached_count(model, inputs, facts, cache_dir)


def _with_phases(result: RunResult, timer: Phases, wall_s: float) -> RunResult:
    timing_stats = msgspec.structs.replace(result.timing, phases_s=phases.ordered(timer.seconds),
                                           wall_s=round(wall_s, 3))
    return msgspec.structs.replace(result, timing=timing_stats)


def _staged(stages: list[Path], final: Path) -> Path:
    """A staging folder for ``final``, remembered in ``stages`` for the clean-up."""
    stages.append(staging_dir(final))
    return stages[-1]


@dataclass
class _Collected:
    """What the phases of one run measured, before it becomes a RunResult."""

    prepare_s: float
    first_call_s: float
    latencies: list[float]
    output: object
    activities: list
    trace_files: list[str]
    notes: dict
    artifacts: list[str]
    numerics: dict
    plan: timing.WindowPlan
    memory: dict
    noise: Noise
    repeat_spread: dict | None
    # --workload generate (profiler.collect.workloads.generate): the generation block, what one timed
    # iteration and one profiler step are, and the record_function spans inside a step
    generation: dict | None = None
    unit: str | None = None
    sync: str = "every iteration"
    phase_spans: list[str] | None = None


def _collect(config, backend, model, inputs, device, use_cuda, progress, run_stage: Path,
             tb_stage: Path, timer: Phases) -> _Collected:
    """The phases in order: prepare, warmup, timed, profile, after windows, numerics; each
    one's seconds added to ``timer``."""
    label = f"{config.model} {backend.name} bs{config.batch_size}"
    progress.say(f"[bold]{label}[/bold] on {torch.cuda.get_device_name() if use_cuda else 'CPU'}")
    reference = None
    if backend.name != REFERENCE_BACKEND:  # the FP32 weights, before the backend casts them
        with timer("numerics"):
            reference = fp32_reference.prepare(config, model)
    prepared, prepare_s, first_call_s = _prepare(config, backend, model, inputs, device,
                                                 use_cuda, progress)
    timer.add("prepare", prepare_s)
    timer.add("first_call", first_call_s)
    fn, inputs = prepared.fn, prepared.inputs
    plan = timing.plan_window(config.iters, config.timed_warmup, config.min_time, use_cuda)
    with timer("warm_up"):
        estimate_ms = _warm_up(plan, fn, inputs, use_cuda, progress)
    with timer("timed"):
        latencies, output, memory, window_noise = _timed(config, plan, estimate_ms, fn, inputs,
                                                         use_cuda, progress)
    activities, trace_files = _profile(config, fn, inputs, use_cuda, progress, tb_stage, timer)
    notes, artifacts = _after_windows(prepared, run_stage, timer)
    with nvtx_range("numerics"), timer("numerics"):
        numeric_check = check_numerics(config, backend.name, fn, inputs, device, use_cuda,
                                       reference)
    if "skipped" not in numeric_check:
        progress.say(f"  numerics vs FP32 eager: relative L2 error "
                     f"{_figure(numeric_check['rel_l2_error'])}, max abs error "
                     f"{_figure(numeric_check['max_abs_error'])} (reference "
                     f"{numeric_check['reference']['source']})")
    elif "reason" in numeric_check:
        progress.say(f"  [yellow]numerics: skipped ({numeric_check['skipped']}):[/] "
                     f"{escape(numeric_check['reason'])}")
    with timer("write"):
        _write_latency_csv(run_stage, latencies)
    spread = None
    if config.repeat_runs > 1:
        with timer("repeat_runs"):
            spread = _repeat_spread(config, plan, latencies, progress)
    return _Collected(prepare_s, first_call_s, latencies, output, activities, trace_files, notes,
                      artifacts, numeric_check, plan, memory, window_noise, spread)


def _prepare(config, backend, model, inputs, device, use_cuda, progress):
    """prepare: hand the model to the backend, and make the first call (compilers compile
    there), each timed with a synchronize at the end."""
    with nvtx_range("prepare"):
        began = time.perf_counter()
        prepared = backend.prepare(model, inputs, config, device)
        _sync(use_cuda)
        prepare_s = time.perf_counter() - began
        began = time.perf_counter()
        prepared.fn(*prepared.inputs)
        _sync(use_cuda)
        first_call_s = time.perf_counter() - began
    progress.say(f"  prepare {prepare_s:.2f} s, first call {first_call_s:.2f} s")
    for warning in prepared.notes.get("warnings", []):
        progress.say(f"  [yellow]warning:[/] {escape(warning)}")
    return prepared, prepare_s, first_call_s



def _warm_up(plan: timing.WindowPlan, fn, inputs, use_cuda, progress) -> float:
    """The untimed warm-up; returns the estimate of one call (ms) a time budget needs."""
    with nvtx_range("warmup"), progress.bar("warmup", plan.warmup) as tick:
        estimate_ms = timing.warm_up(fn, inputs, plan, use_cuda, tick)
        _sync(use_cuda)
    return estimate_ms


def _timed(config, plan: timing.WindowPlan, estimate_ms: float, fn, inputs, use_cuda,
           progress):
    """The timed window: its latencies, last output, peak memory and noise."""
    iters = plan.iterations(estimate_ms)
    timing.reset_peak_memory(use_cuda)
    with nvtx_range("timed"), progress.bar("timed", iters) as tick:
        latencies, output = time_iterations(fn, inputs, iters, use_cuda, tick)
    memory = timing.peak_memory(use_cuda)
    window_noise = noise(latencies)
    p50 = latency_stats(latencies, config.batch_size)["p50_ms"]
    progress.say(f"  timed {iters} iterations ({plan.why}): p50 {p50:.3f} ms, "
                 f"CV {100 * window_noise.cv:.1f} %")
    for warning in window_noise.warnings:
        progress.say(f"  [yellow]warning:[/] {escape(warning)}")
    return latencies, output, memory, window_noise


def _profile(config, fn, inputs, use_cuda, progress, tb_stage: Path, timer: Phases):
    """The profiled steps, as --capture asks: the activities and trace files (none with
    cuda-profiler-api)."""
    if config.capture == "torch":
        return _profile_with_torch(config, fn, inputs, use_cuda, progress, tb_stage, timer)
    with timer("profile"):
        _profile_with_cuda_profiler_api(config, fn, inputs, use_cuda, progress)
    return [], []


def _after_windows(prepared, run_stage: Path, timer: Phases | None = None
                   ) -> tuple[dict, list[str]]:
    """The backend's own measurements after both windows; its artifacts written into the run
    folder. Returns the backend's notes and the artifacts' file names."""
    notes = dict(prepared.notes)
    artifacts = dict(notes.pop("artifacts", {}))
    if prepared.after_windows is not None:
        with nvtx_range("after windows"), (timer or Phases())("after_windows"):
            extra = dict(prepared.after_windows())
        artifacts.update(extra.pop("artifacts", {}))
        notes.update(extra)
    for file_name, text in artifacts.items():
        write_text_atomic(run_stage / check_path_component(file_name, "artifact name"), text)
    return notes, sorted(artifacts)


def _write_latency_csv(run_stage: Path, latencies: list[float]) -> None:
    csv_text = io.StringIO()
    writer = csv.writer(csv_text, lineterminator="\n")
    writer.writerow(["iteration", "latency_ms"])
    writer.writerows((i, f"{ms:.6f}") for i, ms in enumerate(latencies))
    write_text_atomic(run_stage / runs.LATENCY_CSV, csv_text.getvalue())


def _result(config: RunConfig, backend, device, use_cuda: bool, c: _Collected, built_s: float,
            precision_flags: dict, roofline_inputs: dict | None = None) -> RunResult:
    """Everything measured, as the typed run contract (profiler.runs.result.RunResult)."""
    env = metadata.environment(torch)
    env["nvtx"] = _nvtx is not None
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    notes = dict(c.notes)
    engine_memory = notes.pop("engine_memory", None)
    facts = runs.BackendFacts(
        name=backend.name, family=backend.family, precision=backend.precision,
        compile_s=notes.pop("compile_s", None), cache_load_s=notes.pop("load_s", None),
        warnings=list(notes.pop("warnings", [])), artifacts=c.artifacts,
        engine_memory=None if engine_memory is None else _typed(engine_memory,
                                                                runs.EngineMemory),
        extra=notes)
    window_noise = _typed({**c.noise.to_dict(), "repeat_runs": c.repeat_spread},
                          runs.NoiseStats)
    timing_stats = runs.TimingStats(
        prepare_s=c.prepare_s, first_call_s=c.first_call_s,
        timer="cuda_event" if use_cuda else "perf_counter", sync=c.sync, unit=c.unit,
        warmup_iters=c.plan.warmup, model_build_s=built_s,
        **latency_stats(c.latencies, config.batch_size), iters=len(c.latencies),
        iterations_chosen_by=c.plan.why, min_time_s=c.plan.min_time_s, noise=window_noise)
    memory = runs.Memory(**c.memory, **_engine_memory(facts.engine_memory))
    profile = runs.ProfileInfo(
        capture=config.capture, activities=[a.name for a in c.activities],
        schedule=runs.Schedule(wait=config.wait, warmup=config.warmup, active=config.active,
                               repeat=config.repeat),
        steps_run=config.profiled_steps, step_span="inference_step",
        nvtx_domain=NVTX_DOMAIN if _nvtx is not None else None, step_is=c.unit,
        phase_spans=c.phase_spans)
    trace = runs.TraceInfo(dir=str(tb_run_dir), files=[str(tb_run_dir / f) for f in c.trace_files]) \
        if c.trace_files else runs.TraceInfo(
            files=[], skipped=f"--capture {config.capture}: an outside profiler (nsys, ncu) "
            "records the active steps")
    return RunResult(
        run_name=config.run_name,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model=config.model, batch_size=config.batch_size, device=str(device),
        workload=config.workload, config=_typed(config.to_dict(), runs.ConfigRecord),
        backend=facts, numerics=_typed(c.numerics, runs.Numerics), timing=timing_stats,
        memory=memory,
        output=_typed(_describe_output(c.output), runs.OutputInfo), profile=profile,
        trace=trace, latency_csv=str(run_dir / runs.LATENCY_CSV),
        environment=_typed(env, runs.Environment),
        precision=_typed(precision_flags, runs.Precision),
        roofline_inputs=_typed(roofline_inputs, runs.RooflineInputs) if roofline_inputs else None,
        generation=None if c.generation is None else _typed(c.generation, runs.Generation))


def _typed(data: dict, struct: type):
    return msgspec.convert(data, struct, strict=False)


def _engine_memory(engine: runs.EngineMemory | None) -> dict:
    """The TensorRT engines' device memory, where the backend recorded it."""
    if engine is None:
        return {}
    return {"engine_device_memory_bytes": engine.engine_device_memory_bytes,
            "engine_device_memory_why_not": engine.why_not}


def _profile_with_torch(config, fn, inputs, use_cuda, progress, tb_stage: Path,
                        timer: Phases | None = None):
    """torch.profiler over the wait/warmup/active/repeat schedule; the trace files' names.
    ``timer`` gets the window as profile, less the trace handler's writing (and the check of
    the files written) as trace_write."""
    timer = timer or Phases()
    writing = Phases()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if use_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    write_trace = torch.profiler.tensorboard_trace_handler(
        str(tb_stage), worker_name=_worker_name(config), use_gzip=config.gzip)

    def handler(prof) -> None:
        with writing("trace_write"):
            write_trace(prof)

    began = time.perf_counter()
    schedule = torch.profiler.schedule(wait=config.wait, warmup=config.warmup,
                                       active=config.active, repeat=config.repeat)
    # each cycle's trace is exported by the handler, so clearing events between cycles is intended
    warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
    with kineto_quiet(not use_cuda), nvtx_range("profile"), \
            progress.bar("profile", config.profiled_steps) as tick, \
            torch.profiler.profile(activities=activities, schedule=schedule,
                                   on_trace_ready=handler, record_shapes=config.record_shapes,
                                   profile_memory=config.profile_memory,
                                   with_stack=config.with_stack,
                                   with_flops=config.with_flops) as prof:
        for step in range(config.profiled_steps):
            with torch.profiler.record_function("inference_step"), nvtx_range(f"step {step}"):
                fn(*inputs)
                _sync(use_cuda)
            prof.step()
            tick()
    window_s = time.perf_counter() - began
    timer.add("profile", window_s - writing.seconds.get("trace_write", 0.0))
    with writing("trace_write"):
        names = finished_traces(tb_stage)
    timer.add("trace_write", writing.seconds["trace_write"])
    return activities, names


#: what Kineto's C++ side writes to fd 2 on a machine without a GPU, at every profiler start
#: and stop: its USDT probe lines and "gpuGetDeviceCount failed with code 35" (no CUDA driver)
KINETO_NOISE = re.compile(r"^(USDT:|ERROR:.*gpuGetDeviceCount failed)")


@contextlib.contextmanager
def kineto_quiet(enabled: bool):
    """Keep KINETO_NOISE off the terminal: fd 2 goes to a temporary file for the block (Python's
    own stderr, the progress bar included, still goes to the terminal), and the lines that are
    not Kineto's noise are written back afterwards."""
    if not enabled:
        yield
        return
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    saved_fd, python_stderr = os.dup(2), sys.stderr
    with tempfile.TemporaryFile("w+b") as caught:
        os.dup2(caught.fileno(), 2)
        sys.stderr = open(saved_fd, "w", closefd=False, encoding=python_stderr.encoding,
                          errors="backslashreplace")
        try:
            yield
        finally:
            sys.stderr.flush()
            sys.stderr = python_stderr
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            caught.seek(0)
            kept = [line for line in caught.read().decode(errors="replace").splitlines(True)
                    if not KINETO_NOISE.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")


def finished_traces(folder: Path) -> list[str]:
    """The names of the trace files torch.profiler finished in ``folder``. One it did not finish
    (Kineto's ``.pt.trace.json.tmp`` left by a failed write, e.g. on a full disk, or a file cut
    short) fails the run: a truncated trace is never kept as a result."""
    names = sorted(p.name for p in folder.iterdir() if ".pt.trace.json" in p.name)
    finished = [name for name in names if name.endswith(TRACE_SUFFIXES)]
    broken = [name for name in names if name not in finished or not _is_whole(folder / name)]
    if broken:
        raise UserError(f"torch.profiler did not finish writing the trace ({', '.join(broken)} "
                        "is cut short; is the disk full?); nothing was written")
    if not finished:
        raise UserError("torch.profiler wrote no trace file (is the disk full?); nothing was "
                        "written")
    return finished


def _is_whole(path: Path) -> bool:
    """The file is a complete trace: a gzip stream that ends properly (its CRC checked), and
    JSON text that ends with its closing brace."""
    import gzip
    import zlib

    try:
        if path.name.endswith(".gz"):
            tail = b""
            with gzip.open(path, "rb") as stream:
                while chunk := stream.read(1 << 20):
                    tail = (tail + chunk)[-64:]
        else:
            with open(path, "rb") as stream:
                stream.seek(max(0, path.stat().st_size - 64))
                tail = stream.read()
    except (OSError, EOFError, zlib.error):
        return False
    return tail.rstrip().endswith((b"}", b"]"))


def active_steps(config: RunConfig) -> list[int]:
    """Step numbers the schedule records (the same numbers in both capture modes, and in the
    "step N" NVTX ranges): per cycle, after ``wait`` and ``warmup`` steps, ``active`` steps."""
    cycle = config.wait + config.warmup + config.active
    return [c * cycle + config.wait + config.warmup + i
            for c in range(config.repeat) for i in range(config.active)]


def _profile_with_cuda_profiler_api(config, fn, inputs, use_cuda, progress) -> None:
    """The same steps and NVTX ranges as with torch.profiler, but no torch.profiler: each
    cycle's active steps run between torch.cuda.profiler.start() and stop()
    (cudaProfilerStart/Stop), which nsys --capture-range=cudaProfilerApi and ncu
    --profile-from-start off honour. On a machine without CUDA the calls are skipped."""
    active = set(active_steps(config))
    capturing = False
    with nvtx_range("profile"), progress.bar("profile", config.profiled_steps) as tick:
        for step in range(config.profiled_steps):
            if step in active and not capturing:
                _sync(use_cuda)
                if use_cuda:
                    torch.cuda.profiler.start()
                capturing = True
            with torch.profiler.record_function("inference_step"), nvtx_range(f"step {step}"):
                fn(*inputs)
                _sync(use_cuda)
            if capturing and step + 1 not in active:
                if use_cuda:
                    torch.cuda.profiler.stop()
                capturing = False
            tick()


def _repeat_spread(config: RunConfig, plan: timing.WindowPlan, latencies: list[float],
                   progress) -> dict:
    """--repeat-runs: more timed windows in fresh processes; the spread of their p50s."""
    from profiler.collect.repeat_window import repeat
    from profiler.analysis.noise import spread_of_runs

    windows = repeat(config, len(latencies), plan.warmup, progress.say)
    p50s = [latency_stats(w, config.batch_size)["p50_ms"] for w in [latencies, *windows]]
    spread = spread_of_runs(p50s)
    progress.say(f"  p50 over {len(p50s)} processes: {min(p50s):.3f} to {max(p50s):.3f} ms "
                 f"({spread['range_pct_of_median']:.1f} % of the median)")
    return spread


def _figure(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.3g}"


def check_numerics(config: RunConfig, backend_name: str, fn, inputs: tuple, device,
                   use_cuda: bool, reference: fp32_reference.Reference | None) -> dict:
    """Compare one more call of the backend with the FP32 eager reference.

    ``reference`` (profiler.collect.reference, prepared before the backend saw the model; None for the
    reference backend itself) holds the measured model's FP32 weights: its output is loaded
    from the reference cache, or computed by a fresh build holding those weights on the same
    device with TF32 as --tf32 set it, on this run's inputs cast back to float32, so both see
    identical input values.
    """
    if backend_name == REFERENCE_BACKEND:
        return {"skipped": f"{REFERENCE_BACKEND} is the FP32 eager reference itself"}
    # a fresh call, cloned: an engine may reuse its output buffers across calls
    output = _first_tensor(fn(*inputs))
    if output is None:
        return {"skipped": "the output is not a tensor"}
    output = output.clone()
    kind = None
    try:
        reference_output, source = reference.output(inputs, device, use_cuda)
    except Exception as error:  # FP16/BF16/TensorRT can fit batches that FP32 cannot
        kind = out_of_memory_kind(error)
        if kind is None:
            raise
    if kind is not None:  # out of the except block: the reference's frames are freed
        _release_cuda_memory()
        return {"skipped": "reference did not fit",
                "reason": f"{kind} out of memory in the FP32 eager reference at batch size "
                          f"{config.batch_size}; the measurement is kept"}
    result = numerics.compare(output, reference_output)
    result["reference"] = {
        "backend": REFERENCE_BACKEND,
        "how": "FP32 eager build holding the measured model's weights (copied before the "
               "backend saw them) on this run's inputs cast to float32 (contiguous)",
        "device": str(device),
        "tf32": config.tf32,
        "source": source,
        "cache_key": reference.cache_key,
        "cache": reference.cache_note,
    }
    return result
