"""The phases of a run as public steps, the same for every workload (profiler.collect.workloads):
prepare (the backend, then a first call), warm-up, the timed window, the profiled steps, the
backend's measurements after both windows, and the latency file. Each runs inside an NVTX
range of the harness's domain; the harness (profiler.collect.harness) calls them in order, and
a repeat window in a fresh process (profiler.collect.repeat_window) calls the first three.

Timing comes before profiling so the profiler's instrumentation can't leak into the latencies.
The profiled steps run under torch.profiler with a wait/warmup/active/repeat schedule, or, with
--capture cuda-profiler-api, under no torch.profiler but cudaProfilerStart/Stop around the
active steps, so that nsys or ncu own CUPTI and no trace is written.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.markup import escape

from profiler import runs, units
from profiler.analysis.timed_window import TimedWindow
from profiler.collect import gpu_state, graph_capture, memory_history, timing
from profiler.collect.backends.base import Prepared
from profiler.collect.device import inductor_left_unimported, kineto_quiet, nvtx_range, sync
from profiler.collect.workloads.protocol import Workload
from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.runs.config import RunConfig, check_path_component
from profiler.runs.gpu_record import GpuState
from profiler.runs.phases import Phases

#: the record_function span around each profiled step
STEP_SPAN = "inference_step"
TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")


class Progress:
    """Phase lines and a progress bar on ``console``: the command's stderr (its output sink's,
    profiler.cli.output.Output.err_console, or a sweep cell's log); none with ``quiet`` or
    without a console."""

    def __init__(self, quiet: bool, console: Console | None = None) -> None:
        self.console = console
        self.quiet = quiet or console is None

    def say(self, text: str) -> None:
        if self.console is not None and not self.quiet:
            self.console.print(text, highlight=False)

    def warn(self, warning: str) -> None:
        self.say(f"  [yellow]warning:[/] {escape(warning)}")

    @contextlib.contextmanager
    def phase(self, text: str):
        """Around a phase that can take seconds with nothing else to show (imports, the FLOP
        count, prepare, the numeric check): a spinner on a terminal, else one line
        ``  <text> ...`` before it, so that a run is never silent for long."""
        if self.console is None or self.quiet:
            yield
        elif self.console.is_terminal:
            with self.console.status(f"  {text} ..."):
                yield
        else:
            self.say(f"  {text} ...")
            yield

    @contextlib.contextmanager
    def bar(self, label: str, total: int):
        if self.console is None or self.quiet or not self.console.is_terminal:
            self.say(f"  {label} ...")  # (no bar off a terminal: a line says it started)
            yield lambda: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        ) as progress:
            task = progress.add_task(label, total=total)
            yield lambda: progress.advance(task)


def prepare(
    workload: Workload,
    use_cuda: bool,
    progress: Progress,
    captures: graph_capture.CaptureProfile | None = None,
) -> tuple[Prepared, float, float]:
    """prepare: the workload's step (the backend compiles or builds here), then a first call
    (compilers compile there), each timed with a synchronize at the end. With ``captures``
    (a backend that captures CUDA graphs on its first calls: profiler.collect.graph_capture),
    the first RECORDING_CALLS calls run under its profiler, all counted as the first call,
    and the windows it found go into the step's notes and graph_captures.json."""
    with nvtx_range("prepare"):
        began = time.perf_counter()
        with progress.phase("prepare (the backend compiles or builds here)"):
            step = workload.prepare()
            sync(use_cuda)
        prepare_s = time.perf_counter() - began
        began = time.perf_counter()
        with (
            progress.phase(workload.first_call),
            captures.recording() if captures else contextlib.nullcontext(),
        ):
            for _ in range(graph_capture.RECORDING_CALLS if captures else 1):
                step.fn(*step.inputs)
                sync(use_cuda)
        first_call_s = time.perf_counter() - began
    profiled = f" ({graph_capture.RECORDING_CALLS} calls, profiled for CUDA graph capture)"
    progress.say(
        f"  prepare {units.time(prepare_s, 's', decimals=2, thousands=False)}, "
        f"{workload.first_call} "
        f"{units.time(first_call_s, 's', decimals=2, thousands=False)}"
        f"{profiled if captures else ''}"
    )
    if captures:
        step.notes["graph_captures"] = captures.summary()
        step.notes.setdefault("artifacts", {}).update(captures.artifacts())
    for warning in step.notes.get("warnings", []):
        progress.warn(warning)
    return step, prepare_s, first_call_s


