"""The figures a user quotes, from a run's RunResult: timed latency and throughput, the noise of
the timed window, peak memory, the run's config, and what differs between two runs. Returns
the records of profiler.analysis.records for report.headline_view and report.compare_view (and
--json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from profiler import notices
from profiler.analysis.figures import NOT_ON_CPU, differing_fields, mib, overhead_ratio, speedup
from profiler.analysis.generation import generation_figures
from profiler.analysis.records import (  # noqa: F401 (the records re-exported)
    CompareTimed,
    DifferingField,
    FigureOverProcesses,
    GenerationFigures,
    GpuComputeFigures,
    GpuStateFigures,
    Headline,
    MemoryFigures,
    NoiseSource,
    PhaseComparison,
    ProcessFigures,
    TailFigure,
    TimedFigures,
    TimedVerdicts,
    WindowNoise,
    plain,
)
from profiler.analysis.sampling import cv_of
from profiler.analysis.tails import tail_figures
from profiler.analysis.timed_verdict import judge
from profiler.analysis.timed_window import noise, read_latency_csv
from profiler.analysis.verdict import GPU_TIME, LATENCY, TOLERANCE, MachineNoise
from profiler.runs.gpu_record import GpuState
from profiler.runs.noise_floor import (
    DEFAULT_STANDS_IN,
    NoiseFloor,
    cpu_kind,
    floor_problem,
    read_floor,
    this_host,
)
from profiler.runs.result import RunResult, latency_csv_of
from profiler.runs.samples import (
    GPU_BOUND,
    LAUNCH_BOUND,
    PHASES,
    TTFT,
    ConfigSamples,
    config_samples,
)

#: the config fields shown in the one-line config of a headline
CONFIG_LINE = (
    "model",
    "backend",
    "batch_size",
    "image_size",
    "seq_len",
    "tf32",
    "memory_format",
    "compile_mode",
    "iters",
    "timed_warmup",
    "min_time",
)
#: the sections of result.json compared field by field
COMPARED = ("config", "precision", "environment")
#: why a run has no GPU state: it was recorded before the timed window recorded one
RECORDED_BEFORE = "run recorded before the GPU state was"


def timed_figures(result: RunResult) -> TimedFigures:
    """p50, p90, p99 (ms), throughput (samples/s), iterations, CV and IQR of the timed window,
    and GPU compute / enqueue time beside it (``gpu_compute``)."""
    timing = result.timing
    window = timing.noise
    return TimedFigures(
        p50_ms=timing.p50_ms,
        p90_ms=timing.p90_ms,
        p99_ms=timing.p99_ms,
        throughput_samples_per_s=timing.throughput_samples_per_s,
        iters=timing.iters,
        warmup_iters=timing.warmup_iters,
        timer=timing.timer,
        iterations_chosen_by=timing.iterations_chosen_by,
        cv=window.cv if window else None,
        iqr_ms=window.iqr_ms if window else None,
        noise_warnings=list(window.warnings) if window else None,
        repeat_runs=window.repeat_runs if window else None,
        gpu_compute=gpu_compute_figures(result),
    )


def gpu_compute_figures(result: RunResult) -> GpuComputeFigures | None:
    """GPU compute and enqueue time (result.json's timing.gpu_compute, every key), or None for
    a run recorded before it was measured."""
    gpu = result.timing.gpu_compute
    return None if gpu is None else GpuComputeFigures(**msgspec.structs.asdict(gpu))


def window_noise(result: RunResult, result_json: Path | None = None) -> WindowNoise | None:
    """The noise of the timed window: as recorded, else computed from the run's latency.csv
    (runs recorded before noise was)."""
    if result.timing.noise is not None:
        return WindowNoise(**msgspec.structs.asdict(result.timing.noise))
    csv_path = latency_csv_of(result, result_json)
    if csv_path is None:
        return None
    computed = msgspec.structs.asdict(noise(read_latency_csv(csv_path)))
    computed.pop("repeat_runs")  # a window read back from latency.csv was timed once
    return WindowNoise(**computed)


def memory_figures(result: RunResult) -> MemoryFigures:
    """Peak memory of the timed window and the engines' (MemoryFigures)."""
    memory = result.memory
    on_cpu = result.device.startswith("cpu")
    if memory is None:
        return MemoryFigures(
            peak_allocated_mib=None,
            peak_reserved_mib=None,
            engine_mib=None,
            note=NOT_ON_CPU if on_cpu else "not recorded",
        )
    return MemoryFigures(
        peak_allocated_mib=mib(memory.peak_allocated_bytes),
        peak_reserved_mib=mib(memory.peak_reserved_bytes),
        engine_mib=mib(memory.engine_device_memory_bytes),
        note=NOT_ON_CPU if on_cpu else None,
    )


def gpu_state_of(result: RunResult) -> GpuState:
    """The GPU state of the timed window as recorded, or one saying why there is none."""
    return result.gpu_state or GpuState(not_recorded=RECORDED_BEFORE)


def gpu_state_figures(result: RunResult) -> GpuStateFigures:
    """The GPU's state around the timed window and what is derived from it (GpuStateFigures)."""
    state = gpu_state_of(result)
    return GpuStateFigures(
        **msgspec.structs.asdict(state),
        sm_clock_mhz=state.sm_clock_mhz,
        throttle_reasons=state.throttle_reasons,
    )


def config_line(result: RunResult) -> str:
    config = msgspec.to_builtins(result.config)
    parts = [f"{key}={config[key]}" for key in CONFIG_LINE if config.get(key) is not None]
    gpu = result.environment.gpu or {}
    parts.append(f"device={gpu.get('name') or result.device}")
    return ", ".join(parts)


def headline_data(
    result: RunResult,
    result_json: Path | None,
    profiled_step_us: float | None,
    kernel_us_per_step: float | None = None,
) -> Headline:
    """Everything the headline of `summarize` shows (its --json "headline"); ``kernel_us_per_step``:
    the time with a kernel running in a profiled step (the trace's mean), for the GPU's
    utilization over the timed window beside the profiled step's (``utilization``)."""
    timed = timed_figures(result)
    kernel_ms, timed_pct, profiled_pct = utilization(
        kernel_us_per_step, timed.p50_ms, profiled_step_us
    )
    return Headline(
        timed=timed,
        noise=window_noise(result, result_json),
        memory=memory_figures(result),
        config=config_line(result),
        profiled_step_ms=None if profiled_step_us is None else profiled_step_us / 1000.0,
        profiler_overhead_ratio=overhead_ratio(profiled_step_us, timed.p50_ms),
        gpu_state=gpu_state_figures(result),
        generation=_generation(result, config_samples(result, result_json)),
        tails=window_tails(result, result_json),
        kernel_ms_per_step=kernel_ms,
        gpu_utilization_timed_pct=timed_pct,
        gpu_utilization_profiled_pct=profiled_pct,
    )


def utilization(
    kernel_us_per_step: float | None, timed_p50_ms: float | None, profiled_step_us: float | None
) -> tuple[float | None, float | None, float | None]:
    """(kernel ms per step, % of the timed p50, % of the profiled step): the time with at least
    one kernel running in a profiled step (the TensorBoard plugin's definition of GPU
    utilization) over the timed p50, and over the profiled step itself. The profiled step runs
    the same kernels as an untraced call (the trace analysis checks it), and the profiler slows
    mostly the host's side of the step: the profiled step's utilization reads lower than what a
    caller's call keeps the GPU busy, the timed window's. None without GPU work."""
    if not kernel_us_per_step or kernel_us_per_step <= 0:
        return None, None, None
    kernel_ms = kernel_us_per_step / 1000.0
    timed = 100.0 * kernel_ms / timed_p50_ms if timed_p50_ms else None
    profiled = 100.0 * kernel_us_per_step / profiled_step_us if profiled_step_us else None
    return kernel_ms, timed, profiled


def window_tails(result: RunResult, result_json: Path | None = None) -> list[TailFigure]:
    """The timed window's p90 and p99 with their order-statistic intervals, from its latency.csv
    (profiler.analysis.tails); empty when the file is not there."""
    csv_path = latency_csv_of(result, result_json)
    return [] if csv_path is None else tail_figures(read_latency_csv(csv_path))


def differences(ra: RunResult, rb: RunResult) -> list[tuple[str, object, object]]:
    """Every config, precision and environment field whose value differs between two runs, and
    the backend's name and precision and the device."""

    def sections(result: RunResult) -> dict[str, Any]:
        data = {name: msgspec.to_builtins(getattr(result, name), enc_hook=str) for name in COMPARED}
        data["backend"] = {"name": result.backend.name, "precision": result.backend.precision}
        data["device"] = result.device
        return data

    return differing_fields(sections(ra), sections(rb))


def machine_kind(result: RunResult) -> str | None:
    """The machine kind a run ran on, the key of its floor (profiler.runs.noise_floor): its
    GPU's name; on a CPU ``CPU <model>`` as the run recorded it, else this machine's when the
    run ran on this host; None where it cannot be known."""
    gpu = (result.environment.gpu or {}).get("name")
    if gpu:
        return str(gpu)
    if not result.device.startswith("cpu"):
        return None
    if result.environment.cpu:
        return cpu_kind(result.environment.cpu)
    return cpu_kind() if result.environment.hostname == this_host() else None


def _kept_source(floor: NoiseFloor) -> NoiseSource:
    return NoiseSource("noise", floor.gpu, floor.host, floor.measured)


def machine_noise(*results: RunResult, floors_dir: Path | None = None) -> MachineNoise:
    """What `profile.py noise` measured for the runs' machine kind (machine_kind), per figure:
    the between-process CV, as each run recorded it, else as kept on this machine (the larger
    of the runs'), and the within-process rho kept on this machine (the smaller of the runs'
    kinds: pairing pays less); each with its source. A figure never measured is left out (its
    H100 default stands in). ``cpu``: every run ran on a CPU."""
    known: dict[str, list[tuple[float, NoiseSource]]] = {LATENCY: [], GPU_TIME: []}
    rhos: dict[str, list[tuple[float, NoiseSource]]] = {LATENCY: [], GPU_TIME: []}
    for r in results:
        kind = machine_kind(r)
        recorded = r.timing.noise.machine_floor_cv if r.timing.noise else None
        if recorded is not None and (why := floor_problem(recorded)) is not None:
            notices.note(
                f"{r.run_dir or 'a run'}: result.json's timing.noise.machine_floor_cv "
                f"{why}: ignored, {DEFAULT_STANDS_IN}"
            )
            recorded = None
        kept = read_floor(kind, floors_dir)
        if recorded is not None:
            source = NoiseSource("recorded", kind, r.environment.hostname)
            known[LATENCY].append((recorded, source))
        elif kept is not None:
            known[LATENCY].append((kept.between_process_cv, _kept_source(kept)))
        if kept is None:
            continue
        if kept.gpu_time_between_process_cv is not None:
            known[GPU_TIME].append((kept.gpu_time_between_process_cv, _kept_source(kept)))
        for figure in (LATENCY, GPU_TIME):
            if (rho := kept.rho(figure)) is not None:
                rhos[figure].append((rho, _kept_source(kept)))
    floors = {f: max(v, key=lambda item: item[0]) for f, v in known.items() if v}
    least = {f: min(v, key=lambda item: item[0]) for f, v in rhos.items() if v}
    return MachineNoise(
        floors={f: value for f, (value, _) in floors.items()},
        floor_sources={f: source for f, (_, source) in floors.items()},
        rhos={f: value for f, (value, _) in least.items()},
        rho_sources={f: source for f, (_, source) in least.items()},
        cpu=bool(results) and all(r.device.startswith("cpu") for r in results),
    )


def machine_floors(*results: RunResult, floors_dir: Path | None = None) -> dict[str, float | None]:
    """Each figure's between-process CV of machine_noise; None for a figure never measured."""
    found = machine_noise(*results, floors_dir=floors_dir)
    return {figure: found.floor(figure) for figure in (LATENCY, GPU_TIME)}


def machine_floor(*results: RunResult, floors_dir: Path | None = None) -> float | None:
    """The latency floor of machine_floors."""
    return machine_floors(*results, floors_dir=floors_dir)[LATENCY]


def verdicts_between(
    ra: RunResult,
    rb: RunResult,
    samples_a: ConfigSamples,
    samples_b: ConfigSamples,
    floors_dir: Path | None = None,
    tolerance: float = TOLERANCE,
    cuda_graphs_ms: float | None = None,
) -> TimedVerdicts | None:
    """B against A on both figures from every process of each (profiler.analysis
    .timed_verdict); None without latencies on a side. ``cuda_graphs_ms``: the latency
    ``--cuda-graphs`` measured for A's config, quoted with the lever."""
    if not len(samples_a) or not len(samples_b):
        return None
    return judge(
        samples_a,
        samples_b,
        machine=machine_noise(ra, rb, floors_dir=floors_dir),
        tolerance=tolerance,
        cuda_graphs_ms=cuda_graphs_ms,
    )


def phase_comparisons(
    a: ConfigSamples,
    b: ConfigSamples,
    floors: dict[str, float | None] | None = None,
    tolerance: float = TOLERANCE,
    machine: MachineNoise | None = None,
) -> list[PhaseComparison]:
    """A generation's TTFT and TPOT, B against A, each phase both sides timed: its processes'
    figures, speedups and both verdicts (profiler.analysis.timed_verdict.judge on the phase's
    windows, profiler.runs.samples.PHASES)."""
    found = []
    for phase in PHASES:
        pa, pb = a.phase(phase), b.phase(phase)
        if not len(pa) or not len(pb):
            continue
        verdicts = judge(pa, pb, floors=floors, tolerance=tolerance, machine=machine)
        latency = verdicts.latency if verdicts else None
        gpu = verdicts.gpu_time if verdicts else None
        found.append(
            PhaseComparison(
                phase="ttft" if phase == TTFT else "tpot",
                processes_a=samples_figures(pa),
                processes_b=samples_figures(pb),
                speedup_x=None if latency is None else latency.speedup,
                gpu_speedup_x=None if gpu is None else gpu.speedup,
                verdicts=verdicts,
            )
        )
    return found


def samples_figures(samples: ConfigSamples) -> ProcessFigures:
    """What a config's processes measured, each figure over the processes a verdict uses: the
    geometric mean of the per-process medians (ms), their range and between-process CV, the
    processes, and the classification."""
    used = samples.for_verdict()
    figures = {}
    for figure in (LATENCY, GPU_TIME, "enqueue"):
        medians = used.medians(figure)
        figures[figure] = (
            None
            if not medians
            else FigureOverProcesses(
                geomean_ms=used.geometric_mean(figure),
                min_ms=min(medians),
                max_ms=max(medians),
                processes=len(medians),
                cv=cv_of(medians) if len(medians) > 1 else None,
            )
        )
    counts = used.bound_counts()
    return ProcessFigures(
        processes=len(used),
        pilot_processes=len(samples) - len(used) if used is not samples else 0,
        **figures,
        bound=used.bound(),
        launch_bound_processes=counts[LAUNCH_BOUND],
        classified_processes=sum(counts.values()),
        gpu_bound_processes=counts[GPU_BOUND],
    )


def compare_timed(
    ra: RunResult | None,
    rb: RunResult | None,
    json_a: Path | None,
    json_b: Path | None,
    samples: tuple[ConfigSamples, ConfigSamples] | None = None,
    floors_dir: Path | None = None,
    tolerance: float = TOLERANCE,
) -> CompareTimed | None:
    """Both runs' recorded figures; the figures of the processes the verdicts use (processes.csv,
    else latency.csv; ``samples`` when fresh ones were just taken: ``source`` says which); both
    verdicts (latency and GPU time) with their speedups (A / B of the geometric means of the
    per-process medians); memory; and every differing field."""
    if ra is None or rb is None:
        return None
    a = msgspec.structs.replace(timed_figures(ra), device=ra.device)  # "cpu": no GPU time
    b = msgspec.structs.replace(timed_figures(rb), device=rb.device)
    fresh = samples is not None
    sa, sb = samples or (config_samples(ra, json_a), config_samples(rb, json_b))
    verdicts = verdicts_between(ra, rb, sa, sb, floors_dir, tolerance)
    machine = machine_noise(ra, rb, floors_dir=floors_dir)
    latency = verdicts.latency if verdicts else None
    gpu = verdicts.gpu_time if verdicts else None
    return CompareTimed(
        a=a,
        b=b,
        source="fresh processes" if fresh else "recorded processes",
        processes_a=samples_figures(sa),
        processes_b=samples_figures(sb),
        speedup_x=speedup(a.p50_ms, b.p50_ms) if latency is None else latency.speedup,
        gpu_speedup_x=None if gpu is None else gpu.speedup,
        verdict=latency,
        gpu_verdict=gpu,
        verdicts=verdicts,
        noise_a=window_noise(ra, json_a),
        noise_b=window_noise(rb, json_b),
        memory_a=memory_figures(ra),
        memory_b=memory_figures(rb),
        config_a=config_line(ra),
        config_b=config_line(rb),
        differences=[DifferingField(field=f, a=x, b=y) for f, x, y in differences(ra, rb)],
        phases=phase_comparisons(sa, sb, tolerance=tolerance, machine=machine),
        generation_a=_generation(ra, sa),
        generation_b=_generation(rb, sb),
    )


def _generation(result: RunResult, samples: ConfigSamples) -> GenerationFigures | None:
    if result.generation is None:
        return None
    found = generation_figures(samples, result.batch_size, result.generation.max_new_tokens)
    if found is None:
        return None
    return msgspec.structs.replace(found, phase_gpu=result.generation.phase_gpu)
