"""Kernels inside CUDA graphs, attributed to the operators that launched them at capture.

A replayed CUDA graph is one ``cudaGraphLaunch`` in a trace: every kernel of the replay carries
that launch's correlation id, and no operator sits above it (torch 2.11 with CUDA 13.0 writes
no graph or node id in a kernel's args). So a trace of replays alone puts all their time on the
graph launch. What the replay leaves out, the capture has: under torch.profiler, each launch
call made while a stream is captured (``cudaLaunchKernel``, ``cuLaunchKernelEx``,
``cudaMemsetAsync`` ...) is recorded with its correlation and the External id of the operator
that made it, though no kernel runs then. A graph captured on one stream replays its nodes in
the order they were captured, so the n-th GPU event of a replay is the n-th launch of its
capture.

The method, in two steps:

1. ``captures_of(trace of the capture)``: each capture window (``cudaStreamBeginCapture`` to
   ``cudaStreamEndCapture`` on one CPU thread) as its launch calls in order, each with what it
   creates (a kernel, a memset or a memcpy node) and its operator (the innermost CPU operator
   holding the launch's External id, as ``kernel_rows`` finds it for an eager kernel). A launch
   in the window whose work ran at once (its correlation is on a GPU event of the same trace:
   issued to another stream, so not captured) is left out and counted.
2. ``attach(trace of replays, captures)``: the GPU events of each ``cudaGraphLaunch``, in start
   order, are matched to the capture with the same number and sequence of node kinds; the
   kernels then carry the operators of their nodes (``kernel_rows``' ``operator_id``, so the
   kernel table's top operator, the operator view and the phases all see them). Where several
   captures fit with different operators, the one whose operator names equal most of the
   replayed kernel names (an Inductor Triton launch runs inside a range named after its kernel)
   is taken when one is best; a replay that no capture fits, or two fit equally, stays on the
   graph launch, and the reason is counted.

Checked on an H200 (scripts/device_llm_graph_facts.py, docs/gpu/h200/llm/): a Llama decode
step captured with torch.cuda.graph gave 816 launch calls at capture, 2 of which ran at once,
and 814 GPU events per replay with the same kind sequence; of the 813 replayed kernels, 812
carry the operator that the same kernel name has in an eager step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler import units
from profiler.errors import UserError
from profiler.trace.parsed_trace import GraphAttribution, Trace
from profiler.trace.schema import KIND

#: what a node of a captured graph is, by the API call that created it
KERNEL_NODE, MEMSET_NODE, MEMCPY_NODE = "kernel", "memset", "memcpy"
#: the GPU event kind of each node kind
EVENT_KIND = {KERNEL_NODE: "kernel", MEMSET_NODE: "memset", MEMCPY_NODE: "memcpy"}
NODE_OF_EVENT = {KIND[v]: k for k, v in EVENT_KIND.items()}
#: the operator of a node whose launch carried no operator
NO_OPERATOR = "(no operator)"
BEGIN_CAPTURE = ("cudaStreamBeginCapture", "cuStreamBeginCapture")
END_CAPTURE = ("cudaStreamEndCapture", "cuStreamEndCapture")
GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch")


def node_kind(api: str) -> str | None:
    """The node a launch call creates in a captured stream (None for any other call):
    ``cudaLaunchKernel``/``cuLaunchKernelEx``... a kernel, ``cudaMemsetAsync``/``cuMemsetD32Async``
    a memset, ``cudaMemcpyAsync``/``cuMemcpyAsync`` a memcpy. A host function
    (``cudaLaunchHostFunc``) creates a node with no GPU event, so it is none of these."""
    if api.startswith(("cudaLaunch", "cuLaunch")) and "HostFunc" not in api:
        return KERNEL_NODE
    if api.startswith(("cudaMemset", "cuMemset")) and "Async" in api:
        return MEMSET_NODE
    if api.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" in api:
        return MEMCPY_NODE
    return None


class GraphNode(msgspec.Struct, frozen=True, array_like=True):
    """One node of a captured graph: what it is and the operator that launched it."""

    kind: str
    operator: str


class GraphCapture(msgspec.Struct, frozen=True):
    """One capture window: its nodes in capture order."""

    nodes: tuple[GraphNode, ...]
    #: launch calls inside the window whose work ran at once (not captured)
    ran_outside: int = 0

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(n.kind for n in self.nodes)

    @property
    def operators(self) -> tuple[str, ...]:
        return tuple(n.operator for n in self.nodes)


class GraphCaptures(msgspec.Struct, frozen=True):
    """Every capture window of one profiled capture (a run's graph_captures.json)."""

    captures: tuple[GraphCapture, ...]
    #: what was profiled to find them, in words
    source: str = ""

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)


