"""runs/<sweep>/sweep.json: the sweep manifest, read and written only here."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import msgspec

from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.fsutil.lockfile import is_held, lock_path
from profiler.runs.config import CliOption, run_name, run_options
from profiler.runs.layout import MANIFEST, RUNS_ROOT, is_leftover

MANIFEST_SCHEMA = 1

#: a cell's status words
OK, FAILED, OOM, TIMEOUT, INTERRUPTED, RUNNING, PENDING = (
    "ok",
    "failed",
    "oom",
    "timeout",
    "interrupted",
    "running",
    "pending",
)

#: run options a sweep sets itself rather than passing them on to its cells: field -> why.
#: Every other RunConfig option is a sweep option, shared by all cells (config.run_options).
SWEEP_SETS = {
    "backend": "--backends takes a comma-separated list",
    "batch_size": "--bs takes a comma-separated list",
    "name": "--name names the sweep folder; a cell is named <backend>_bs<N>",
    "runs_dir": "cells go into <runs-dir>/<sweep>/",
    "tb_dir": "cells' traces go into <tb-dir>/<sweep>/",
    "capture": "the benchmark table needs each cell's torch.profiler trace",
    "target_noise": "the sweep's --target-noise samples processes round-robin over the cells",
    "budget": "the sweep's --budget limits its --target-noise rounds",
    "cuda_graphs": "cells run without CUDA graphs (cell names do not carry it yet): "
    "`run --cuda-graphs` measures one config",
    "nproc": "a cell is one process: `run --nproc N` starts N ranks of one config",
}


class SweepCell(msgspec.Struct):
    """One backend x batch size of a sweep; updated as it runs."""

    backend: str
    batch_size: int
    status: str = "pending"
    #: how it ended, typed: ok, user-error, cuda-oom, host-oom, crash, died, timeout or
    #: interrupted (sweep.cell.KINDS; absent in sweeps recorded before it was)
    kind: str | None = None
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
        raise UserError(f"{path} is not readable JSON ({error}); remove it or use --name") from None
    if not isinstance(data, dict) or "cells" not in data or "options" not in data:
        raise UserError(f"{path} is not a sweep manifest; use another --name")
    try:  # every part that is read has its type: a damaged file is refused before any rewrite
        manifest = msgspec.convert(data, SweepManifest, strict=False)
    except msgspec.ValidationError as error:
        raise UserError(
            f"{path} is damaged or not a sweep manifest this version reads "
            f"({error}); remove it or use another --name"
        ) from None
    for name in manifest.cells:  # a cell is a folder of the sweep, never a path out of it
        if not is_plain_name(name):
            raise UserError(
                f"{path} names a cell {json.dumps(name)[:80]}, not a folder name "
                "of the sweep: the manifest is damaged; remove it or use another "
                "--name"
            )
    return manifest


#: the reason of a cell listed as running whose sweep is gone (``settle_running``)
OWNER_GONE = "not finished: its sweep ended without recording how; `sweep --resume` runs it again"


def settle_running(sweep_dir: Path, manifest: SweepManifest, mine: bool = False) -> list[str]:
    """The cells ``manifest`` lists as running while no live sweep runs ``sweep_dir`` (none
    holds its lock; ``mine``: the caller holds it, so a cell listed running is an earlier
    sweep's), marked interrupted in this reading (the file is not rewritten), with OWNER_GONE
    as their reason: a sweep killed, or stopped by a full disk before sweep.json could say so.
    Returns their names, for a note."""
    running = [name for name, cell in manifest.cells.items() if cell.status == RUNNING]
    if not running or (not mine and is_held(lock_path(Path(sweep_dir)))):
        return []
    for name in running:
        cell = manifest.cells[name]
        cell.status, cell.kind, cell.reason = INTERRUPTED, "interrupted", OWNER_GONE
    return running


def owner_gone_note(sweep_dir: Path, names: list[str]) -> str:
    """The note of ``settle_running``'s cells."""
    return (
        f"{Path(sweep_dir) / MANIFEST} lists {len(names)} cell(s) as running ({', '.join(names)}) "
        "but no sweep is running it: read as not finished; `sweep --resume` runs them again"
    )


def is_plain_name(name: str) -> bool:
    """One folder name: no separator, not ``.``/``..``, not hidden, no NUL."""
    return bool(name) and "/" not in name and "\0" not in name and not name.startswith(".")


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


# ---- the grid: cells, their names and labels, the swept options ----------------------------


def shared_options() -> dict[str, CliOption]:
    """Option key (the manifest's ``options`` key) -> declaration of the options a sweep
    passes on to its cells."""
    return {spec.key: spec for name, spec in run_options().items() if name not in SWEEP_SETS}


def axis_options() -> dict[str, CliOption]:
    """Option key -> declaration of the options a sweep may be given a list of."""
    return {key: spec for key, spec in shared_options().items() if spec.axis}


def axis_values(options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the swept options' values (``[{}]`` when none is swept), in the
    order given."""
    axes = {
        key: value
        for key, value in options.items()
        if key in axis_options() and isinstance(value, list)
    }
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def cell_name(
    backend: str,
    batch_size: int,
    model: str,
    workload: str = "forward",
    axis: dict[str, Any] | None = None,
) -> str:
    """A cell's folder: the name `profile.py run` gives that run (config.run_name), and the
    cell's value of each swept option (``_new16``)."""
    specs = axis_options()
    return run_name(backend, batch_size, model, workload=workload) + "".join(
        f"_{specs[key].axis}{value}" for key, value in (axis or {}).items()
    )


def cell_label(backend: str, batch_size: int, axis: dict[str, Any] | None = None) -> str:
    """``ttrt_fp16 bs 8`` and the cell's value of each swept option (``--max-new-tokens 16``)."""
    specs = axis_options()
    return " ".join(
        [
            f"{backend} bs {batch_size}",
            *(f"{specs[key].flags[0]} {value}" for key, value in (axis or {}).items()),
        ]
    )


def short_label(cell: SweepCell) -> str:
    """``ttrt_fp16 bs8``, and ``new16`` for each swept option: a cell in a plot or a report."""
    specs = axis_options()
    return " ".join(
        [
            f"{cell.backend} bs{cell.batch_size}",
            *(f"{specs[key].axis}{value}" for key, value in (cell.axis or {}).items()),
        ]
    )


def grid_cells(manifest: SweepManifest) -> list[tuple[str, SweepCell]]:
    """The manifest's cells of its current grid, in sweep order."""
    by_grid = {(c.backend, c.batch_size): (name, c) for name, c in manifest.cells.items()}
    found = []
    for backend in manifest.backends:
        for batch_size in manifest.batch_sizes:
            for axis in axis_values(manifest.options):
                name = cell_name(
                    backend,
                    batch_size,
                    manifest.model,
                    manifest.options.get("workload", "forward"),
                    axis,
                )
                if name in manifest.cells:
                    found.append((name, manifest.cells[name]))
                elif not axis and (backend, batch_size) in by_grid:  # before models were named
                    found.append(by_grid[backend, batch_size])
    return found