def warm_up(plan: timing.WindowPlan, step: Prepared, use_cuda: bool, progress: Progress) -> float:
    """The untimed warm-up; returns the estimate of one call (ms) a time budget needs."""
    with nvtx_range("warmup"), progress.bar("warmup", plan.warmup) as tick:
        estimate_ms = timing.warm_up(step.fn, step.inputs, plan, use_cuda, tick)
        sync(use_cuda)
    return estimate_ms


@dataclass
class Timed:
    """The timed window of a run: its record (raw times, statistics, noise), the workload's
    own per-iteration figures, the last output, the peak memory, the plan, and the GPU's state
    and the host's load around it (profiler.collect.gpu_state)."""

    window: TimedWindow
    details: object
    output: object
    memory: dict
    plan: timing.WindowPlan
    gpu_state: GpuState | None = None

    @property
    def enqueue_ms(self) -> tuple[float, ...]:
        """Each timed call's enqueue time, where the workload records it (forward, on a GPU)."""
        return tuple(getattr(self.details, "enqueue_ms", ()))


def timed(
    workload: Workload,
    step: Prepared,
    plan: timing.WindowPlan,
    estimate_ms: float,
    batch_size: int,
    use_cuda: bool,
    progress: Progress,
) -> Timed:
    """The timed window: as many iterations as the plan says, each timed as the workload times
    one step; its record built here, its figures and noise warnings printed."""
    deadline = plan.deadline
    timing.reset_peak_memory(use_cuda)
    with (
        gpu_window(use_cuda) as gpu,
        nvtx_range("timed"),
        progress.bar("timed", plan.iterations(estimate_ms)) as tick,
    ):
        began = timing.clock()
        latencies, details, output = workload.time(
            step,
            deadline.cap if deadline else plan.iterations(estimate_ms),
            use_cuda,
            tick,
            deadline,
        )
        elapsed_s = timing.clock() - began
    memory = timing.peak_memory(use_cuda)
    window = TimedWindow(tuple(latencies), batch_size)
    figures = workload.figures(window, details)
    progress.say(
        f"  timed {len(latencies)} {workload.iterations} in "
        f"{units.time(elapsed_s, 's', decimals=1, thousands=False)} "
        f"({plan.why}): {figures}, CV {units.percent(100 * window.noise.cv)}"
    )
    if deadline is not None:  # what the budget did, in the record too
        plan = dataclasses.replace(plan, why=plan.done(elapsed_s))
    for warning in window.noise.warnings:
        progress.warn(warning)
    return Timed(window, details, output, memory, plan, gpu.state)


def gpu_window(use_cuda: bool) -> gpu_state.GpuWindow:
    """NVML's readings around the timed window (it never raises): the current CUDA device,
    found by its PCI bus id (CUDA may number GPUs fastest first, NVML by bus); on a CPU run no
    GPU is read ("not recorded (no GPU)") and the host's load is still recorded."""
    if not use_cuda:
        return gpu_state.GpuWindow(None)
    index = torch.cuda.current_device()
    try:
        return gpu_state.GpuWindow(gpu_state.pci_bus_id(torch.cuda.get_device_properties(index)))
    except (AttributeError, RuntimeError):  # properties without PCI ids: the ordinal
        return gpu_state.GpuWindow(index)


