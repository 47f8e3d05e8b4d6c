"""The TensorBoard plugin's Distributed view figures of rank traces beside this tool's.

For each trace: torch-tb-profiler's own Computation/Communication Overview (its loader, driven
in-process on the tb-compat copy of the trace, then DistributedRunGenerator's overlap graph:
computation and communication without their overlap, overlapping, other, µs per step) and
profiler.trace.ranks.rank_steps' figures for the same steps, with whether they are equal.
Needs torch-tb-profiler installed (the dev extra).

    python scripts/plugin_distributed.py TRACE [TRACE ...]
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def plugin_overlap(path: Path) -> dict[str, list[float]]:
    """step -> [computation, overlapping, communication, other] as the plugin's view shows."""
    from torch_tb_profiler.profiler.data import DistributedRunProfileData, RunProfileData
    from torch_tb_profiler.profiler.run_generator import DistributedRunGenerator

    from profiler.trace.tb_compat import compat_trace

    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    compat_trace(data)
    logging.disable(logging.WARNING)
    try:
        profile = RunProfileData.from_json(path.name, 0, data)
        profile.process()
    finally:
        logging.disable(logging.NOTSET)
    generator = DistributedRunGenerator([DistributedRunProfileData(profile)], None)
    graph = generator._generate_overlap_graph()  # the view's figures, as its page draws them
    return {step: rows[path.name] for step, rows in graph["data"].items() if step != "all"}


def main(paths: list[str]) -> int:
    from torch_tb_profiler import __version__ as plugin_version

    from profiler.trace.load import load_trace
    from profiler.trace.ranks import PLUGIN_COLUMNS, distributed_info, rank_steps

    print(
        f"torch-tb-profiler {plugin_version}; µs per step: computation, overlapping, "
        "communication, other"
    )
    unequal = 0
    for name in paths:
        path = Path(name)
        info = distributed_info(path)
        plugin = plugin_overlap(path)
        ours = rank_steps(load_trace(path))
        print(f"{path.name} (rank {info.rank if info else '?'}):")
        for row in ours.itertuples():
            step = str(row.step).removeprefix("ProfilerStep#")
            mine = [getattr(row, c) for c in PLUGIN_COLUMNS]
            theirs = plugin.get(step)
            same = theirs == mine
            unequal += not same
            print(f"  step {step}: plugin {theirs}; this tool {mine}; equal: {same}")
    return 1 if unequal else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
