"""``profile.py ncu``: Nsight Compute on the top-K kernels of one profiled step.

1. An ordinary run (torch.profiler trace) gives the kernel table and its top-K kernels
   (``--reuse`` takes the run folder's existing trace instead).
2. The harness runs again under ncu with ``--capture cuda-profiler-api`` (no torch.profiler:
   ncu owns CUPTI), and ncu profiles only kernels that are
   - inside the NVTX push/pop range ``step N`` of the harness's domain
     (``--nvtx --nvtx-include "infer-profiler@step N/"``; the trailing ``/`` marks a push/pop
     range, ``domain@`` the domain) and between cudaProfilerStart/Stop
     (``--profile-from-start off``),
   - whose function name is one of the top-K kernels' (``-k regex:a|b|c`` on ncu's default
     function-name base: bare identifiers, so nothing needs escaping; a superset is fine, the
     join picks by full name),
   - at most ``--launch-count`` launches.
   Clocks stay as they are (``--clock-control none``); ``TORCHINDUCTOR_COMPILE_THREADS=1`` keeps
   torch.compile in one process (ncu crashed on compile workers on the H200).
3. ``ncu --import ... --csv --page raw --print-units base --print-kernel-base demangled`` writes
   ncu.csv; demangled names are the form Kineto's trace carries, so they join by full name.

Outputs land in runs/<run>/: ncu.csv, ncu.ncu-rep, ncu.log and ncu.json (commands, metrics
collected and skipped, agreement).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from ..errors import UserError
from ..fsutil import write_json_atomic, write_text_atomic
from .external import harness_command, last_line_with, locate, run_logged

NVTX_DOMAIN = "infer-profiler"  # the harness's NVTX domain (harness.NVTX_DOMAIN; no torch here)
KNOWN_LOCATIONS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu",
                   "/usr/local/cuda-*/bin/ncu", "/usr/local/NVIDIA-Nsight-Compute*/ncu")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BASE_METRIC = re.compile(r"^\s*([a-z0-9]+__[A-Za-z0-9_]+)\b")
_MISSING = re.compile(r"[Ff]ailed to find metric[s]?\s*:?\s*\"?([A-Za-z0-9_.]+)")


def locate_ncu() -> str:
    return locate("ncu", "NCU", KNOWN_LOCATIONS)


def nvtx_filter(step: int) -> str:
    """Push/pop range ``step N`` of the harness's domain (nested inside ``profile``)."""
    return f"{NVTX_DOMAIN}@step {step}/"


