"""Overview: steps, GPU utilization, SM efficiency, occupancy, time breakdown, idle gaps,
top CPU operators. Pure functions of a parsed Trace; interval arithmetic in numpy.

Steps, GPU utilization, SM efficiency and occupancy follow the PyTorch profiler TensorBoard
plugin's definitions (its docs/gpu_utilization.md and gpu_metrics_parser.py), implemented
independently here, and equal the plugin's figures on its sample traces; the time breakdown's
roles do not all mean what the plugin's do (below):

- steps come from the CPU-side ``ProfilerStep#N`` spans only (Kineto's GPU-timeline copies,
  ``gpu_user_annotation``, are not steps). A step is extended to the end of the GPU work its
  launches started, and starts no earlier than the previous step ended; without step spans the
  CPU activity is one step;
- GPU utilization = time with at least one kernel running, inside the steps / steps time;
- est. SM efficiency = sum over time of min(sum of concurrent kernels' blocks per SM, 1),
  inside the steps / steps time;
- est. achieved occupancy = kernel-time-weighted mean of Kineto's ``est. achieved occupancy %``
  over the kernels inside the steps;
- time breakdown: each instant of a step goes to the first of kernel, memcpy, memset,
  communication, runtime, data loader, CPU exec that covers it, else "other" (the plugin's
  order). What each role holds differs from the plugin's, though: ``BREAKDOWN_DEFINITIONS``
  states both, and ``breakdown(..., definitions="plugin")`` computes the plugin's (0.4.3, read
  from its ``event_parser.py``) as it reads the ``tb-compat`` copy of a trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.errors import UserError
from profiler.trace.columns import give_back_memory
from profiler.trace.kernels import NO_OPERATOR, launch_table
from profiler.trace.load import KIND, Trace

BREAKDOWN = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
)

_COMMUNICATION = r"nccl|all_?reduce|all_?gather|reduce_?scatter|alltoall"

#: What each role of the step breakdown holds: this tool's reading ("tool", the default) and
#: the TensorBoard plugin's (torch-tb-profiler 0.4.3, ``event_parser._parse_step``), as it reads
#: the ``tb-compat`` copy of a trace (which gives it the runtime/driver calls it otherwise drops
#: and hides the GPU-timeline copies of annotations). Roles are taken in BREAKDOWN's order in
#: both: an instant goes to the first role that covers it.
BREAKDOWN_DEFINITIONS: dict[str, dict[str, str]] = {
    "tool": {
        "steps": "CPU ProfilerStep#N spans, extended to the end of the GPU work they launched",
        "kernel": "GPU kernels other than communication kernels",
        "communication": "kernels named as communication (nccl, all_reduce, all_gather, "
        "reduce_scatter, alltoall: the category rules)",
        "runtime": "CUDA runtime and driver API calls (cuda_runtime, cuda_driver)",
        "dataloader": "enumerate(DataLoader)#*.__next__ / enumerate(DataPipe)#* spans",
        "cpu_exec": "cpu_op, user_annotation and python_function spans (python_function only "
        "in traces recorded with stacks)",
    },
    "plugin": {
        "steps": "the same, as it reads a tb-compat copy (in a raw trace a GPU-side "
        "ProfilerStep#N copy is an extra step); without step spans, one step over "
        "the cpu_op spans only",
        "kernel": "GPU kernels other than those launched by a communication operator",
        "communication": "kernels launched by an nccl:*/gloo:* operator (by External id), and "
        "those operators' CPU spans; no kernel is communication by its name",
        "runtime": "runtime API calls (cat 'Runtime'/'runtime': current traces' cuda_runtime "
        "and cuda_driver only in the tb-compat copy; 0 in a raw current trace)",
        "dataloader": "enumerate(DataLoader)#*.__next__ / enumerate(DataPipe)#* cpu_op spans "
        "only: 0.4.3 drops user_annotation spans, as current torch records a "
        "DataLoader's (the plugin's last source, unreleased, reads them)",
        "cpu_exec": "cpu_op spans only: user_annotation (record_function) spans other than "
        "steps and communication operators, and python_function spans, are not "
        "counted",
    },
}
#: who defines each reading, for titles
DEFINERS = {"tool": "this tool", "plugin": "TensorBoard plugin 0.4.3"}
#: communication operators as the plugin names them (its NcclOpNameSet and GlooOpNameSet)
PLUGIN_COMMUNICATION_OPS = (
    "nccl:broadcast",
    "nccl:reduce",
    "nccl:all_reduce",
    "nccl:all_gather",
    "nccl:reduce_scatter",
    "gloo:broadcast",
    "gloo:reduce",
    "gloo:all_reduce",
    "gloo:all_gather",
    "gloo:reduce_scatter",
)


# --------------------------------------------------------------------------------------------
# interval helpers
# --------------------------------------------------------------------------------------------


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals, as sorted disjoint (starts, ends).

    A union is the same whatever the grouping, and its bounds are the intervals' own values:
    many intervals are merged a block at a time and the blocks' unions merged again, which
    gives the same bits with a block's temporaries, not all of them."""
    if len(starts) > _MERGE_BLOCK:
        blocks = [
            _merge(starts[i : i + _MERGE_BLOCK], ends[i : i + _MERGE_BLOCK])
            for i in range(0, len(starts), _MERGE_BLOCK)
        ]
        return _merge(
            np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])
        )
    return _merge(starts, ends)


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(starts) == 0:
        return np.array([]), np.array([])
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    del order
    running_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > running_end[:-1]
    del running_end
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new)) if len(s) else e[new]


#: intervals merged at a time (merge)
_MERGE_BLOCK = 1 << 19


def covered(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> float:
    """Length of merged intervals (starts, ends) inside [lo, hi]."""
    if len(starts) == 0 or hi <= lo:
        return 0.0
    return float(np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None).sum())


