"""A sweep's benchmark table: one row per cell, built from the manifest and each cell's
result.json, written as benchmark.csv and benchmark.md and printed with rich.

Columns (times in ms, as the timed window measured them; the trace figures come from the
profiled steps, summarized with profiler.trace):

model, device, backend, bs, mean_ms, p50_ms, p90_ms, p99_ms, throughput_per_s,
speedup (baseline p50 / this cell's p50 at the same batch size; empty when the baseline cell
did not finish), baseline, ready_s (prepare + first call: from handing the model to the backend
to the first output, every backend), compile_s and compile_what (TensorRT: engine build time,
with ModelOpt's extension build for ttrt_fp8/ttrt_int8, or the engine cache load time; ONNX
Runtime: export + session creation, or the session alone from a cached ONNX file; Inductor: the
first call, where torch.compile compiles; empty for eager and TorchScript), rel_l2_error (vs the FP32 eager reference; empty for pytorch_fp32,
the reference itself), tensor_core_pct (share of kernel time on Tensor Cores), gpu_util_pct,
cv_pct (the timed window's coefficient of variation), noise (its warnings, ";"-joined),
peak_allocated_mib and peak_reserved_mib (PyTorch allocator, timed window; empty on a CPU),
engine_mib (TensorRT engines' device memory),
tflops, pct_peak_compute, gbs, pct_peak_bandwidth, flop_per_byte (the roofline of the timed
p50: FLOPs and minimum bytes from result.json's roofline_inputs, against the measured ceilings of
`profile.py peaks`, else the datasheet's; empty for runs without roofline_inputs),
status, reason, gpu (the GPU that ran the cell, as CUDA_VISIBLE_DEVICES names it; empty on a
CPU), node (the host), elapsed_s (the cell in its worker, wall time), then where the cell's seconds
went: wall_s (the run's own wall time: imports + harness, result.json's timing.wall_s) and one
column per phase, <phase>_s in run order (profiler.runs.phases: imports_s, build_s, flops_s,
prepare_s, first_call_s, warm_up_s, timed_s, profile_s, trace_write_s, after_windows_s,
numerics_s, repeat_runs_s, write_s; empty where the phase did not run). A column per phase
rather than one text column: the seconds sort, sum and plot as numbers; benchmark.md and the
terminal table leave them out to stay readable.

A sweep given a list of an option's values (``--max-new-tokens 16,64``) has a column of that
option after bs (named as the manifest's options: max_new_tokens, src_len, prompt_len, seq_len,
image_size), and speedup compares cells with the same batch size and the same values.

With ``--workload generate`` a cell's timed unit is one whole generation (mean_ms ... p99_ms,
throughput_per_s in sequences/s), and four more columns are filled: ttft_ms (time to first
token, p50), token_p50_ms and token_p99_ms (decode latency per token after the first) and
tokens_per_s (generated tokens per second, batch included); token_agreement is the share of
generated tokens equal to FP32 eager generation's. The seed's benchmark_times.csv (mean, p50,
p90, p99 per backend) is the first columns.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.runs import backends as backend_facts
from profiler.runs.phases import ORDER as PHASE_ORDER
from profiler.runs.layout import MANIFEST, RESULT_FILE
from profiler.runs.result import RunResult, try_read_result
from profiler.runs.manifest import SweepManifest, read_manifest
from profiler.report.export import _markdown, integer_counts
from profiler.report.fmt import fixed, mib, pct, times

#: the reason of a finished cell whose output holds NaN or Inf: its latency is not one to quote
NOT_FINITE = "output holds NaN or Inf"
PHASE_COLUMNS = ["wall_s", *(f"{phase}_s" for phase in PHASE_ORDER)]
ROOFLINE_COLUMNS = ["tflops", "pct_peak_compute", "gbs", "pct_peak_bandwidth", "flop_per_byte"]
COLUMNS = ["model", "device", "backend", "bs", "mean_ms", "p50_ms", "p90_ms", "p99_ms",
           "throughput_per_s", "speedup", "baseline", "ready_s", "compile_s", "compile_what",
           "rel_l2_error", "tensor_core_pct", "gpu_util_pct", "cv_pct", "noise",
           "peak_allocated_mib", "peak_reserved_mib", "engine_mib", *ROOFLINE_COLUMNS, "ttft_ms",
           "token_p50_ms", "token_p99_ms", "tokens_per_s", "token_agreement", "status", "reason",
           "gpu", "node", "elapsed_s", *PHASE_COLUMNS]
GENERATION_COLUMNS = ("ttft_ms", "token_p50_ms", "token_p99_ms", "tokens_per_s",
                      "token_agreement")


MD_FORMATS = {"mean_ms": ".3f", "p50_ms": ".3f", "p90_ms": ".3f", "p99_ms": ".3f",
              "throughput_per_s": ".1f", "speedup": ".2f", "ready_s": ".2f", "compile_s": ".2f",
              "rel_l2_error": ".2e", "tensor_core_pct": ".1f", "gpu_util_pct": ".1f",
              "elapsed_s": ".1f", "cv_pct": ".1f", "peak_allocated_mib": ".1f",
              "peak_reserved_mib": ".1f", "engine_mib": ".1f", "tflops": ".2f",
              "pct_peak_compute": ".1f", "gbs": ".1f", "pct_peak_bandwidth": ".1f",
              "flop_per_byte": ".0f", "ttft_ms": ".3f",
              "token_p50_ms": ".3f", "token_p99_ms": ".3f", "tokens_per_s": ".1f",
              "token_agreement": ".3f"}



def roofline_columns(result: RunResult) -> dict:
    """The roofline figures of one cell's result (empty without roofline_inputs)."""
    from profiler.collect.engine_cache import peaks_dir
    from profiler.runs.result import result_to_dict
    from profiler.analysis.roofline import roofline_of

    if result.roofline_inputs is None:
        return {}
    r = roofline_of(result_to_dict(result), peaks_dir())
    if r is None:
        return {}
    return {"tflops": r.achieved_tflops, "pct_peak_compute": r.pct_of_compute,
            "gbs": r.achieved_gbs, "pct_peak_bandwidth": r.pct_of_bandwidth,
            "flop_per_byte": r.intensity}


