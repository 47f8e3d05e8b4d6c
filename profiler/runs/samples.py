"""A config's samples: every timed process of one config (``ProcessWindow``: its iterations of
each figure, the GPU it ran on, the round it was timed in) and the statistics derived from them
(``ConfigSamples``). Kept beside result.json as processes.csv, one row per iteration:

    process, iteration, latency_ms, gpu_ms, enqueue_ms, gpu, round, pilot

- latency_ms: the host-synchronized latency of iteration ``iteration`` of the process's timed
  window; gpu_ms: the GPU time of the same-numbered iteration of its GPU-time window (the call
  queued behind a blocking kernel, profiler.collect.gpu_time); enqueue_ms: the host's time to
  return from the call in the latency window, no synchronize inside; empty where not measured
  (a CPU, a generation, a call that synchronizes inside).
- gpu: the GPU as CUDA_VISIBLE_DEVICES named it; round: the sampling round (one fresh process
  timing every config of a sweep or compare once; two configs' windows of one round pair up in
  a verdict); pilot: 1 for the pilot rounds of ``--target-noise``, which choose the count and
  are left out of the verdict.

The run's own window is process 0 (latency.csv, with the same three figure columns, when the run
has no processes.csv). Written by a run with ``--repeat-runs`` and by the rounds of a sweep's or
compare's ``--processes`` (profiler.sweep.rounds); read by the verdicts (profiler.analysis
.verdict). Files written before the GPU-time columns read as latency-only windows."""

from __future__ import annotations

import csv
import io
import math
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import numpy as np

from profiler import notices, units
from profiler.errors import UserError, first_line
from profiler.fsutil import write_text_atomic
from profiler.runs.layout import LATENCY_CSV, PROCESSES_CSV, RESULT_FILE
from profiler.runs.result import RepeatSpread, RunResult, latency_csv_of, read_result, write_result

if TYPE_CHECKING:
    from profiler.runs.config import RunConfig

HEADER = ("process", "iteration", "latency_ms", "gpu_ms", "enqueue_ms", "gpu", "round", "pilot")
#: the column a generation's phase rows add (written only when a window has phases)
PHASE_COLUMN = "phase"
#: a generation's phases, each timed as a figure of its own: time to first token (the prefill
#: and its token: latency, the prefill's GPU time and enqueue) and time per output token (the
#: mean decode step of each generation: latency, one decode step's GPU time and enqueue)
TTFT, TPOT = "ttft", "tpot"
PHASES: Final = (TTFT, TPOT)
#: every inter-token latency of the window (each generation's steps after the first token, in
#: order), kept for its percentiles; not judged apart
ITL = "itl"
KEPT_PHASES: Final = (*PHASES, ITL)
#: the column each figure's per-iteration values are kept in
FIGURE_COLUMNS = {"latency": "latency_ms", "gpu_time": "gpu_ms", "enqueue": "enqueue_ms"}
#: How the host and the GPU share one call, from a process's three medians (latency, GPU time,
#: enqueue; profiler.collect.gpu_time measures the last two the way trtexec splits a call):
#: - launch-bound: the host paces the call: its median enqueue reaches the GPU time (trtexec's
#:   rule: the host takes longer to launch the work than the GPU to run it), or the latency is
#:   at least LAUNCH_LATENCY_RATIO x the GPU time (the GPU waits on the host for a tenth of the
#:   call or more);
#: - GPU-bound: neither, and the latency is within GPU_BOUND_RATIO of the GPU time: the caller
#:   waits for the GPU's work and little else;
#: - near the launch bound: between the two: the GPU's work still sets most of the call, but the
#:   host's launches show in what the caller waits and may take over with a busier host.
#: The two ratios read from the committed windows (docs/guide/reproducible-numbers.md, "Which
#: configs the host paces"): a call with no launches to wait for (a CUDA-graph replay) or with
#: far fewer than the GPU runs (eager FP32 at bs 16 and 32) reads latency / GPU time
#: 1.000-1.030; eager FP32 bs 8 on an H100, half of whose processes the host paces, 1.008-1.014
#: in its other processes and 1.12-1.25 in these, their median enqueue 1.08-1.24 x GPU time.
LAUNCH_LATENCY_RATIO = 1.10
GPU_BOUND_RATIO = 1.05
LAUNCH_BOUND: Final = "launch-bound"
NEAR_LAUNCH_BOUND: Final = "near the launch bound"
GPU_BOUND: Final = "GPU-bound"
#: how a process or a config is classified
BoundWord = Literal["launch-bound", "near the launch bound", "GPU-bound"]
BOUND_WORDS: Final = (LAUNCH_BOUND, NEAR_LAUNCH_BOUND, GPU_BOUND)


