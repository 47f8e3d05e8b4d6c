"""Atomic writes, the one family every file goes through: a crash or Ctrl-C never leaves a
half-written file or run folder behind. Text, bytes and JSON, or any writer given a temp path
(``write_with``, ``atomic_path``); whole folders through ``staging_dir`` and ``replace_dir``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator


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


@contextlib.contextmanager
def atomic_path(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A hidden temp file beside ``path`` for the block to write (by name: a library's
    ``save(file)``); renamed onto ``path`` when the block ends, removed when it fails. The temp
    name (``.<name>.<random><suffix>``) matches no pattern a reader of the folder looks for."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    chmod_by_umask(handle)
    os.close(handle)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_with(path: Path, writer: Callable[[Path], object], suffix: str = ".tmp") -> Path:
    """``writer(temp_path)`` writes the file, which then takes ``path``'s place."""
    with atomic_path(path, suffix) as tmp:
        writer(tmp)
    return path


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


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


def move_into(folder: Path, files: list[Path]) -> list[Path]:
    """Move finished files (each renamed whole, so never half there) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    moved = []
    for path in files:
        os.replace(path, folder / path.name)
        moved.append(folder / path.name)
    return moved