def covered_per_window(
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    w_lo: np.ndarray | pd.Series,
    w_hi: np.ndarray | pd.Series,
) -> np.ndarray:
    """Covered length of merged intervals inside each window (windows may be many).

    Per window, the same as ``covered``: only the intervals that overlap the window are clipped
    (the others clip to exactly +0.0), and their sum is the one numpy makes of the array of
    full length those zeros pad them to (``padded_sum``), so it gives the same bits, without
    recomputing or summing every interval for every window."""
    starts, ends = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    out = np.zeros(len(w_lo))
    if len(starts) == 0:
        return out
    for k, (lo, hi) in enumerate(zip(w_lo, w_hi)):
        if hi <= lo:
            continue
        # merged intervals are sorted and disjoint: those overlapping [lo, hi] are contiguous
        i0 = int(np.searchsorted(ends, lo, side="right"))
        i1 = int(np.searchsorted(starts, hi, side="left"))
        part = np.clip(np.minimum(ends[i0:i1], hi) - np.maximum(starts[i0:i1], lo), 0, None)
        out[k] = padded_sum(part, len(starts), i0)
    return out


def padded_sum(values: np.ndarray, n: int, at: int) -> float:
    """``float(a.sum())`` of the float64 array ``a`` of length ``n`` that is +0.0 but for
    ``a[at : at + len(values)] = values`` (``values`` >= +0.0), without building ``a``.

    numpy sums a contiguous float64 array pairwise (``pairwise_sum`` in its loops: halves
    split at a multiple of 8, blocks of at most 128 summed in 8 running sums, fewer than 8
    added one by one) onto +0.0. The blocks of zeros add exactly +0.0, so only the nodes of
    that tree that overlap ``values`` are computed: whole ones by numpy itself, the others as
    numpy would (tests/test_streaming_reader.py checks it against numpy's own sum)."""
    if not len(values):
        return 0.0
    return 0.0 + _pairwise(values, 0, n, at, at + len(values))


def _pairwise(values: np.ndarray, lo: int, n: int, i0: int, i1: int) -> float:
    """numpy's pairwise sum of a[lo : lo + n], where a is +0.0 outside [i0, i1) and
    ``values`` inside."""
    if lo + n <= i0 or lo >= i1:
        return 0.0
    if i0 <= lo and lo + n <= i1:  # a whole node: numpy's own sum, from +0.0
        return float(np.add.reduce(values[lo - i0 : lo - i0 + n], initial=0.0))
    if n > 128:
        half = n // 2
        half -= half % 8
        return _pairwise(values, lo, half, i0, i1) + _pairwise(values, lo + half, n - half, i0, i1)
    a = [float(values[i - i0]) if i0 <= i < i1 else 0.0 for i in range(lo, lo + n)]
    if n < 8:
        total = 0.0
        for x in a:
            total += x
        return total
    r = a[:8]
    whole = n - n % 8
    for i in range(8, whole, 8):
        for j in range(8):
            r[j] += a[i + j]
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for x in a[whole:]:
        total += x
    return total


