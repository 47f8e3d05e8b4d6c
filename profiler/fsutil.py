"""Atomic writes: a crash or Ctrl-C never leaves a half-written file or run folder behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def chmod_by_umask(target: int | str | Path, directory: bool = False) -> None:
    """Give a file (a path or an open descriptor) or folder made by mkstemp/mkdtemp (0600/0700)
    the mode an ordinary open/mkdir would have given it (0644/0755 under umask 022)."""
    mode = (0o777 if directory else 0o666) & ~current_umask()
    if isinstance(target, int):
        os.fchmod(target, mode)
    else:
        os.chmod(target, mode)


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        chmod_by_umask(handle)
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: object) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def staging_dir(final: Path) -> Path:
    """A fresh hidden folder beside ``final`` to build its contents in."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        chmod_by_umask(staging, directory=True)
    except BaseException:  # Ctrl-C included: leave no empty staging folder behind
        staging.rmdir()
        raise
    return staging


def replace_dir(staging: Path, final: Path) -> None:
    """Put a finished staging folder in place of ``final`` (replacing an older one)."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
