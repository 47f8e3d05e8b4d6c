"""The lock file beside a folder: taken with flock(2) (``try_lock``), let go (``release``),
its holder named (``holder``), and told apart from other files (``is_our_lock``)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from profiler.errors import UserError

# One writer per folder, and what a killed writer left behind:
#
# A run or sweep folder F (runs/<run>, tb_logs/<run>, runs/<sweep>) has a lock file beside it,
# F.parent/.F.lock, held with flock(2) by the one process that writes F, for as long as that
# process may create F's staging folders (.F.partial-*) or replace F (.F.old-*). The kernel
# releases the lock when the process ends in any way (SIGKILL, OOM killer, power loss), so a
# staging folder whose lock nobody holds is a leftover, and any later command may remove it.
# The holder unlinks the lock file as it lets go; a killed holder leaves an unlocked one, which
# the next writer takes over.

#: the lock files this process holds (flock conflicts between two descriptors of one process)
held_here: set[str] = set()


def lock_path(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


def try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path`` (created if need be), or None
    when another process holds it. A holder unlinks the file before it lets go, so a lock taken
    on a file that is no longer at ``path`` is dropped and taken again on the new one."""
    while True:
        try:  # never through a symlink planted at the lock's path
            descriptor = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666
            )  # as open(): the umask decides
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UserError(
                    f"{path} is a symlink, not a lock file of this tool: remove it"
                ) from None
            raise
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(descriptor)
            raise UserError(
                f"{path} is not a lock file of this tool (not a regular file of "
                "this user): remove it"
            )
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


def release(path: Path, descriptor: int) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(descriptor)  # closing releases the flock


def holder(path: Path) -> str:
    """ "process 123 (a sweep)", from what the holder wrote into the lock file."""
    try:
        pid, _, what = path.read_text().strip().partition(" ")
    except OSError:
        pid, what = "", ""
    return (f"process {pid}" if pid.isdigit() else "another process") + (
        f" (a {what})" if what.isidentifier() else ""
    )


def is_held(path: Path) -> bool:
    """Whether a live process holds the lock ``path`` (this one included), asked without
    taking it or creating anything: a reader's question (a missing file, a symlink or a file
    that cannot be opened is no lock held)."""
    if os.path.abspath(path) in held_here:
        return True
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return False
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)  # (a shared lock taken here is let go with it)
    return False


@contextlib.contextmanager
def lock_if_free(path: Path) -> Iterator[bool]:
    """True in the block when this process holds the lock ``path`` (already, or taken now from
    nobody or a dead holder); False when another live process holds it or it cannot be taken."""
    if os.path.abspath(path) in held_here:
        yield True
        return
    try:
        descriptor = try_lock(path)
    except (OSError, UserError):  # read-only, or not our lock: nothing is touched
        descriptor = None
    if descriptor is None:
        yield False
        return
    held_here.add(os.path.abspath(path))
    try:
        yield True
    finally:
        held_here.discard(os.path.abspath(path))
        release(path, descriptor)


#: what folder_lock writes into its lock file: "<pid> <what>"
_LOCK_TEXT = re.compile(rb"^[0-9]+ [a-z]+\n$")


def is_our_lock(entry: Path) -> bool:
    """``.<name>.lock``, a regular file (not a symlink) holding what folder_lock writes."""
    if not (
        entry.name.startswith(".")
        and entry.name.endswith(".lock")
        and len(entry.name) > len("..lock")
    ):
        return False
    try:
        if not stat.S_ISREG(os.lstat(entry).st_mode):
            return False
        with open(entry, "rb") as f:
            return bool(_LOCK_TEXT.match(f.read(64)))
    except OSError:
        return False
