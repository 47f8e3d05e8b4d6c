"""One writer per folder: ``folder_lock`` holds the lock file of each folder it writes, and a
second writer is refused at once (``FolderBusy``), never kept waiting."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from profiler.errors import UserError
from profiler.fsutil.commit import report_dead_holder
from profiler.fsutil.lockfile import held_here, holder, lock_path, release, try_lock


class FolderBusy(UserError):
    """Another live process is writing the folder."""


@contextlib.contextmanager
def folder_lock(*folders: Path, what: str = "writer") -> Iterator[None]:
    """Hold the write lock of each folder (the same folder named twice is locked once) as a
    ``what`` ("run", "sweep": one word, shown to a process that is refused). A folder another
    live process holds raises FolderBusy at once, naming that process: the second writer
    refuses rather than waits, because a run or a sweep can take hours. Parent folders this
    creates for its lock files are removed again if they are still empty at the end."""
    held: list[tuple[Path, int]] = []
    created: list[Path] = []
    unique = {os.path.abspath(lock_path(Path(f))): Path(f) for f in reversed(folders)}
    try:
        for key, folder in reversed(unique.items()):
            path = Path(key)
            try:
                created += _make_parents(path.parent)
                descriptor = try_lock(path)
            except OSError as error:
                where = (
                    path.parent
                    if error.errno in (errno.EACCES, errno.EROFS, errno.ENOSPC)
                    else path
                )
                raise UserError(
                    f"cannot write in {where}: {error.strerror}"
                    if where != path
                    else f"cannot take the lock {path}: {error.strerror}"
                ) from None
            if descriptor is None:
                raise FolderBusy(
                    f"{folder} is being written by {holder(path)}; wait for it "
                    "to finish, or use another --name"
                )
            held.append((path, descriptor))
            held_here.add(str(path))
            report_dead_holder(path, descriptor)
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, f"{os.getpid()} {what}\n".encode(), 0)
        yield
    finally:
        for path, descriptor in reversed(held):
            held_here.discard(str(path))
            release(path, descriptor)
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty


def _make_parents(folder: Path) -> list[Path]:
    """mkdir -p, returning the folders it created, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing
