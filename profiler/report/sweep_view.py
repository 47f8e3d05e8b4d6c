"""A sweep's progress on the terminal: a bar over the cells, and a line per cell."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.markup import escape


@contextlib.contextmanager
def cell_progress(
    console: Console, total: int, quiet: bool = False
) -> Iterator[tuple[Callable[[str], None], Callable[[], None] | None]]:
    """A progress bar over the cells when stderr is a terminal, per-cell lines either way;
    neither when ``quiet`` (-q)."""

    def say(text: str) -> None:
        if not quiet:
            console.print(escape(text), highlight=False, soft_wrap=True)

    if quiet or not console.is_terminal:
        yield say, None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    # the ETA: rich's estimate from the cells done so far (blank until one is)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        "eta",
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("sweep", total=total)

        def advance() -> None:
            bar.advance(task)

        yield say, advance
