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
import signal
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from profiler import signals
from profiler.analysis.run_analysis import RunAnalysis
from profiler.errors import UserError
from profiler.fsutil import move_into, write_json_atomic, write_text_atomic
from profiler.notices import Say
from profiler.runs.config import RunConfig
from profiler.runs.layout import RESULT_FILE
from profiler.tools.external import harness_command, last_line_with, locate, run_logged
from profiler.trace.hardware import (
    agreement_share,
    function_name,
    hardware_join,
    read_ncu_csv,
    wanted_metrics,
)

NVTX_DOMAIN = "infer-profiler"  # the harness's NVTX domain (harness.NVTX_DOMAIN; no torch here)
KNOWN_LOCATIONS = (
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/bin/ncu",
    "/usr/local/cuda-*/bin/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BASE_METRIC = re.compile(r"^\s*([a-z0-9]+__[A-Za-z0-9_]+)\b")
_MISSING = re.compile(r"[Ff]ailed to find metric[s]?\s*:?\s*\"?([A-Za-z0-9_.]+)")


def locate_ncu() -> str:
    return locate("ncu", "NCU", KNOWN_LOCATIONS)


def nvtx_filter(step: int) -> str:
    """Push/pop range ``step N`` of the harness's domain (nested inside ``profile``)."""
    return f"{NVTX_DOMAIN}@step {step}/"


def kernel_regex(names: list[str]) -> str | None:
    """``regex:f1|f2`` over the kernels' function names, or None (no name filter) when one of
    them is not a plain identifier."""
    functions = sorted({function_name(n) for n in names})
    if not functions or not all(_IDENTIFIER.match(f) for f in functions):
        return None
    return "regex:" + "|".join(functions)


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names from ``ncu --query-metrics`` output (one per line, then a
    description)."""
    return {m.group(1) for line in text.splitlines() if (m := _BASE_METRIC.match(line))}


def choose_metrics(available: set[str] | None) -> tuple[list[str], list[str]]:
    """(metrics to ask for, metrics skipped because the chip lacks them). ``available`` None
    means the query failed: ask for all, and drop what ncu says it cannot find."""
    wanted = list(dict.fromkeys(wanted_metrics()))
    if available is None:
        return wanted, []
    chosen = [m for m in wanted if m.split(".")[0] in available]
    return chosen, [m for m in wanted if m not in chosen]


def profile_command(
    ncu: str,
    metrics: list[str],
    report_base: Path,
    step: int,
    name_regex: str | None,
    launch_count: int,
    run_args: list[str],
) -> list[str]:
    command = [
        ncu,
        "--target-processes",
        "all",
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--nvtx",
        "--nvtx-include",
        nvtx_filter(step),
    ]
    if name_regex:
        command += ["--kernel-name", name_regex]
    command += [
        "--launch-count",
        str(launch_count),
        "--metrics",
        ",".join(metrics),
        "--export",
        str(report_base),
        "--force-overwrite",
        *run_args,
    ]
    return command


def import_command(ncu: str, report: Path) -> list[str]:
    return [
        ncu,
        "--import",
        str(report),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--print-kernel-base",
        "demangled",
    ]


def query_command(ncu: str, chip: str | None) -> list[str]:
    return [ncu, "--query-metrics"] + (["--chip", chip] if chip else [])


def missing_metrics(output: str) -> list[str]:
    return _MISSING.findall(output)


def ncu_env() -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


@dataclass
class Measured:
    """What the run under ncu gave: the command, the report, the metrics it took."""

    command: list[str]
    report: Path
    metrics: list[str]
    skipped: list[str]


def run(
    options: dict,
    top: int = 0,
    step: int | None = None,
    launch_count: int = 500,
    reuse: bool = False,
    chip: str | None = None,
    echo: Say = print,
) -> dict:
    """``options``: RunConfig field -> value, as for `run`; both runs get them all, with cuDNN's
    autotuner off (under ncu it picks other kernels than the run whose trace is joined)."""
    ncu = locate_ncu()
    config = RunConfig(**{**options, "cudnn_benchmark": False})  # validates options and names
    if top < 0:
        raise UserError(f"--top must be 0 (all kernels of the step) or more (got {top})")
    step = config.wait + config.warmup if step is None else step
    run_dir = config.runs_dir / config.run_name
    table = kernel_table(config, reuse, echo)
    chosen = table if not top else table.head(top)
    name_regex = kernel_regex(list(chosen["name"])) if top else None
    scratch = Path(tempfile.mkdtemp(prefix=f".{config.run_name}.ncu-partial-", dir=config.runs_dir))
    finished = False
    try:
        metrics, skipped = query_metrics(ncu, chip, scratch)
        measured = profile_step(
            ncu,
            config,
            scratch,
            step,
            name_regex,
            launch_count,
            (metrics, skipped),
            len(chosen),
            run_dir,
            echo,
        )
        raw = export_csv(ncu, measured.report, scratch)
        joined = hardware_join(table, raw)
        result = describe(
            config, ncu, step, name_regex, launch_count, top, chosen, raw, joined, measured
        )
        write_json_atomic(scratch / "ncu.json", result)
        finished = True
    finally:  # the log (and the metrics query) also when ncu failed: it says why
        keep_outputs(scratch, run_dir, finished)
    result["joined"] = joined
    result["agreement"] = agreement_share(joined)
    return result


def kernel_table(config: RunConfig, reuse: bool, echo: Say = print):
    """1. The kernel table, from an ordinary run (or, with --reuse, the one already there)."""
    run_dir = config.runs_dir / config.run_name
    if not (reuse and (run_dir / RESULT_FILE).is_file()):
        echo(f"ncu 1/3: ordinary run for the kernel table ({config.run_name})")
        # its output straight to the user; a stop ends it (SIGTERM: still importing, it just
        # ends, where SIGINT would print a traceback), and the one line is ours
        first = signals.run_child(
            harness_command(config),
            capture=False,
            stop=signal.SIGTERM,
            env={**ncu_env(), signals.QUIET_STOP_ENV: "1"},
        )
        if first.returncode != 0:
            raise UserError(f"the run without ncu failed (status {first.returncode}); see above")
    return RunAnalysis(str(run_dir)).kernels


def query_metrics(ncu: str, chip: str | None, scratch: Path) -> tuple[list[str], list[str]]:
    """The metrics this chip has, of those wanted (``ncu --query-metrics``, kept beside)."""
    query = signals.run_child(query_command(ncu, chip), stop=signal.SIGTERM)
    available = parse_query_metrics(query.stdout) if query.returncode == 0 else None
    write_text_atomic(scratch / "query-metrics.txt", query.stdout + query.stderr)
    return choose_metrics(available or None)


def profile_step(
    ncu: str,
    config: RunConfig,
    scratch: Path,
    step: int,
    name_regex: str | None,
    launch_count: int,
    metrics_skipped: tuple[list[str], list[str]],
    kernels: int,
    run_dir: Path,
    echo: Say = print,
) -> Measured:
    """2. The harness under ncu, into the scratch folder; a metric ncu says it cannot find is
    dropped and the run tried again (at most four tries)."""
    metrics, skipped = metrics_skipped
    under_ncu = replace(
        config,
        capture="cuda-profiler-api",
        iters=10,
        timed_warmup=3,
        min_time=None,
        repeat_runs=1,
        runs_dir=scratch / "runs",
        tb_dir=scratch / "tb_logs",
    )
    report_base = scratch / "ncu"
    for attempt in range(4):
        command = profile_command(
            ncu, metrics, report_base, step, name_regex, launch_count, harness_command(under_ncu)
        )
        echo(
            f"ncu 2/3: {len(metrics)} metrics, NVTX {nvtx_filter(step)!r}, "
            f"{kernels} kernels, at most {launch_count} launches"
        )
        done = run_logged(command, scratch / "ncu.log", env=ncu_env(), echo=echo)
        missing = [m for m in missing_metrics(done.output) if m in metrics]
        if done.returncode == 0 or not missing or attempt == 3:
            break
        skipped += missing
        metrics = [m for m in metrics if m not in missing]
    report = report_base.with_suffix(".ncu-rep")
    if done.returncode != 0 or not report.is_file():
        why = last_line_with(done.output, ("==error==", "error")) or done.status
        raise UserError(f"ncu did not write a report: {why} (log: {run_dir / 'ncu.log'})")
    return Measured(command, report, metrics, skipped)


def export_csv(ncu: str, report: Path, scratch: Path):
    """3. The report as ncu.csv (raw page, demangled names) and read back."""
    csv_result = signals.run_child(import_command(ncu, report), stop=signal.SIGTERM)
    if csv_result.returncode != 0:
        raise UserError(f"ncu --import failed: {csv_result.stderr.strip()[-300:]}")
    write_text_atomic(scratch / "ncu.csv", csv_result.stdout)
    return read_ncu_csv(scratch / "ncu.csv")


def describe(
    config: RunConfig,
    ncu: str,
    step: int,
    name_regex: str | None,
    launch_count: int,
    top: int,
    chosen,
    raw,
    joined,
    measured: Measured,
) -> dict:
    """ncu.json: what was asked for, what was measured, and where the name rules agree."""
    profiled = set(joined.loc[joined["rules_vs_hardware"] != "not profiled", "name"])
    return {
        "run": config.run_name,
        "ncu": ncu,
        "step": step,
        "nvtx_include": nvtx_filter(step),
        "kernel_regex": name_regex,
        "launch_count": launch_count,
        "top": top,
        "top_kernels": list(chosen["name"]),
        "top_kernels_not_profiled": [n for n in chosen["name"] if n not in profiled],
        "ncu_kernels_not_in_table": sorted(
            set(raw["Kernel Name"].astype(str)) - set(joined["hw_kernel_name"].dropna())
        ),
        "launches_profiled": int(len(raw)),
        "metrics_collected": [m for m in measured.metrics if m in raw.columns],
        "metrics_skipped": measured.skipped,
        "profile_command": measured.command,
        "import_command": import_command(ncu, measured.report),
        "env": {"TORCHINDUCTOR_COMPILE_THREADS": "1"},
        **agreement_share(joined).to_dict(),
    }


def keep_outputs(scratch: Path, run_dir: Path, finished: bool = True) -> None:
    """Move ncu's files from the scratch folder into the run folder; drop the rest. A failed or
    killed ncu leaves its log and the metrics query only: a report it did not finish is not
    kept (nor a CSV of it), and the run folder's earlier ncu results stay as they were."""
    names = (
        ("ncu.csv", "ncu.ncu-rep", "ncu.log", "ncu.json", "query-metrics.txt")
        if finished
        else ("ncu.log", "query-metrics.txt")
    )
    move_into(run_dir, [scratch / n for n in names if (scratch / n).exists()])
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python profile.py ncu --help")
