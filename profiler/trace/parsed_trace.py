"""The Trace record: a parsed trace as plain columns, and what its readers ask of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.schema import KIND, DeviceProperties


@dataclass
class GraphAttribution:
    """What profiler.trace.graphs.attach found: the operators of kernels replayed from CUDA
    graphs, and how much it covered."""

    #: event row (of ``trace.events``) of a replayed kernel -> name_id of its operator
    operator_of_row: pd.Series
    captures: int = 0
    replays: int = 0
    attributed_replays: int = 0
    #: GPU kernel time inside replays, and the part of it attributed to operators
    replay_kernel_us: float = 0.0
    attributed_kernel_us: float = 0.0
    replay_kernels: int = 0
    attributed_kernels: int = 0
    #: why replays stayed on their graph launch: reason -> replays
    unattributed: dict[str, int] = field(default_factory=dict)


@dataclass
class KernelLaunch:
    """The launch configurations of a trace's kernels, each distinct one stored once: a
    kernel row's configuration is ``configs.iloc[config[i]]`` (a trace launches its kernels
    with a few configurations, so this grows with the kernels by one int32 each)."""

    #: row of each kernel in ``Trace.events``, ascending
    rows: npt.NDArray[np.int64]
    #: each kernel's configuration, a row number of ``configs``
    config: npt.NDArray[np.int32]
    #: the distinct configurations; columns columns.KERNEL_COLUMNS
    configs: pd.DataFrame

    def frame(self) -> pd.DataFrame:
        """One row per kernel, indexed by its row in ``Trace.events``."""
        if not len(self.rows):
            return pd.DataFrame({c: np.array([], dtype=np.float64) for c in self.configs.columns})
        columns = {c: self.configs[c].to_numpy()[self.config] for c in self.configs.columns}
        return pd.DataFrame(columns, index=self.rows, copy=False)

    def without(self, keep: npt.NDArray[np.bool_]) -> KernelLaunch:
        """These kernels' configurations once only the events ``keep`` (a mask of
        ``Trace.events``' rows) are kept, the events renumbered."""
        kept = keep[self.rows]
        new_row = np.cumsum(keep) - 1
        return KernelLaunch(new_row[self.rows[kept]], self.config[kept], self.configs)


@dataclass
class Trace:
    """A parsed trace: plain columns, nothing torch-specific."""

    path: Path
    #: one row per complete ('X') event of a known kind, in file order; columns EVENT_COLUMNS
    events: pd.DataFrame
    #: launch configuration of the kernel rows (``kernel_launch`` spells it out per row)
    launch: KernelLaunch
    #: name_id -> name
    names: npt.NDArray[np.object_]
    #: thread code -> (pid, tid) as written in the trace
    threads: list[tuple[int | str, int | str]]
    devices: dict[int, DeviceProperties]
    #: every ``cat`` seen on a complete event, with its count (unknown ones included)
    categories: dict[str, int] = field(default_factory=dict)
    #: the 'PyTorch Profiler (0)' span, or the span of all events
    span: tuple[float, float] = (0.0, 0.0)
    #: events left out of ``events`` because their values cannot be real: reason -> count
    excluded: dict[str, int] = field(default_factory=dict)
    #: complete events of a category the loader does not read (another accelerator's, a new
    #: Kineto activity type): (cat, pid) -> count
    unread: dict[tuple[str, Any], int] = field(default_factory=dict)
    #: the operators of kernels replayed from CUDA graphs, when their captures were attached
    #: (profiler.trace.graphs.attach); None otherwise
    graphs: GraphAttribution | None = None

    @property
    def kernel_launch(self) -> pd.DataFrame:
        """Launch configuration of the kernel rows, same index as those rows of ``events``
        (built on each call from the distinct configurations: keep what you need of it)."""
        return self.launch.frame()

    @property
    def host_pids(self) -> set[int | str]:
        """The pids of the CPU-side events (operators, runtime calls, annotations)."""
        cpu = [KIND[k] for k in ("runtime", "driver", "cpu_op", "annotation", "python")]
        kinds = np.zeros(len(KIND), dtype=bool)
        kinds[cpu] = True
        threads = self.events["thread"].to_numpy()[kinds[self.events["kind"].to_numpy()]]
        codes: npt.NDArray[np.intp] = np.flatnonzero(
            np.bincount(threads, minlength=len(self.threads))
        )
        return {self.threads[code][0] for code in cast(list[int], codes.tolist())}

    @property
    def unanalysed_device_events(self) -> list[tuple[int, str, Any]]:
        """(count, cat, pid) of the unread events that sit on a process other than the host's
        (a device timeline: Kineto gives each device its own pid), most first."""
        if not self.unread:
            return []
        host = self.host_pids
        return sorted(
            ((n, cat, pid) for (cat, pid), n in self.unread.items() if pid not in host),
            key=lambda t: (-t[0], t[1], str(t[2])),
        )

    @property
    def unanalysed_warning(self) -> str | None:
        """``N events of category X on device Y, not analysed`` for each such group, or None."""
        found = self.unanalysed_device_events
        if not found:
            return None
        groups = "; ".join(
            f"{n} events of category {cat!r} on device {pid}" for n, cat, pid in found
        )
        return groups + (
            ", not analysed (this tool reads CUDA kernel, memcpy and memset events only)"
        )

    @property
    def excluded_warning(self) -> str | None:
        """One line naming what was left out of the figures and why, or None."""
        if not self.excluded:
            return None
        total = sum(self.excluded.values())
        reasons = ", ".join(f"{n} {reason}" for reason, n in self.excluded.items())
        return (
            f"{total} of {total + len(self.events)} events left out of the figures, their "
            f"values cannot be real: {reasons}"
        )

    @property
    def schema(self) -> str:
        old = {"Kernel", "Runtime", "Operator", "Memcpy", "Memset"}
        return "kineto-2021 (Kernel/Runtime/Operator)" if old & set(self.categories) else "kineto"

    def of_kind(self, kind: str) -> pd.DataFrame:
        return self.events[self.events["kind"] == KIND[kind]]

    def name_of(self, name_ids: npt.ArrayLike) -> npt.NDArray[np.object_]:
        return self.names[np.asarray(name_ids, dtype=np.int64)]

    @property
    def has_gpu_activity(self) -> bool:
        gpu = [KIND["kernel"], KIND["memcpy"], KIND["memset"]]
        return bool(self.events["kind"].isin(gpu).any())