def bound_word(latency_ms: float, gpu_ms: float, enqueue_ms: float) -> BoundWord:
    """A call's classification from its median latency, GPU time and enqueue time (the rule
    above LAUNCH_LATENCY_RATIO)."""
    if enqueue_ms >= gpu_ms or latency_ms >= LAUNCH_LATENCY_RATIO * gpu_ms:
        return LAUNCH_BOUND
    if latency_ms <= GPU_BOUND_RATIO * gpu_ms:
        return GPU_BOUND
    return NEAR_LAUNCH_BOUND


class ProcessWindow(msgspec.Struct, frozen=True, omit_defaults=True):
    """One process's timed windows of one config: per iteration its latency, GPU time and
    enqueue time (ms), and where and when it was timed."""

    latency_ms: tuple[float, ...]
    gpu_ms: tuple[float, ...] = ()
    enqueue_ms: tuple[float, ...] = ()
    gpu: str | None = None
    round: str | None = None
    pilot: bool = False
    #: a generation's phases (TTFT, TPOT), each a window of its own figures, same process
    phases: dict[str, ProcessWindow] = msgspec.field(default_factory=dict)

    def values(self, figure: str) -> tuple[float, ...]:
        values: tuple[float, ...] = getattr(self, FIGURE_COLUMNS[figure])
        return values

    def median(self, figure: str = "latency") -> float | None:
        values = self.values(figure)
        return float(np.median(values)) if values else None

    @property
    def bound(self) -> BoundWord | None:
        """launch-bound, near the launch bound or GPU-bound from the medians of the window's
        latency, GPU time and enqueue (bound_word); None without all three."""
        latency, gpu, enqueue = self.median(), self.median("gpu_time"), self.median("enqueue")
        if latency is None or gpu is None or enqueue is None:
            return None
        return bound_word(latency, gpu, enqueue)


def window_of(
    record: dict[str, Any], round_id: str | None = None, gpu: str | None = None, pilot: bool = False
) -> ProcessWindow:
    """A timing child's JSON record (profiler.collect.repeat_window) as the typed window; a
    generation's ``phases`` (name -> a record of the same three lists) with it."""
    return ProcessWindow(
        tuple(record["latencies_ms"]),
        tuple(record.get("gpu_ms") or ()),
        tuple(record.get("enqueue_ms") or ()),
        gpu,
        round_id,
        pilot,
        {
            name: window_of(phase, round_id, gpu, pilot)
            for name, phase in (record.get("phases") or {}).items()
            if phase.get("latencies_ms")
        },
    )


def window_record(window: ProcessWindow) -> dict[str, Any]:
    """The JSON record window_of reads (a timing child's line)."""
    record: dict[str, Any] = {
        "latencies_ms": list(window.latency_ms),
        "gpu_ms": list(window.gpu_ms),
        "enqueue_ms": list(window.enqueue_ms),
    }
    if window.phases:
        record["phases"] = {name: window_record(w) for name, w in window.phases.items()}
    return record


