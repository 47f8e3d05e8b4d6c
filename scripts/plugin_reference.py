"""Numbers the PyTorch profiler TensorBoard plugin (torch-tb-profiler) computes for a trace.

Used once to record the reference values the tests compare against
(tests/fixtures/kineto_tb_plugin/plugin_reference.json); needs torch-tb-profiler installed.

    python scripts/plugin_reference.py TRACE [TRACE ...] > plugin_reference.json
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def reference(path: Path) -> dict:
    from torch_tb_profiler import __version__ as plugin_version
    from torch_tb_profiler.profiler.data import RunProfileData

    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    profile = RunProfileData.from_json("worker", 0, json.loads(raw))
    profile.process()
    gpu = profile.gpu_metrics_parser
    devices = {}
    for gpu_id in sorted(gpu.gpu_ids):
        devices[str(gpu_id)] = {
            "gpu_utilization_pct": 100 * gpu.gpu_utilization[gpu_id],
            "est_sm_efficiency_pct": None
            if gpu.avg_approximated_sm_efficiency_per_device[gpu_id] is None
            else 100 * gpu.avg_approximated_sm_efficiency_per_device[gpu_id],
            "est_achieved_occupancy_pct": gpu.avg_occupancy_per_device[gpu_id],
        }
    roles = [
        "kernel",
        "memcpy",
        "memset",
        "communication",
        "runtime",
        "dataloader",
        "cpu_exec",
        "other",
        "total",
    ]
    return {
        "file": path.name,
        "plugin": f"torch-tb-profiler {plugin_version}",
        "step_names": list(profile.steps_names),
        "step_us": [c.costs[-1] for c in profile.steps_costs],
        "avg_step_breakdown_us": dict(zip(roles, profile.avg_costs.costs)),
        "step_breakdown_us": [dict(zip(roles, c.costs)) for c in profile.steps_costs],
        "devices": devices,
        "kernel_time_using_tensor_cores_pct": {
            str(k): 100 * v for k, v in enumerate(profile.tc_ratio) if v is not None
        },
    }


if __name__ == "__main__":
    print(json.dumps([reference(Path(p)) for p in sys.argv[1:]], indent=1))
