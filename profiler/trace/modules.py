"""The module view: time per ``nn.Module`` as a hierarchy, from a trace recorded with Python
stacks (``run --with-stack``: torch.profiler's ``with_stack=True`` writes one ``python_function``
event ``nn.Module: <Name>_<k>`` per module call; ``with_modules=True`` alone writes none for an
eager model).

The tree is the TensorBoard plugin's (torch-tb-profiler 0.4.3, ``module_op.py``): the module
calls and the CPU operators of each thread nested by time (sorted by start, longest first; a
range that crosses the end of the one holding it is left out, as the plugin does). Per call:

- host total: the call's duration; host self: less the operators and module calls directly
  in it;
- GPU total: the kernels, copies and memsets launched by the operators inside it (kernel ->
  correlation -> its runtime or driver launch call -> External id -> the operator), its
  sub-modules' included; GPU self: those of the operators directly in it, its sub-modules' left
  out (the plugin's Device Total and Device Self); kernel total and self: the same, kernels only;
- operators: the operators directly in it.

Calls are summed per path in the hierarchy (``LlamaForCausalLM_0/LlamaModel_0/
LlamaDecoderLayer_3/LlamaAttention_3``), per module type (``LlamaAttention``, the name without its
instance number), and, in a generation, per phase span (``prefill``, ``decode``: a call belongs
to the span it starts in). A block repeated under one parent (the decoder layers) gets its
time split among its children's types (attention, MLP, norms and its own self time), phase by
phase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.kernels import launch_rows
from profiler.trace.load import KIND, Trace
from profiler.trace.phase_kernels import GENERATION_PHASES, phase_spans

#: the name torch.profiler gives a module call's python_function event, before ``<Name>_<k>``
MODULE_PREFIX = "nn.Module: "
#: what a trace without module events needs (one line, for the command's error)
NEEDS_STACKS = (
    "the trace has no nn.Module events: record it with `run --with-stack` "
    "(torch.profiler's with_stack=True; with_modules=True alone records none for an eager model)"
)
#: operators the plugin does not count as a module's (module_op.is_operator_node)
_NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")
#: a call outside every phase span
NO_PHASE = "(no phase)"
#: the part of a block's time that is its own (outside its sub-modules)
SELF_PART = "(self)"

#: the figures summed per module path, type or phase (µs; calls and operators counted)
FIGURES = (
    "calls",
    "operators",
    "host_total_us",
    "host_self_us",
    "gpu_total_us",
    "gpu_self_us",
    "kernel_total_us",
    "kernel_self_us",
)
TREE_COLUMNS = ("path", "module", "type", "depth", "parent", *FIGURES)
TYPE_COLUMNS = ("type", "instances", *FIGURES)
PHASE_COLUMNS = ("phase", *TREE_COLUMNS)
BLOCK_COLUMNS = (
    "phase",
    "block",
    "part",
    "calls",
    "host_us",
    "gpu_us",
    "kernel_us",
    "host_share_pct",
    "gpu_share_pct",
)

_INSTANCE = re.compile(r"_\d+$")


@dataclass
class ModuleView:
    """A trace's modules: the tree by path, the types, the phases and the repeated blocks."""

    #: one row per module path, depth first in call order; TREE_COLUMNS
    tree: pd.DataFrame
    #: one row per module type; TYPE_COLUMNS
    types: pd.DataFrame
    #: one row per (phase, path) of a generation's trace (empty otherwise); PHASE_COLUMNS
    phases: pd.DataFrame
    #: per (phase, repeated block, part): its time and share of the block's; BLOCK_COLUMNS
    blocks: pd.DataFrame
    #: whether the trace holds GPU kernels, copies or memsets
    has_gpu: bool
    #: the trace's kernel time, the part launched inside modules and the part outside them
    kernel_us: float
    kernel_in_modules_us: float
    kernel_outside_us: float
    #: the same for kernels, copies and memsets
    gpu_us: float
    gpu_in_modules_us: float
    gpu_outside_us: float
    #: module calls counted, and those left out (a range crossing its parent's end)
    module_calls: int
    left_out_calls: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "has_gpu": self.has_gpu,
            "kernel_us": self.kernel_us,
            "kernel_in_modules_us": self.kernel_in_modules_us,
            "kernel_outside_us": self.kernel_outside_us,
            "gpu_us": self.gpu_us,
            "gpu_in_modules_us": self.gpu_in_modules_us,
            "gpu_outside_us": self.gpu_outside_us,
            "module_calls": self.module_calls,
            "left_out_calls": self.left_out_calls,
            "tree": _records(self.tree),
            "types": _records(self.types),
            "phases": _records(self.phases),
            "blocks": _records(self.blocks),
            "notes": list(self.notes),
        }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = frame.to_dict(orient="records")
    return records


