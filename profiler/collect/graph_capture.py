"""The capture of CUDA graphs, profiled: what each captured graph's nodes are and which operator
launched each (profiler.trace.graphs.captures_of), so the kernels of its replays in the run's
trace can be attributed to operators (profiler.trace.graphs.attach).

A replay's kernels carry only the graph launch's correlation; the capture carries the
operators. So every capture a run makes runs under a short torch.profiler session of its own
(CPU and CUDA activities; it ends before the run's profiled steps begin):

- ``--cuda-graphs``: the capture of the step (profiler.collect.cuda_graphs; with --workload
  generate, of the decode step);
- an inductor backend with ``--compile-mode reduce-overhead`` or ``max-autotune``: torch.compile's
  CUDA graph trees warm a new graph up on its first call and capture it on the next, so the
  run's first ``RECORDING_CALLS`` calls are profiled (for a generation, the first generation
  captures the decode step's graph and the second the prefill's).

The windows found are written into the run folder as ``graph_captures.json``
(profiler.runs.layout.GRAPH_CAPTURES); the trace of the capture itself is not kept.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from profiler.runs.config import RunConfig
from profiler.runs.layout import GRAPH_CAPTURES

if TYPE_CHECKING:
    from profiler.trace.graphs import GraphCaptures

#: the calls of a graph-replaying torch.compile mode that are profiled (warm-up, then capture)
RECORDING_CALLS = 2
#: torch.compile modes that capture and replay CUDA graphs (torch._inductor.list_mode_options())
INDUCTOR_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def records_graphs(config: RunConfig, family: str, use_cuda: bool) -> bool:
    """Whether the backend captures CUDA graphs itself on its first calls (Inductor's graph
    trees), which are then profiled; not without a GPU or a torch.profiler trace."""
    return (
        use_cuda
        and config.capture == "torch"
        and family == "inductor"
        and config.compile_mode in INDUCTOR_GRAPH_MODES
    )


def for_backend(config: RunConfig, family: str, use_cuda: bool) -> CaptureProfile | None:
    """The profile of the run's first RECORDING_CALLS calls where the backend captures graphs
    on them (records_graphs), else None."""
    if not records_graphs(config, family, use_cuda):
        return None
    return CaptureProfile(
        f"torch.compile --compile-mode {config.compile_mode}: the first {RECORDING_CALLS} "
        "calls (CUDA graph trees warm a graph up, then capture it)"
    )


class CaptureProfile:
    """torch.profiler over the calls that capture CUDA graphs; the capture windows it saw."""

    def __init__(self, source: str, enabled: bool = True) -> None:
        self.source = source
        self.enabled = enabled  # off: a process that only times (no trace, no files)
        self.captures: list[Any] = []  # profiler.trace.graphs.GraphCapture

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Profile the block; add the capture windows found in its trace (empty ones left
        out). Nothing when not enabled."""
        if not self.enabled:
            yield
            return
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with tempfile.TemporaryDirectory(prefix="graph-capture-") as folder:
            profiler = torch.profiler.profile(activities=activities)
            with profiler:
                yield
                torch.cuda.synchronize()
            path = Path(folder) / "capture.pt.trace.json"
            profiler.export_chrome_trace(str(path))
            # (the trace reader, pandas included, only where a capture is profiled: a run
            # imports none of it at start-up)
            from profiler.trace import graphs
            from profiler.trace.load import load_trace

            found = graphs.captures_of(load_trace(path), self.source)
        self.captures.extend(c for c in found.captures if c.nodes)

    def record(self) -> GraphCaptures:
        from profiler.trace.graphs import GraphCaptures

        return GraphCaptures(tuple(self.captures), self.source)

    def artifacts(self) -> dict[str, str]:
        """graph_captures.json, as the run folder's artifact (none when not enabled)."""
        return {GRAPH_CAPTURES: self.record().to_json().decode()} if self.enabled else {}

    def summary(self) -> str:
        """The windows found, in words (a note of the run)."""
        sizes = ", ".join(str(len(c.nodes)) for c in self.captures) or "none"
        return (
            f"{len(self.captures)} CUDA graph capture(s) profiled ({self.source}); nodes per "
            f"capture: {sizes}; the replays' kernels are attributed to the operators that "
            f"launched them at capture ({GRAPH_CAPTURES})"
        )