def kernel_regex(names: list[str]) -> Optional[str]:
    """``regex:f1|f2`` over the kernels' function names, or None (no name filter) when one of
    them is not a plain identifier."""
    from ..trace.hardware import function_name

    functions = sorted({function_name(n) for n in names})
    if not functions or not all(_IDENTIFIER.match(f) for f in functions):
        return None
    return "regex:" + "|".join(functions)


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names from ``ncu --query-metrics`` output (one per line, then a
    description)."""
    return {m.group(1) for line in text.splitlines() if (m := _BASE_METRIC.match(line))}


def choose_metrics(available: Optional[set[str]]) -> tuple[list[str], list[str]]:
    """(metrics to ask for, metrics skipped because the chip lacks them). ``available`` None
    means the query failed: ask for all, and drop what ncu says it cannot find."""
    from ..trace.hardware import wanted_metrics

    wanted = list(dict.fromkeys(wanted_metrics()))
    if available is None:
        return wanted, []
    chosen = [m for m in wanted if m.split(".")[0] in available]
    return chosen, [m for m in wanted if m not in chosen]


def profile_command(ncu: str, metrics: list[str], report_base: Path, step: int,
                    name_regex: Optional[str], launch_count: int,
                    run_args: list[str]) -> list[str]:
    command = [ncu, "--target-processes", "all", "--clock-control", "none",
               "--profile-from-start", "off", "--nvtx", "--nvtx-include", nvtx_filter(step)]
    if name_regex:
        command += ["--kernel-name", name_regex]
    command += ["--launch-count", str(launch_count), "--metrics", ",".join(metrics),
                "--export", str(report_base), "--force-overwrite", *run_args]
    return command


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
            "--print-kernel-base", "demangled"]


def query_command(ncu: str, chip: Optional[str]) -> list[str]:
    return [ncu, "--query-metrics"] + (["--chip", chip] if chip else [])


def missing_metrics(output: str) -> list[str]:
    return _MISSING.findall(output)


def ncu_env() -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


def run(backend: str, bs: int, model: str = "resnet50", top: int = 10, step: Optional[int] = None,
        launch_count: int = 200, name: Optional[str] = None, runs_dir: Path = Path("runs"),
        tb_dir: Path = Path("tb_logs"), reuse: bool = False, chip: Optional[str] = None,
        echo=print) -> dict:
    from ..config import RunConfig
    from ..trace.hardware import agreement_share, hardware_join, read_ncu_csv
    from ..runs import RESULT_FILE, resolve_target

    ncu = locate_ncu()
    config = RunConfig(backend=backend, batch_size=bs, model=model, name=name,
                       runs_dir=runs_dir, tb_dir=tb_dir)  # validates the names
    if top < 0:
        raise UserError(f"--top must be 0 (all kernels of the step) or more (got {top})")
    step = config.wait + config.warmup if step is None else step
    run_dir = runs_dir / config.run_name
    same = ["--name", name] if name else []
    env = ncu_env()

    # 1. the kernel table, from an ordinary run (or the one already there)
    if not (reuse and (run_dir / RESULT_FILE).is_file()):
        echo(f"ncu 1/3: ordinary run for the kernel table ({config.run_name})")
        first = subprocess.run(harness_command(backend, bs, model, [
            *same, "--runs-dir", str(runs_dir), "--tb-dir", str(tb_dir)]), env=env)
        if first.returncode != 0:
            raise UserError(f"the run without ncu failed (status {first.returncode}); see above")
    target = resolve_target(str(run_dir))
    summary = target.summary()
    table = summary.kernels.table
    chosen = table if not top else table.head(top)
    name_regex = kernel_regex(list(chosen["name"])) if top else None

    # 2. the harness under ncu, into a scratch folder
    scratch = Path(tempfile.mkdtemp(prefix=f".{config.run_name}.ncu-partial-", dir=runs_dir))
    try:
        log = scratch / "ncu.log"
        query = subprocess.run(query_command(ncu, chip), capture_output=True, text=True)
        available = parse_query_metrics(query.stdout) if query.returncode == 0 else None
        write_text_atomic(scratch / "query-metrics.txt", query.stdout + query.stderr)
        metrics, skipped = choose_metrics(available or None)
        run_args = harness_command(backend, bs, model, [
            *same, "--capture", "cuda-profiler-api", "--iters", "10", "--timed-warmup", "3",
            "--runs-dir", str(scratch / "runs"), "--tb-dir", str(scratch / "tb_logs")])
        report_base = scratch / "ncu"
        for attempt in range(4):
            command = profile_command(ncu, metrics, report_base, step, name_regex, launch_count,
                                      run_args)
            echo(f"ncu 2/3: {len(metrics)} metrics, NVTX {nvtx_filter(step)!r}, "
                 f"{len(chosen)} kernels, at most {launch_count} launches")
            done = run_logged(command, log, env=env)
            missing = [m for m in missing_metrics(done.output) if m in metrics]
            if done.returncode == 0 or not missing or attempt == 3:
                break
            skipped += missing
            metrics = [m for m in metrics if m not in missing]
        report = report_base.with_suffix(".ncu-rep")
        if done.returncode != 0 or not report.is_file():
            why = last_line_with(done.output, ("==error==", "error")) or \
                f"exit status {done.returncode}"
            raise UserError(f"ncu did not write a report: {why} (log: {run_dir / 'ncu.log'})")

        # 3. CSV, join, agreement
        csv_result = subprocess.run(import_command(ncu, report), capture_output=True, text=True)
        if csv_result.returncode != 0:
            raise UserError(f"ncu --import failed: {csv_result.stderr.strip()[-300:]}")
        write_text_atomic(scratch / "ncu.csv", csv_result.stdout)
        raw = read_ncu_csv(scratch / "ncu.csv")
        joined = hardware_join(table, raw)
        agreement = agreement_share(joined)
        profiled = set(joined.loc[joined["rules_vs_hardware"] != "not profiled", "name"])
        result = {
            "run": config.run_name, "ncu": ncu, "step": step, "nvtx_include": nvtx_filter(step),
            "kernel_regex": name_regex, "launch_count": launch_count, "top": top,
            "top_kernels": list(chosen["name"]),
            "top_kernels_not_profiled": [n for n in chosen["name"] if n not in profiled],
            "launches_profiled": int(len(raw)), "metrics_collected": [
                m for m in metrics if m in raw.columns], "metrics_skipped": skipped,
            "profile_command": command, "import_command": import_command(ncu, report),
            "env": {"TORCHINDUCTOR_COMPILE_THREADS": "1"}, **agreement.to_dict(),
        }
        write_json_atomic(scratch / "ncu.json", result)
    finally:  # whatever ncu left, also when it failed (the log says why)
        run_dir.mkdir(parents=True, exist_ok=True)
        for file_name in ("ncu.csv", "ncu.ncu-rep", "ncu.log", "ncu.json", "query-metrics.txt"):
            if (scratch / file_name).exists():
                os.replace(scratch / file_name, run_dir / file_name)
        shutil.rmtree(scratch, ignore_errors=True)
    result["joined"] = joined
    result["agreement"] = agreement
    return result


def print_result(result: dict, top: int, echo=print) -> None:
    from ..report.console import make_console
    from ..report.hardware_view import print_hardware

    print_hardware(result["joined"], result["agreement"], top, make_console())
    echo(f"metrics collected: {', '.join(result['metrics_collected']) or 'none'}")
    if result["metrics_skipped"]:
        echo(f"metrics not on this GPU/ncu: {', '.join(result['metrics_skipped'])}")
    if result["top_kernels_not_profiled"]:
        echo(f"{len(result['top_kernels_not_profiled'])} of the top kernels were not seen under "
             "ncu (another cuDNN algorithm, or past --launch-count)")
    echo(f"wrote ncu.csv, ncu.ncu-rep, ncu.json, ncu.log to runs/{result['run']}/ "
         "(`summarize` picks ncu.csv up from there)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python profile.py ncu --help")