def has_modules(trace: Trace) -> bool:
    """Whether the trace holds any ``nn.Module`` call (a trace recorded with stacks)."""
    return bool(_module_rows(trace).size)


def _module_name_ids(trace: Trace) -> npt.NDArray[np.bool_]:
    return np.char.startswith(trace.names.astype(str), MODULE_PREFIX)


def _module_rows(trace: Trace) -> npt.NDArray[np.intp]:
    ev = trace.events
    is_module = _module_name_ids(trace)
    if not is_module.any():
        return np.array([], dtype=np.intp)
    kind = ev["kind"].to_numpy()
    return np.flatnonzero((kind == KIND["python"]) & is_module[ev["name_id"].to_numpy()])


def module_view(trace: Trace) -> ModuleView | None:
    """The module view of ``trace``; None when it holds no module call."""
    modules = _module_rows(trace)
    if not len(modules):
        return None
    ev = trace.events
    kind = ev["kind"].to_numpy()
    ops = np.flatnonzero(kind == KIND["cpu_op"])
    nodes = _Nodes(trace, modules, ops)
    nodes.nest()
    gpu, kernel = nodes.launched(trace)
    calls = nodes.calls(gpu, kernel)
    tree = _by_path(calls)
    has_gpu = bool(np.isin(kind, [KIND["kernel"], KIND["memcpy"], KIND["memset"]]).any())
    dur = ev["dur"].to_numpy()
    all_gpu = float(dur[np.isin(kind, [KIND["kernel"], KIND["memcpy"], KIND["memset"]])].sum())
    all_kernel = float(dur[kind == KIND["kernel"]].sum())
    roots = tree["depth"] == 0
    phases, blocks = _phase_tables(trace, calls)
    view = ModuleView(
        tree=tree,
        types=_by_type(tree),
        phases=phases,
        blocks=blocks,
        has_gpu=has_gpu,
        kernel_us=all_kernel,
        kernel_in_modules_us=float(tree.loc[roots, "kernel_total_us"].sum()),
        kernel_outside_us=nodes.kernel_outside_us,
        gpu_us=all_gpu,
        gpu_in_modules_us=float(tree.loc[roots, "gpu_total_us"].sum()),
        gpu_outside_us=nodes.gpu_outside_us,
        module_calls=len(calls),
        left_out_calls=nodes.left_out_modules,
    )
    if nodes.left_out_modules:
        view.notes.append(
            f"{nodes.left_out_modules} module calls left out: each ends after the range that "
            "holds it on its thread (the TensorBoard plugin leaves them out too)"
        )
    return view


