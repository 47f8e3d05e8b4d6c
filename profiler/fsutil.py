"""Atomic writes, the one family every file goes through: a crash or Ctrl-C never leaves a
half-written file or run folder behind. Text, bytes and JSON, or any writer given a temp path
(``write_with``, ``atomic_path``); whole folders through ``staging_dir`` and ``replace_dir``.
One writer per folder (``folder_lock``: a lock file beside it), and the removal of what a killed
writer left (``clean_leftovers``)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
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


#: the empty file inside every folder this tool builds (staging folders, and so the run and
#: sweep folders they become): the clean-up removes or restores only folders that hold it
MARKER = ".infer-profiler"


def is_ours(folder: Path) -> bool:
    """A real folder (not a symlink) holding this tool's marker file."""
    try:
        return stat.S_ISDIR(os.lstat(folder).st_mode) and stat.S_ISREG(
            os.lstat(Path(folder) / MARKER).st_mode
        )
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
        raise UserError(f"{final} exists and is not a folder: move it away, or use another --name")
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


#: the file a finished staging folder holds once it is about to take its final folder's place
#: as part of one change of several folders (replace_dirs): ``leader`` and the paths of the
#: change's other staging folders, one a line, or ``member`` and the leader's path. The
#: leader's file, written last and whole, is the commit of the change.
READY = ".infer-profiler.ready"


def replace_dirs(pairs: list[tuple[Path, Path]]) -> None:
    """Put finished staging folders in place of their final folders as one change (a run's
    trace folder and its results folder); the last pair's staging folder is the leader.

    Each staging folder but the leader gets READY naming the leader, then the leader gets READY
    naming them: the commit. Then each pair is replaced in order, the leader's last. A process
    killed before the commit moved nothing, and the clean-up removes its staging folders as
    leftovers; killed after it (between any two renames), it leaves what the next clean-up
    (clean_leftovers) or read (settle) finishes, as this process would have: never an old
    folder beside a new one."""
    *members, (leader, _) = pairs
    for _, final in pairs:  # refused before the commit, never half-way through the change
        try:
            mode = os.lstat(final).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(mode):
            raise UserError(
                f"{final} exists and is not a folder: move it away, or use another --name"
            )
        if not is_ours(final):  # an older version's folder: marked, so a finisher replaces it
            (final / MARKER).touch()
    for staging, _ in members:
        write_text_atomic(staging / READY, f"member\n{os.path.abspath(leader)}\n")
    write_text_atomic(
        leader / READY,
        "leader\n" + "".join(f"{os.path.abspath(staging)}\n" for staging, _ in members),
    )
    for staging, final in pairs:
        replace_dir(staging, final)
        (final / READY).unlink(missing_ok=True)


def remove_bare(folder: Path) -> None:
    """Remove a folder this tool made that holds nothing but its own hidden files (a run's
    trace folder when the run recorded no trace)."""
    try:
        bare = is_ours(folder) and all(e.name in (MARKER, READY) for e in Path(folder).iterdir())
    except OSError:
        return
    if bare:
        shutil.rmtree(folder, ignore_errors=True)


