"""A sweep's benchmark table (profiler.analysis.benchmark) written as benchmark.csv and
benchmark.md, printed with rich, and as --json."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape

from profiler.fsutil import write_text_atomic
from profiler.runs.manifest import SweepManifest
from profiler.analysis.benchmark import (GENERATION_COLUMNS, NOT_FINITE, PHASE_COLUMNS,
                                         axis_columns)
from profiler.report.console import FitTable
from profiler.report.export import markdown_table, integer_counts
from profiler.report.fmt import fixed, mib, pct, times
from profiler.trace.summary import json_safe

MD_FORMATS = {"mean_ms": ".3f", "p50_ms": ".3f", "p90_ms": ".3f", "p99_ms": ".3f",
              "gpu_compute_ms": ".3f", "enqueue_ms": ".3f",
              "throughput_per_s": ".1f", "speedup": ".2f", "speedup_low": ".2f",
              "speedup_high": ".2f", "processes": ".0f", "ready_s": ".2f", "compile_s": ".2f",
              "rel_l2_error": ".2e", "tensor_core_pct": ".1f", "gpu_util_pct": ".1f",
              "elapsed_s": ".1f", "cv_pct": ".1f", "peak_allocated_mib": ".1f",
              "peak_reserved_mib": ".1f", "engine_mib": ".1f", "tflops": ".2f",
              "pct_peak_compute": ".1f", "gbs": ".1f", "pct_peak_bandwidth": ".1f",
              "flop_per_byte": ".0f", "ttft_ms": ".3f",
              "token_p50_ms": ".3f", "token_p99_ms": ".3f", "tokens_per_s": ".1f",
              "token_agreement": ".3f"}



def write_benchmark(sweep_dir: Path, frame: pd.DataFrame, manifest: SweepManifest) -> list[Path]:
    csv_path, md_path = sweep_dir / "benchmark.csv", sweep_dir / "benchmark.md"
    write_text_atomic(csv_path, integer_counts(frame).to_csv(index=False, float_format="%.6g"))
    write_text_atomic(md_path, markdown(frame, manifest))
    return [csv_path, md_path]


def markdown(frame: pd.DataFrame, manifest: SweepManifest) -> str:
    devices = sorted({d for d in frame["device"].dropna() if d})
    options = {key: "default" if value is None else value
               for key, value in manifest.options.items()}
    lines = [f"# Sweep `{manifest.name}`: {manifest.model} on "
             f"{', '.join(devices) or 'no finished cell'}\n",
             f"- backends: {', '.join(manifest.backends)}; batch sizes: "
             f"{', '.join(map(str, manifest.batch_sizes))}"
             + "".join(f"; {key}: {', '.join(map(str, manifest.options[key]))}"
                       for key in axis_columns(manifest)),
             f"- speedup = p50 of `{manifest.baseline}` / p50 of the cell, at the same batch "
             "size" + (" and the same " + ", ".join(axis_columns(manifest))
                       if axis_columns(manifest) else "")
             + "; with several processes per cell, each p50 is the mean of the per-process "
             "medians; speedup_low..speedup_high is its 95 % interval and verdict says whether "
             "the cell is faster, slower, the same (±2 %) or undecided against the machine's "
             "noise (Welch's interval over the per-process medians; with several GPUs, over the "
             "windows on the GPUs both cells share)",
             f"- timed window: {options.get('iters', 'default')} iterations after "
             f"{options.get('timed_warmup', 'default')} warm-up (defaults: 100 after 20 on a "
             "GPU, a 5 s budget after 2 on a CPU), synchronized every iteration; TF32 "
             f"{'on' if options.get('tf32') else 'off'}",
             "- ready_s = prepare + first call; compile_s: see compile_what; rel_l2_error vs the "
             "FP32 eager reference; tensor_core_pct and gpu_util_pct from the profiled steps' "
             "trace", ""]
    dropped = ["model", "device", "baseline", "reason", *PHASE_COLUMNS]
    if frame["node"].nunique() < 2:  # one host: its name says nothing per cell
        dropped.append("node")
    if not frame["gpu"].astype(bool).any():  # a CPU sweep
        dropped.append("gpu")
    if not frame["tokens_per_s"].notna().any():  # not a generation sweep
        dropped += list(GENERATION_COLUMNS)
    shown = frame.drop(columns=dropped).astype(object)
    for column, spec in MD_FORMATS.items():
        if column in shown:
            shown[column] = [fixed(v, spec, blank="") for v in frame[column]]
    lines.append(markdown_table(shown))
    broken = frame[(frame["status"] == "ok") & (frame["reason"] == NOT_FINITE)]
    if len(broken):
        lines.append("\n## Cells whose output holds NaN or Inf (their latency is not one to "
                     "quote)\n")
        lines.extend(f"- `{r.backend}` bs {r.bs}" for r in broken.itertuples())
    failed = frame[frame["status"] != "ok"]
    if len(failed):
        lines.append("\n## Cells that did not finish\n")
        for r in failed.itertuples():
            values = "".join(f" {key} {getattr(r, key)}" for key in axis_columns(manifest))
            where = f" (gpu {r.gpu})" if r.gpu else ""
            lines.append(f"- `{r.backend}` bs {r.bs}{values}{where}: {r.status}: {r.reason}")
    return "\n".join(lines) + "\n"


#: the sweep table's columns left out, the last first, where the width cannot show them all
OPTIONAL = ("gpu", "processes", "mean ms", "p90 ms", "ready s", "compile s", "rel L2 err", "Tensor Cores",
            "GPU util", "peak alloc MiB", "peak reserved MiB", "TTFT ms", "token p99")


def print_benchmark(frame: pd.DataFrame, manifest: SweepManifest, console: Console) -> None:
    bad = bool(((frame["status"] != "ok") | (frame["reason"] == NOT_FINITE)).any())
    devices = sorted({d for d in frame["device"].dropna() if d})
    t = FitTable(title=f"{manifest.model} on {', '.join(devices) or '-'}: speedup = "
                       f"{manifest.baseline} p50 / p50")
    axes = axis_columns(manifest)
    headers = ("backend", "bs", *axes, "mean ms", "p50 ms", "p90 ms", "p99 ms", "samples/s",
               "speedup", "verdict [95 % interval]", "processes",
               "ready s", "compile s", "rel L2 err", "Tensor Cores", "GPU util", "CV",
               "peak alloc MiB", "peak reserved MiB", "status")
    generation = bool(frame["tokens_per_s"].notna().any())
    if generation:
        headers = headers[:-1] + ("TTFT ms", "token p50", "token p99", "tokens/s", "status")
    on_gpus = bool(frame["gpu"].astype(bool).any())
    if on_gpus:
        headers = ("gpu", *headers)
    for h in headers:
        if h == "backend":  # whole, like a number: the names are short and the row's key
            t.add_column(h, number=True, justify="left")
        elif h == "status":
            t.add_column(h, optional=not bad)
        elif h.startswith("verdict"):  # words and an interval: wraps where the width is short
            t.add_column(h)
        else:
            t.add_column(h, number=True, optional=h in OPTIONAL)
    for r in frame.itertuples():
        status = r.status if r.status == "ok" else f"[red]{escape(str(r.status))}[/]"
        if r.status == "ok" and r.reason == NOT_FINITE:
            status = "[yellow]ok, NaN/Inf output[/]"
        t.add_row(*((r.gpu,) if on_gpus else ()), r.backend, str(r.bs),
                  *(fixed(getattr(r, key), ".0f") for key in axes),
                  fixed(r.mean_ms, ".3f"), fixed(r.p50_ms, ".3f"),
                  fixed(r.p90_ms, ".3f"), fixed(r.p99_ms, ".3f"),
                  fixed(r.throughput_per_s, ",.1f"), times(r.speedup), verdict_cell(r),
                  fixed(r.processes, ".0f"),
                  fixed(r.ready_s, ".2f"),
                  fixed(r.compile_s, ".2f"), fixed(r.rel_l2_error, ".2g"),
                  pct(r.tensor_core_pct), pct(r.gpu_util_pct),
                  pct(r.cv_pct) + (f" [yellow]{escape(r.noise)}[/]" if isinstance(r.noise, str)
                                   and r.noise else ""),
                  _mib(r.peak_allocated_mib, r.device), _mib(r.peak_reserved_mib, r.device),
                  *((fixed(r.ttft_ms, ".3f"), fixed(r.token_p50_ms, ".3f"),
                     fixed(r.token_p99_ms, ".3f"), fixed(r.tokens_per_s, ",.1f"))
                    if generation else ()),
                  status)
    console.print(t)


VERDICT_COLOURS = {"faster": "green", "slower": "red", "same": "cyan", "undecided": "yellow"}


def verdict_cell(r) -> str:
    """The cell's verdict against the baseline and the speedup's interval, with the processes
    behind it: "faster [1.42-1.60] 3p"."""
    verdict = r.verdict if isinstance(r.verdict, str) else ""
    if verdict in ("", "baseline"):
        return verdict or "-"
    colour = VERDICT_COLOURS.get(verdict, "white")
    return f"[{colour}]{verdict}[/] [{r.speedup_low:.2f}-{r.speedup_high:.2f}]"


def _mib(value, device) -> str:
    return mib(value, "n/a (CPU)" if device == "CPU" else None).removesuffix(" MiB")


def benchmark_json(frame: pd.DataFrame, manifest: SweepManifest, sweep_dir: Path) -> dict:
    """The sweep's table as JSON: one record per cell (the benchmark.csv columns)."""
    return json_safe({"sweep": manifest.name, "folder": str(sweep_dir),
                   "model": manifest.model, "baseline": manifest.baseline,
                   "cells": integer_counts(frame).astype(object)
                   .where(frame.notna(), None).to_dict(orient="records")})
