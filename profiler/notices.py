"""What a command read but did not use, and what stood in: a damaged noise-floor file, a floor
that is not a positive number, a processes.csv that contradicts its result.json. The code that
finds it raises a Python warning (``Notice``: said as ``warning:``; ``Note``: said as
``note:``), so the Python API sees ordinary warnings; the CLI says each one once per command,
as one line on stderr (``told``), however many cells or sides read the same file.

Long work says how far it is with ``progress`` (reading a trace of gigabytes): inside ``told``
a line on stderr, left out like a note by -q/--quiet; the Python API hears nothing."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator


class Notice(UserWarning):
    """Something read was left out; the text names it and says what stood in."""

    word = "warning"


class Note(Notice):
    """The same, for what does not change a figure the user quotes (a note, left out by
    -q/--quiet)."""

    word = "note"


#: how a floor below the CLI says one line on stderr: the CLI hands it Output's note, warn or
#: say; a test hands a list's append; the Python API, print
Say = Callable[[str], None]

#: who hears ``progress``: the innermost ``told``'s say (none outside one)
_LISTENERS: list[Say] = []


def progress(text: str) -> None:
    """One line of progress of long work, said as it is (no ``note:`` word) where a command
    listens (``told``, not with -q); nothing elsewhere."""
    for listener in _LISTENERS[-1:]:
        listener(text)


def warn(text: str) -> None:
    warnings.warn(text, Notice, stacklevel=2)


def note(text: str) -> None:
    warnings.warn(text, Note, stacklevel=2)


@contextlib.contextmanager
def told(say: Say, quiet: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Inside, every Notice is said once through ``say`` as ``<word>: <text>`` (the same text
    once); notes are left out while ``quiet()``. Other warnings are shown as before."""
    said: set[tuple[str, str]] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always", Notice)
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, Notice):
                return shown(message, category, filename, lineno, file, line)
            key = (category.word, str(message))
            if key in said or (category.word == Note.word and quiet()):
                return None
            said.add(key)
            say(f"{key[0]}: {key[1]}")
            return None

        warnings.showwarning = show
        _LISTENERS.append(lambda text: None if quiet() else say(text))
        try:
            yield
        finally:
            _LISTENERS.pop()
