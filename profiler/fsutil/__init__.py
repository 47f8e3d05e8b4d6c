"""Atomic writes, the one family every file goes through: a crash or Ctrl-C never leaves a
half-written file or run folder behind. Text, bytes and JSON, or any writer given a temp path
(``write_with``, ``atomic_path``); whole folders through ``staging_dir`` and ``replace_dir``.
One writer per folder (``folder_lock``: a lock file beside it), and the removal of what a killed
writer left (``clean_leftovers``).

One module a job: files.py (one file: written whole, moved, read small), staging.py (a folder
built aside and put in place), lockfile.py (a folder's lock file), locks.py (``folder_lock``),
commit.py (several folders replaced as one change, finished after a kill) and leftovers.py
(what killed writers left). Importers use the names below from ``profiler.fsutil``.
"""

from __future__ import annotations

from profiler.fsutil.commit import is_committed, replace_dirs, settle
from profiler.fsutil.files import (
    atomic_path,
    chmod_by_umask,
    current_umask,
    move_into,
    read_small,
    refuse_non_regular,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
    write_with,
)
from profiler.fsutil.leftovers import clean_leftovers, clean_tree
from profiler.fsutil.lockfile import lock_path
from profiler.fsutil.locks import FolderBusy, folder_lock
from profiler.fsutil.staging import (
    LEFTOVER,
    MARKER,
    READY,
    is_ours,
    old_name,
    remove_bare,
    replace_dir,
    set_aside,
    staging_dir,
)

__all__ = [
    "LEFTOVER",
    "MARKER",
    "READY",
    "FolderBusy",
    "atomic_path",
    "chmod_by_umask",
    "clean_leftovers",
    "clean_tree",
    "current_umask",
    "folder_lock",
    "is_committed",
    "is_ours",
    "lock_path",
    "move_into",
    "old_name",
    "read_small",
    "refuse_non_regular",
    "remove_bare",
    "replace_dir",
    "replace_dirs",
    "set_aside",
    "settle",
    "staging_dir",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
    "write_with",
]
