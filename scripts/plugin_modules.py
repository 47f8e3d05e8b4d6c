"""The TensorBoard plugin's (torch-tb-profiler) Module view of traces recorded with stacks, as the
reference the module view's tests compare against (tests/fixtures/modules_cpu/plugin_modules.json);
needs torch-tb-profiler installed.

    python scripts/plugin_modules.py TRACE [TRACE ...] > plugin_modules.json

Each trace is read as the plugin reads the tool's plugin-friendly copy (profiler.trace.tb_compat:
its runtime and driver categories renamed) and parsed by its own loader in this process; the
rows are its ``aggegate_module_view`` (what its Module view shows), one per module path. The
plugin hangs the runtime calls that carry no External id (cudaDeviceSynchronize ...) on the first
module call it meets; ``runtimes_on_modules`` lists those (their host time and the GPU time they
launched), so the tests can say how that call's figures differ.
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _flat(stats: list[Any], prefix: str = "") -> Iterator[dict[str, Any]]:
    for s in stats:
        path = f"{prefix}/{s.name}" if prefix else s.name
        yield {
            "path": path,
            "occurences": s.occurences,
            "operators": s.operators,
            "host_duration": s.host_duration,
            "self_host_duration": s.self_host_duration,
            "device_duration": s.device_duration,
            "self_device_duration": s.self_device_duration,
        }
        yield from _flat(s.children, path)


def reference(path: Path) -> dict[str, Any]:
    from torch_tb_profiler import __version__ as plugin_version
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.module_op import _get_node_list, aggegate_module_view
    from torch_tb_profiler.profiler.node import ModuleNode

    from profiler.trace.tb_compat import compat_trace

    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    compat_trace(data)
    logging.disable(logging.WARNING)
    profile = RunProfileData.from_json("worker", 0, data)
    profile.process()
    stats = aggegate_module_view(profile.tid2tree, profile.events) or []
    attached = [
        {
            "module": m.name,
            "start": m.start_time,
            "runtimes": len(m.runtimes),
            "runtime_us": sum(r.end_time - r.start_time for r in m.runtimes),
            "device_us": sum(r.device_duration for r in m.runtimes),
        }
        for m in _get_node_list(profile.tid2tree, ModuleNode)
        if m.runtimes
    ]
    return {
        "file": str(
            path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        ),
        "plugin": f"torch-tb-profiler {plugin_version}",
        "modules": list(_flat(stats)),
        "runtimes_on_modules": attached,
    }


if __name__ == "__main__":
    print(json.dumps([reference(Path(p)) for p in sys.argv[1:]], indent=1))