def profile(
    config: RunConfig,
    step: Prepared,
    use_cuda: bool,
    progress: Progress,
    tb_stage: Path,
    timer: Phases,
    run_stage: Path | None = None,
) -> tuple[list, list[str], list[str]]:
    """The profiled steps, as --capture asks: the activities, the trace files (none with
    cuda-profiler-api) and, with --memory-history on a GPU, the snapshot's file written into
    ``run_stage`` (profiler.collect.memory_history; on a CPU one line says why there is none)."""
    recorder = memory_history.Recorder(config.memory_history and use_cuda, active_steps(config))
    if config.memory_history and not use_cuda:
        progress.say(f"  {memory_history.NO_CUDA}")
    with recorder:
        if config.capture == "torch":
            activities, names = profile_with_torch(
                config, step, use_cuda, progress, tb_stage, timer, recorder
            )
        else:
            with timer("profile"):
                profile_with_cuda_profiler_api(config, step, use_cuda, progress, recorder)
            activities, names = [], []
    if recorder.snapshot is not None:
        progress.say(
            f"  memory history: {units.count(recorder.events())} allocator events over the "
            f"active steps (the last {units.count(runs.MEMORY_HISTORY_MAX_ENTRIES)} are kept), "
            f"{runs.MEMORY_SNAPSHOT} (open it at https://pytorch.org/memory_viz)"
        )
    return activities, names, recorder.write(run_stage) if run_stage is not None else []


def worker_name(config: RunConfig) -> str:
    # the TensorBoard plugin reads "<worker>.<span>.pt.trace.json": no dots in the worker name
    return re.sub(r"[^A-Za-z0-9_-]", "_", config.model) or "worker"


def profile_with_torch(
    config: RunConfig,
    step: Prepared,
    use_cuda: bool,
    progress: Progress,
    tb_stage: Path,
    timer: Phases | None = None,
    recorder: memory_history.Recorder | None = None,
):
    """torch.profiler over the wait/warmup/active/repeat schedule; the trace files' names.
    ``timer`` gets the window as profile, less the trace handler's writing (and the check of
    the files written) as trace_write. ``recorder``: --memory-history's, around the active
    steps."""
    recorder = recorder or memory_history.Recorder(False, [])
    timer = timer or Phases()
    writing = Phases()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if use_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    write_trace = torch.profiler.tensorboard_trace_handler(
        str(tb_stage), worker_name=worker_name(config), use_gzip=config.gzip
    )

    def handler(prof) -> None:
        with writing("trace_write"):
            write_trace(prof)

    began = time.perf_counter()
    schedule = torch.profiler.schedule(
        wait=config.wait, warmup=config.warmup, active=config.active, repeat=config.repeat
    )
    # each cycle's trace is exported by the handler, so clearing events between cycles is intended
    warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
    profiler = torch.profiler.profile(
        activities=activities,
        schedule=schedule,
        on_trace_ready=handler,
        record_shapes=config.record_shapes,
        profile_memory=config.profile_memory,
        with_stack=config.with_stack,
        with_flops=config.with_flops,
    )
    mark_single_rank(profiler)
    with (
        # (the bar, or its line, before Kineto's noise is held back: a line said inside would
        # come out after the profile)
        progress.bar("profile", config.profiled_steps) as tick,
        kineto_quiet(not use_cuda),
        nvtx_range("profile"),
        inductor_left_unimported(),
        profiler as prof,
    ):
        for index in range(config.profiled_steps):
            recorder.before(index)
            with torch.profiler.record_function(STEP_SPAN), nvtx_range(f"step {index}"):
                step.fn(*step.inputs)
                sync(use_cuda)
            recorder.after(index)
            prof.step()
            tick()
    window_s = time.perf_counter() - began
    timer.add("profile", window_s - writing.seconds.get("trace_write", 0.0))
    with writing("trace_write"):
        names = finished_traces(tb_stage)
    timer.add("trace_write", writing.seconds["trace_write"])
    return activities, names


#: what a trace of one process says of its place among processes: Holistic Trace Analysis
#: reads ``distributedInfo.rank`` to tell traces apart and refuses a trace without it
SINGLE_RANK = {"rank": 0, "world_size": 1}


