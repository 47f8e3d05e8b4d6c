"""What a command writes to: the CLI's one output sink per command call
(profiler.cli.output.Output, on the floor above), named here by what the commands use of it, so
every command's signature is typed and the CLI's call hands an Output that mypy holds to it."""

from __future__ import annotations

from typing import Any, Protocol

from rich.console import Console


class Sink(Protocol):
    """Human lines and tables on stdout, or one --json document; notes, details, warnings and
    errors on stderr (profiler.cli.output.Output says how each is shown)."""

    @property
    def json(self) -> bool: ...

    @property
    def quiet(self) -> bool: ...

    @property
    def verbose(self) -> bool: ...

    @property
    def console(self) -> Console: ...

    @property
    def err_console(self) -> Console: ...

    def note(self, text: str) -> None: ...

    def detail(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...

    def error(self, text: str) -> None: ...

    def line(self, text: str) -> None: ...

    def document(self, kind: str, data: dict[str, Any]) -> None: ...