class ConfigSamples(msgspec.Struct, frozen=True):
    """Every timed process of one config, the run's own first."""

    windows: tuple[ProcessWindow, ...] = ()

    def __len__(self) -> int:
        return len(self.windows)

    def for_verdict(self) -> ConfigSamples:
        """The windows a verdict uses: the pilot rounds of --target-noise left out (when there
        are others)."""
        fresh = tuple(w for w in self.windows if not w.pilot)
        return ConfigSamples(fresh) if fresh else self

    def with_figure(self, figure: str) -> list[ProcessWindow]:
        return [w for w in self.windows if w.values(figure)]

    def medians(self, figure: str = "latency") -> list[float]:
        """The median of ``figure`` of each process that measured it."""
        return [float(np.median(w.values(figure))) for w in self.with_figure(figure)]

    def rounds(self, figure: str = "latency") -> list[str | None]:
        return [w.round for w in self.with_figure(figure)]

    def gpus(self) -> list[str | None]:
        return [w.gpu for w in self.windows]

    def geometric_mean(self, figure: str = "latency") -> float | None:
        """The figure a verdict speaks of: the geometric mean of the per-process medians."""
        medians = self.medians(figure)
        return float(np.exp(np.mean(np.log(medians)))) if medians and min(medians) > 0 else None

    def bound(self) -> BoundWord | None:
        """The config's classification: bound_word on the geometric means, over the classified
        processes, of each one's latency, GPU time and enqueue medians (bound_figures); None
        without the figures. Its processes can differ (bound_counts): the host paces some
        processes of a config and not others."""
        figures = self.bound_figures()
        return None if figures is None else bound_word(*figures)

    def bound_figures(self) -> tuple[float, float, float] | None:
        """(latency, GPU time, enqueue), ms: the geometric mean over the processes that measured
        all three (above zero) of each process's median; None without such a process."""
        medians = []
        for w in self.windows:
            latency, gpu, enqueue = w.median(), w.median("gpu_time"), w.median("enqueue")
            if latency and gpu and enqueue and min(latency, gpu, enqueue) > 0:
                medians.append((latency, gpu, enqueue))
        if not medians:
            return None
        logs = np.log(np.asarray(medians, dtype=float))
        latency, gpu, enqueue = (float(v) for v in np.exp(logs.mean(axis=0)))
        return latency, gpu, enqueue

    def bound_counts(self) -> dict[BoundWord, int]:
        """The classified processes of each word (BOUND_WORDS order)."""
        seen = [w.bound for w in self.windows if w.bound is not None]
        return {word: seen.count(word) for word in BOUND_WORDS}

    def launch_bound_processes(self) -> tuple[int, int]:
        """(processes classified launch-bound, processes classified at all)."""
        counts = self.bound_counts()
        return counts[LAUNCH_BOUND], sum(counts.values())

    def placed(self, gpu: str | None) -> ConfigSamples:
        """The windows without a recorded GPU on ``gpu`` (None: as they are)."""
        if not gpu:
            return self
        return ConfigSamples(
            tuple(w if w.gpu else msgspec.structs.replace(w, gpu=gpu) for w in self.windows)
        )

    def on_gpus(self, gpus: set[str]) -> ConfigSamples:
        return ConfigSamples(tuple(w for w in self.windows if w.gpu in gpus))

    def phase(self, name: str) -> ConfigSamples:
        """Each process's window of one phase of a generation (TTFT, TPOT), where it has one."""
        return ConfigSamples(tuple(w.phases[name] for w in self.windows if name in w.phases))

    @property
    def phase_names(self) -> tuple[str, ...]:
        """The phases every process timed, in PHASES order."""
        if not self.windows:
            return ()
        return tuple(p for p in PHASES if all(p in w.phases for w in self.windows))

    def per_sample(self, batch_size: int) -> ConfigSamples:
        """Every time divided by the batch size (a throughput comparison across batches)."""

        def scale(values: tuple[float, ...]) -> tuple[float, ...]:
            return tuple(v / batch_size for v in values)

        return ConfigSamples(
            tuple(
                msgspec.structs.replace(
                    w,
                    latency_ms=scale(w.latency_ms),
                    gpu_ms=scale(w.gpu_ms),
                    enqueue_ms=scale(w.enqueue_ms),
                )
                for w in self.windows
            )
        )

    def __add__(self, other: ConfigSamples) -> ConfigSamples:
        return ConfigSamples(self.windows + other.windows)


