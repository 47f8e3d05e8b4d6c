"""A trace's steps: the CPU-side ``ProfilerStep#N`` spans (Kineto's GPU-timeline copies,
``gpu_user_annotation``, are not steps), each extended to the end of the GPU work its launches
started and starting no earlier than the previous step ended; without step spans the CPU activity
is one step. As the PyTorch profiler TensorBoard plugin's ``StepParser`` defines them
(implemented independently here)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.kernels import launch_table
from profiler.trace.load import KIND, Trace

#: events handled at a time where a step's CPU span is found over the whole trace
_SEGMENTS = 1 << 19


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


def _gpu_per_step(
    trace: Trace, steps: pd.DataFrame
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], float]:
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
    dev_min: npt.NDArray[np.float64],
    dev_max: npt.NDArray[np.float64],
    matched: npt.NDArray[np.int64],
    prev_end: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], float]:
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