def read_captures(path: Path) -> GraphCaptures:
    """A graph_captures.json; a one-line UserError for a file that is not one."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=GraphCaptures)
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise UserError(f"{path} is not a graph captures file ({error})") from None


def _api_calls(trace: Trace) -> pd.DataFrame:
    ev = trace.events
    api = ev.loc[
        ev["kind"].isin([KIND["runtime"], KIND["driver"]]),
        ["name_id", "thread", "ts", "correlation", "external_id"],
    ]
    return api.assign(api=trace.names[api["name_id"].to_numpy()])


def _gpu_events(trace: Trace) -> pd.DataFrame:
    ev = trace.events
    return ev.loc[
        ev["kind"].isin([KIND["kernel"], KIND["memset"], KIND["memcpy"]]),
        ["kind", "name_id", "ts", "dur", "correlation"],
    ]


def operator_of_external(trace: Trace) -> pd.Series:
    """External id -> name_id of the CPU operator (or record_function range) carrying it; an
    operator wins over a range that shares its id."""
    ev = trace.events
    ops = ev.loc[
        ev["kind"].isin([KIND["cpu_op"], KIND["annotation"]]) & (ev["external_id"] >= 0),
        ["kind", "name_id", "external_id"],
    ].sort_values("kind", kind="stable")
    found = pd.Series(ops["name_id"].to_numpy(), index=ops["external_id"].to_numpy())
    return found[~found.index.duplicated()]


def captures_of(trace: Trace, source: str = "") -> GraphCaptures:
    """The capture windows of a trace recorded while CUDA graphs were captured (see the module
    doc), in the order they began."""
    api = _api_calls(trace)
    begins = api[api["api"].str.startswith(BEGIN_CAPTURE)].sort_values("ts", kind="stable")
    ends = api[api["api"].str.startswith(END_CAPTURE)]
    if begins.empty:
        return GraphCaptures((), source)
    executed = set(_gpu_events(trace)["correlation"].tolist())
    operators = operator_of_external(trace)
    kinds = api["api"].map(node_kind)
    launches = api[kinds.notna()].assign(node=kinds[kinds.notna()]).sort_values("ts", kind="stable")
    captures = []
    for begin in begins.itertuples(index=False):
        later = ends[(ends["thread"] == begin.thread) & (ends["ts"] >= begin.ts)]
        if later.empty:
            continue  # a capture that never ended (the trace stopped first)
        end = float(later["ts"].min())
        inside = launches[
            (launches["thread"] == begin.thread)
            & (launches["ts"] > begin.ts)
            & (launches["ts"] < end)
        ]
        ran = inside["correlation"].isin(executed).to_numpy()
        kept = inside[~ran]
        op_ids = kept["external_id"].map(operators).to_numpy()
        nodes = tuple(
            GraphNode(kind, NO_OPERATOR if pd.isna(op) else str(trace.names[int(op)]))
            for kind, op in zip(kept["node"].tolist(), op_ids)
        )
        captures.append(GraphCapture(nodes, int(ran.sum())))
    return GraphCaptures(tuple(captures), source)


def replay_groups(trace: Trace) -> dict[int, npt.NDArray[np.int64]]:
    """correlation of each cudaGraphLaunch -> its GPU event rows, in start order."""
    api = _api_calls(trace)
    launches = api.loc[api["api"].str.startswith(GRAPH_LAUNCH), "correlation"]
    gpu = _gpu_events(trace)
    replayed = gpu[gpu["correlation"].isin(set(launches.tolist()))]
    if replayed.empty:
        return {}
    order = np.lexsort((replayed.index.to_numpy(), replayed["ts"].to_numpy()))
    replayed = replayed.iloc[order]
    rows = replayed.index.to_numpy()
    groups: dict[int, npt.NDArray[np.int64]] = {}
    for correlation, positions in replayed.groupby("correlation", sort=False).indices.items():
        groups[int(correlation)] = rows[positions]
    return groups


def attach(trace: Trace, captures: GraphCaptures) -> GraphAttribution:
    """Attribute the kernels of every graph replay in ``trace`` to the operators of their
    capture (module doc); sets ``trace.graphs`` (read by ``kernel_rows``) and returns it. New
    operator names are added to ``trace.names``."""
    groups = replay_groups(trace)
    ev = trace.events
    kinds = ev["kind"].to_numpy()
    name_ids = ev["name_id"].to_numpy()
    durations = ev["dur"].to_numpy()
    by_kinds: dict[tuple[str, ...], list[GraphCapture]] = {}
    for capture in captures.captures:
        by_kinds.setdefault(capture.kinds, []).append(capture)
    name_id = {str(n): i for i, n in enumerate(trace.names.tolist())}
    added: list[str] = []

    def intern(name: str) -> int:
        if name not in name_id:
            name_id[name] = len(name_id)
            added.append(name)
        return name_id[name]

    rows_out: list[npt.NDArray[np.int64]] = []
    ops_out: list[npt.NDArray[np.int64]] = []
    found = GraphAttribution(pd.Series(dtype=np.int64), captures=len(captures.captures))
    reasons: Counter[str] = Counter()
    for rows in groups.values():
        event_kinds = tuple(NODE_OF_EVENT[int(k)] for k in kinds[rows])
        is_kernel = kinds[rows] == KIND["kernel"]
        kernel_us = float(durations[rows][is_kernel].sum())
        found.replays += 1
        found.replay_kernels += int(is_kernel.sum())
        found.replay_kernel_us += kernel_us
        chosen, why = _choose(by_kinds.get(event_kinds, []), trace.names[name_ids[rows]])
        if chosen is None:
            reasons[why or f"no capture of {len(rows)} launches in this order"] += 1
            continue
        ids = np.fromiter((intern(op) for op in chosen.operators), dtype=np.int64)
        rows_out.append(rows[is_kernel])
        ops_out.append(ids[is_kernel])
        found.attributed_replays += 1
        found.attributed_kernels += int(is_kernel.sum())
        found.attributed_kernel_us += kernel_us
    if added:
        names = np.empty(len(trace.names) + len(added), dtype=object)
        names[: len(trace.names)] = trace.names
        names[len(trace.names) :] = added
        trace.names = names
    if rows_out:
        found.operator_of_row = pd.Series(np.concatenate(ops_out), index=np.concatenate(rows_out))
    found.unattributed = dict(reasons)
    trace.graphs = found
    return found


def _choose(
    candidates: list[GraphCapture], kernel_names: npt.NDArray[np.object_]
) -> tuple[GraphCapture | None, str | None]:
    """The capture a replay's events came from, among those of its kind sequence (see the
    module doc); (None, why) when none or several fit."""
    distinct = list({c.operators: c for c in candidates}.values())
    if not distinct:
        return None, None
    if len(distinct) == 1:
        return distinct[0], None
    names = kernel_names.tolist()
    scores = [sum(op == name for op, name in zip(c.operators, names)) for c in distinct]
    best = max(scores)
    if scores.count(best) == 1:
        return distinct[scores.index(best)], None
    return None, f"{len(distinct)} captures of {len(names)} launches fit equally"


@dataclass
class GraphSummary(GraphAttribution):
    """A trace's graph replays and how much of their kernel time carries an operator (what
    ``attach`` found, or the replays alone), beside all the trace's kernel time."""

    #: every kernel of the trace, replayed or not
    all_kernel_us: float = 0.0

    @property
    def attributed_pct(self) -> float | None:
        """The share of the replays' kernel time attributed to operators."""
        if not self.replay_kernel_us:
            return None
        return 100.0 * self.attributed_kernel_us / self.replay_kernel_us

    @property
    def replayed_pct(self) -> float | None:
        """The share of all kernel time that ran inside graph replays."""
        return 100.0 * self.replay_kernel_us / self.all_kernel_us if self.all_kernel_us else None

    def to_dict(self) -> dict[str, object]:
        return {
            "captures": self.captures,
            "replays": self.replays,
            "attributed_replays": self.attributed_replays,
            "replay_kernels": self.replay_kernels,
            "attributed_kernels": self.attributed_kernels,
            "replay_kernel_us": self.replay_kernel_us,
            "attributed_kernel_us": self.attributed_kernel_us,
            "attributed_pct": self.attributed_pct,
            "replayed_pct_of_all_kernel_time": self.replayed_pct,
            "unattributed": dict(self.unattributed),
        }