def _ready(folder: Path) -> tuple[str, list[Path]] | None:
    """What a staging folder's READY says: ("leader", the other staging folders) or ("member",
    [the leader]); None when it has none (or one that is not this tool's)."""
    try:
        descriptor = os.open(Path(folder) / READY, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as f:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        lines = f.read(1 << 16).decode("utf-8", "replace").splitlines()
    if not lines or lines[0] not in ("leader", "member") or not is_ours(folder):
        return None
    return lines[0], [Path(line) for line in lines[1:] if line]


def _same(a: Path, b: Path) -> bool:
    try:
        one, two = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    return (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino)


def _leader_of(member: Path) -> Path | None:
    """The leader of the committed change ``member`` (a staging folder) belongs to; None when
    it belongs to none, or to one not committed (yet, or ever: its writer was killed first)."""
    ready = _ready(member)
    if ready is None or ready[0] != "member" or len(ready[1]) != 1:
        return None
    leader = ready[1][0]
    listed = _ready(leader)
    if listed is None or listed[0] != "leader" or not _is_partial(leader):
        return None
    return leader if any(_same(member, other) for other in listed[1]) else None


def _is_partial(path: Path) -> bool:
    match = LEFTOVER.match(Path(path).name)
    return match is not None and match["kind"] == "partial"


def is_committed(staging: Path) -> bool:
    """A staging folder of a committed change (replace_dirs) that is not in place yet: what a
    killed process left for the next clean-up or read to finish, never to remove."""
    ready = _ready(staging)
    return ready is not None and (ready[0] == "leader" or _leader_of(staging) is not None)


def _leftover_part(leftover: Path, part: str) -> str:
    """A part ("name", "kind") of the name of ``leftover``, which LEFTOVER matches."""
    match = LEFTOVER.match(leftover.name)
    if match is None:
        raise ValueError(f"not a leftover: {leftover}")
    return match[part]


def _final_of(staging: Path) -> Path:
    return staging.parent / _leftover_part(staging, "name")


@contextlib.contextmanager
def _lock_if_free(path: Path) -> Iterator[bool]:
    """True in the block when this process holds the lock ``path`` (already, or taken now from
    nobody or a dead holder); False when another live process holds it or it cannot be taken."""
    if os.path.abspath(path) in _held_here:
        yield True
        return
    try:
        descriptor = _try_lock(path)
    except (OSError, UserError):  # read-only, or not our lock: nothing is touched
        descriptor = None
    if descriptor is None:
        yield False
        return
    _held_here.add(os.path.abspath(path))
    try:
        yield True
    finally:
        _held_here.discard(os.path.abspath(path))
        _release(path, descriptor)


def _finish(leader: Path, final: Path) -> bool:
    """Finish a committed change (replace_dirs) whose process died: each other staging folder
    still there takes its final folder's place, then ``leader`` takes ``final``'s. Called under
    ``final``'s lock; the others' are taken here. False, with nothing moved, when another live
    process holds one of them, or a final folder there is not this tool's."""
    listed = _ready(leader)
    if listed is None or listed[0] != "leader":
        return False
    moves = []
    for member in listed[1]:
        if not os.path.lexists(member):
            continue  # in place already: the members go before the leader
        leader_of = _leader_of(member) if _is_partial(member) else None
        if leader_of is None or not _same(leader_of, leader):
            continue  # not a folder of this change: never touched
        target = _final_of(member)
        if os.path.lexists(target) and not is_ours(target):
            return False
        moves.append((member, target))
    with contextlib.ExitStack() as locks:
        if not all(locks.enter_context(_lock_if_free(lock_path(target))) for _, target in moves):
            return False
        pid = _marker_pid(leader)
        for member, target in moves:
            replace_dir(member, target)
            (target / READY).unlink(missing_ok=True)
            _remove_olds(target)
        replace_dir(leader, final)
        (final / READY).unlink(missing_ok=True)
        _remove_olds(final)
    if pid not in _reported:
        _reported.add(pid)
        print(
            f"note: {final} was being replaced when process {pid or '?'} ended (killed?); "
            "its replacement is finished now, as that process would have finished it",
            file=sys.stderr,
        )
    return True


def _marker_pid(folder: Path) -> str:
    """The process that made a staging folder, from its marker ("" when unknown)."""
    try:
        pid = (Path(folder) / MARKER).read_text(errors="replace").split(" ", 1)[0]
    except OSError:
        return ""
    return pid if pid.isdigit() else ""


def _remove_olds(final: Path) -> None:
    """The folders set aside on the way to ``final`` (called with its lock held, ``final`` in
    place): what a killed process did not get to remove."""
    try:
        entries = list(final.parent.glob(f".{glob.escape(final.name)}.old-*"))
    except OSError:
        return
    for entry in entries:
        match = LEFTOVER.match(entry.name)
        if match and match["name"] == final.name and is_ours(entry):
            shutil.rmtree(entry, ignore_errors=True)


def settle(final: Path) -> None:
    """Before a read of ``final``: finish a change of it (or of the change it belongs to) that a
    killed process committed but did not finish (replace_dirs). Nothing else is touched; quiet
    when nothing is pending, the folder cannot be written or a live process holds it."""
    final = Path(final)
    try:
        partials = [
            p
            for p in final.parent.glob(f".{glob.escape(final.name)}.partial-*")
            if _is_partial(p) and _final_of(p).name == final.name
        ]
    except OSError:
        return
    for partial in partials:
        ready = _ready(partial)
        if ready is None:
            continue
        leader = partial if ready[0] == "leader" else _leader_of(partial)
        if leader is None:
            continue
        with _lock_if_free(lock_path(_final_of(leader))) as free:
            if free and _ready(leader) is not None:
                _finish(leader, _final_of(leader))


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

#: hidden staging names: staging_dir's ".<name>.partial-<random>" and replace_dir's
#: ".<name>.old-<pid>"
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


def _release(path: Path, descriptor: int) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(descriptor)  # closing releases the flock


def _holder(path: Path) -> str:
    """ "process 123 (a sweep)", from what the holder wrote into the lock file."""
    try:
        pid, _, what = path.read_text().strip().partition(" ")
    except OSError:
        pid, what = "", ""
    return (f"process {pid}" if pid.isdigit() else "another process") + (
        f" (a {what})" if what.isidentifier() else ""
    )


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
                descriptor = _try_lock(path)
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
                    f"{folder} is being written by {_holder(path)}; wait for it "
                    "to finish, or use another --name"
                )
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
            by_name.setdefault(entry.name[1 : -len(".lock")], [])
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
        _held_here.add(os.path.abspath(lock_path(folder / name)))
        try:
            _report_dead_holder(lock_path(folder / name), descriptor)
            removed += _remove_leftovers(folder / name, leftovers)
        finally:
            _held_here.discard(os.path.abspath(lock_path(folder / name)))
            _release(lock_path(folder / name), descriptor)
    return removed