def compile_time(result: RunResult) -> tuple[float | None, str]:
    """The seconds the backend spent compiling (or loading its engines) and what they were
    (profiler.runs.backends: the family's facts)."""
    family = backend_facts.family(result.backend.family)
    if result.backend.compile_s is not None:
        return float(result.backend.compile_s), family.compiled(result.backend.extra)
    if result.backend.cache_load_s is not None:
        return float(result.backend.cache_load_s), "engine cache load"
    if family.compiles_on_first_call:
        return float(result.timing.first_call_s), "first call (torch.compile)"
    return None, ""


def generation_columns(result: RunResult) -> dict:
    """TTFT, per-token p50/p99, tokens/s and token agreement of a --workload generate run."""
    generation = result.generation
    if generation is None:
        return {}
    tokens = result.numerics.tokens if result.numerics else None
    return {"ttft_ms": generation.ttft_ms.p50,
            "token_p50_ms": generation.per_token_ms.p50,
            "token_p99_ms": generation.per_token_ms.p99,
            "tokens_per_s": generation.tokens_per_s,
            "token_agreement": tokens.positions_equal if tokens else None}


def axis_columns(manifest: SweepManifest) -> list[str]:
    """The options the sweep was given a list of: a column each, after bs."""
    from profiler.sweep.plan import axis_options

    return [key for key in axis_options() if isinstance(manifest.options.get(key), list)]


def benchmark_table(sweep_dir: Path, manifest: SweepManifest) -> pd.DataFrame:
    from profiler.sweep.plan import OK, grid_cells

    rows = []
    axes = axis_columns(manifest)
    for name, cell in grid_cells(manifest):
        row = {"model": manifest.model, "device": "", "backend": cell.backend,
               "bs": cell.batch_size, **(cell.axis or {}), "status": cell.status,
               "reason": cell.reason or "", "gpu": cell.gpu or "", "node": cell.node or "",
               "elapsed_s": cell.elapsed_s, "baseline": manifest.baseline}
        result = try_read_result(sweep_dir / name / RESULT_FILE) if cell.status == OK else None
        if cell.status == OK and result is None:
            row.update(status="failed", reason="result.json missing or unreadable")
        if result is not None:
            row.update(_result_columns(result, cell.metrics or {}))
            if result.output.finite is False:  # it ran, but what it timed is broken
                row["reason"] = NOT_FINITE
        rows.append(row)
    frame = pd.DataFrame(rows).reindex(columns=[*COLUMNS[:4], *axes, *COLUMNS[4:]])
    frame = frame.astype({c: float for c in ("mean_ms", "p50_ms", "p90_ms", "p99_ms",
                                              "throughput_per_s", "speedup", "ready_s",
                                              "compile_s", "rel_l2_error", "tensor_core_pct",
                                              "gpu_util_pct", "elapsed_s", "cv_pct",
                                              "peak_allocated_mib", "peak_reserved_mib",
                                              "engine_mib", *ROOFLINE_COLUMNS,
                                              *GENERATION_COLUMNS, *PHASE_COLUMNS)})
    same = ["bs", *axes]  # speedup: the baseline's cell with the same batch size and values
    base = frame.loc[frame["backend"] == manifest.baseline, [*same, "p50_ms"]]
    base_p50 = frame[same].merge(base, on=same, how="left")["p50_ms"].to_numpy()
    frame["speedup"] = [b / p50 if p50 and p50 > 0 else math.nan
                        for b, p50 in zip(base_p50, frame["p50_ms"])]
    return frame


