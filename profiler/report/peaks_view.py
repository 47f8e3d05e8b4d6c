"""The `peaks` command: measure (or read the cached) ceilings of this machine and print them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UserError


def run(refresh: bool = False, cache_dir: Path | None = None, matmul_n: int | None = None,
        copy_mib: int | None = None, json_out: bool = False) -> dict:
    for flag, value in (("--matmul-n", matmul_n), ("--copy-mib", copy_mib)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be 1 or more (got {value})")
    from .. import peaks

    sizes = None
    if matmul_n is not None or copy_mib is not None:
        import torch

        base = dict(peaks.GPU_SIZES if torch.cuda.is_available() else peaks.CPU_SIZES)
        if matmul_n is not None:
            base["matmul_n"] = base["int8_n"] = matmul_n
        if copy_mib is not None:
            base["copy_bytes"] = copy_mib << 20
        sizes = base
    print("measuring..." if refresh else "reading or measuring...", file=sys.stderr)
    data, path, measured = peaks.peaks(cache_dir, refresh=refresh or sizes is not None,
                                       sizes=sizes)
    if json_out:
        json.dump({**data, "cache_file": str(path)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return data
    print_peaks(data, path, measured)
    return data


def print_peaks(data: dict, path: Path, measured: bool) -> None:
    m = data["method"]
    print(f"{data['machine']['device']} (driver {data['machine']['driver'] or 'n/a'}, torch "
          f"{data['machine']['torch']}): {'measured now' if measured else 'cached'}, {path}")
    print(f"method: {m['data']} data, {m['warmup_calls']} warm-up calls, median of "
          f"{m['repeats']} ({m['timer']}); matmul {m['matmul']} with n = "
          f"{m['sizes']['matmul_n']}; copy of {m['sizes']['copy_bytes'] / 2**20:,.0f} MiB, "
          f"{m['copy']}")
    for name, detail in data["matmul_detail"].items():
        value = detail["tflops"]
        shown = f"{value:10.4g} TFLOP/s" if value is not None else f"{'n/a':>10}          " \
            f"({detail.get('why_not')})"
        print(f"  matmul {name:5} {shown}")
    print(f"  copy bandwidth {data['copy']['gb_per_s']:10.1f} GB/s")