class _Nodes:
    """The module calls and CPU operators of a trace, nested per thread as the plugin's
    operator tree nests them (event_parser / op_tree: sorted by (start, -end), a range that
    crosses the end of the one on top of the stack left out)."""

    def __init__(self, trace: Trace, modules: npt.NDArray[np.intp], ops: npt.NDArray[np.intp]):
        ev = trace.events
        rows = np.concatenate([modules, ops])
        self.rows = rows
        self.is_module = np.concatenate(
            [np.ones(len(modules), dtype=bool), np.zeros(len(ops), dtype=bool)]
        )
        self.thread = ev["thread"].to_numpy()[rows].astype(np.int64)
        # the plugin groups a thread's events by tid alone
        codes: dict[int | str, int] = {}
        tids = np.array([codes.setdefault(tid, len(codes)) for _, tid in trace.threads])
        self.tid = tids[self.thread] if len(tids) else self.thread
        self.start = ev["ts"].to_numpy(dtype=np.float64)[rows]
        self.end = self.start + ev["dur"].to_numpy(dtype=np.float64)[rows]
        self.name_id = ev["name_id"].to_numpy()[rows].astype(np.int64)
        self.names = trace.names
        n = len(rows)
        self.parent = np.full(n, -1, dtype=np.int64)  # the node directly holding it
        self.owner = np.full(n, -1, dtype=np.int64)  # the innermost module call holding it
        self.kept = np.ones(n, dtype=bool)
        self.left_out_modules = 0
        self.kernel_outside_us = 0.0
        self.gpu_outside_us = 0.0

    def nest(self) -> None:
        order = np.lexsort((self.rows, -self.end, self.start, self.tid))
        start, end, tid = self.start.tolist(), self.end.tolist(), self.tid.tolist()
        is_module = self.is_module.tolist()
        parent, owner = self.parent, self.owner
        stack: list[int] = []
        current = None
        for i in order.tolist():
            if tid[i] != current:
                stack, current = [], tid[i]
            while stack and not start[i] < end[stack[-1]]:
                stack.pop()
            if stack and end[i] > end[stack[-1]]:
                self.kept[i] = False
                continue
            if stack:
                top = stack[-1]
                parent[i] = top
                owner[i] = top if is_module[top] else owner[top]
            stack.append(i)
        self.left_out_modules = int((~self.kept & self.is_module).sum())

    def launched(self, trace: Trace) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per node: the GPU time (kernels, copies, memsets) and the kernel time its launch
        calls asked for, counted at the operator that carries the launch's External id (the
        first to start, where several do)."""
        ev = trace.events
        kind = ev["kind"].to_numpy()
        gpu_rows = np.flatnonzero(np.isin(kind, [KIND["kernel"], KIND["memcpy"], KIND["memset"]]))
        n = len(self.rows)
        gpu, kernel = np.zeros(n), np.zeros(n)
        if not len(gpu_rows):
            return gpu, kernel
        # the GPU time as the plugin takes a duration, end - start (ts + dur - ts: not always
        # dur's bits); the kernel time as the trace wrote it, as the operator table sums it
        ts = ev["ts"].to_numpy(dtype=np.float64)[gpu_rows]
        written = ev["dur"].to_numpy(dtype=np.float64)[gpu_rows]
        dur = (ts + written) - ts
        is_kernel = kind[gpu_rows] == KIND["kernel"]
        launch = launch_rows(trace, ev["correlation"].to_numpy()[gpu_rows].astype(np.int64))
        ext = np.where(launch >= 0, ev["external_id"].to_numpy()[np.maximum(launch, 0)], -1)
        ext = ext.astype(np.int64)
        # the operator nodes by External id: the first to start carries it
        op_nodes = np.flatnonzero(~self.is_module & self.kept)
        op_ext = ev["external_id"].to_numpy()[self.rows[op_nodes]].astype(np.int64)
        sorted_nodes = op_nodes[np.lexsort((-self.end[op_nodes], self.start[op_nodes], op_ext))]
        keys = ev["external_id"].to_numpy()[self.rows[sorted_nodes]].astype(np.int64)
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        keys, by_key = keys[first], sorted_nodes[first]
        node = np.full(len(gpu_rows), -1, dtype=np.int64)
        if len(keys):
            at = np.clip(np.searchsorted(keys, ext), 0, len(keys) - 1)
            hit = (ext > 0) & (keys[at] == ext)
            node[hit] = by_key[at[hit]]
        owner = np.where(node >= 0, self.owner[np.maximum(node, 0)], -1)
        inside = owner >= 0
        np.add.at(gpu, owner[inside], dur[inside])
        np.add.at(kernel, owner[inside & is_kernel], written[inside & is_kernel])
        self.gpu_outside_us = float(dur[~inside].sum())
        self.kernel_outside_us = float(written[~inside & is_kernel].sum())
        return gpu, kernel

    def calls(self, gpu: npt.NDArray[np.float64], kernel: npt.NDArray[np.float64]) -> pd.DataFrame:
        """One row per module call kept: its path, figures, start and depth."""
        n = len(self.rows)
        dur = self.end - self.start
        direct = np.zeros(n)  # the durations of the nodes directly in each node
        operators = np.zeros(n, dtype=np.int64)
        child = np.flatnonzero(self.kept & (self.parent >= 0))
        np.add.at(direct, self.parent[child], dur[child])
        names = self.names[self.name_id].astype(str)
        counted = child[~self.is_module[child] & ~np.isin(names[child], _NOT_OPERATORS)]
        counted = counted[~np.char.startswith(names[counted].astype(str), "Optimizer.")]
        np.add.at(operators, self.parent[counted], 1)
        mods = np.flatnonzero(self.is_module & self.kept)
        # totals: each call's self GPU time added up its chain of module calls
        order = mods[np.lexsort((self.rows[mods], -self.end[mods], self.start[mods]))]
        gpu_total, kernel_total = gpu.copy(), kernel.copy()
        up = self.owner
        for i in order[::-1].tolist():
            o = up[i]
            if o >= 0:
                gpu_total[o] += gpu_total[i]
                kernel_total[o] += kernel_total[i]
        short = [str(s)[len(MODULE_PREFIX) :] for s in names[order].tolist()]
        path: dict[int, str] = {}
        depth: dict[int, int] = {}
        paths, depths, parents = [], [], []
        for i, name in zip(order.tolist(), short):
            o = int(up[i])
            path[i] = name if o < 0 else f"{path[o]}/{name}"
            depth[i] = 0 if o < 0 else depth[o] + 1
            paths.append(path[i])
            depths.append(depth[i])
            parents.append("" if o < 0 else path[o])
        return pd.DataFrame(
            {
                "path": paths,
                "module": short,
                "type": [_INSTANCE.sub("", s) for s in short],
                "depth": depths,
                "parent": parents,
                "start": self.start[order],
                "calls": 1,
                "operators": operators[order],
                "host_total_us": dur[order],
                "host_self_us": dur[order] - direct[order],
                "gpu_total_us": gpu_total[order],
                "gpu_self_us": gpu[order],
                "kernel_total_us": kernel_total[order],
                "kernel_self_us": kernel[order],
            }
        )


_SUMS = {f: "sum" for f in FIGURES}


def _by_path(calls: pd.DataFrame, keys: tuple[str, ...] = ()) -> pd.DataFrame:
    """The calls summed per path (per ``keys`` and path), depth first in call order."""
    if not len(calls):
        return pd.DataFrame(columns=[*keys, *TREE_COLUMNS])
    group = [*keys, "path"]
    sums = calls.groupby(group, sort=False).agg(
        {**_SUMS, "module": "first", "type": "first", "depth": "first", "parent": "first"}
    )
    first = calls.groupby(group, sort=False)["start"].min()
    sums = sums.reset_index()
    sums["start"] = first.to_numpy()
    # depth first: each path after its parent, siblings in the order of their first call
    ordered: list[int] = []
    children: dict[tuple[Any, ...], list[int]] = {}
    by_start = sums.sort_values("start", kind="stable")
    for i, row in zip(by_start.index.tolist(), by_start[[*keys, "parent"]].itertuples(index=False)):
        children.setdefault(tuple(row), []).append(i)
    paths = sums["path"].tolist()
    key_rows = sums[list(keys)].itertuples(index=False) if keys else [()] * len(sums)
    key_of = [tuple(k) for k in key_rows]

    def walk(i: int) -> None:
        ordered.append(i)
        for c in children.get((*key_of[i], paths[i]), []):
            walk(c)

    for i in by_start.index.tolist():
        if sums.at[i, "depth"] == 0:
            walk(i)
    return sums.loc[ordered, [*keys, *TREE_COLUMNS]].reset_index(drop=True)


def _by_type(tree: pd.DataFrame) -> pd.DataFrame:
    sums = (
        tree.groupby("type", sort=False)
        .agg({**_SUMS, "path": "size"})
        .rename(columns={"path": "instances"})
    )
    sums = sums.reset_index()[list(TYPE_COLUMNS)]
    by = "gpu_self_us" if sums["gpu_self_us"].sum() > 0 else "host_self_us"
    return sums.sort_values(by, ascending=False, kind="stable").reset_index(drop=True)


def _phase_tables(trace: Trace, calls: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tree per phase span (a call in the span it starts in) and the repeated blocks'
    parts per phase; both empty without phase spans."""
    spans = phase_spans(trace, GENERATION_PHASES)
    if not len(spans):
        return pd.DataFrame(columns=PHASE_COLUMNS), pd.DataFrame(columns=BLOCK_COLUMNS)
    spans = spans.sort_values("start", kind="stable")
    starts, ends = spans["start"].to_numpy(), spans["end"].to_numpy()
    at = np.searchsorted(starts, calls["start"].to_numpy(), side="right") - 1
    inside = (at >= 0) & (calls["start"].to_numpy() <= ends[np.maximum(at, 0)])
    phase = np.where(inside, spans["phase"].to_numpy()[np.maximum(at, 0)], NO_PHASE)
    calls = calls.assign(phase=phase)
    phases = _by_path(calls, ("phase",))
    return phases, _blocks(phases)