def spread_of_runs(
    p50s_ms: list[float],
    samples_csv: str | None = None,
    schedule: str | None = None,
    samples: ConfigSamples | None = None,
) -> RepeatSpread:
    """How the p50 of K timed windows (one per process) varies: min, max, (max - min) / median;
    with ``samples``, each process's GPU time and enqueue medians and its classification."""
    values = np.asarray(p50s_ms, dtype=float)
    median = float(np.median(values))
    per = samples.windows if samples is not None else ()
    return RepeatSpread(
        runs=len(values),
        p50_ms=[float(v) for v in values],
        median_p50_ms=median,
        min_p50_ms=float(values.min()),
        max_p50_ms=float(values.max()),
        range_pct_of_median=100.0 * float(values.max() - values.min()) / median
        if median > 0
        else 0.0,
        samples_csv=samples_csv,
        schedule=schedule,
        gpu_p50_ms=[w.median("gpu_time") for w in per] if per else None,
        enqueue_p50_ms=[w.median("enqueue") for w in per] if per else None,
        bound=[w.bound for w in per] if per else None,
    )


def _cell(values: tuple[float, ...], i: int) -> str:
    return repr(float(values[i])) if i < len(values) else ""


def processes_text(samples: ConfigSamples) -> str:
    """processes.csv's text: one row per iteration of each process (module doc); a
    generation's phase windows as rows of their own, named in a last ``phase`` column (written
    only when a window has phases)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    phased = any(w.phases for w in samples.windows)
    writer.writerow(HEADER + ((PHASE_COLUMN,) if phased else ()))
    for process, whole in enumerate(samples.windows):
        parts = [("", whole)] + [(name, whole.phases[name]) for name in sorted(whole.phases)]
        for phase, w in parts:
            for i in range(max(len(w.latency_ms), len(w.gpu_ms), len(w.enqueue_ms))):
                writer.writerow(
                    (
                        process,
                        i,
                        _cell(w.latency_ms, i),
                        _cell(w.gpu_ms, i),
                        _cell(w.enqueue_ms, i),
                        whole.gpu or "",
                        whole.round or "",
                        1 if whole.pilot else "",
                        *((phase,) if phased else ()),
                    )
                )
    return out.getvalue()


#: the times a sample file may hold (ms): from 1 ns to one day. Beyond them a value is no time
#: this tool measured (a damaged or edited file), and a ratio or mean of two would overflow
MIN_TIME_MS, MAX_TIME_MS = 1e-6, 86_400_000.0
#: the longest text a field of a sample file may hold (a float's repr, a GPU's UUID, a round)
MAX_FIELD_CHARS = 256
#: relative difference between a process's median in processes.csv and result.json's record
#: of it beyond which the two files describe different windows
SAME_MEDIAN = 1e-4


def _number(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    if len(text) > MAX_FIELD_CHARS:
        raise ValueError(f"a field of {len(text)} characters is not a time")
    value = float(text)
    if not MIN_TIME_MS <= value <= MAX_TIME_MS:  # NaN fails it too
        raise ValueError(
            f"{text!r} is not a time in ms (from {units.plain(MIN_TIME_MS)} to "
            f"{units.plain(MAX_TIME_MS)})"
        )
    return value


def _checked(row: dict[str, Any]) -> dict[str, Any]:
    """A row of a sample file, refused when it holds more fields than the header names or a
    field longer than MAX_FIELD_CHARS."""
    if None in row:
        raise ValueError("a row holds more fields than the header names")
    for column, text in row.items():
        if text is not None and len(text) > MAX_FIELD_CHARS:
            raise ValueError(f"its {column} field is {len(text)} characters long")
    return row


def _why(error: BaseException) -> str:
    name = "csv.Error" if isinstance(error, csv.Error) else type(error).__name__
    return f"{name}: {first_line(error)}"


#: the largest sample file read (processes.csv, latency.csv: about 60 bytes an iteration)
MAX_SAMPLES_BYTES = 256 << 20


def _sample_text(path: Path, what: str) -> str:
    """A sample file's text, read whole before it is parsed: a regular file (a folder, a FIFO
    or a device is refused) of at most MAX_SAMPLES_BYTES (a larger one is refused before it is
    read: the csv reader read a 4 GiB line in full before refusing it); UTF-8 (else a
    UnicodeDecodeError)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise UserError(f"{path}: not a {what} (cannot read it: {error.strerror})") from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SAMPLES_BYTES:
        os.close(descriptor)
        if not stat.S_ISREG(info.st_mode):  # (a folder: before fdopen refuses it)
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise UserError(f"{path}: not a {what} ({kind})")
        raise UserError(
            f"{path}: not a {what} (larger than {MAX_SAMPLES_BYTES >> 20} MiB: "
            f"{units.size(info.st_size / 2**20, 'MiB')})"
        )
    with os.fdopen(descriptor, "rb") as handle:
        data = handle.read(MAX_SAMPLES_BYTES + 1)
    if len(data) > MAX_SAMPLES_BYTES:  # (it grew while read)
        raise UserError(f"{path}: not a {what} (larger than {MAX_SAMPLES_BYTES >> 20} MiB)")
    return data.decode("utf-8")