def _result_columns(result: RunResult, metrics: dict) -> dict:
    timing = result.timing
    compile_s, compile_what = compile_time(result)
    return {
        "device": (result.environment.gpu or {}).get("name") or "CPU",
        "mean_ms": timing.mean_ms, "p50_ms": timing.p50_ms,
        "p90_ms": timing.p90_ms, "p99_ms": timing.p99_ms,
        "throughput_per_s": timing.throughput_samples_per_s,
        "ready_s": timing.prepare_s + timing.first_call_s,
        "compile_s": compile_s, "compile_what": compile_what,
        "rel_l2_error": result.numerics.rel_l2_error if result.numerics else None,
        "tensor_core_pct": metrics.get("tensor_core_pct"),
        "gpu_util_pct": metrics.get("gpu_util_pct"),
        **_noise_and_memory(result),
        **roofline_columns(result),
        **generation_columns(result),
        **phase_columns(result),
    }


def phase_columns(result: RunResult) -> dict:
    """wall_s and <phase>_s of one cell's result (empty for runs recorded before phases)."""
    timing = result.timing
    if not timing.phases_s:
        return {}
    return {"wall_s": timing.wall_s,
            **{f"{phase}_s": seconds for phase, seconds in timing.phases_s.items()}}


def _noise_and_memory(result: RunResult) -> dict:
    from profiler.analysis.headline import memory_figures, window_noise

    window = window_noise(result) or {}
    memory = memory_figures(result)
    return {"cv_pct": None if "cv" not in window else 100 * window["cv"],
            "noise": "; ".join(w.split(":")[0] for w in window.get("warnings") or []),
            "peak_allocated_mib": memory["peak_allocated_mib"],
            "peak_reserved_mib": memory["peak_reserved_mib"], "engine_mib": memory["engine_mib"]}


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
                       if axis_columns(manifest) else ""),
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
    lines.append(_markdown(shown))
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


def print_benchmark(frame: pd.DataFrame, manifest: SweepManifest, console: Console) -> None:
    devices = sorted({d for d in frame["device"].dropna() if d})
    t = Table(title=f"{manifest.model} on {', '.join(devices) or '-'}: speedup = "
                    f"{manifest.baseline} p50 / p50", title_justify="left")
    axes = axis_columns(manifest)
    headers = ("backend", "bs", *axes, "mean ms", "p50 ms", "p90 ms", "p99 ms", "samples/s",
               "speedup",
               "ready s", "compile s", "rel L2 err", "Tensor Cores", "GPU util", "CV",
               "peak alloc MiB", "peak reserved MiB", "status")
    generation = bool(frame["tokens_per_s"].notna().any())
    if generation:
        headers = headers[:-1] + ("TTFT ms", "token p50", "token p99", "tokens/s", "status")
    on_gpus = bool(frame["gpu"].astype(bool).any())
    if on_gpus:
        headers = ("gpu", *headers)
    for h in headers:
        t.add_column(h, justify="left" if h in ("backend", "status") else "right")
    for r in frame.itertuples():
        status = r.status if r.status == "ok" else f"[red]{escape(str(r.status))}[/]"
        if r.status == "ok" and r.reason == NOT_FINITE:
            status = "[yellow]ok, NaN/Inf output[/]"
        t.add_row(*((r.gpu,) if on_gpus else ()), r.backend, str(r.bs),
                  *(fixed(getattr(r, key), ".0f") for key in axes),
                  fixed(r.mean_ms, ".3f"), fixed(r.p50_ms, ".3f"),
                  fixed(r.p90_ms, ".3f"), fixed(r.p99_ms, ".3f"),
                  fixed(r.throughput_per_s, ",.1f"), times(r.speedup), fixed(r.ready_s, ".2f"),
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


def _mib(value, device) -> str:
    return mib(value, "n/a (CPU)" if device == "CPU" else None).removesuffix(" MiB")


def load_sweep(target: Path) -> tuple[Path, SweepManifest]:
    """A sweep folder (or its sweep.json) -> (folder, manifest)."""
    folder = target.parent if target.name == MANIFEST else target
    manifest = read_manifest(folder) if folder.is_dir() else None
    if manifest is None:
        raise UserError(f"{target} is not a sweep folder (no {MANIFEST})")
    return folder, manifest


def benchmark_json(frame: pd.DataFrame, manifest: SweepManifest, sweep_dir: Path) -> dict:
    """The sweep's table as JSON: one record per cell (the benchmark.csv columns)."""
    from profiler.trace.summary import _clean

    return _clean({"sweep": manifest.name, "folder": str(sweep_dir),
                   "model": manifest.model, "baseline": manifest.baseline,
                   "cells": integer_counts(frame).astype(object)
                   .where(frame.notna(), None).to_dict(orient="records")})
