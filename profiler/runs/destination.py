"""Where a run may be written: what a run replaces, and what it refuses to."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.errors import UserError
from profiler.runs.layout import MANIFEST, RESULT_FILE, check_separate_roots, traces_named_by_result
from profiler.runs.manifest import is_sweep_dir
from profiler.runs.result import try_read_result

if TYPE_CHECKING:
    from profiler.runs.config import RunConfig

#: what makes two runs the same run (besides backend and batch size, which are in the name;
#: a --cuda-graphs run's name differs without --name, and with one, this tells them apart)
IDENTITY = ("model", "image_size", "seq_len", "weights", "cuda_graphs")


def _identity(record: object) -> dict[str, Any]:
    return {
        key: (None if getattr(record, key) is None else str(getattr(record, key)))
        if key == "weights"
        else getattr(record, key)
        for key in IDENTITY
    }


def check_destination(config: RunConfig) -> None:
    """Refuse, before anything is built, a run that would replace what it is not: a sweep
    folder, a run of another model / image size / sequence length / weights (unless
    ``config.replace``), or a run whose results and trace folders are one folder."""
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    check_separate_roots(config.runs_dir, config.tb_dir)
    for folder in (run_dir, tb_run_dir):
        if is_sweep_dir(folder):
            raise UserError(
                f"{folder} is a sweep ({MANIFEST}); a run never replaces a sweep: "
                "pass --name for another run name"
            )
    for folder in (run_dir, tb_run_dir):
        if os.path.lexists(folder) and not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise UserError(
                f"{folder} exists and is not a folder: move it away, or pass --name "
                "for another run name"
            )
    if run_dir.exists() and not config.replace:
        _check_run_folder(config, run_dir)
    _check_trace_folder(run_dir, tb_run_dir, config.replace)


def _check_run_folder(config: RunConfig, run_dir: Path) -> None:
    existing = try_read_result(run_dir / RESULT_FILE)
    if existing is None:
        if any(run_dir.iterdir()):
            raise UserError(
                f"{run_dir} exists and holds no readable {RESULT_FILE}: pass "
                "--replace to replace it, or --name for another run name"
            )
        return
    old, new = _identity(existing.config), _identity(config)
    if old != new:
        changed = ", ".join(
            f"{key.replace('_', ' ')} {old[key]} (now {new[key]})"
            for key in IDENTITY
            if old[key] != new[key]
        )
        raise UserError(
            f"{run_dir} holds another run ({changed}): pass --replace to replace "
            "it, or --name for another run name"
        )


def _check_trace_folder(run_dir: Path, tb_run_dir: Path, replace: bool) -> None:
    """``tb_logs/<run>`` is replaced only when it is the trace folder of ``runs/<run>`` (the
    run's result.json names traces in it), or empty, or with --replace; a folder holding
    sub-folders (a sweep's traces, or the user's) never."""
    try:
        entries = [e for e in tb_run_dir.iterdir() if not e.name.startswith(".")]
    except FileNotFoundError:
        return
    except OSError as error:
        raise UserError(f"cannot read {tb_run_dir}: {error.strerror}") from None
    if not entries:
        return
    if any(e.is_dir() for e in entries):
        raise UserError(
            f"{tb_run_dir} holds folders (a sweep's traces?); a run never replaces "
            "it: pass --name for another run name"
        )
    if replace:
        return
    try:
        named = traces_named_by_result(run_dir) if run_dir.is_dir() else []
    except UserError:
        named = []
    mine = os.path.realpath(tb_run_dir)
    if not any(os.path.realpath(p.parent) == mine for p in named):
        raise UserError(
            f"{tb_run_dir} holds traces of another run (not named by "
            f"{run_dir / RESULT_FILE}): pass --replace to replace it, or --name for "
            "another run name"
        )