def read_samples(path: Path) -> ConfigSamples:
    """processes.csv -> the config's samples, in process order (files written before the
    gpu_ms, enqueue_ms, round and pilot columns read with those empty). A file that is no
    processes.csv (no process or latency_ms column, a value that is no time, a field too long,
    bytes that are not text, a folder, a file too large: ``_sample_text``) is a UserError
    naming it."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    try:
        text = _sample_text(path, "processes.csv")
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if not {"process", "latency_ms"} <= set(reader.fieldnames or ()):
            raise ValueError("no process and latency_ms columns")
        for row in map(_checked, reader):
            phase = row.get(PHASE_COLUMN) or ""
            if phase and phase not in KEPT_PHASES:
                raise ValueError(f"unknown phase {phase[:40]!r}")
            process = rows.setdefault(
                (int(row["process"]), phase),
                {
                    "latency_ms": [],
                    "gpu_ms": [],
                    "enqueue_ms": [],
                    "gpu": row.get("gpu") or None,
                    "round": row.get("round") or None,
                    "pilot": (row.get("pilot") or "") not in ("", "0"),
                },
            )
            for column in ("latency_ms", "gpu_ms", "enqueue_ms"):
                value = _number(row.get(column))
                if value is not None:
                    process[column].append(value)
    except (OSError, KeyError, ValueError, TypeError, csv.Error) as error:
        raise UserError(f"{path}: not a processes.csv ({_why(error)})") from None

    def window(r: dict[str, Any], phases: dict[str, ProcessWindow]) -> ProcessWindow:
        return ProcessWindow(
            tuple(r["latency_ms"]),
            tuple(r["gpu_ms"]),
            tuple(r["enqueue_ms"]),
            r["gpu"],
            r["round"],
            r["pilot"],
            phases,
        )

    windows = []
    for (number, phase), r in sorted(rows.items()):
        if phase or not r["latency_ms"]:
            continue
        phases = {
            name: window(rows[number, name], {})
            for name in KEPT_PHASES
            if (number, name) in rows and rows[number, name]["latency_ms"]
        }
        windows.append(window(r, phases))
    return ConfigSamples(tuple(windows))


def read_latency_csv(path: Path) -> list[float]:
    """The latency_ms column of a run's latency.csv."""
    return list(read_own_window(path).latency_ms)


def read_own_window(path: Path, gpu: str | None = None) -> ProcessWindow:
    """A run's latency.csv as one process (its gpu_ms and enqueue_ms columns where written); a
    UserError naming it when it is no latency.csv (as read_samples)."""
    columns: dict[str, list[float]] = {"latency_ms": [], "gpu_ms": [], "enqueue_ms": []}
    try:
        text = _sample_text(path, "latency.csv")
        for row in map(_checked, csv.DictReader(io.StringIO(text, newline=""))):
            for column, values in columns.items():
                value = _number(row.get(column))
                if value is not None:
                    values.append(value)
    except (ValueError, TypeError, csv.Error) as error:
        raise UserError(f"{path}: not a latency.csv ({_why(error)})") from None
    return ProcessWindow(
        tuple(columns["latency_ms"]), tuple(columns["gpu_ms"]), tuple(columns["enqueue_ms"]), gpu
    )


