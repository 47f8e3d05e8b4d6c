"""The sentences the views write from the analysis' records: how a verdict was reached, how to
read two verdicts (launch-bound or near it, the lever, a disagreement), why two runs differ,
the GPU's state around a timed window, the roofline chart's labels and title, and what would
lower this machine's noise floor. The records carry the reasons and the figures; the words,
and every number in them (spelled by profiler.report.fmt), are written here, once, for the
terminal, Markdown, HTML and a sweep's benchmark.csv.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler import units
from profiler.analysis.difference import (
    CLOCK,
    CLOCK_AND_KERNELS,
    HOST,
    KERNEL_SHARE,
    KERNELS,
    LISTED,
    NONE,
)
from profiler.analysis.floor import Tip
from profiler.analysis.records import (
    Bound,
    Difference,
    Explanation,
    GpuStateFigures,
    KernelShare,
    NoiseSource,
    TailFigure,
    TimedVerdicts,
    Verdict,
)
from profiler.analysis.timed_verdict import LATENCY_TARGET, LEVER
from profiler.analysis.verdict import MAX_FLOOR
from profiler.report.fmt import (
    count,
    number,
    percent,
    plain,
    ratio,
    time,
)

if TYPE_CHECKING:  # the roofline module imports pandas: a run's views import none
    from profiler.analysis.roofline import Roof, RooflineChart
from profiler.runs.gpu_record import GpuState
from profiler.runs.noise_floor import this_host
from profiler.runs.samples import (
    GPU_BOUND_RATIO,
    LAUNCH_BOUND,
    LAUNCH_LATENCY_RATIO,
    NEAR_LAUNCH_BOUND,
)
from profiler.trace.rules import distinct_short_names

# --- a verdict (profiler.analysis.verdict)


def verdict_method(v: Verdict) -> str:
    """How a verdict was reached: its interval's design, the tests, and where the windows ran
    when they ran on several GPUs."""
    if v.design == "paired":
        how = (
            f"paired t-interval on the log ratio of {v.pairs} processes that timed both "
            f"(rounds), {number(v.df, 0, thousands=False)} degrees of freedom"
        )
    elif v.design == "unpaired":
        how = (
            f"Welch t-interval on the log of per-process medians, {v.processes_a} vs "
            f"{v.processes_b} processes, {units.number(v.df, thousands=False)} degrees of freedom"
        )
    else:
        source = noise_source_words(v.floor_from, "floor") if v.floor_from else None
        how = (
            f"one process on a side ({v.processes_a} vs {v.processes_b}): the between-process "
            f"spread is unknown, a {v.floor_source} floor of {percent(100 * (v.noise_floor or 0))} "
            f"CV stands in (normal interval{f'; {source}' if source else ''})"
        )
        if v.floor_refused is not None:
            how += f"; the floor given, {v.floor_refused!r}, is no spread from 0 to "
            how += plain(MAX_FLOOR)
    if v.rho is not None and v.rho_source is not None:
        how += f"; {_rho_clause(v.design == 'paired', v.rho, v.rho_source)}"
    tolerance = plain(100 * v.tolerance)
    method = (
        f"{how}; 95 % interval; same when the 90 % interval is within ±{tolerance} % (TOST), "
        f"faster/slower when p < 0.05 and the ratio is beyond ±{tolerance} %"
    )
    if v.withheld:
        method += f"; {WITHHELD_WHY}"
    gpus = _gpus_note(v)
    return f"{method}; {gpus}" if gpus else method


#: a verdict withheld (Verdict.withheld): its word, and why
WITHHELD_WORDS = "undecided (one process a side; measure this machine with `noise`)"
WITHHELD_WHY = (
    "no faster/slower: one process a side on a CPU, whose between-process spread `noise` has "
    "not measured (the H100's floor says nothing of it)"
)


def withheld_note(cells: list[str]) -> str:
    """The cells of a sweep whose verdicts were withheld, and what decides them."""
    return (
        f"{WITHHELD_WORDS}: {', '.join(cells)}: one timed window a side on a CPU; "
        "`python profile.py noise` measures this machine's floor, or --processes 3 (or "
        "more) times each cell in fresh processes"
    )


def noise_source_words(source: NoiseSource, what: str = "rho") -> str:
    """Where a floor or rho came from (profiler.analysis.records.NoiseSource), in words:
    "measured on this machine by `noise` at 2026-05-01T10:00:00+00:00", "the H100 default"."""
    if source.kind == "default":
        return "the H100 default" + (
            ", not this machine's: `noise` measures it" if what == "floor" else ""
        )
    if source.kind == "given":
        return "given"
    where = (
        "this machine"
        if source.host and source.host == this_host()
        else (source.host or "the run's machine")
    )
    kind = f" ({source.machine})" if source.machine else ""
    if source.kind == "recorded":
        return f"recorded with the run, measured by `noise` on {where}{kind}"
    when = f" at {source.measured}" if source.measured else ""
    return f"measured on {where}{kind} by `noise`{when}"


def _rho_clause(paired: bool, rho: float, source: NoiseSource) -> str:
    """Why the design is paired or not: the within-process correlation and its source."""
    at = f"at ρ {plain(round(rho, 2))} ({noise_source_words(source)})"
    if paired:
        return f"paired: {at} pairing narrows the expected interval"
    return f"not paired: {at} pairing would widen the expected interval"


def _gpus_note(v: Verdict) -> str | None:
    """Where the windows ran, when on several GPUs: paired out, or a factor left in."""
    if v.gpus_a is None or v.gpus_b is None:
        return None
    if v.design == "paired":
        return (
            f"windows on GPUs {_gpu_list(v.gpus_a + v.gpus_b)}; each pair's two windows on one "
            "GPU (one process): an offset between GPUs cancels"
        )
    return (
        f"GPU a recorded factor, not paired out: A's windows by GPU {_per_gpu(v.gpus_a)}, "
        f"B's {_per_gpu(v.gpus_b)}; an offset between GPUs widens the interval (sweep's "
        "GPU offsets)"
    )


def _gpu_list(gpus: list[str]) -> str:
    return ",".join(sorted(set(gpus), key=lambda g: (not g.isdigit(), g.zfill(8))))


def _per_gpu(gpus: list[str]) -> str:
    return " ".join(f"{g}:{gpus.count(g)}" for g in _gpu_list(gpus).split(","))


def fdr_note(v: Verdict) -> str | None:
    """How the verdict was held against its family (a sweep's cells), or None."""
    if v.fdr_comparisons is None or v.fdr_q is None:
        return None
    return f"Benjamini-Hochberg over {v.fdr_comparisons} comparisons, q = {plain(v.fdr_q)}"


# --- how to read two verdicts (profiler.analysis.timed_verdict)


#: what each word that is not GPU-bound means for the latency (its rule: BOUND_RULES)
BOUND_MEANINGS = {
    LAUNCH_BOUND: "the host paces the call, so its latency spreads with the host",
    NEAR_LAUNCH_BOUND: "the GPU's work sets most of the call and the host's launches the "
    "rest, so its latency spreads with the host",
}
#: each word's rule, in words (profiler.runs.samples.bound_word)
BOUND_RULES = {
    LAUNCH_BOUND: f"median enqueue >= GPU time, or latency >= {plain(LAUNCH_LATENCY_RATIO)} x "
    "GPU time",
    NEAR_LAUNCH_BOUND: f"latency {plain(GPU_BOUND_RATIO)}-{plain(LAUNCH_LATENCY_RATIO)} x GPU "
    "time, enqueue below it",
}


def bound_figures_words(bound: Bound) -> str:
    """The figures a config's word was read from (the geometric means over its processes of
    their medians) and the processes the host paced: "enqueue p50 5.000 ms >= GPU time 3.000
    ms; 4 of 5 processes launch-bound"."""
    enqueue, gpu, latency = bound.enqueue_p50_ms, bound.gpu_p50_ms, bound.latency_p50_ms
    if enqueue is None or gpu is None:  # a record without its figures
        why = ""
    elif bound.word == LAUNCH_BOUND and (enqueue >= gpu or latency is None):
        why = (
            f"enqueue p50 {time(enqueue, thousands=False)} >= GPU time {time(gpu, thousands=False)}"
        )
    elif latency is not None:
        rule = (
            f">= {plain(LAUNCH_LATENCY_RATIO)} x"
            if bound.word == LAUNCH_BOUND
            else f"{plain(GPU_BOUND_RATIO)}-{plain(LAUNCH_LATENCY_RATIO)} x"
        )
        why = (
            f"latency p50 {time(latency, thousands=False)} = "
            f"{ratio(latency / gpu, suffix=' x')} GPU time "
            f"{time(gpu, thousands=False)} ({rule}), enqueue p50 {time(enqueue, thousands=False)}"
        )
    else:
        why = f"enqueue p50 {time(enqueue, thousands=False)}, GPU time {time(gpu, thousands=False)}"
    seen = bound.classified_processes
    processes = f"{bound.launch_bound_processes} of {seen} processes launch-bound"
    return f"{why}; {processes}" if why else processes


def bound_line(label: str, bound: Bound) -> str | None:
    """A config the host paces or nearly paces, with the figures that make it so; None for a
    GPU-bound or unclassified one."""
    if bound.word not in BOUND_MEANINGS:
        return None
    return f"{bound.word} ({label}): {bound_figures_words(bound)}: {BOUND_MEANINGS[bound.word]}"


def note_lines(v: TimedVerdicts) -> list[str]:
    """What to read and why, in words: each config the host paces (launch-bound) or nearly
    paces (near the launch bound) with the figures that make it so, the lever and the
    processes the latency would need, and a disagreement of the two figures
    (profiler.analysis.timed_verdict's module doc)."""
    paced = [
        line for label, b in (("A", v.bound_a), ("B", v.bound_b)) if (line := bound_line(label, b))
    ]
    lines = list(paced)
    if paced:
        lines.append(_lever_line(v))
    latency, gpu = v.latency, v.gpu_time
    if v.disagree and latency is not None and gpu is not None:  # disagree: both decided
        why = (
            "the host's launches, not the GPU's work, decide what the caller waits"
            if paced
            else "check the GPU state of both runs (clocks, other tenants)"
        )
        lines.append(
            f"the two figures disagree: latency says {latency.verdict}, GPU time says "
            f"{gpu.verdict}: {why}"
        )
    elif v.split and latency is not None and gpu is not None:
        lines.append(f"latency says {latency.verdict}, GPU time says {gpu.verdict}")
    return lines


def _lever_line(v: TimedVerdicts) -> str:
    """The lever of a comparison the host paces, after the processes the latency would
    need."""
    lever = f"`{LEVER}` replays the call without launches"
    if v.cuda_graphs_ms is not None:
        lever += f" (measured: {time(v.cuda_graphs_ms, thousands=False)})"
    needed = v.latency_processes_for_5pct
    if needed is None:
        return lever
    gpu = (
        "the GPU-time verdict holds with these"
        if v.gpu_time is not None
        else "no GPU-time verdict here (a side's GPU time was not measured)"
    )
    return (
        f"the latency verdict would need about {needed} processes a side for "
        f"±{plain(100 * LATENCY_TARGET)} %; {gpu}; {lever}"
    )


def verdict_note(v: TimedVerdicts | None) -> str:
    """The lines in one: a sweep's benchmark.csv column verdict_note ("" without verdicts),
    a withheld latency verdict's words first."""
    if v is None:
        return ""
    withheld = [f"latency {WITHHELD_WORDS}"] if v.latency and v.latency.withheld else []
    return "; ".join(withheld + note_lines(v))


# --- a window's tails (profiler.analysis.tails)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def tail_value(t: TailFigure, cv: float | None = None) -> str:
    """A tail percentile with its 95 % interval, to the figures the window's ``cv`` allows
    (units.time with its noise): "6.21 ms [6.01-6.40]"; an end the window cannot give is "?"
    ("6.58 ms [6.41-?]")."""
    low = units.number(t.low_ms, None, noise=cv) if t.low_ms is not None else "?"
    high = units.number(t.high_ms, None, noise=cv) if t.high_ms is not None else "?"
    return f"{units.time(t.value_ms, decimals=None, noise=cv)} [{low}-{high}]"


def tail_rank(t: TailFigure) -> str:
    """Which of the window's values the percentile is: "the 99th of 100 values", "between the
    90th and 91st of 100 values" (numpy's linear interpolation)."""
    position = 1 + t.percentile / 100 * (t.iterations - 1)
    near = round(position)
    if abs(position - near) < 0.05 or t.iterations == 1:
        return f"the {ordinal(near)} of {t.iterations} values"
    low = int(position)
    return f"between the {ordinal(low)} and {ordinal(low + 1)} of {t.iterations} values"


def tail_meaning(t: TailFigure) -> str:
    """What a tail's interval is, and where the window is too small for it: "95 % interval: the
    84th to 96th of 100 values (order statistics, no shape assumed)"."""
    if t.low_rank is not None and t.high_rank is not None:
        return (
            f"95 % interval: the {ordinal(t.low_rank)} to {ordinal(t.high_rank)} of "
            f"{t.iterations} values (order statistics, no shape assumed)"
        )
    missing_end = (
        f"from the {ordinal(t.low_rank)} value up, with no upper end"
        if t.low_rank is not None
        else f"up to the {ordinal(t.high_rank)} value, with no lower end"
        if t.high_rank is not None
        else "with neither end"
    )
    return (
        f"p{t.percentile} of {t.iterations} iterations is {tail_rank(t)}: too few for its 95 % "
        f"interval, which runs {missing_end} among them; {t.needed} iterations give both ends"
    )


# --- why two runs differ (profiler.analysis.difference)


def difference_lines(d: Difference, listed: int | None = None) -> list[str]:
    """Why B differs from A, in words: the kernels one run has and the other has not, the SM
    clock and the time of the kernels both ran, or that none of it moved."""
    configs = f"the runs differ in {', '.join(d.differs_in)}" if d.differs_in else None
    lines = _kernel_lines(d, configs, LISTED if listed is None else listed) + _time_lines(
        d, configs
    )
    clocks_known = d.clock_a_mhz is not None and d.clock_b_mhz is not None
    if d.cause == HOST and d.latency_ratio is not None:
        lines.append(
            "same kernels, same kernel time: the latency difference "
            f"({percent(100 * (d.latency_ratio - 1), sign=True)}) is host-side (launch overhead, "
            "scheduling, other processes)"
        )
    elif d.cause == NONE:
        lines.append(
            "same kernels and kernel time" + (" at the same clock" if clocks_known else "")
        )
    return lines


def explanation_line(e: Explanation, short: bool = False, listed: int | None = None) -> str:
    """The lines in one; ``short``: the kernels by their short names (a terminal's width);
    ``listed``: the kernels added and dropped named (LISTED by default), the rest counted."""
    line = "; ".join(difference_lines(e, listed))
    if short:
        names = sorted({k.name for k in e.added + e.removed}, key=len, reverse=True)
        for name, shortened in zip(names, distinct_short_names(names)):
            line = line.replace(name, shortened)
    return line


def _names(kernels: list[KernelShare], listed: int = LISTED) -> str:
    named = ", ".join(f"{k.name} ({percent(100 * k.share)})" for k in kernels[:listed])
    more = len(kernels) - listed
    return (named + (f" and {more} more" if named else f"{more} kernels")) if more > 0 else named


def _kernel_lines(d: Difference, configs: str | None, listed: int = LISTED) -> list[str]:
    """The line on the kernels one run has and the other has not (``listed`` of each named)."""
    if d.cause in (KERNELS, CLOCK_AND_KERNELS):
        return [
            f"different kernels ({configs or 'autotuning picked other algorithms?'}): "
            f"B adds {_names(d.added, listed) or 'none'}; B drops "
            f"{_names(d.removed, listed) or 'none'}"
        ]
    if d.added or d.removed:
        return [
            f"kernel names differ only in small kernels (< {plain(100 * KERNEL_SHARE)} % "
            f"of kernel time each): {len(d.added)} added, {len(d.removed)} removed"
        ]
    return []


def _time_lines(d: Difference, configs: str | None) -> list[str]:
    """The lines on the SM clock and the time of the kernels both ran."""
    lines = []
    clock_a, clock_b, ratio = d.clock_a_mhz, d.clock_b_mhz, d.kernel_time_ratio
    clock_moved = d.cause in (CLOCK, CLOCK_AND_KERNELS)
    if clock_moved and clock_a is not None and clock_b is not None:  # known when it moved
        change = clock_b / clock_a - 1
        line = (
            f"{'same kernels at a ' if d.cause == CLOCK else ''}"
            f"{'lower' if change < 0 else 'higher'} SM clock in B: "
            f"{number(clock_b, 0, thousands=False)} MHz "
            f"against {number(clock_a, 0, thousands=False)} MHz "
            f"({percent(100 * change, sign=True)})"
        )
        if ratio is not None:
            line += (
                f"; the kernels both ran took {percent(100 * (ratio - 1), sign=True)} "
                "(the clock alone "
                f"predicts {percent(100 * (clock_a / clock_b - 1), sign=True)})"
            )
        if d.throttle_reasons_b:
            line += f"; throttle reasons in B: {', '.join(d.throttle_reasons_b)}"
        lines.append(line)
    elif d.kernel_time_moved and ratio is not None:  # known when it moved
        clocks_known = clock_a is not None and clock_b is not None
        lines.append(
            f"the kernels both ran took {percent(100 * (ratio - 1), sign=True)} in B at "
            f"{'the same clock' if clocks_known else 'an unrecorded clock'}"
            f" ({configs or 'memory, contention or another tenant on the GPU'})"
        )
    if clock_a is None or clock_b is None:
        lines.append(
            "SM clock not recorded for "
            + " and ".join(side for side, c in (("A", clock_a), ("B", clock_b)) if c is None)
        )
    return lines


# --- the GPU's state around a timed window (profiler.runs.gpu_record.GpuState)


def gpu_state_line(state: GpuState | GpuStateFigures, side: str = "") -> str:
    """One line for a person: the GPU, its SM clock, temperature and power before -> after,
    the throttle reasons and the host's load (``side``: "A" or "B" of a compare)."""
    load = state.load_average
    host = (
        ""
        if load is None
        else f"host load {number(load[0], 2, thousands=False)}"
        + (f" on {state.cpus} CPUs" if state.cpus else "")
    )
    head = f"GPU state {side}:" if side else "GPU state:"
    if state.not_recorded:
        return f"{head} not recorded ({state.not_recorded})" + (f"; {host}" if host else "")
    parts = [state.device or "GPU"]
    if state.sm_clock_mhz is not None:
        peak = f" of {state.max_sm_clock_mhz}" if state.max_sm_clock_mhz else ""
        parts.append(f"SM {number(state.sm_clock_mhz, 0, thousands=False)}{peak} MHz")
    ends = [s for s in (state.before, state.after) if s is not None]
    temps = [s.temperature_c for s in ends if s.temperature_c is not None]
    if temps:
        parts.append(" -> ".join(f"{t} C" for t in temps))
    power = [s.power_w for s in ends if s.power_w is not None]
    if power:
        parts.append(" -> ".join(f"{number(p, 0, thousands=False)} W" for p in power))
    parts.append("throttle: " + (", ".join(state.throttle_reasons) or "none"))
    if host:
        parts.append(host)
    return f"{head} " + ", ".join(parts)


# --- the roofline chart (profiler.analysis.roofline.chart_data)


def roof_name(roof: Roof) -> str:
    """A roof by its precision; one of another GPU's ceilings with its bandwidth too."""
    return f"{roof.key}, {count(roof.peak_gbs, 0)} GB/s" if roof.apart else roof.key


def roof_label(roof: Roof) -> str:
    """``fp16 roof: 4,800 GB/s, 989 TFLOP/s``."""
    return (
        f"{roof_name(roof)} roof: {count(roof.peak_gbs, 0)} GB/s, "
        f"{count(roof.peak_tflops, 0)} TFLOP/s"
    )


def roofline_title(chart: RooflineChart) -> str:
    from profiler.analysis.roofline import MIN_BYTES_LABEL

    return (
        f"Roofline, each point against its precision's roof; bytes: {MIN_BYTES_LABEL}, "
        f"not measured (ceilings: {', '.join(chart.sources)})"
    )


# --- what would lower the noise floor (profiler.analysis.floor.suggestions)


def floor_tip(tip: Tip) -> str:
    """A change that would lower this machine's noise floor, in words."""
    clock = f"`sudo nvidia-smi -lgc {tip.clock_mhz},{tip.clock_mhz}`"
    if tip.kind == "persistence-mode":
        return (
            "persistence mode is off: `sudo nvidia-smi -pm 1` keeps the driver loaded "
            "between processes (no re-initialisation per run)"
        )
    if tip.kind == "clocks-float":
        return (
            f"clocks float with load and temperature: {clock} locks the SM clock (where the "
            "driver permits; undo with -rgc)"
        )
    if tip.kind == "lock-clock":
        return f"lock the SM clock where permitted: {clock} (undo with -rgc)"
    if tip.kind == "launch-jitter":
        return (
            f"the window's own spread (CV {percent(100 * (tip.within_cv or 0))}) is mostly "
            "host-side launch jitter: `run --cuda-graphs` replays the forward without launches"
        )
    if tip.kind == "cpu-governor":
        return (
            f"the CPU governor is {tip.governor!r}: `sudo cpupower frequency-set -g "
            "performance` stops the host clock from ramping"
        )
    if tip.kind == "pin-cores":
        return f"pin the process to a few idle cores: `taskset -c {tip.cpus} {tip.command} ...`"
    return (
        "more processes per side narrow the interval: compare --processes 5 (or --target-noise 2)"
    )
