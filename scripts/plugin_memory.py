"""The memory view (profiler.trace.memory) against the TensorBoard plugin's Memory view
(torch-tb-profiler, its loader in-process) on any traces: each device's curve, peak and
operator table, equal or not, and the peak's figures.

    python scripts/plugin_memory.py TRACE [TRACE ...]

tests/test_memory_view.py holds the same on the committed traces it can load quickly.
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
from pathlib import Path

from profiler.trace.load import load_trace
from profiler.trace.memory import memory_view


def check(path: Path) -> bool:
    from torch_tb_profiler import __version__
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    view = memory_view(load_trace(path))
    if view is None:
        print(f"{path}: no [memory] events")
        return False
    raw = path.read_bytes()
    logging.disable(logging.WARNING)
    profile = RunProfileData.from_json(
        "worker", 0, json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    )
    run = RunGenerator("worker", 0, profile).generate_run_profile()
    curve = run.get_memory_curve(time_metric="ms", memory_metric="B", patch_for_step_plot=False)
    stats = profile.memory_snapshot.get_memory_statistics(profile.tid2tree)
    theirs = {(d, n): list(v) for d, ops in stats.items() for n, v in ops.items()}
    mine = {
        (r.device, r.operator): [
            r.self_size_increase_bytes,
            r.self_allocation_size_bytes,
            r.self_allocation_count,
            r.size_increase_bytes,
            r.allocation_size_bytes,
            r.allocation_count,
            r.calls,
        ]
        for r in view.operators
    }
    ok = mine == theirs and curve["metadata"]["first_ts"] == view.first_ts_us
    print(f"{path.name} against torch-tb-profiler {__version__}:")
    print(f"  operator table: {len(mine)} rows, equal: {mine == theirs}")
    for c, peak in zip(view.curves, view.peaks):
        points = [list(p) for p in zip(c.time_ms, c.allocated_bytes, c.reserved_bytes)]
        same = points == curve["rows"][c.device]
        ok &= same
        print(
            f"  {c.device}: {len(points)} curve points, equal: {same}; peak "
            f"{peak.allocated_bytes} B (plugin: {curve['metadata']['peaks'][c.device]}) by "
            f"{peak.operator} in {peak.parent}"
        )
    return ok


if __name__ == "__main__":
    results = [check(Path(p)) for p in sys.argv[1:]]
    sys.exit(0 if results and all(results) else 1)
