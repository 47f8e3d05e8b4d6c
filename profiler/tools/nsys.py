"""``profile.py nsys``: Nsight Systems over the profiled steps of one run.

The harness runs under ``nsys profile -t cuda,nvtx,cudnn,cublas --capture-range=cudaProfilerApi
--capture-range-end=stop`` with ``--capture cuda-profiler-api``: no torch.profiler (CUPTI takes
one subscriber, and nsys is it), ``torch.cuda.profiler.start()/stop()`` around the active steps,
and the harness's NVTX ranges (``profile``, ``step N``) in domain ``infer-profiler``. CPU
sampling and context-switch tracing are off (``--sample=none --cpuctxsw=none``): they need
kernel permissions containers rarely grant, and the question here is the GPU side.

The run folder is runs/<backend>_bs<N>_nsys/ (result.json and latency.csv of that run). nsys
writes into a scratch folder; its files (report, .qdstrm when the import failed, nsys.log) move
into the run folder when it exits. Where ``nsys stats`` works, ``cuda_gpu_kern_sum`` and
``nvtx_sum`` are parsed: the kernels become a table in the format of ``summarize``'s kernel table
(nsys_kernels.csv), the NVTX ranges nsys_nvtx.csv.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from profiler.errors import UserError
from profiler.fsutil import move_into, write_json_atomic, write_text_atomic
from profiler.notices import Say
from profiler.runs.config import RunConfig
from profiler.tools.external import harness_command, last_line_with, locate, run_logged
from profiler.trace.rules import classify, short_name

KNOWN_LOCATIONS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)
TRACE = "cuda,nvtx,cudnn,cublas"
STATS_REPORTS = ("cuda_gpu_kern_sum", "nvtx_sum")


def locate_nsys() -> str:
    return locate("nsys", "NSYS", KNOWN_LOCATIONS)


def profile_command(nsys: str, out_base: Path, run_args: list[str]) -> list[str]:
    return [
        nsys,
        "profile",
        "-t",
        TRACE,
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--sample=none",
        "--cpuctxsw=none",
        "-o",
        str(out_base),
        "--force-overwrite=true",
        *run_args,
    ]


def stats_command(nsys: str, report: Path, out_prefix: Path) -> list[str]:
    return [
        nsys,
        "stats",
        "--report",
        ",".join(STATS_REPORTS),
        "--format",
        "csv",
        "--output",
        str(out_prefix),
        "--force-export=true",
        str(report),
    ]


def _read_csv(text: str) -> pd.DataFrame:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Time (%)" in line), None)
    if start is None:
        raise UserError('not an nsys stats CSV: no header with "Time (%)"')
    return pd.read_csv(io.StringIO("\n".join(lines[start:])))


def kernel_table_from_kern_sum(text: str) -> pd.DataFrame:
    """``nsys stats --report cuda_gpu_kern_sum --format csv`` -> the kernel table columns of
    ``summarize`` that nsys can fill (times in µs; launch configuration columns are absent)."""
    sums = _read_csv(text)
    total = float(sums["Total Time (ns)"].sum())
    classes = [classify(str(n)) for n in sums["Name"]]
    table = pd.DataFrame(
        {
            "kernel": [short_name(str(n)) for n in sums["Name"]],
            "name": sums["Name"].astype(str),
            "category": [c.category for c in classes],
            "calls": sums["Instances"].astype(int),
            "total_us": sums["Total Time (ns)"] / 1e3,
            "mean_us": sums["Avg (ns)"] / 1e3,
            "median_us": sums["Med (ns)"] / 1e3,
            "min_us": sums["Min (ns)"] / 1e3,
            "max_us": sums["Max (ns)"] / 1e3,
            "share_pct": 100.0 * sums["Total Time (ns)"] / total if total else 0.0,
            "tensor_core": [c.tensor_core for c in classes],
            "tensor_core_rule": [c.tensor_core_rule for c in classes],
        }
    )
    return table.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def nvtx_table_from_nvtx_sum(text: str) -> pd.DataFrame:
    sums = _read_csv(text)
    return pd.DataFrame(
        {
            "range": sums["Range"].astype(str),
            "style": sums.get("Style", pd.Series([""] * len(sums))).astype(str),
            "instances": sums["Instances"].astype(int),
            "total_us": sums["Total Time (ns)"] / 1e3,
            "mean_us": sums["Avg (ns)"] / 1e3,
        }
    )


def stats_failure(output: str, returncode: int) -> str:
    why = last_line_with(output, ("error", "failed", "not found", "cannot"))
    return why or f"nsys stats exited with status {returncode}"


def import_failure(output: str) -> str:
    """One line saying why nsys left a .qdstrm and no .nsys-rep."""
    why = last_line_with(output, ("libdw", "qdstrmimporter", "importer", "error", "failed"))
    return why or "no error message from nsys"


def run(options: dict, echo: Say = print) -> dict:
    """``options``: RunConfig field -> value, as for `run`; the run under nsys is captured with
    cuda-profiler-api, once (--repeat 1), its trace folder a scratch one."""
    from dataclasses import replace

    nsys = locate_nsys()
    config = RunConfig(**{**options, "capture": "cuda-profiler-api", "repeat": 1})
    runs_dir = config.runs_dir
    run_dir = runs_dir / config.run_name
    runs_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{config.run_name}.nsys-partial-", dir=runs_dir))
    result: dict = {"run": config.run_name, "nsys": nsys}
    # the run under nsys writes no trace (cuda-profiler-api); its trace folder is an empty one
    # outside the runs folder (inside it, --runs-dir and --tb-dir would be nested)
    no_trace = Path(tempfile.mkdtemp(prefix="infer-profiler-nsys-"))
    try:
        log = scratch / "nsys.log"
        run_args = harness_command(replace(config, tb_dir=no_trace))
        command = profile_command(nsys, scratch / "nsys", run_args)
        result["profile_command"] = command
        echo(f"nsys: {' '.join(command[:8])} ... (log: {run_dir / 'nsys.log'})")
        done = run_logged(command, log, echo=echo)
        result["profile_status"] = done.returncode
        report = scratch / "nsys.nsys-rep"
        qdstrm = next(iter(sorted(scratch.glob("*.qdstrm"))), None)
        if report.is_file():
            _stats(nsys, report, scratch, run_dir, log, result)
        elif qdstrm is not None:
            result["stats_error"] = (
                "nsys wrote a .qdstrm but no .nsys-rep (its "
                f"QdstrmImporter failed): {import_failure(done.output)}"
            )
        else:
            result["stats_error"] = (
                f"nsys wrote no report ({done.status}): {import_failure(done.output)}"
            )
        kept = move_into(run_dir, [p for p in sorted(scratch.iterdir()) if p.is_file()])
        result["files"] = [str(path) for path in kept]
        result["report"] = (
            str(run_dir / report.name)
            if report.is_file() or (run_dir / report.name).is_file()
            else None
        )
        result["qdstrm"] = str(run_dir / qdstrm.name) if qdstrm is not None else None
        write_json_atomic(run_dir / "nsys.json", result)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(no_trace, ignore_errors=True)
    return result


def _stats(nsys: str, report: Path, scratch: Path, run_dir: Path, log: Path, result: dict) -> None:
    """nsys stats on the report: its kernel and NVTX tables as CSV files in ``scratch``, their
    sizes (or why there are none) in ``result``."""
    out_prefix = scratch / "nsys_stats"
    stats = run_logged(stats_command(nsys, report, out_prefix), log)
    result["stats_command"] = stats_command(nsys, run_dir / report.name, run_dir / "nsys_stats")
    kern = next(iter(sorted(scratch.glob("nsys_stats*cuda_gpu_kern_sum*.csv"))), None)
    nvtx = next(iter(sorted(scratch.glob("nsys_stats*nvtx_sum*.csv"))), None)
    if kern is None:
        result["stats_error"] = stats_failure(stats.output, stats.returncode)
    else:
        table = kernel_table_from_kern_sum(kern.read_text())
        write_text_atomic(scratch / "nsys_kernels.csv", table.to_csv(index=False))
        result["kernels"] = int(len(table))
        result["kernel_time_us"] = float(table["total_us"].sum())
        if nvtx is not None:
            ranges = nvtx_table_from_nvtx_sum(nvtx.read_text())
            write_text_atomic(scratch / "nsys_nvtx.csv", ranges.to_csv(index=False))
            result["nvtx_ranges"] = int(len(ranges))


def stats_only(report: Path, echo: Say = print) -> pd.DataFrame | None:
    """``nsys stats`` on an existing report (used by the device script after an import)."""
    nsys = locate_nsys()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "stats"
        done = run_logged(stats_command(nsys, report, prefix), Path(tmp) / "log")
        kern = next(iter(sorted(Path(tmp).glob("stats*cuda_gpu_kern_sum*.csv"))), None)
        if kern is None:
            echo(f"nsys stats: {stats_failure(done.output, done.returncode)}")
            return None
        return kernel_table_from_kern_sum(kern.read_text())