def _blocks(phases: pd.DataFrame) -> pd.DataFrame:
    """Each repeated block (a module type called as two or more siblings, with sub-modules of
    its own: the decoder layers) split into its parts per phase: its children summed per type
    and its self time, each with its share of the block's host and GPU time."""
    if not len(phases):
        return pd.DataFrame(columns=BLOCK_COLUMNS)
    parents = set(phases["parent"])
    has_children = phases["path"].isin(parents)
    siblings = phases.groupby(["phase", "parent", "type"])["path"].transform("size")
    blocks = phases[has_children & (siblings >= 2)]
    rows: list[dict[str, Any]] = []
    for block in blocks.itertuples(index=False):
        parts = phases[(phases["phase"] == block.phase) & (phases["parent"] == block.path)]
        summed = parts.groupby("type", sort=False)[
            ["host_total_us", "gpu_total_us", "kernel_total_us", "calls"]
        ].sum()
        # its own: the block's time outside its sub-modules (its operators' included)
        own = {
            "host_total_us": block.host_total_us - summed["host_total_us"].sum(),
            "gpu_total_us": block.gpu_total_us - summed["gpu_total_us"].sum(),
            "kernel_total_us": block.kernel_total_us - summed["kernel_total_us"].sum(),
            "calls": block.calls,
        }
        summed.loc[SELF_PART] = pd.Series(own)
        for part, row in summed.iterrows():
            rows.append(
                {
                    "phase": block.phase,
                    "block": block.path,
                    "part": part,
                    "calls": int(row["calls"]),
                    "host_us": float(row["host_total_us"]),
                    "gpu_us": float(row["gpu_total_us"]),
                    "kernel_us": float(row["kernel_total_us"]),
                    "host_share_pct": _share(row["host_total_us"], block.host_total_us),
                    "gpu_share_pct": _share(row["gpu_total_us"], block.gpu_total_us),
                }
            )
    return pd.DataFrame(rows, columns=BLOCK_COLUMNS)


def _share(part: float, whole: float) -> float:
    return 100.0 * float(part) / float(whole) if whole > 0 else float("nan")
