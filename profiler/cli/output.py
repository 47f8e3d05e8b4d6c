"""The one sink of every command's output: human (tables and lines on a terminal console) or
``--json`` (one document on stdout, its kind and version first: profiler.cli.documents).

The CLI makes one ``Output`` per command call and hands it to the command, which prints nothing
itself: it draws its tables on ``out.console``, says a result line with ``out.line`` and gives its
``--json`` document to ``out.document``. Progress, notes and warnings stay on stderr: ``note``
(what was read or written, progress) is left out by ``-q/--quiet``, ``detail`` is said only with
``-v/--verbose``, ``warn`` always.
"""

from __future__ import annotations

import json
import sys
from functools import cached_property

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

    @cached_property
    def console(self) -> Console:
        """The terminal the human views draw on (stdout)."""
        return make_console()

    def line(self, text: str) -> None:
        """One line of the human result on stdout (a file written, a copy made)."""
        print(text)

    def document(self, kind: str, data: dict) -> None:
        """Print ``data`` as the --json document of ``kind`` (a key of documents.DOCUMENTS):
        ``{"$schema": "infer-profiler/<kind>/<version>", **data}``, indented."""
        if kind not in DOCUMENTS:
            raise KeyError(f"no --json document kind {kind!r} in profiler.cli.documents")
        text = json.dumps({"$schema": schema_id(kind), **data}, indent=1, default=str)
        sys.stdout.write(text + "\n")