def _inside(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Index of the merged interval containing each point, or -1."""
    if len(starts) == 0:
        return np.full(len(points), -1)
    i = np.searchsorted(starts, points, side="right") - 1
    ok = (i >= 0) & (points < ends[np.clip(i, 0, None)])
    return np.where(ok, i, -1)


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------


@dataclass
class DeviceMetrics:
    device: int
    name: str
    gpu_utilization_pct: float
    est_sm_efficiency_pct: float | None
    est_achieved_occupancy_pct: float | None  # Kineto's per-kernel estimate, time-weighted
    theoretical_occupancy_pct: float | None  # ours, time-weighted over the same kernels
    busy_us: float
    idle_gaps: int
    idle_total_us: float
    idle_largest_us: float
    idle_median_us: float


@dataclass
class Overview:
    #: one row per step: name, CPU span, GPU-extended span, breakdown, kernels, idle gaps
    steps: pd.DataFrame
    devices: list[DeviceMetrics]
    #: averages per step of each breakdown role, µs
    breakdown_us: dict[str, float]
    steps_window: tuple[float, float]
    #: CPU operators (and record_function ranges): calls, total/self CPU, kernel time launched
    operators: pd.DataFrame
    has_gpu: bool
    dropped_tail_steps: int = 0
    notes: list[str] = field(default_factory=list)
    #: whose definitions the breakdown follows: "tool" or "plugin" (BREAKDOWN_DEFINITIONS)
    definitions: str = "tool"
    #: what the views print as warning lines (step numbers that repeat)
    warnings: list[str] = field(default_factory=list)

    @property
    def mean_step_us(self) -> float:
        return float(self.steps["step_us"].mean()) if len(self.steps) else 0.0

    def slowest_and_fastest(self, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The ``n`` slowest steps (longest ``step_us`` first) and the ``n`` fastest (shortest
        first); of equal steps, the earlier comes first."""
        return (
            self.steps.nlargest(n, "step_us", keep="first"),
            self.steps.nsmallest(n, "step_us", keep="first"),
        )

    def step_distribution(self) -> pd.DataFrame:
        """Min, median, 90th percentile and max of every numeric step column, one row each."""
        numeric = self.steps.select_dtypes("number")
        rows = {
            "min": numeric.min(),
            "median": numeric.median(),
            "p90": numeric.quantile(0.9),
            "max": numeric.max(),
        }
        return pd.DataFrame(rows).T


# --------------------------------------------------------------------------------------------
# steps
# --------------------------------------------------------------------------------------------


def cpu_steps(trace: Trace) -> pd.DataFrame:
    """ProfilerStep#N spans on CPU threads (the GPU copies are ignored). Spans of one name over
    the same time are one step (the longest is kept); spans of one name at different times
    are steps of their own, the second labelled ``ProfilerStep#N (2)`` and so on
    (repeated_steps says so)."""
    ev = trace.events
    names = pd.Series(trace.names)
    step_ids = names[names.str.startswith("ProfilerStep#")].index
    steps = ev.loc[
        ev["kind"].isin([KIND["cpu_op"], KIND["annotation"]]) & ev["name_id"].isin(step_ids),
        ["name_id", "ts", "dur"],
    ].copy()
    if steps.empty:
        return pd.DataFrame(columns=["step", "cpu_start", "cpu_end"])
    steps["step"] = trace.names[steps["name_id"].to_numpy()]
    kept: dict[str, list[tuple[float, float]]] = {}
    keep = []
    for step, ts, dur in steps.sort_values("dur", ascending=False, kind="stable")[
        ["step", "ts", "dur"]
    ].itertuples(index=False):
        spans = kept.setdefault(step, [])
        if not any(ts < end and start < ts + dur for start, end in spans):
            spans.append((ts, ts + dur))
            keep.append((ts, dur, step))
    keep.sort(key=lambda row: row[0])
    seen: dict[str, int] = {}
    labels = []
    for _, _, step in keep:
        seen[step] = seen.get(step, 0) + 1
        labels.append(step if seen[step] == 1 else f"{step} ({seen[step]})")
    return pd.DataFrame(
        {
            "step": labels,
            "cpu_start": [ts for ts, _, _ in keep],
            "cpu_end": [ts + dur for ts, dur, _ in keep],
        }
    )


def repeated_steps(steps: pd.DataFrame) -> str | None:
    """A warning when step numbers repeat (cpu_steps' ``(2)`` labels): two profilers in one
    trace, or spans named like steps by hand; None when every number is one step."""
    if not len(steps):
        return None
    numbers = steps["step"].astype(str).str.replace(r" \(\d+\)$", "", regex=True)
    counts = numbers.value_counts(sort=False)
    repeated = counts[counts > 1]
    if repeated.empty:
        return None
    listed = ", ".join(f"{name} {n} times" for name, n in repeated.items())
    return (
        f"step numbers repeat in this trace ({listed}): each span is counted as a step, "
        "labelled (2), (3) ... after the first; two profilers in one trace, or spans "
        "named like steps by hand?"
    )


def _gpu_rows(
    trace: Trace,
    columns: tuple[str, ...] | list[str] = ("ts", "dur", "correlation", "device", "thread"),
) -> pd.DataFrame:
    ev = trace.events
    return ev.loc[ev["kind"].isin([KIND["kernel"], KIND["memcpy"], KIND["memset"]]), list(columns)]


def step_windows(trace: Trace, definitions: str = "tool") -> tuple[pd.DataFrame, int]:
    """Steps with their GPU-extended windows [start, end], and how many tail steps were dropped
    because the recording ended before their kernels were captured.

    As the plugin's ``StepParser``: step 0 starts no earlier than the end of the last GPU event
    that no step launched (launched before the steps, or whose launch was not recorded) and that
    ended before step 0's first GPU event. Without step spans, the one step spans the CPU
    activity: cpu_op, user_annotation and python_function spans for this tool; for the plugin
    (``definitions="plugin"``) cpu_op spans only, the events its ``cpu_min_ts``/``cpu_max_ts``
    read."""
    steps = cpu_steps(trace)
    if steps.empty:
        whole = _whole_trace_step(trace, definitions)
        if whole is None:
            return pd.DataFrame(
                columns=["step", "cpu_start", "cpu_end", "start", "end", "gpu_events"]
            ), 0
        steps = whole
    n = len(steps)
    dev_max, matched, prev_end = _gpu_per_step(trace, steps)
    use_gpu = bool(matched.sum())
    starts, ends = [], []
    cpu_starts, cpu_ends = steps["cpu_start"].to_numpy(), steps["cpu_end"].to_numpy()
    for k in range(n):
        cs_k, ce_k = float(cpu_starts[k]), float(cpu_ends[k])
        if use_gpu:
            start = max(prev_end, cs_k)
            end = max(ce_k, dev_max[k]) if matched[k] else max(ce_k, start)
            end = max(end, start)
            prev_end = end
        else:
            start, end = cs_k, ce_k
        starts.append(start)
        ends.append(end)
    steps = steps.assign(start=starts, end=ends, gpu_events=matched)
    dropped = 0
    if use_gpu and n > 1:
        last = int(np.flatnonzero(matched > 0).max()) if (matched > 0).any() else -1
        keep = last + 1
        if last > 0 and matched[last - 1] * 0.8 > matched[last]:
            keep = last
        dropped = n - keep
        steps = steps.iloc[:keep]
    return steps.reset_index(drop=True), dropped


def _whole_trace_step(trace: Trace, definitions: str) -> pd.DataFrame | None:
    """Without step spans, the one step over the CPU activity (step_windows); None for a trace
    with no events."""
    ev = trace.events
    cpu_kinds = [KIND["cpu_op"], KIND["annotation"], KIND["python"]]
    if definitions == "plugin":
        cpu_kinds = [KIND["cpu_op"]]
    cpu = np.isin(ev["kind"].to_numpy(), cpu_kinds)
    if not cpu.any():
        cpu[:] = True
    if not len(cpu):
        return None
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    end = max(
        np.max(
            ts[i : i + _SEGMENTS] + dur[i : i + _SEGMENTS],
            where=cpu[i : i + _SEGMENTS],
            initial=-np.inf,
        )
        for i in range(0, len(ts), _SEGMENTS)
    )
    return pd.DataFrame(
        {
            "step": ["(whole trace)"],
            "cpu_start": [np.min(ts, where=cpu, initial=np.inf)],
            "cpu_end": [end],
        }
    )


def _gpu_per_step(trace: Trace, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, float]:
    """The end of the last GPU event each step launched, how many it launched, and where step
    0 may start at the earliest (step_windows)."""
    ev = trace.events
    kind = ev["kind"].to_numpy()
    gpu = np.flatnonzero(np.isin(kind, [KIND["kernel"], KIND["memcpy"], KIND["memset"]]))
    n = len(steps)
    dev_min = np.full(n, np.inf)
    dev_max = np.full(n, -np.inf)
    matched = np.zeros(n, dtype=np.int64)
    prev_end = float(steps["cpu_start"].iloc[0])
    launches = launch_table(trace)
    if not len(gpu) or not len(launches.keys):
        return dev_max, matched, prev_end
    if launches.repeated:  # a correlation on several launch calls: every pair, as a merge
        return _gpu_per_step_merged(trace, steps, dev_min, dev_max, matched, prev_end)
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    link = launches.rows_of(ev["correlation"].to_numpy()[gpu])
    linked = link >= 0
    lts = ts[link[linked]]
    lend = lts + dur[link[linked]]
    cs, ce = steps["cpu_start"].to_numpy(), steps["cpu_end"].to_numpy()
    i = np.searchsorted(cs, lts, side="right") - 1
    ok = (i >= 0) & (lend <= ce[np.clip(i, 0, None)]) & (lts >= cs[np.clip(i, 0, None)])
    del lts, lend
    rows = gpu[linked]
    gts = ts[rows]
    gend = gts + dur[rows]
    if ok.any():
        np.minimum.at(dev_min, i[ok], gts[ok])
        np.maximum.at(dev_max, i[ok], gend[ok])
        np.add.at(matched, i[ok], 1)
    if np.isfinite(dev_min[0]):
        # GPU work that no step launched (launched outside the steps, or with no launch
        # recorded) and that finished before step 0's GPU work
        unmatched = np.ones(len(gpu), dtype=bool)
        unmatched[np.flatnonzero(linked)[ok]] = False
        gpu_end = ts[gpu[unmatched]] + dur[gpu[unmatched]]
        early = gpu_end[gpu_end < dev_min[0]]
        if len(early):
            prev_end = max(prev_end, float(early.max()))
    return dev_max, matched, prev_end


def _gpu_per_step_merged(
    trace: Trace,
    steps: pd.DataFrame,
    dev_min: np.ndarray,
    dev_max: np.ndarray,
    matched: np.ndarray,
    prev_end: float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """_gpu_per_step where launch calls share correlations: each GPU event with every launch
    call of its correlation (a pandas merge)."""
    ev = trace.events
    gpu = _gpu_rows(trace)
    launch = ev.loc[
        ev["kind"].isin([KIND["runtime"], KIND["driver"]]) & (ev["correlation"] >= 0),
        ["correlation", "ts", "dur"],
    ]
    link = (
        gpu[["correlation", "ts", "dur"]]
        .rename_axis("row")
        .reset_index()
        .merge(
            launch[["correlation", "ts", "dur"]].rename(columns={"ts": "lts", "dur": "ldur"}),
            on="correlation",
            how="inner",
        )
    )
    lts, lend = link["lts"].to_numpy(), (link["lts"] + link["ldur"]).to_numpy()
    cs, ce = steps["cpu_start"].to_numpy(), steps["cpu_end"].to_numpy()
    i = np.searchsorted(cs, lts, side="right") - 1
    ok = (i >= 0) & (lend <= ce[np.clip(i, 0, None)]) & (lts >= cs[np.clip(i, 0, None)])
    gts, gend = link["ts"].to_numpy(), (link["ts"] + link["dur"]).to_numpy()
    if ok.any():
        np.minimum.at(dev_min, i[ok], gts[ok])
        np.maximum.at(dev_max, i[ok], gend[ok])
        np.add.at(matched, i[ok], 1)
    if np.isfinite(dev_min[0]):
        unmatched = ~gpu.index.isin(link.loc[ok, "row"].to_numpy())
        gpu_end = (gpu["ts"] + gpu["dur"]).to_numpy()[unmatched]
        early = gpu_end[gpu_end < dev_min[0]]
        if len(early):
            prev_end = max(prev_end, float(early.max()))
    return dev_max, matched, prev_end


def _device_of(rows: pd.DataFrame | _Columns, trace: Trace) -> np.ndarray:
    dev: np.ndarray = np.asarray(rows["device"])
    if (dev < 0).any():  # old traces without args.device: the pid is the device
        pids = np.array([trace.threads[t][0] for t in np.asarray(rows["thread"])], dtype=object)
        fallback = np.array([p if isinstance(p, int) else -1 for p in pids], dtype=np.int64)
        dev = np.where(dev >= 0, dev, fallback)
    return dev


def sm_efficiency_ranges(
    starts: np.ndarray, ends: np.ndarray, blocks_per_sm: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step function of min(sum of concurrent blocks per SM, 1): (seg_start, seg_end, value)."""
    valid = blocks_per_sm > 0
    s, e, v = starts[valid], ends[valid], blocks_per_sm[valid]
    if len(s) == 0:
        return np.array([]), np.array([]), np.array([])
    times = np.concatenate([s, e])
    deltas = np.concatenate([v, -v])
    del s, e, v
    # starts before ends at equal times: every start comes before every end in ``times``, so
    # a stable sort keeps them so (np.lexsort((is_end, times))'s order, without the key)
    order = np.argsort(times, kind="stable")
    times = times[order]
    deltas = deltas[order]
    del order
    level = np.cumsum(deltas, out=deltas)  # (in place: the same running sum)
    seg_s, seg_e, val = times[:-1], times[1:], level[:-1]
    keep = (seg_e > seg_s) & (val > 1e-9)
    return seg_s[keep], seg_e[keep], np.minimum(val[keep], 1.0)


def device_metrics(
    trace: Trace, kernels: pd.DataFrame, window: tuple[float, float]
) -> list[DeviceMetrics]:
    lo, hi = window
    span = hi - lo
    out: list[DeviceMetrics] = []
    if kernels.empty or span <= 0:
        return out
    devices = _device_of(kernels, trace)
    # (only the columns used are filtered: a row filter copies every column it is given)
    gpu_rows = np.flatnonzero(
        np.isin(trace.events["kind"].to_numpy(), [KIND["kernel"], KIND["memcpy"], KIND["memset"]])
    )
    gpu_devices = _device_of(_Columns(trace.events, gpu_rows), trace)
    for device in sorted(set(devices.tolist())):
        one = devices == device
        k = _Columns(kernels, None if one.all() else one)
        ks, ke = k["ts"], k["ts"] + k["dur"]
        ms, me = merge(ks, ke)
        busy = covered(ms, me, lo, hi)
        del ms, me
        bps = k["blocks_per_sm"].astype(np.float64, copy=False)
        sm_eff = None
        if np.isfinite(bps).any():
            ss, se, sv = sm_efficiency_ranges(ks, ke, np.nan_to_num(bps, nan=0.0))
            if len(ss):
                clip = np.clip(np.minimum(se, hi) - np.maximum(ss, lo), 0, None)
                sm_eff = 100.0 * float((clip * sv).sum()) / span
        clip_k = np.clip(np.minimum(ke, hi) - np.maximum(ks, lo), 0, None)
        occ = k["kineto_occupancy_pct"].astype(np.float64, copy=False)
        has = np.isfinite(occ) & (occ >= 0) & (clip_k > 0)
        est_occ = float((occ[has] * clip_k[has]).sum() / clip_k[has].sum()) if has.any() else None
        theo = k["theoretical_occupancy_pct"].astype(np.float64, copy=False)
        has_t = np.isfinite(theo) & (clip_k > 0)
        theo_occ = (
            float((theo[has_t] * clip_k[has_t]).sum() / clip_k[has_t].sum())
            if has_t.any()
            else None
        )
        gaps = _idle_gaps(_Columns(trace.events, gpu_rows[gpu_devices == device]), lo, hi)
        props = trace.devices.get(int(device))
        out.append(
            DeviceMetrics(
                device=int(device),
                name=props.name if props else "",
                gpu_utilization_pct=100.0 * busy / span,
                est_sm_efficiency_pct=sm_eff,
                est_achieved_occupancy_pct=est_occ,
                theoretical_occupancy_pct=theo_occ,
                busy_us=busy,
                idle_gaps=int(len(gaps)),
                idle_total_us=float(gaps.sum()),
                idle_largest_us=float(gaps.max()) if len(gaps) else 0.0,
                idle_median_us=float(np.median(gaps)) if len(gaps) else 0.0,
            )
        )
    return out


def _idle_gaps(gpu: _Columns, lo: float, hi: float) -> np.ndarray:
    """The idle gaps between GPU activity (kernels, copies, memsets) inside [lo, hi]."""
    starts = gpu["ts"]
    gs, ge = merge(starts, starts + gpu["dur"])
    del starts
    inside = (ge > lo) & (gs < hi)
    gs, ge = np.clip(gs[inside], lo, hi), np.clip(ge[inside], lo, hi)
    gaps: np.ndarray = gs[1:] - ge[:-1] if len(gs) > 1 else np.array([])
    return gaps[gaps > 0]


class _Columns:
    """A frame's columns as arrays, each taken at ``rows`` (a mask, or None: all) when asked:
    a row filter of the frame would copy every column."""

    def __init__(self, frame: pd.DataFrame, rows: np.ndarray | None = None) -> None:
        self.frame, self.rows = frame, rows

    def __getitem__(self, column: str) -> np.ndarray:
        values: np.ndarray = self.frame[column].to_numpy()
        return values if self.rows is None else values[self.rows]


def utilization_timeline(trace: Trace, device: int | None = None) -> list[tuple[float, float]]:
    """The plugin's GPU-utilization counter track: buckets of a power-of-ten µs (at most 100 of
    them over the recorded span, the last one stretched to its end), each with the busy
    fraction; a final (end, 0) point."""
    lo, hi = trace.span
    kernels = trace.events[trace.events["kind"] == KIND["kernel"]]
    if device is not None:
        kernels = kernels[_device_of(kernels, trace) == device]
    ms, me = merge(kernels["ts"].to_numpy(), (kernels["ts"] + kernels["dur"]).to_numpy())
    length = hi - lo
    size = 1
    while length / size > 100:
        size *= 10
    n = int(length / size)
    edges = [lo + i * size for i in range(n)] + [hi]
    points = []
    for i in range(n):
        a, b = edges[i], edges[i + 1]
        points.append((a, covered(ms, me, a, b) / (b - a)))
    points.append((hi, 0.0))
    return points


# --------------------------------------------------------------------------------------------
# breakdown
# --------------------------------------------------------------------------------------------


def _role_intervals(
    trace: Trace, communication_kernel: np.ndarray, definitions: str = "tool"
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Merged intervals of each role but "other"; ``definitions``: "tool" or "plugin"
    (BREAKDOWN_DEFINITIONS)."""
    ev = trace.events
    names = pd.Series(trace.names)
    kind = ev["kind"].to_numpy()
    name_id = ev["name_id"].to_numpy()
    is_step = names.str.startswith("ProfilerStep#").to_numpy()[name_id]
    is_loader = names.str.contains(
        r"^enumerate\(DataLoader\)#.*__next__$|^enumerate\(DataPipe\)#", regex=True
    ).to_numpy()[name_id]
    kernel = kind == KIND["kernel"]
    cpu_kinds = [KIND["cpu_op"], KIND["annotation"], KIND["python"]]
    loader_kinds = [KIND["cpu_op"], KIND["annotation"]]
    is_comm_op = None
    if definitions == "plugin":  # the plugin keeps no user_annotation span but steps and
        cpu_kinds = [KIND["cpu_op"]]  # communication operators: not a DataLoader's either
        loader_kinds = [KIND["cpu_op"]]
        is_comm_op = np.isin(kind, [KIND["cpu_op"], KIND["annotation"]]) & np.isin(
            name_id, np.flatnonzero(np.isin(trace.names, PLUGIN_COMMUNICATION_OPS))
        )
        external = ev["external_id"].to_numpy()
        comm_ids = external[is_comm_op & (external >= 0)]
        communication_kernel = kernel & np.isin(external, comm_ids) & (external >= 0)

    def mask(role: str) -> np.ndarray:
        """The events of ``role`` (one at a time: each is a row's worth of bools)."""
        found: np.ndarray
        if role == "kernel":
            found = kernel & ~communication_kernel
        elif role in ("memcpy", "memset"):
            found = kind == KIND[role]
        elif role == "communication":
            found = kernel & communication_kernel
            if is_comm_op is not None:
                found |= is_comm_op
        elif role == "runtime":
            found = (kind == KIND["runtime"]) | (kind == KIND["driver"])
        elif role == "dataloader":
            found = np.isin(kind, loader_kinds) & is_loader
        else:  # cpu_exec
            found = np.isin(kind, cpu_kinds) & ~is_step & ~is_loader
            if is_comm_op is not None:
                found &= ~is_comm_op
        return found

    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    return {role: merge_mask(ts, dur, mask(role)) for role in BREAKDOWN[:-1]}


def merge_mask(ts: np.ndarray, dur: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """merge() of the intervals [ts, ts + dur] of the events where ``mask`` holds, a block of
    events at a time: the same as ``merge(ts[mask], (ts + dur)[mask])`` without those copies."""
    blocks = []
    for i in range(0, len(mask), _MERGE_BLOCK):
        rows = np.flatnonzero(mask[i : i + _MERGE_BLOCK]) + i
        starts = ts[rows]
        blocks.append(_merge(starts, starts + dur[rows]))
    if len(blocks) == 1:
        return blocks[0]
    return _merge(
        np.concatenate([b[0] for b in blocks] or [np.array([])]),
        np.concatenate([b[1] for b in blocks] or [np.array([])]),
    )


def _covered_regions(cuts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each region [cuts[r], cuts[r+1]) (the last one open-ended), whether one of the merged
    intervals (starts, ends) covers it; the same as ``_inside(point, starts, ends) >= 0`` for any
    point of the region, provided every interval bound within [cuts[0], cuts[-1]] is a cut.

    Each interval covers the regions from its start's cut index to its end's. Merged intervals
    are disjoint and sorted, so those that cover any region start and stop at cut indices that
    all differ: a +1 at each start and a -1 at each stop, summed in order, is 1 inside them."""
    m = len(cuts)
    first = np.searchsorted(cuts, starts, side="left")
    stop = np.searchsorted(cuts, ends, side="left")
    some = first < stop
    marks = np.zeros(m + 1, dtype=np.int8)
    marks[first[some]] = 1
    marks[stop[some]] -= 1
    return np.cumsum(marks[:m], dtype=np.int8) > 0


def breakdown(
    trace: Trace, steps: pd.DataFrame, communication_kernel: np.ndarray, definitions: str = "tool"
) -> pd.DataFrame:
    """Per step, µs of each role, by priority (kernel first, 'other' last); ``definitions``:
    "tool" or "plugin" (BREAKDOWN_DEFINITIONS)."""
    if steps.empty:
        return pd.DataFrame(columns=list(BREAKDOWN))
    give_back_memory()
    roles = _role_intervals(trace, communication_kernel, definitions)
    w_lo, w_hi = steps["start"].to_numpy(dtype=float), steps["end"].to_numpy(dtype=float)
    bounds = [w_lo, w_hi] + [x for s, e in roles.values() for x in (s, e)]
    cuts = _sorted_unique(np.concatenate(bounds))
    del bounds
    cuts = cuts[(cuts >= w_lo.min()) & (cuts <= w_hi.max())]
    # the role of each region of `cuts`: the first role (BREAKDOWN's order) that covers it
    other = len(BREAKDOWN) - 1
    owner = np.full(len(cuts), other, dtype=np.int8)
    for r, role in enumerate(BREAKDOWN[:-1]):
        owner[(owner == other) & _covered_regions(cuts, *roles.pop(role))] = r
    table = np.zeros((len(steps), len(BREAKDOWN)))
    for i in range(0, len(cuts) - 1, _SEGMENTS):  # (np.add.at adds in order, block after block)
        seg_s, seg_e = cuts[i : i + _SEGMENTS], cuts[i + 1 : i + 1 + _SEGMENTS]
        seg_s = seg_s[: len(seg_e)]
        mid = (seg_s + seg_e) / 2
        length = seg_e - seg_s
        step_of = np.searchsorted(w_lo, mid, side="right") - 1
        in_step = (step_of >= 0) & (mid < w_hi[np.clip(step_of, 0, None)])
        # the region each midpoint lies in: its segment, or the next one where the midpoint of
        # two adjacent floats rounds up to the segment's end
        role = owner[i : i + len(mid)].copy()
        up = np.flatnonzero(mid >= seg_e)
        role[up] = owner[i + up + 1]
        np.add.at(table, (step_of[in_step], role[in_step]), length[in_step])
    return pd.DataFrame(table, columns=list(BREAKDOWN))


#: segments of the breakdown's timeline handled at a time
_SEGMENTS = 1 << 19


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique(values) (no NaN) by a stable sort, which is fast on the concatenation of a
    few sorted arrays (merged intervals' bounds)."""
    values = np.sort(values, kind="stable")
    keep = np.ones(len(values), dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def _plugin_version_notes(trace: Trace, steps: pd.DataFrame) -> list[str]:
    """One line for each thing in this trace that the plugin's last release (0.4.3, whose
    definitions ``--breakdown plugin`` follows) and its last source read differently."""
    ev = trace.events
    names = pd.Series(trace.names)
    loader = names.str.contains(
        r"^enumerate\(DataLoader\)#.*__next__$|^enumerate\(DataPipe\)#", regex=True
    ).to_numpy()[ev["name_id"].to_numpy()]
    spans = int((loader & (ev["kind"] == KIND["annotation"]).to_numpy()).sum())
    if not spans:
        return []
    return [
        f"{spans} DataLoader span(s) recorded as user_annotation: left out of data loading, "
        "as plugin 0.4.3 drops them (its unreleased last source counts them)"
    ]


# --------------------------------------------------------------------------------------------
# operators
# --------------------------------------------------------------------------------------------


def operator_table(trace: Trace, kernels: pd.DataFrame) -> pd.DataFrame:
    """CPU operators and record_function ranges by name: calls, total (inclusive) and self CPU
    µs, and the GPU kernel time they launched directly (innermost operator).

    Self CPU time is torch.profiler's (``key_averages()``'s ``self_cpu_time_total``): the range
    less the ranges nested in it on its thread, CUDA runtime and driver calls included, since
    torch.profiler makes those calls children of the operator that made them. The TensorBoard
    plugin's "Host Self Duration" subtracts the operator's runtime calls too."""
    agg = _operator_sums(trace)
    if agg is None:
        return pd.DataFrame(
            columns=["operator", "calls", "cpu_total_us", "cpu_self_us", "kernels", "kernel_us"]
        )
    if len(kernels):
        launched = kernels.groupby("operator_id")["dur"].agg(["size", "sum"])
        agg = _with_replayed(agg, launched)
        agg["kernels"] = launched["size"].reindex(agg.index).fillna(0).astype(int)
        agg["kernel_us"] = launched["sum"].reindex(agg.index).fillna(0.0)
        orphan = launched.loc[launched.index < 0] if (launched.index < 0).any() else None
    else:
        agg["kernels"], agg["kernel_us"], orphan = 0, 0.0, None
    agg.insert(0, "operator", trace.names[agg.index.to_numpy()])
    agg = agg.reset_index(drop=True)
    if orphan is not None and len(orphan):
        agg = pd.concat(
            [
                agg,
                pd.DataFrame(
                    [
                        {
                            "operator": NO_OPERATOR,
                            "calls": 0,
                            "cpu_total_us": 0.0,
                            "cpu_self_us": 0.0,
                            "kernels": int(orphan["size"].sum()),
                            "kernel_us": float(orphan["sum"].sum()),
                        }
                    ]
                ),
            ],
            ignore_index=True,
        )
    return agg.sort_values(["cpu_total_us", "kernel_us"], ascending=False).reset_index(drop=True)


def _with_replayed(agg: pd.DataFrame, launched: pd.DataFrame) -> pd.DataFrame:
    """The operators seen only at a CUDA graph's capture (trace.graphs) added with no CPU
    time: their kernels were replayed, they made no CPU call in this trace."""
    absent = launched.index[(launched.index >= 0) & ~launched.index.isin(agg.index)]
    if not len(absent):
        return agg
    agg = pd.concat(
        [agg, pd.DataFrame(0.0, index=absent, columns=["cpu_total_us", "cpu_self_us"])]
    ).fillna({"calls": 0})
    agg["calls"] = agg["calls"].astype(int)
    return agg


def _operator_sums(trace: Trace) -> pd.DataFrame | None:
    """Per name of the operators and ranges (steps left out): calls, total and self µs; None
    when there are none."""
    give_back_memory()  # (what the analyses before freed, before the largest temporaries)
    ev = trace.events
    kind = ev["kind"].to_numpy()
    is_op = np.isin(kind, [KIND["cpu_op"], KIND["annotation"]])
    if not is_op.any():
        return None
    is_step = pd.Series(trace.names).str.startswith("ProfilerStep#").to_numpy()
    name_id = ev["name_id"].to_numpy()
    is_op &= ~is_step[name_id]
    ops = np.flatnonzero(is_op)
    del is_op
    if len(ev) < 2**31:
        ops = ops.astype(np.int32)
    self_us = self_times(ev, np.isin(kind, [KIND[k] for k in _SELF_TIME_KINDS]), ops)
    # (only the columns used are filtered: a row filter copies every column it is given. One
    # frame of every operator row: pandas' sums per group depend on the frame's layout)
    frame = pd.DataFrame(
        {"name_id": name_id[ops], "dur": ev["dur"].to_numpy()[ops], "self": self_us}, copy=False
    )
    del ops, self_us
    return frame.groupby("name_id").agg(
        calls=("dur", "size"), cpu_total_us=("dur", "sum"), cpu_self_us=("self", "sum")
    )


#: the CPU ranges that nest under an operator and leave its self time: child operators and
#: record_function ranges, and the CUDA runtime/driver calls it made
_SELF_TIME_KINDS = ("cpu_op", "annotation", "runtime", "driver")


def _self_time(cpu: pd.DataFrame) -> np.ndarray:
    """Self time of nested CPU ranges (a frame of them: ts, dur, thread), per thread, in the
    frame's order (self_times)."""
    return self_times(cpu, np.ones(len(cpu), dtype=bool), np.arange(len(cpu)))


def self_times(ev: pd.DataFrame, nested: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Self time of the nested CPU ranges ``wanted`` (ascending rows of ``ev`` where ``nested``
    holds), per thread, without a Python loop over events.

    Ranges on one thread nest. Sorted by (start, longest first), the ranges enclosing range i
    are exactly the earlier ones that have not ended by its start, so its depth is
    i - #(ranges ending at or before its start); its parent is the last earlier range one level
    up. Self time = duration - the durations of the children.

    Threads are laid side by side in time (t0), and the sorted ranges are taken a block at a
    time, cut where every earlier range has ended before the next one starts: the earlier
    blocks then count as ended for every range of the block and hold none of its parents, so
    each block gives the bits the whole would, with a block's temporaries."""
    ts, dur = ev["ts"].to_numpy(dtype=np.float64), ev["dur"].to_numpy(dtype=np.float64)
    thread = ev["thread"].to_numpy()
    lo = float(np.min(ts, where=nested, initial=np.inf))
    hi = -np.inf
    for i in range(0, len(ts), _SEGMENTS):
        ends = ts[i : i + _SEGMENTS] + dur[i : i + _SEGMENTS]
        hi = max(hi, float(np.max(ends, where=nested[i : i + _SEGMENTS], initial=-np.inf)))
    span = (np.float64(hi) - np.float64(lo)) + 1.0
    real = np.flatnonzero(nested & (dur > 0))
    out = np.zeros(len(wanted))
    if not len(real):
        return out
    real = real.astype(np.int32) if len(ts) < 2**31 else real
    t0 = (ts[real] - lo) + thread[real].astype(np.float64) * span  # threads side by side
    order = _by_start_longest_first(t0, dur, real)
    for first, last in _nesting_blocks(t0, dur, real, order):
        rows = order[first:last]
        s = t0[rows]
        d = dur[real[rows]]
        e = s + d
        depth = np.arange(len(rows)) - np.searchsorted(np.sort(e), s, side="right")
        depth = np.maximum(depth, 0)
        parent = np.full(len(rows), -1)
        for level in range(1, int(depth.max()) + 1 if len(depth) else 0):
            up = np.flatnonzero(depth == level - 1)
            here = np.flatnonzero(depth == level)
            if len(up) == 0 or len(here) == 0:
                continue
            j = np.searchsorted(up, here, side="left") - 1
            parent[here] = np.where(j >= 0, up[np.clip(j, 0, None)], -1)
        has = parent >= 0
        # bincount adds the weights in order, as np.add.at would, only faster
        child_sum = np.bincount(parent[has], weights=d[has], minlength=len(rows))
        found = real[rows]
        at = np.clip(np.searchsorted(wanted, found), 0, max(len(wanted) - 1, 0))
        keep = wanted[at] == found if len(wanted) else np.zeros(len(found), dtype=bool)
        out[at[keep]] = np.maximum(d - child_sum, 0.0)[keep]
    return out


#: the nested ranges whose self time is found at a time, at least
_NESTING_BLOCK = 1 << 18


def _by_start_longest_first(t0: np.ndarray, dur: np.ndarray, real: np.ndarray) -> np.ndarray:
    """The order of np.lexsort((-dur[real], t0)): a stable sort by t0, which is fast on the few
    time-ordered runs a trace's events come in, then the ranges that start together by -dur
    (stably)."""
    order = np.argsort(t0, kind="stable")
    if len(order) < 2**31:
        order = order.astype(np.int32)
    tied = []
    for i in range(0, len(order), _SEGMENTS):
        starts = t0[order[i : i + _SEGMENTS + 1]]
        tied.append(np.flatnonzero(starts[1:] == starts[:-1]) + i)
    ties = np.concatenate(tied) if tied else np.array([], dtype=np.int64)
    if len(ties):
        rows = np.union1d(ties, ties + 1)
        sub = order[rows]
        order[rows] = sub[np.lexsort((-dur[real[sub]], t0[sub]))]
    return order


def _nesting_blocks(
    t0: np.ndarray, dur: np.ndarray, real: np.ndarray, order: np.ndarray
) -> list[tuple[int, int]]:
    """Blocks [first, last) of ``order`` of at least _NESTING_BLOCK ranges (the last one may be
    smaller), each starting where every range before it has ended before it starts."""
    cuts = []
    latest = -np.inf
    for i in range(0, len(order), _SEGMENTS):
        rows = order[i : i + _SEGMENTS]
        s = t0[rows]
        e = s + dur[real[rows]]
        before = np.maximum.accumulate(np.concatenate([[latest], e[:-1]]))
        cuts.append(np.flatnonzero(s > before) + i)
        latest = max(latest, float(e.max()))
    free = np.concatenate(cuts)
    blocks, first = [], 0
    while first < len(order):
        at = int(np.searchsorted(free, first + _NESTING_BLOCK, side="left"))
        last = int(free[at]) if at < len(free) else len(order)
        blocks.append((first, last))
        first = last
    return blocks


# --------------------------------------------------------------------------------------------
# the whole overview
# --------------------------------------------------------------------------------------------


def overview(
    trace: Trace,
    kernels: pd.DataFrame,
    kernel_categories: pd.Series | None = None,
    definitions: str = "tool",
) -> Overview:
    """``kernels``: kernel_rows(trace); ``kernel_categories``: category of each of those rows;
    ``definitions``: the breakdown's, "tool" or "plugin" (BREAKDOWN_DEFINITIONS)."""
    if definitions not in BREAKDOWN_DEFINITIONS:
        raise UserError(
            f"unknown breakdown definitions {definitions!r}; choose one of: "
            f"{', '.join(BREAKDOWN_DEFINITIONS)}"
        )
    steps, dropped = step_windows(trace, definitions)
    has_gpu = trace.has_gpu_activity
    notes = _overview_notes(trace, steps, dropped, definitions)
    repeated = repeated_steps(steps)
    window = (float(steps["start"].min()), float(steps["end"].max())) if len(steps) else trace.span
    communication = np.zeros(len(trace.events), dtype=bool)
    if kernel_categories is not None and len(kernels):
        communication[kernels.index.to_numpy()] = kernel_categories == "communication"
    devices = device_metrics(trace, kernels, window) if has_gpu else []
    table = breakdown(trace, steps, communication, definitions)
    if len(steps):
        per_step = _per_step(steps, table, kernels)
        avg = {role: float(table[role].mean()) for role in BREAKDOWN}
    else:
        per_step = pd.DataFrame()
        avg = {role: 0.0 for role in BREAKDOWN}
    return Overview(
        steps=per_step,
        devices=devices,
        breakdown_us=avg,
        steps_window=window,
        operators=operator_table(trace, kernels),
        has_gpu=has_gpu,
        dropped_tail_steps=dropped,
        notes=notes,
        definitions=definitions,
        warnings=[repeated] if repeated else [],
    )


def _overview_notes(trace: Trace, steps: pd.DataFrame, dropped: int, definitions: str) -> list[str]:
    """What the overview's reader should know: events not read, no GPU activity, steps left
    out, the plugin's version differences."""
    has_gpu = trace.has_gpu_activity
    notes = []
    unanalysed = trace.unanalysed_warning
    if unanalysed:
        notes.append(
            f"device events this tool does not read: {unanalysed}"
            + ("; CPU tables only" if not has_gpu else "")
        )
    elif not has_gpu:
        notes.append(
            "no GPU activity was recorded in this trace (CPU-only profile): CPU tables only"
        )
    if dropped:
        notes.append(
            f"left out the last {dropped} step(s): the recording ended before their "
            "GPU work was captured"
        )
    if definitions == "plugin":
        notes += _plugin_version_notes(trace, steps)
    return notes


def _per_step(steps: pd.DataFrame, table: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Each step's window, breakdown, GPU busy time and kernel count."""
    per_step = steps.reset_index(drop=True).join(table)
    per_step["step_us"] = per_step["end"] - per_step["start"]
    per_step["cpu_step_us"] = per_step["cpu_end"] - per_step["cpu_start"]
    kts = kernels["ts"].to_numpy() if len(kernels) else np.array([])
    ke = (kernels["ts"] + kernels["dur"]).to_numpy() if len(kernels) else np.array([])
    ms, me = merge(kts, ke)
    per_step["gpu_busy_us"] = covered_per_window(ms, me, per_step["start"], per_step["end"])
    per_step["gpu_utilization_pct"] = np.where(
        per_step["step_us"] > 0, 100 * per_step["gpu_busy_us"] / per_step["step_us"], 0.0
    )
    step_of = np.searchsorted(per_step["start"].to_numpy(), kts, side="right") - 1
    ok = (step_of >= 0) & (kts < per_step["end"].to_numpy()[np.clip(step_of, 0, None)])
    per_step["kernels"] = np.bincount(step_of[ok], minlength=len(per_step))[: len(per_step)]
    return per_step
