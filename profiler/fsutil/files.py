"""One file at a time: written whole (``atomic_path`` and the ``write_*`` family: a crash or
Ctrl-C never leaves a half-written file), moved whole (``move_into``), read small
(``read_small``), and only ever replacing a regular file (``refuse_non_regular``)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from profiler.errors import UserError


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
    refuse_non_regular(path)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    chmod_by_umask(handle)
    os.close(handle)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        if error.filename is None:  # a write's own error names no file: say which one
            error.filename = str(path)
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def refuse_non_regular(path: Path) -> None:
    """A file this tool writes replaces only a regular file (or nothing): never a device node
    (``/dev/null`` as root), a FIFO, a socket, a folder or a symlink (which it would not follow)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = (
            "a symlink"
            if stat.S_ISLNK(mode)
            else "a folder"
            if stat.S_ISDIR(mode)
            else "not a regular file"
        )
        raise UserError(
            f"{path} exists and is {kind}: this tool replaces only regular files; give another path"
        )


def read_small(path: Path, limit: int, what: str) -> bytes:
    """A small input file's bytes: a regular file (never a FIFO, which would hang, or a device
    such as /dev/zero, which never ends) of at most ``limit`` bytes; one-line errors."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise UserError(f"{what} {path}: cannot read it ({error.strerror})") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # a folder too: before fdopen refuses
        os.close(descriptor)
        raise UserError(f"{what} {path}: not a regular file")
    with os.fdopen(descriptor, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{what} {path}: larger than {limit >> 20} MiB, not a file of this kind")
    return data


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


def move_into(folder: Path, files: list[Path]) -> list[Path]:
    """Move finished files (each renamed whole, so never half there) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    moved = []
    for path in files:
        os.replace(path, folder / path.name)
        moved.append(folder / path.name)
    return moved
