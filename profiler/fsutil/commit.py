"""Several folders replaced as one change (``replace_dirs``: a READY file in each staging
folder, the leader's written last is the commit), and the finishing of a change a killed
process committed but did not finish (``settle``, ``finish_change``), with the one note that
says so (``report_dead_holder``: a profiler.notices note, which the command line says)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import stat
from pathlib import Path

from profiler import notices
from profiler.errors import UserError
from profiler.fsutil.files import write_text_atomic
from profiler.fsutil.lockfile import lock_if_free, lock_path
from profiler.fsutil.staging import (
    LEFTOVER,
    MARKER,
    READY,
    final_of,
    is_ours,
    is_partial,
    replace_dir,
)


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


def ready_of(folder: Path) -> tuple[str, list[Path]] | None:
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


def leader_of(member: Path) -> Path | None:
    """The leader of the committed change ``member`` (a staging folder) belongs to; None when
    it belongs to none, or to one not committed (yet, or ever: its writer was killed first)."""
    ready = ready_of(member)
    if ready is None or ready[0] != "member" or len(ready[1]) != 1:
        return None
    leader = ready[1][0]
    listed = ready_of(leader)
    if listed is None or listed[0] != "leader" or not is_partial(leader):
        return None
    return leader if any(_same(member, other) for other in listed[1]) else None


def is_committed(staging: Path) -> bool:
    """A staging folder of a committed change (replace_dirs) that is not in place yet: what a
    killed process left for the next clean-up or read to finish, never to remove."""
    ready = ready_of(staging)
    return ready is not None and (ready[0] == "leader" or leader_of(staging) is not None)


def finish_change(leader: Path, final: Path) -> bool:
    """Finish a committed change (replace_dirs) whose process died: each other staging folder
    still there takes its final folder's place, then ``leader`` takes ``final``'s. Called under
    ``final``'s lock; the others' are taken here. False, with nothing moved, when another live
    process holds one of them, or a final folder there is not this tool's."""
    listed = ready_of(leader)
    if listed is None or listed[0] != "leader":
        return False
    moves = []
    for member in listed[1]:
        if not os.path.lexists(member):
            continue  # in place already: the members go before the leader
        its_leader = leader_of(member) if is_partial(member) else None
        if its_leader is None or not _same(its_leader, leader):
            continue  # not a folder of this change: never touched
        target = final_of(member)
        if os.path.lexists(target) and not is_ours(target):
            return False
        moves.append((member, target))
    with contextlib.ExitStack() as locks:
        if not all(locks.enter_context(lock_if_free(lock_path(target))) for _, target in moves):
            return False
        pid = _marker_pid(leader)
        for member, target in moves:
            replace_dir(member, target)
            (target / READY).unlink(missing_ok=True)
            _remove_olds(target)
        replace_dir(leader, final)
        (final / READY).unlink(missing_ok=True)
        _remove_olds(final)
    if pid not in reported:
        reported.add(pid)
        notices.note(
            f"{final} was being replaced when process {pid or '?'} ended (killed?); "
            "its replacement is finished now, as that process would have finished it"
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
            if is_partial(p) and final_of(p).name == final.name
        ]
    except OSError:
        return
    for partial in partials:
        ready = ready_of(partial)
        if ready is None:
            continue
        leader = partial if ready[0] == "leader" else leader_of(partial)
        if leader is None:
            continue
        with lock_if_free(lock_path(final_of(leader))) as free:
            if free and ready_of(leader) is not None:
                finish_change(leader, final_of(leader))


#: the processes whose unfinished work this process has reported (one line each)
reported: set[str] = set()


def report_dead_holder(path: Path, descriptor: int) -> None:
    """A lock file taken over from a holder that never let go (its process ended without
    finishing: killed, or a model that called os._exit): one note, once per process.
    What it holds is the holder's ``PID what`` line."""
    try:
        pid, _, what = (
            os.pread(descriptor, 200, 0).decode("utf-8", "replace").strip().partition(" ")
        )
    except OSError:
        return
    if not pid.isdigit() or pid in reported or int(pid) == os.getpid():
        return
    name = path.name[1 : -len(".lock")]
    if _pending(path.parent / name):  # it did finish: its clean-up says so (finish_change)
        return
    reported.add(pid)
    notices.note(
        f"an earlier {what if what.isidentifier() else 'writer'} of "
        f"{path.parent / name} did not finish (process {pid} ended before it was done: "
        "killed, or os._exit in the model); nothing of it was written"
    )


def _pending(final: Path) -> bool:
    """A committed change of ``final`` (replace_dirs) left for a finisher."""
    try:
        return any(
            is_partial(p) and is_committed(p)
            for p in final.parent.glob(f".{glob.escape(final.name)}.partial-*")
        )
    except OSError:
        return False
