"""A config's between-process samples: every timed window of one config, each in its own
process, kept beside result.json as processes.csv (process, iteration, latency_ms; the run's own
window is process 0) and summarized in result.json's ``timing.noise.repeat_runs``.

Written by a run with ``--repeat-runs`` and by the rounds of a sweep's or compare's
``--processes`` (profiler.sweep.rounds); read by the verdicts (profiler.analysis.verdict), which
treat the process as the independent unit. A run without processes.csv is one process: its
latency.csv."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import msgspec
import numpy as np

from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.runs.layout import LATENCY_CSV, PROCESSES_CSV, RESULT_FILE
from profiler.runs.result import RepeatSpread, RunResult, latency_csv_of, read_result, \
    write_result

HEADER = ("process", "iteration", "latency_ms")
#: the optional fourth column: the GPU (as CUDA_VISIBLE_DEVICES named it) the process ran on
GPU_COLUMN = "gpu"


def spread_of_runs(p50s_ms: list[float], samples_csv: str | None = None,
                   schedule: str | None = None) -> RepeatSpread:
    """How the p50 of K timed windows (one per process) varies: min, max, (max - min) / median."""
    values = np.asarray(p50s_ms, dtype=float)
    median = float(np.median(values))
    return RepeatSpread(
        runs=len(values), p50_ms=[float(v) for v in values], median_p50_ms=median,
        min_p50_ms=float(values.min()), max_p50_ms=float(values.max()),
        range_pct_of_median=100.0 * float(values.max() - values.min()) / median
        if median > 0 else 0.0, samples_csv=samples_csv, schedule=schedule)


def processes_text(windows: list[list[float]], gpus: list[str | None] | None = None) -> str:
    """processes.csv's text; with ``gpus`` (one per window) a gpu column too."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    labelled = gpus is not None and any(g is not None for g in gpus)
    writer.writerow(HEADER + ((GPU_COLUMN,) if labelled else ()))
    for process, window in enumerate(windows):
        gpu = ((gpus[process] or "",) if labelled else ())
        writer.writerows((process, i, repr(float(v)), *gpu) for i, v in enumerate(window))
    return out.getvalue()


def read_processes_csv(path: Path) -> list[list[float]]:
    """processes.csv -> one list of latencies (ms) per process, in process order."""
    windows: dict[int, list[float]] = {}
    try:
        with open(path, newline="") as handle:
            for row in csv.DictReader(handle):
                windows.setdefault(int(row["process"]), []).append(float(row["latency_ms"]))
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise UserError(f"{path}: not a processes.csv ({type(error).__name__}: {error})") \
            from None
    return [windows[k] for k in sorted(windows)]


def read_process_gpus(path: Path) -> list[str | None]:
    """The GPU of each process in processes.csv (None where it was not recorded)."""
    gpus: dict[int, str | None] = {}
    try:
        with open(path, newline="") as handle:
            for row in csv.DictReader(handle):
                gpus.setdefault(int(row["process"]), row.get(GPU_COLUMN) or None)
    except (OSError, KeyError, ValueError, TypeError):
        return []
    return [gpus[k] for k in sorted(gpus)]


def read_latency_csv(path: Path) -> list[float]:
    """The latency_ms column of a run's latency.csv."""
    with open(path, newline="") as handle:
        return [float(row["latency_ms"]) for row in csv.DictReader(handle)]


def process_windows(result: RunResult, result_json: Path | None = None) -> list[list[float]]:
    """Every timed window of the run's config, one per process: processes.csv where the run
    has one, else its latency.csv as a single process; [] when neither file is there."""
    if result_json is not None:
        samples = Path(result_json).parent / PROCESSES_CSV
        if samples.is_file():
            return read_processes_csv(samples)
    latency = latency_csv_of(result, result_json)
    return [] if latency is None else [read_latency_csv(latency)]


def process_gpus(result_json: Path | None) -> list[str | None]:
    """The GPU of each of a run's windows where processes.csv recorded it; [] otherwise."""
    if result_json is None:
        return []
    samples = Path(result_json).parent / PROCESSES_CSV
    return read_process_gpus(samples) if samples.is_file() else []


def record_processes(run_dir: Path, windows: list[list[float]], schedule: str,
                     result: RunResult | None = None,
                     gpus: list[str | None] | None = None) -> RunResult:
    """processes.csv written beside result.json (all of ``windows``, the run's own first) and
    result.json's repeat_runs updated to match; each file replaced atomically. Returns the
    updated result."""
    run_dir = Path(run_dir)
    if result is None:
        result = read_result(run_dir / RESULT_FILE)
    p50s = [float(np.median(w)) for w in windows]
    spread = spread_of_runs(p50s, samples_csv=PROCESSES_CSV, schedule=schedule)
    write_text_atomic(run_dir / PROCESSES_CSV, processes_text(windows, gpus))
    timing = result.timing
    if timing.noise is not None:
        noise = msgspec.structs.replace(timing.noise, repeat_runs=spread)
        result = msgspec.structs.replace(result,
                                         timing=msgspec.structs.replace(timing, noise=noise))
    write_result(run_dir, result)
    return result


def config_json_of(result: RunResult) -> dict:
    """The run's config as config_to_json writes it, from result.json (options added since the
    run take their defaults): what a new window of the same config is timed with."""
    from profiler.runs.config import config_from_json, config_to_json, keyed, run_options

    recorded = msgspec.to_builtins(result.config)
    options = {k: v for k, v in recorded.items() if k in run_options()}
    return config_to_json(config_from_json(keyed(options)))


def own_window(run_dir: Path) -> list[float]:
    """The run's own timed window (latency.csv in its folder)."""
    return read_latency_csv(Path(run_dir) / LATENCY_CSV)
