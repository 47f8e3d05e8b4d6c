"""Atomic writes, the one family every file goes through: a crash or Ctrl-C never leaves a
half-written file or run folder behind. Text, bytes and JSON, or any writer given a temp path
(``write_with``, ``atomic_path``); whole folders through ``staging_dir`` and ``replace_dir``.
One writer per folder (``folder_lock``: a lock file beside it), and the removal of what a killed
writer left (``clean_leftovers``)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

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
        kind = "a symlink" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else \
            "not a regular file"
        raise UserError(f"{path} exists and is {kind}: this tool replaces only regular files; "
                        "give another path")


def read_small(path: Path, limit: int, what: str) -> bytes:
    """A small input file's bytes: a regular file (never a FIFO, which would hang, or a device
    such as /dev/zero, which never ends) of at most ``limit`` bytes; one-line errors."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise UserError(f"{what} {path}: cannot read it ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as f:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise UserError(f"{what} {path}: not a regular file")
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


#: the empty file inside every folder this tool builds (staging folders, and so the run and
#: sweep folders they become): the clean-up removes or restores only folders that hold it
MARKER = ".infer-profiler"


def is_ours(folder: Path) -> bool:
    """A real folder (not a symlink) holding this tool's marker file."""
    try:
        return stat.S_ISDIR(os.lstat(folder).st_mode) and \
            stat.S_ISREG(os.lstat(Path(folder) / MARKER).st_mode)
    except OSError:
        return False


def staging_dir(final: Path) -> Path:
    """A fresh hidden folder beside ``final`` to build its contents in, marked as this tool's."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        chmod_by_umask(staging, directory=True)
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        (staging / MARKER).write_text(f"{os.getpid()} {started}\n")
    except BaseException:  # Ctrl-C included: leave no staging folder behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def old_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.old-{os.getpid()}")


def set_aside(final: Path) -> Path | None:
    """Rename the folder at ``final`` to its ``.old-`` name (None when there is none). Only a
    real folder is set aside: a file or a symlink there is refused, never moved or followed."""
    try:
        mode = os.lstat(final).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(mode):
        raise UserError(f"{final} exists and is not a folder: move it away, or use another "
                        "--name")
    old = old_name(final)
    if not is_ours(final):  # a folder of an older version: mark it, so a leftover is ours
        (final / MARKER).touch()
    os.replace(final, old)
    return old


def replace_dir(staging: Path, final: Path) -> None:
    """Put a finished staging folder in place of ``final`` (replacing an older one)."""
    old = set_aside(final)
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


# ---- one writer per folder, and what a killed writer left behind ---------------------------
#
# A run or sweep folder F (runs/<run>, tb_logs/<run>, runs/<sweep>) has a lock file beside it,
# F.parent/.F.lock, held with flock(2) by the one process that writes F, for as long as that
# process may create F's staging folders (.F.partial-*) or replace F (.F.old-*). The kernel
# releases the lock when the process ends in any way (SIGKILL, OOM killer, power loss), so a
# staging folder whose lock nobody holds is a leftover, and any later command may remove it.
# The holder unlinks the lock file as it lets go; a killed holder leaves an unlocked one, which
# the next writer takes over.

#: hidden staging names: staging_dir's ".<name>.partial-<random>" and replace_dir's ".<name>.old-<pid>"
LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>partial|old)-[A-Za-z0-9_]+$")


#: the lock files this process holds (flock conflicts between two descriptors of one process)
_held_here: set[str] = set()


class FolderBusy(UserError):
    """Another live process is writing the folder."""


def lock_path(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path`` (created if need be), or None
    when another process holds it. A holder unlinks the file before it lets go, so a lock taken
    on a file that is no longer at ``path`` is dropped and taken again on the new one."""
    while True:
        try:  # never through a symlink planted at the lock's path
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                                 0o666)  # as open(): the umask decides
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UserError(f"{path} is a symlink, not a lock file of this tool: remove it"
                                ) from None
            raise
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(descriptor)
            raise UserError(f"{path} is not a lock file of this tool (not a regular file of "
                            "this user): remove it")
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        try:
            if os.stat(path).st_ino == os.fstat(descriptor).st_ino:
                return descriptor
        except FileNotFoundError:
            pass
        os.close(descriptor)


def _release(path: Path, descriptor: int) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(descriptor)  # closing releases the flock


