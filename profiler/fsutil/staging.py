"""Whole folders built aside and put in place: a staging folder marked as this tool's
(``staging_dir``, ``MARKER``) takes its final folder's place (``replace_dir``), the older one set
aside under its ``.old-`` name first; the names of those hidden folders (``LEFTOVER``)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from profiler.errors import UserError
from profiler.fsutil.files import chmod_by_umask

#: the empty file inside every folder this tool builds (staging folders, and so the run and
#: sweep folders they become): the clean-up removes or restores only folders that hold it
MARKER = ".infer-profiler"


#: the file a finished staging folder holds once it is about to take its final folder's place
#: as part of one change of several folders (replace_dirs): ``leader`` and the paths of the
#: change's other staging folders, one a line, or ``member`` and the leader's path. The
#: leader's file, written last and whole, is the commit of the change.
READY = ".infer-profiler.ready"


#: hidden staging names: staging_dir's ".<name>.partial-<random>" and replace_dir's
#: ".<name>.old-<pid>"
LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>partial|old)-[A-Za-z0-9_]+$")


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


def remove_bare(folder: Path) -> None:
    """Remove a folder this tool made that holds nothing but its own hidden files (a run's
    trace folder when the run recorded no trace)."""
    try:
        bare = is_ours(folder) and all(e.name in (MARKER, READY) for e in Path(folder).iterdir())
    except OSError:
        return
    if bare:
        shutil.rmtree(folder, ignore_errors=True)


def is_partial(path: Path) -> bool:
    match = LEFTOVER.match(Path(path).name)
    return match is not None and match["kind"] == "partial"


def leftover_part(leftover: Path, part: str) -> str:
    """A part ("name", "kind") of the name of ``leftover``, which LEFTOVER matches."""
    match = LEFTOVER.match(leftover.name)
    if match is None:
        raise ValueError(f"not a leftover: {leftover}")
    return match[part]


def final_of(staging: Path) -> Path:
    return staging.parent / leftover_part(staging, "name")
