"""runs/<sweep>/sweep.json: the sweep manifest, read and written only here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.runs.layout import MANIFEST, RUNS_ROOT, is_leftover

MANIFEST_SCHEMA = 1


class SweepCell(msgspec.Struct):
    """One backend x batch size of a sweep; updated as it runs."""

    backend: str
    batch_size: int
    status: str = "pending"
    reason: str | None = None
    exit_code: int | None = None
    started: str | None = None
    finished: str | None = None
    elapsed_s: float | None = None
    log: str | None = None
    metrics: dict[str, Any] | None = None
    # the cell's value of each option the sweep was given a list of (--max-new-tokens 16,64)
    axis: dict[str, Any] | None = None
    gpu: str | None = None  # the GPU that ran it (as CUDA_VISIBLE_DEVICES names it)
    node: str | None = None  # the host that ran it
    worker: str | None = None  # the worker process: <slot>/pid<N>


class SweepManifest(msgspec.Struct):
    """runs/<sweep>/sweep.json: the grid, the shared options, and each cell's state."""

    options: dict[str, Any]
    name: str = ""
    model: str = ""
    backends: list[str] = []
    batch_sizes: list[int] = []
    baseline: str = ""
    cells: dict[str, SweepCell] = {}
    schema: int = MANIFEST_SCHEMA
    kind: str = "infer-profiler sweep"
    created: str | None = None
    updated: str | None = None
    cell_timeout_s: float | None = None
    runs_dir: str | None = None
    tb_dir: str | None = None
    command_line: list[str] = []
    wall_s: float | None = None


def is_sweep_dir(folder: Path) -> bool:
    return not is_leftover(folder) and (Path(folder) / MANIFEST).is_file()


def read_manifest(sweep_dir: Path) -> SweepManifest | None:
    """The sweep manifest in ``sweep_dir``, or None when there is none."""
    path = Path(sweep_dir) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as error:
        raise UserError(f"{path} is not readable JSON ({error}); remove it or use --name") \
            from None
    if not isinstance(data, dict) or "cells" not in data or "options" not in data:
        raise UserError(f"{path} is not a sweep manifest; use another --name")
    try:  # every part that is read has its type: a damaged file is refused before any rewrite
        return msgspec.convert(data, SweepManifest, strict=False)
    except msgspec.ValidationError as error:
        raise UserError(f"{path} is damaged or not a sweep manifest this version reads "
                        f"({error}); remove it or use another --name") from None


def write_manifest(sweep_dir: Path, manifest: SweepManifest) -> None:
    text = msgspec.json.format(msgspec.json.encode(manifest), indent=2)
    write_text_atomic(Path(sweep_dir) / MANIFEST, text.decode("utf-8") + "\n")


def find_sweep(target: str | Path, root: Path | None = None) -> Path | None:
    """A sweep folder, its sweep.json, or a sweep name under runs/ -> the sweep folder."""
    root = Path.cwd() if root is None else root
    path = Path(target)
    for candidate in (path, root / RUNS_ROOT / path):
        folder = candidate.parent if candidate.name == MANIFEST else candidate
        if is_sweep_dir(folder):
            return folder
    return None