def mark_single_rank(profiler) -> None:
    """Every trace of ``profiler`` carries ``"distributedInfo": {"rank": 0, "world_size": 1}``,
    unless torch.distributed is initialized (torch.profiler then writes the real one)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return
    preset = getattr(profiler, "preset_metadata_json", None)  # torch >= 2.1
    if preset is not None:
        preset("distributedInfo", json.dumps(SINGLE_RANK))


def finished_traces(folder: Path) -> list[str]:
    """The names of the trace files torch.profiler finished in ``folder``. One it did not finish
    (Kineto's ``.pt.trace.json.tmp`` left by a failed write, e.g. on a full disk, or a file cut
    short) fails the run: a truncated trace is never kept as a result."""
    names = sorted(p.name for p in folder.iterdir() if ".pt.trace.json" in p.name)
    finished = [name for name in names if name.endswith(TRACE_SUFFIXES)]
    broken = [name for name in names if name not in finished or not _is_whole(folder / name)]
    if broken:
        raise UserError(
            f"torch.profiler did not finish writing the trace ({', '.join(broken)} "
            "is cut short; is the disk full?); nothing was written"
        )
    if not finished:
        raise UserError(
            "torch.profiler wrote no trace file (is the disk full?); nothing was written"
        )
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
    return [
        c * cycle + config.wait + config.warmup + i
        for c in range(config.repeat)
        for i in range(config.active)
    ]


def profile_with_cuda_profiler_api(
    config: RunConfig,
    step: Prepared,
    use_cuda: bool,
    progress: Progress,
    recorder: memory_history.Recorder | None = None,
) -> None:
    """The same steps and NVTX ranges as with torch.profiler, but no torch.profiler: each
    cycle's active steps run between torch.cuda.profiler.start() and stop()
    (cudaProfilerStart/Stop), which nsys --capture-range=cudaProfilerApi and ncu
    --profile-from-start off honour. On a machine without CUDA the calls are skipped."""
    active = set(active_steps(config))
    capturing = False
    recorder = recorder or memory_history.Recorder(False, [])
    with nvtx_range("profile"), progress.bar("profile", config.profiled_steps) as tick:
        for index in range(config.profiled_steps):
            if index in active and not capturing:
                sync(use_cuda)
                if use_cuda:
                    torch.cuda.profiler.start()
                capturing = True
            recorder.before(index)
            with torch.profiler.record_function(STEP_SPAN), nvtx_range(f"step {index}"):
                step.fn(*step.inputs)
                sync(use_cuda)
            recorder.after(index)
            if capturing and index + 1 not in active:
                if use_cuda:
                    torch.cuda.profiler.stop()
                capturing = False
            tick()


def after_windows(
    step: Prepared, run_stage: Path, timer: Phases | None = None
) -> tuple[dict, list[str]]:
    """The backend's own measurements after both windows; its artifacts written into the run
    folder. Returns the backend's notes and the artifacts' file names."""
    notes = dict(step.notes)
    artifacts = dict(notes.pop("artifacts", {}))
    if step.after_windows is not None:
        with nvtx_range("after windows"), (timer or Phases())("after_windows"):
            extra = dict(step.after_windows())
        artifacts.update(extra.pop("artifacts", {}))
        notes.update(extra)
    for file_name, text in artifacts.items():
        write_text_atomic(run_stage / check_path_component(file_name, "artifact name"), text)
    return notes, sorted(artifacts)


def write_latency_csv(run_stage: Path, latencies, gpu_ms=(), enqueue_ms=()) -> None:
    """latency.csv: one timed iteration per row; with the GPU-time window, each iteration's GPU
    time and enqueue time beside it (empty where not measured)."""
    csv_text = io.StringIO()
    writer = csv.writer(csv_text, lineterminator="\n")
    extra = bool(gpu_ms or enqueue_ms)
    writer.writerow(["iteration", "latency_ms", *(("gpu_ms", "enqueue_ms") if extra else ())])

    def cell(values, i: int) -> str:
        return (
            units.time(values[i], decimals=6, thousands=False, labelled=False)
            if i < len(values)
            else ""
        )

    writer.writerows(
        (
            i,
            units.time(ms, decimals=6, thousands=False, labelled=False),
            *((cell(gpu_ms, i), cell(enqueue_ms, i)) if extra else ()),
        )
        for i, ms in enumerate(latencies)
    )
    write_text_atomic(run_stage / runs.LATENCY_CSV, csv_text.getvalue())
