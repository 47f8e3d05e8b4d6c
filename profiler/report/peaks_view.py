"""Terminal view of the measured ceilings (`peaks`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler.report.fmt import count, peak_gbs, peak_tflops


def print_peaks(
    data: dict[str, Any], path: Path, measured: bool, echo: Callable[[str], None] = print
) -> None:
    """The ceilings, a line each, through ``echo`` (the CLI's output sink). ``data`` is the
    cached JSON document of profiler.collect.measured_peaks, read as it was written (Any)."""
    m = data["method"]
    echo(
        f"{data['machine']['device']} (driver {data['machine']['driver'] or 'n/a'}, torch "
        f"{data['machine']['torch']}): {'measured now' if measured else 'cached'}, {path}"
    )
    echo(
        f"method: {m['data']} data, {m['warmup_calls']} warm-up calls, median of "
        f"{m['repeats']} ({m['timer']}); matmul {m['matmul']} with n = "
        f"{m['sizes']['matmul_n']}; copy of {count(m['sizes']['copy_bytes'] / 2**20, 0)} MiB, "
        f"{m['copy']}"
    )
    for name, detail in data["matmul_detail"].items():
        value = detail["tflops"]
        shown = (
            peak_tflops(value)
            if value is not None
            else f"{'n/a':>10}          ({detail.get('why_not')})"
        )
        how = f"  {detail['kernel']}" if value is not None and detail.get("kernel") else ""
        if detail.get("cuda_kernels"):
            how += f"; ran {', '.join(k[:60] for k in detail['cuda_kernels'][:2])}"
        echo(f"  matmul {name:5} {shown}{how}")
    echo(f"  copy bandwidth {peak_gbs(data['copy']['gb_per_s'])}")