def graph_summary(trace: Trace) -> GraphSummary | None:
    """The trace's CUDA graph replays and their attribution (``attach``); None when the trace
    holds no graph replay."""
    ev = trace.events
    all_us = float(ev.loc[ev["kind"] == KIND["kernel"], "dur"].sum())
    found = trace.graphs
    if found is not None and found.replays:
        return GraphSummary(
            **{f.name: getattr(found, f.name) for f in fields(found)}, all_kernel_us=all_us
        )
    groups = replay_groups(trace)
    if not groups:
        return None
    rows = np.concatenate(list(groups.values()))
    kernels = rows[ev["kind"].to_numpy()[rows] == KIND["kernel"]]
    return GraphSummary(
        pd.Series(dtype=np.int64),
        replays=len(groups),
        replay_kernels=len(kernels),
        replay_kernel_us=float(ev["dur"].to_numpy()[kernels].sum()),
        unattributed={"no record of the capture (graph_captures.json)": len(groups)},
        all_kernel_us=all_us,
    )


def graph_note(found: GraphSummary) -> str:
    """The replays and their attribution in one sentence (a trace note)."""
    share = found.replayed_pct
    where = f" ({units.percent(share)} of all kernel time)" if share is not None else ""
    text = f"CUDA graphs: {found.replays} replays, {found.replay_kernels} kernels{where}"
    attributed = found.attributed_pct
    if attributed is not None and found.attributed_replays:
        text += (
            f"; {units.percent(attributed)} of their kernel time attributed to the operators that "
            f"launched each kernel at capture ({found.captures} capture(s) profiled)"
        )
    else:
        text += "; their kernels carry no operator (only the graph launch)"
    if found.unattributed:
        reasons = "; ".join(f"{n} replay(s): {why}" for why, n in found.unattributed.items())
        text += f"; not attributed: {reasons}"
    return text


