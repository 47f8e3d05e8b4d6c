"""The terminal every view prints to."""

from __future__ import annotations

import copy
import os
from dataclasses import replace

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table

#: the width of output to a file or a pipe when COLUMNS is not set (rich's own default there
#: is 80)
PIPE_WIDTH = 160


def make_console(stderr: bool = False) -> Console:
    """A real terminal keeps its own width; output to a file or a pipe gets ``COLUMNS`` when
    it is set, else PIPE_WIDTH columns."""
    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(stderr=stderr, width=PIPE_WIDTH)
    return console


class FitTable(Table):
    """A table whose numbers are never cut: number columns take the width of their widest cell
    (their headers wrap), name columns shrink (they fold onto more lines), and the columns added
    with ``optional=True`` are left out, the last added first, when the width cannot show the
    rest whole."""

    #: the narrowest a name column is counted when deciding what fits
    NARROWEST = 20
    #: headers stay on one line only where the name columns keep this width too
    ROOMY = 40

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("title_justify", "left")
        super().__init__(*args, **kwargs)
        self.optional: list[Column] = []
        self.numbers: list[Column] = []
        self.whole: list[Column] = []

    def add_column(self, header="", *, optional: bool = False, number: bool = False,
                   whole: bool = False, **kwargs) -> None:
        """``whole``: a name column whose cells the optional columns give way to (they are left
        out until its cells fit on one line); it folds only when none is left."""
        if number:
            kwargs.setdefault("justify", "right")
        elif "no_wrap" not in kwargs:
            kwargs.setdefault("overflow", "fold")
        super().add_column(header, **kwargs)
        if optional:
            self.optional.append(self.columns[-1])
        if number:
            self.numbers.append(self.columns[-1])
        if whole:
            self.whole.append(self.columns[-1])

    def __rich_console__(self, console, options):
        fitted = self._fixed(console, options, whole_headers=True)
        if fitted._needed(console, options, self.ROOMY) > options.max_width:
            fitted = self._fixed(console, options, whole_headers=False)
        dropped = [fitted.columns[self.columns.index(c)] for c in self.optional]
        whole = [fitted.columns[self.columns.index(c)] for c in self.whole]
        while dropped and fitted._needed(console, options, whole=whole) > options.max_width:
            fitted.columns.remove(dropped.pop())
        yield from Table.__rich_console__(fitted, console, options)

    def _fixed(self, console, options, whole_headers: bool) -> "FitTable":
        """A copy whose number columns are as wide as their widest cell and their header (on
        one line, or wrapped between words)."""
        fitted = copy.copy(self)
        fitted.columns = [replace(c, width=self._number_width(console, options, c, whole_headers))
                          if c in self.numbers else c for c in self.columns]
        return fitted

    def _number_width(self, console, options, column: Column, whole_header: bool) -> int:
        cells = [Measurement.get(console, options, cell).maximum for cell in column._cells]
        header = Measurement.get(console, options, column.header)
        return max([header.maximum if whole_header else header.minimum, *cells])

    def _needed(self, console, options, names: int | None = None,
                whole: list[Column] | None = None) -> int:
        """The width that shows every number whole, the ``whole`` columns' cells on one line
        and every other name column ``names`` (default NARROWEST) wide, or its widest name
        where that is narrower."""
        need = 0
        for column in self.columns:
            widest = self._measure_column(console, options, column).maximum
            narrowest = (max(names or self.NARROWEST, column.min_width or 0)
                         + self._get_padding_width(0))
            if column in (whole or ()):  # its widest cell, its header may wrap
                narrowest = max([*(Measurement.get(console, options, cell).maximum
                                   for cell in column._cells), 0]) + self._get_padding_width(0)
            need += widest if column.width is not None else min(widest, narrowest)
        return need + self._extra_width
