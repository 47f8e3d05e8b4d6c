"""The one sink of every command's output: human (tables and lines on a terminal console) or
``--json`` (one document on stdout, its kind and version first: profiler.cli.documents).

The CLI makes one ``Output`` per command call and hands it to the command, which prints nothing
itself: it draws its tables on ``out.console``, says a result line with ``out.line`` and gives its
``--json`` document to ``out.document``. Progress, notes and warnings stay on stderr.
"""

from __future__ import annotations

import json
import sys
from functools import cached_property

from rich.console import Console

from profiler.cli.documents import DOCUMENTS, schema_id
from profiler.report.console import make_console


class Output:
    """``json``: the command prints one document (``document``) instead of its tables."""

    def __init__(self, json: bool = False) -> None:
        self.json = json

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