#: what folder_lock writes into its lock file: "<pid> <what>"
_LOCK_TEXT = re.compile(rb"^[0-9]+ [a-z]+\n$")


def _is_our_lock(entry: Path) -> bool:
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
        pid, _, what = (
            os.pread(descriptor, 200, 0).decode("utf-8", "replace").strip().partition(" ")
        )
    except OSError:
        return
    if not pid.isdigit() or pid in _reported or int(pid) == os.getpid():
        return
    name = path.name[1 : -len(".lock")]
    if _pending(path.parent / name):  # it did finish: its clean-up says so (_finish)
        return
    _reported.add(pid)
    print(
        f"note: an earlier {what if what.isidentifier() else 'writer'} of "
        f"{path.parent / name} did not finish (process {pid} ended before it was done: "
        "killed, or os._exit in the model); nothing of it was written",
        file=sys.stderr,
    )


def _pending(final: Path) -> bool:
    """A committed change of ``final`` (replace_dirs) left for a finisher."""
    try:
        return any(
            _is_partial(p) and is_committed(p)
            for p in final.parent.glob(f".{glob.escape(final.name)}.partial-*")
        )
    except OSError:
        return False


def _remove_leftovers(final: Path, leftovers: list[Path]) -> list[Path]:
    """What dead writers left on the way to ``final`` (its lock held): a committed change is
    finished (replace_dirs), a folder set aside with nothing in its place is put back, and the
    rest removed, except the staging folders of a committed change led from elsewhere."""
    leaders = sorted(
        (p for p in leftovers if _is_partial(p) and (_ready(p) or ("",))[0] == "leader"), key=_mtime
    )
    kept = []
    if leaders:
        if _finish(leaders[-1], final):  # the newest: it replaced the others
            leftovers = [p for p in leftovers if os.path.lexists(p) and p != leaders[-1]]
        else:  # its other folders are held by a live process: finished later
            kept.append(leaders[-1])
    kept += [p for p in leftovers if _is_partial(p) and _leader_of(p) is not None]
    olds = sorted((p for p in leftovers if _leftover_part(p, "kind") == "old"), key=_mtime)
    if olds and not final.exists():
        os.replace(olds[-1], final)
        kept.append(olds[-1])
    leftovers = [p for p in leftovers if p not in kept]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    return leftovers


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0
