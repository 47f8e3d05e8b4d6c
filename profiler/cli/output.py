"""The one sink of every command's output: human (tables and lines on a terminal console) or
``--json`` (one document on stdout, its kind and version first: profiler.cli.documents).

The CLI makes one ``Output`` per command call and hands it to the command, which prints nothing
itself: it draws its tables on ``out.console``, says a result line with ``out.line`` and gives its
``--json`` document to ``out.document``. Progress, notes and warnings stay on stderr: ``note``
(what was read or written, progress) is left out by ``-q/--quiet``, ``detail`` is said only with
``-v/--verbose``, ``warn``, ``error`` and ``say`` always. Nothing else in the package writes to
stderr: what the floors below say reaches it through a ``say``/``note``/``warn`` they are handed,
through ``err_console`` (progress bars) or as a notice (profiler.notices, said here by the app);
tests/test_stderr_sink.py holds it.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cached_property
from typing import Any

from rich.console import Console

from profiler.cli.documents import DOCUMENTS, schema_id
from profiler.report.console import make_console

#: the verbosity of this command call: -1 with -q/--quiet, 0 by default, 1 with -v/--verbose
#: (set by the app from the options, before the command makes its Output)
VERBOSITY = {"level": 0}


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


class Output:
    """``json``: the command prints one document (``document``) instead of its tables.
    ``verbosity``: -1 quiet, 0 default, 1 verbose (default: the command line's)."""

    def __init__(self, json: bool = False, verbosity: int | None = None) -> None:
        self.json = json
        self.verbosity = VERBOSITY["level"] if verbosity is None else verbosity

    @property
    def quiet(self) -> bool:
        """-q/--quiet: no progress and no notes on stderr (warnings and errors stay)."""
        return self.verbosity < 0

    @property
    def verbose(self) -> bool:
        return self.verbosity > 0

    def note(self, text: str) -> None:
        """A note on stderr (a file written, what a target held); none with -q."""
        if not self.quiet:
            _stderr(text)

    def detail(self, text: str) -> None:
        """A line on stderr only with -v/--verbose (which files were read, how)."""
        if self.verbose:
            _stderr(text)

    def warn(self, text: str) -> None:
        """``warning: text`` on stderr, whatever the verbosity."""
        _stderr(f"warning: {text}")

    def error(self, text: str) -> None:
        """``error: text`` on stderr, whatever the verbosity."""
        _stderr(f"error: {text}")

    def say(self, line: str) -> None:
        """One line on stderr whatever the verbosity (the app's error, interrupted and notice
        lines): a newline or another control character in it (from an argument or a file name)
        is written escaped, so nothing can forge a second ``error:`` line; a stderr that is gone
        (a closed terminal sent SIGHUP) is let be: the exit status remains."""
        line = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], line)
        try:
            _stderr(line)
        except OSError:
            pass

    @cached_property
    def console(self) -> Console:
        """The terminal the human views draw on (stdout)."""
        return make_console()

    @cached_property
    def err_console(self) -> Console:
        """The terminal of progress (stderr): a run's phase lines and bars, a sweep's cell
        lines and bar. Its users say nothing on it while ``quiet``."""
        return make_console(stderr=True)

    def line(self, text: str) -> None:
        """One line of the human result on stdout (a file written, a copy made)."""
        print(text)

    def document(self, kind: str, data: dict[str, Any]) -> None:
        """Print ``data`` as the --json document of ``kind`` (a key of documents.DOCUMENTS):
        ``{"$schema": "infer-profiler/<kind>/<version>", **data}``, indented; a number that is
        not finite is written null (JSON has none), a numpy scalar as the number it holds."""
        if kind not in DOCUMENTS:
            raise KeyError(f"no --json document kind {kind!r} in profiler.cli.documents")
        from profiler.trace.summary import json_safe

        text = json.dumps({"$schema": schema_id(kind), **json_safe(data)}, indent=1, default=str)
        sys.stdout.write(text + "\n")
