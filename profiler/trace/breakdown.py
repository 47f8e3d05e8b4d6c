"""The time breakdown of each step: each instant goes to the first of kernel, memcpy, memset,
communication, runtime, data loader, CPU exec that covers it, else "other" (the PyTorch profiler
TensorBoard plugin's order). What each role holds differs from the plugin's, though:
``BREAKDOWN_DEFINITIONS`` states both, and ``breakdown(..., definitions="plugin")`` computes the
plugin's (0.4.3, read from its ``event_parser.py``) as it reads the ``tb-compat`` copy of a trace.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.columns import give_back_memory
from profiler.trace.intervals import covered_regions, merge_mask
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


def role_intervals(
    trace: Trace, communication_kernel: npt.NDArray[np.bool_], definitions: str = "tool"
) -> dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
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

    def mask(role: str) -> npt.NDArray[np.bool_]:
        """The events of ``role`` (one at a time: each is a row's worth of bools)."""
        found: npt.NDArray[np.bool_]
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


def breakdown(
    trace: Trace,
    steps: pd.DataFrame,
    communication_kernel: npt.NDArray[np.bool_],
    definitions: str = "tool",
) -> pd.DataFrame:
    """Per step, µs of each role, by priority (kernel first, 'other' last); ``definitions``:
    "tool" or "plugin" (BREAKDOWN_DEFINITIONS)."""
    if steps.empty:
        return pd.DataFrame(columns=list(BREAKDOWN))
    give_back_memory()
    roles = role_intervals(trace, communication_kernel, definitions)
    w_lo, w_hi = steps["start"].to_numpy(dtype=float), steps["end"].to_numpy(dtype=float)
    bounds = [w_lo, w_hi] + [x for s, e in roles.values() for x in (s, e)]
    cuts = _sorted_unique(np.concatenate(bounds))
    del bounds
    cuts = cuts[(cuts >= w_lo.min()) & (cuts <= w_hi.max())]
    # the role of each region of `cuts`: the first role (BREAKDOWN's order) that covers it
    other = len(BREAKDOWN) - 1
    owner = np.full(len(cuts), other, dtype=np.int8)
    for r, role in enumerate(BREAKDOWN[:-1]):
        owner[(owner == other) & covered_regions(cuts, *roles.pop(role))] = r
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
        region_role = owner[i : i + len(mid)].copy()
        up = np.flatnonzero(mid >= seg_e)
        region_role[up] = owner[i + up + 1]
        np.add.at(table, (step_of[in_step], region_role[in_step]), length[in_step])
    return pd.DataFrame(table, columns=list(BREAKDOWN))


#: segments of the breakdown's timeline handled at a time
_SEGMENTS = 1 << 19


def _sorted_unique(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """np.unique(values) (no NaN) by a stable sort, which is fast on the concatenation of a
    few sorted arrays (merged intervals' bounds)."""
    values = np.sort(values, kind="stable")
    keep: npt.NDArray[np.bool_] = np.ones(len(values), dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def plugin_version_notes(trace: Trace, steps: pd.DataFrame) -> list[str]:
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