def contradiction(samples: ConfigSamples, result: RunResult) -> str | None:
    """How processes.csv's windows contradict result.json's record of them (the number of
    processes and each one's p50 in timing.noise.repeat_runs; without it, one process whose
    median is timing.p50_ms); None when they agree."""
    spread = result.timing.noise.repeat_runs if result.timing.noise is not None else None
    medians = samples.medians("latency")
    count = spread.runs if spread is not None else 1
    if len(medians) != count:
        return f"it holds {len(medians)} process(es), result.json records {count}" + (
            "" if spread is not None else " (no repeat_runs)"
        )
    recorded = list(spread.p50_ms) if spread is not None else [result.timing.p50_ms]
    for index, (mine, theirs) in enumerate(zip(medians, recorded)):
        if theirs is None or not math.isclose(mine, theirs, rel_tol=SAME_MEDIAN):
            shown = theirs if theirs is None else units.significant(theirs, 6)
            return (
                f"process {index}'s median is {units.significant(mine, 6)} ms, result.json "
                f"records {shown} ms"
            )
    return None


def config_samples(
    result: RunResult, result_json: Path | None = None, gpu: str | None = None
) -> ConfigSamples:
    """Every timed process of the run's config: processes.csv where the run has one, else its
    latency.csv as a single process; a window without a recorded GPU is placed on ``gpu`` (the
    cell's own run's GPU) when given; empty when neither file is there. A processes.csv that
    does not read, or that contradicts result.json (``contradiction``), is not used: one
    warning (profiler.notices) says so, and the run's own window stands in."""
    if result_json is not None:
        path = Path(result_json).parent / PROCESSES_CSV
        if os.path.lexists(path):  # a folder or a FIFO of that name too: one warning
            try:
                samples = read_samples(path)
                why = contradiction(samples, result)
            except UserError as error:
                why = str(error).removeprefix(f"{path}: ")
            if why is None:
                return samples.placed(gpu)
            notices.warn(
                f"{path} is not used: {why}; the verdicts take the run's own timed "
                "window (latency.csv) instead"
            )
    latency = latency_csv_of(result, result_json)
    if latency is None:
        return ConfigSamples()
    return ConfigSamples((read_own_window(latency, gpu),))


def record_processes(
    run_dir: Path, samples: ConfigSamples, schedule: str, result: RunResult | None = None
) -> RunResult:
    """processes.csv written beside result.json (all of ``samples``, the run's own first) and
    result.json's repeat_runs updated to match; each file replaced atomically. Returns the
    updated result."""
    run_dir = Path(run_dir)
    if result is None:
        result = read_result(run_dir / RESULT_FILE)
    spread = spread_of_runs(
        samples.medians("latency"), samples_csv=PROCESSES_CSV, schedule=schedule, samples=samples
    )
    write_text_atomic(run_dir / PROCESSES_CSV, processes_text(samples))
    timing = result.timing
    if timing.noise is not None:
        noise = msgspec.structs.replace(timing.noise, repeat_runs=spread)
        result = msgspec.structs.replace(
            result, timing=msgspec.structs.replace(timing, noise=noise)
        )
    write_result(run_dir, result)
    return result


def config_of(result: RunResult) -> RunConfig:
    """The run's RunConfig, from result.json (options added since the run take their defaults,
    each value validated as the command line's would be)."""
    from profiler.runs.config import config_from_json, keyed, run_options

    recorded = msgspec.to_builtins(result.config)
    options = {k: v for k, v in recorded.items() if k in run_options()}
    return config_from_json(keyed(options))


def own_window(run_dir: Path) -> list[float]:
    """The run's own timed window (latency.csv in its folder)."""
    return read_latency_csv(Path(run_dir) / LATENCY_CSV)
