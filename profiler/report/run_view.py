"""Terminal and JSON views of a run result and of the backend list (plain data in, text out)."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..runs import RESULT_FILE, Numerics, RunResult, result_text
from .console import make_console
from .fmt import ms, significant


def print_json(result: RunResult) -> None:
    sys.stdout.write(result_text(result))


def print_result(result: RunResult) -> None:
    timing, backend = result.timing, result.backend
    gpu = result.environment.gpu or {}
    table = Table(title=f"{result.model} · {backend.name} · bs {result.batch_size} · "
                        f"{gpu.get('name', 'CPU')}", title_justify="left")
    columns = ["mean ms", "std", "min", "p50", "p90", "p95", "p99", "max", "samples/s", "prepare s"]
    cells = [*(ms(getattr(timing, k)) for k in ("mean_ms", "std_ms", "min_ms", "p50_ms",
                                                 "p90_ms", "p95_ms", "p99_ms", "max_ms")),
             f"{timing.throughput_samples_per_s:.1f}",
             f"{timing.prepare_s + timing.first_call_s:.2f}"]
    # compiled backends: the compile (or cache load) part of prepare, as its own figure
    for value, column in ((backend.compile_s, "compile s"), (backend.cache_load_s, "cache load s")):
        if value is not None:
            columns.append(column)
            cells.append(f"{value:.2f}")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(*cells)
    console = make_console()
    console.print(table)
    _print_numerics(console, result.numerics)
    console.print(f"{timing.iters} iterations after {timing.warmup_iters} warm-up, "
                  f"{timing.timer}, synchronized every iteration; TF32 "
                  f"{'on' if result.precision and result.precision.tf32 else 'off'}",
                  highlight=False)
    for line in describe_notes(backend.extra):
        console.print(line, highlight=False)
    for warning in backend.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False)
    if result.output.finite is False:
        console.print("[bold red]warning:[/] the output holds NaN or Inf values")
    if backend.artifacts:
        console.print(f"files:   {', '.join(backend.artifacts)}", highlight=False)
    console.print(f"trace:   {', '.join(result.trace.files)}", highlight=False)
    console.print(f"results: {result.run_dir}/{RESULT_FILE}", highlight=False)


# backend notes that stay in result.json only (too long for the terminal, or shown elsewhere)
_QUIET_NOTES = {"artifacts", "warnings", "compile_s", "load_s", "cache", "versions",
                "compile_options", "distribution", "layer_files", "layer_timing",
                "profiling_verbosity"}


def describe_notes(notes: dict) -> list[str]:
    """What the backend did, in a few short lines (everything stays in result.json)."""
    brief = [f"{key.replace('_', ' ')} {', '.join(map(str, value)) or 'none'}"
             if isinstance(value, list) else f"{key.replace('_', ' ')} {value}"
             for key, value in notes.items() if key not in _QUIET_NOTES]
    lines = [f"backend: {escape('; '.join(brief))}"] if brief else []
    if "versions" in notes:
        lines.append("versions: " + escape(", ".join(f"{k} {v}" for k, v in notes["versions"].items())))
    cache = notes.get("cache")
    if isinstance(cache, dict) and cache.get("enabled"):
        state = "hit" if cache.get("hit") else f"miss ({cache.get('reason', '?')})"
        stored = ", stored" if cache.get("stored") else ""
        lines.append(f"engine cache: {state}{stored}: {cache.get('path')}")
    elif isinstance(cache, dict):
        lines.append("engine cache: off (--no-cache)")
    return lines


def _print_numerics(console: Console, numerics: Numerics | None) -> None:
    """The numeric check against the FP32 eager reference, as a one-row table."""
    if numerics is None or numerics.skipped is not None:
        return
    table = Table(title="numerics vs FP32 eager reference", title_justify="left")
    for column in ("max abs err", "mean abs err", "rel L2 err", "cosine", "top-1 agree"):
        table.add_column(column, justify="right")
    top1 = numerics.top1_agreement
    table.add_row(significant(numerics.max_abs_error), significant(numerics.mean_abs_error),
                  significant(numerics.rel_l2_error), significant(numerics.cosine_similarity, 6),
                  "-" if top1 is None and numerics.finite else significant(top1, 4))
    console.print(table)
    if not numerics.finite:
        console.print("[bold red]warning:[/] NaN or Inf in the output or the reference: the "
                      "numeric check fails")


def print_backends(backend_list, json_out: bool) -> None:
    import importlib

    cuda = False
    if importlib.util.find_spec("torch") is not None:
        import torch

        cuda = torch.cuda.is_available()
    rows = [{"name": b.name, "family": b.family, "precision": b.precision,
             "available": b.unavailable_reason(cuda) is None,
             "why_not": b.unavailable_reason(cuda), "description": b.description}
            for b in backend_list]
    if json_out:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table(title=f"backends ({'CUDA GPU found' if cuda else 'no CUDA GPU: CPU only'})",
                  title_justify="left")
    for column in ("backend", "precision", "available", "what it is / why not"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], row["precision"], "yes" if row["available"] else "[red]no[/]",
                      escape(row["description"] if row["available"] else row["why_not"]))
    make_console().print(table)
