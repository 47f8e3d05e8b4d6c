"""The removal of what a killed writer left (``clean_leftovers``, ``clean_tree``): staging
folders no live process owns go, a folder cut between its two renames is put back, and a
committed change is finished."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from profiler.errors import UserError
from profiler.fsutil.commit import finish_change, leader_of, ready_of, report_dead_holder
from profiler.fsutil.lockfile import held_here, is_our_lock, lock_path, release, try_lock
from profiler.fsutil.staging import LEFTOVER, is_ours, is_partial, leftover_part


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
        elif is_our_lock(entry):  # a killed holder's lock, with no staging folder yet
            by_name.setdefault(entry.name[1 : -len(".lock")], [])
    removed = []
    for name, leftovers in by_name.items():
        if os.path.abspath(lock_path(folder / name)) in held_here:
            # ours, taken before this process made any staging folder: all are leftovers
            removed += _remove_leftovers(folder / name, leftovers)
            continue
        try:
            descriptor = try_lock(lock_path(folder / name))
        except (OSError, UserError):  # read-only, or not our lock: nothing is touched
            continue
        if descriptor is None:
            continue  # a live writer owns them
        held_here.add(os.path.abspath(lock_path(folder / name)))
        try:
            report_dead_holder(lock_path(folder / name), descriptor)
            removed += _remove_leftovers(folder / name, leftovers)
        finally:
            held_here.discard(os.path.abspath(lock_path(folder / name)))
            release(lock_path(folder / name), descriptor)
    return removed


def clean_tree(logdir: Path) -> list[Path]:
    """clean_leftovers in ``logdir`` and in each folder directly below it (a sweep's cells), as
    TensorBoard lists every run folder under its logdir."""
    removed = clean_leftovers(logdir)
    if logdir.is_dir():
        for folder in sorted(logdir.iterdir()):
            if folder.is_dir() and not folder.name.startswith("."):
                removed += clean_leftovers(folder)
    return removed


def _remove_leftovers(final: Path, leftovers: list[Path]) -> list[Path]:
    """What dead writers left on the way to ``final`` (its lock held): a committed change is
    finished (replace_dirs), a folder set aside with nothing in its place is put back, and the
    rest removed, except the staging folders of a committed change led from elsewhere."""
    leaders = sorted(
        (p for p in leftovers if is_partial(p) and (ready_of(p) or ("",))[0] == "leader"),
        key=_mtime,
    )
    kept = []
    if leaders:
        if finish_change(leaders[-1], final):  # the newest: it replaced the others
            leftovers = [p for p in leftovers if os.path.lexists(p) and p != leaders[-1]]
        else:  # its other folders are held by a live process: finished later
            kept.append(leaders[-1])
    kept += [p for p in leftovers if is_partial(p) and leader_of(p) is not None]
    olds = sorted((p for p in leftovers if leftover_part(p, "kind") == "old"), key=_mtime)
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