def _holder(path: Path) -> str:
    """"process 123 (a sweep)", from what the holder wrote into the lock file."""
    try:
        pid, _, what = path.read_text().strip().partition(" ")
    except OSError:
        pid, what = "", ""
    return (f"process {pid}" if pid.isdigit() else "another process") + \
        (f" (a {what})" if what.isidentifier() else "")


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
        for path, folder in reversed(unique.items()):
            path = Path(path)
            try:
                created += _make_parents(path.parent)
                descriptor = _try_lock(path)
            except OSError as error:
                where = path.parent if error.errno in (errno.EACCES, errno.EROFS, errno.ENOSPC) \
                    else path
                raise UserError(f"cannot write in {where}: {error.strerror}" if where != path
                                else f"cannot take the lock {path}: {error.strerror}") from None
            if descriptor is None:
                raise FolderBusy(f"{folder} is being written by {_holder(path)}; wait for it "
                                 "to finish, or use another --name")
            held.append((path, descriptor))
            _held_here.add(str(path))
            _report_dead_holder(path, descriptor)
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, f"{os.getpid()} {what}\n".encode(), 0)
        yield
    finally:
        for path, descriptor in reversed(held):
            _held_here.discard(str(path))
            _release(path, descriptor)
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty


def _make_parents(folder: Path) -> list[Path]:
    """mkdir -p, returning the folders it created, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def clean_leftovers(folder: Path) -> list[Path]:
    """Remove the staging folders in ``folder`` that no live process owns, and put back a folder
    whose replacement was cut between its two renames (``.F.old-*`` present, ``F`` missing).
    Only folders holding this tool's marker (see staging_dir) are touched; folders whose writer
    still runs are left alone. Returns what was removed."""
    if not folder.is_dir():
        return []
    by_name: dict[str, list[Path]] = {}
    for entry in folder.iterdir():
        match = LEFTOVER.match(entry.name)
        if match and is_ours(entry):
            by_name.setdefault(match["name"], []).append(entry)
        elif _is_our_lock(entry):  # a killed holder's lock, with no staging folder yet
            by_name.setdefault(entry.name[1:-len(".lock")], [])
    removed = []
    for name, leftovers in by_name.items():
        if os.path.abspath(lock_path(folder / name)) in _held_here:
            # ours, taken before this process made any staging folder: all are leftovers
            removed += _remove_leftovers(folder / name, leftovers)
            continue
        try:
            descriptor = _try_lock(lock_path(folder / name))
        except (OSError, UserError):  # read-only, or not our lock: nothing is touched
            continue
        if descriptor is None:
            continue  # a live writer owns them
        try:
            _report_dead_holder(lock_path(folder / name), descriptor)
            removed += _remove_leftovers(folder / name, leftovers)
        finally:
            _release(lock_path(folder / name), descriptor)
    return removed


#: what folder_lock writes into its lock file: "<pid> <what>"
_LOCK_TEXT = re.compile(rb"^[0-9]+ [a-z]+\n$")


def _is_our_lock(entry: Path) -> bool:
    """``.<name>.lock``, a regular file (not a symlink) holding what folder_lock writes."""
    if not (entry.name.startswith(".") and entry.name.endswith(".lock")
            and len(entry.name) > len("..lock")):
        return False
    try:
        if not stat.S_ISREG(os.lstat(entry).st_mode):
            return False
        with open(entry, "rb") as f:
            return bool(_LOCK_TEXT.match(f.read(64)))
    except OSError:
        return False


def clean_tree(logdir: Path) -> list[Path]:
    """clean_leftovers in ``logdir`` and in each folder directly below it (a sweep's cells), as
    TensorBoard lists every run folder under its logdir."""
    removed = clean_leftovers(logdir)
    if logdir.is_dir():
        for folder in sorted(logdir.iterdir()):
            if folder.is_dir() and not folder.name.startswith("."):
                removed += clean_leftovers(folder)
    return removed


#: the processes whose unfinished work this process has reported (one line each)
_reported: set[str] = set()


def _report_dead_holder(path: Path, descriptor: int) -> None:
    """A lock file taken over from a holder that never let go (its process ended without
    finishing: killed, or a model that called os._exit): one line on stderr, once per process.
    What it holds is the holder's ``PID what`` line."""
    try:
        pid, _, what = os.pread(descriptor, 200, 0).decode("utf-8", "replace").strip() \
            .partition(" ")
    except OSError:
        return
    if not pid.isdigit() or pid in _reported or int(pid) == os.getpid():
        return
    _reported.add(pid)
    name = path.name[1:-len(".lock")]
    print(f"note: an earlier {what if what.isidentifier() else 'writer'} of "
          f"{path.parent / name} did not finish (process {pid} ended before it was done: "
          "killed, or os._exit in the model); nothing of it was written", file=sys.stderr)


def _remove_leftovers(final: Path, leftovers: list[Path]) -> list[Path]:
    olds = sorted((p for p in leftovers if LEFTOVER.match(p.name)["kind"] == "old"),
                  key=lambda p: p.stat().st_mtime)
    if olds and not final.exists():
        os.replace(olds[-1], final)
        leftovers = [p for p in leftovers if p != olds[-1]]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    return leftovers