@dataclass
class Agreement:
    """Graph attribution checked against an eager run of the same step: per kernel name, the
    operator the replays attributed and the one the eager run's kernels of that name had
    (``kernels``); per operator, its kernel time per step in each (``operators``)."""

    #: kernel, graph_operator, eager_operator, agrees, graph_us_per_step
    kernels: pd.DataFrame
    #: operator, eager_us_per_step, graph_us_per_step, ratio (graph / eager)
    operators: pd.DataFrame
    eager_steps: int
    graph_steps: int

    @property
    def agreeing_share(self) -> float:
        """The share of the replayed kernel time whose operator is the eager run's."""
        total = float(self.kernels["graph_us_per_step"].sum())
        if not total:
            return 0.0
        return float(self.kernels.loc[self.kernels["agrees"], "graph_us_per_step"].sum()) / total


def _by_operator(trace: Trace, rows: pd.DataFrame) -> pd.DataFrame:
    return rows.assign(
        kernel=trace.names[rows["name_id"].to_numpy()],
        operator=[
            NO_OPERATOR if i < 0 else str(trace.names[i]) for i in rows["operator_id"].tolist()
        ],
    )


def agreement(
    eager: tuple[Trace, pd.DataFrame, int], graphed: tuple[Trace, pd.DataFrame, int]
) -> Agreement:
    """Each side: (trace, its kernel rows of the step compared, with ``operator_id``: e.g. the
    decode phase's rows of kernel_rows, and the number of steps they span). The same kernel
    names should carry the same operator; each operator's kernel time per step should agree
    within what the graph removes (launch gaps do not count in kernel time, so mostly the
    kernels' own run-to-run spread)."""
    (et, er, en), (gt, gr, gn) = eager, graphed
    e, g = _by_operator(et, er), _by_operator(gt, gr)
    eager_op = (
        (e.groupby(["kernel", "operator"])["dur"].sum().reset_index().sort_values("dur"))
        .drop_duplicates("kernel", keep="last")
        .set_index("kernel")["operator"]
    )
    per_kernel = g.groupby(["kernel", "operator"])["dur"].sum().reset_index()
    kernels = pd.DataFrame(
        {
            "kernel": per_kernel["kernel"],
            "graph_operator": per_kernel["operator"],
            "eager_operator": per_kernel["kernel"].map(eager_op).fillna("(not in the eager run)"),
            "graph_us_per_step": per_kernel["dur"] / gn,
        }
    )
    kernels["agrees"] = kernels["graph_operator"] == kernels["eager_operator"]
    ops_e = e.groupby("operator")["dur"].sum() / en
    ops_g = g.groupby("operator")["dur"].sum() / gn
    operators = pd.DataFrame({"eager_us_per_step": ops_e, "graph_us_per_step": ops_g}).fillna(0.0)
    operators["ratio"] = operators["graph_us_per_step"] / operators["eager_us_per_step"]
    operators = (
        operators.sort_values("eager_us_per_step", ascending=False)
        .rename_axis("operator")
        .reset_index()
    )
    return Agreement(
        kernels.sort_values("graph_us_per_step", ascending=False).reset_index(drop=True),
        operators,
        en,
        gn,
    )
