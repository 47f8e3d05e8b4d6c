"""The terminal every view prints to."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypedDict

from rich.align import VerticalAlignMethod
from rich.console import (
    Console,
    ConsoleOptions,
    JustifyMethod,
    OverflowMethod,
    RenderableType,
    RenderResult,
)
from rich.measure import Measurement
from rich.style import Style
from rich.table import Column, Table
from rich.text import Text

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: the width of output to a file or a pipe when COLUMNS is not set (rich's own default there
#: is 80)
PIPE_WIDTH = 160


class ColumnOptions(TypedDict, total=False):
    """The keyword options of rich's ``Table.add_column``, which FitTable.add_column passes on."""

    header_style: str | Style | None
    highlight: bool | None
    footer_style: str | Style | None
    style: str | Style | None
    justify: JustifyMethod
    vertical: VerticalAlignMethod
    overflow: OverflowMethod
    width: int | None
    min_width: int | None
    max_width: int | None
    ratio: int | None
    no_wrap: bool


class PipeConsole(Console):
    """A console whose reader leaving (``| head``) raises BrokenPipeError, as print does, for
    the command line to end quietly (rich's own exits with status 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def make_console(stderr: bool = False) -> Console:
    """A real terminal keeps its own width; output to a file or a pipe gets ``COLUMNS`` when
    it is set, else PIPE_WIDTH columns."""
    console = PipeConsole(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = PipeConsole(stderr=stderr, width=PIPE_WIDTH)
    return console


class FitTable(Table):
    """A table whose numbers are never cut: number columns take the width of their widest cell
    (their headers wrap), name columns shrink (they fold onto more lines), and the columns added
    with ``optional`` are left out when the width cannot show the rest whole: the highest
    ``optional`` rank first (True is rank 1), the last added first among equals. A line under
    the table names the columns left out."""

    #: the narrowest a name column is counted when deciding what fits
    NARROWEST = 20
    #: headers stay on one line only where the name columns keep this width too
    ROOMY = 40

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 (rich's Table's)
        kwargs.setdefault("title_justify", "left")
        super().__init__(*args, **kwargs)
        self.optional: list[tuple[int, Column]] = []  # (rank, column), in the order added
        self.numbers: list[Column] = []
        self.whole: list[Column] = []

    def add_column(
        self,
        header: RenderableType = "",
        footer: RenderableType = "",
        *,
        optional: bool | int = False,
        number: bool = False,
        whole: bool = False,
        **kwargs: Unpack[ColumnOptions],
    ) -> None:
        """``optional``: True or a rank (the higher, the sooner the column is left out).
        ``whole``: a name column whose cells the optional columns give way to (they are left
        out until its cells fit on one line); it folds only when none is left."""
        if number:
            kwargs.setdefault("justify", "right")
        elif "no_wrap" not in kwargs:
            kwargs.setdefault("overflow", "fold")
        super().add_column(header, footer, **kwargs)
        if optional:
            self.optional.append((int(optional), self.columns[-1]))
        if number:
            self.numbers.append(self.columns[-1])
        if whole:
            self.whole.append(self.columns[-1])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fitted = self._fixed(console, options, whole_headers=True)
        if fitted._needed(console, options, self.ROOMY) > options.max_width:
            fitted = self._fixed(console, options, whole_headers=False)
        every = list(fitted.columns)
        whole = [fitted.columns[self.columns.index(c)] for c in self.whole]
        self._leave_out(fitted, console, options, whole)
        if whole and fitted._needed(console, options, whole=whole) > options.max_width:
            # their cells cannot have one line each: the whole columns wrap between words,
            # never inside one, and fewer columns give way to them
            fitted.columns = [
                replace(c, width=self._word_width(console, options, c))
                if any(c is w for w in whole)
                else c
                for c in every
            ]
            self._leave_out(fitted, console, options)
        yield from Table.__rich_console__(fitted, console, options)
        left_out = [c for c in self.columns if c.header not in {k.header for k in fitted.columns}]
        if left_out:
            names = ", ".join(_plain(c.header) for c in left_out)
            yield Text(
                f"columns left out for width: {names} (widen the terminal, or use --json)",
                style="dim",
            )

    def _leave_out(
        self,
        fitted: FitTable,
        console: Console,
        options: ConsoleOptions,
        whole: list[Column] | None = None,
    ) -> None:
        """Leave optional columns out of ``fitted`` (the highest rank, the last added first)
        until the rest fits the width, or none is left."""
        order = sorted(range(len(self.optional)), key=lambda i: (self.optional[i][0], i))
        droppable = [fitted.columns[self.columns.index(self.optional[i][1])] for i in order]
        while droppable and fitted._needed(console, options, whole=whole) > options.max_width:
            fitted.columns.remove(droppable.pop())

    def _fixed(self, console: Console, options: ConsoleOptions, whole_headers: bool) -> FitTable:
        """A copy whose number columns are as wide as their widest cell and their header (on
        one line, or wrapped between words)."""
        fitted = copy.copy(self)
        fitted.columns = [
            replace(c, width=self._number_width(console, options, c, whole_headers))
            if c in self.numbers
            else c
            for c in self.columns
        ]
        return fitted

    def _number_width(
        self, console: Console, options: ConsoleOptions, column: Column, whole_header: bool
    ) -> int:
        cells = [Measurement.get(console, options, cell).maximum for cell in column._cells]
        header = Measurement.get(console, options, column.header)
        return max([header.maximum if whole_header else header.minimum, *cells])

    @staticmethod
    def _word_width(console: Console, options: ConsoleOptions, column: Column) -> int:
        """The width of the column's longest word (of its cells and its header)."""
        return max(
            Measurement.get(console, options, cell).minimum
            for cell in [column.header, *column._cells]
        )

    def _needed(
        self,
        console: Console,
        options: ConsoleOptions,
        names: int | None = None,
        whole: list[Column] | None = None,
    ) -> int:
        """The width that shows every number whole, the ``whole`` columns' cells on one line
        and every other name column ``names`` (default NARROWEST) wide, or its widest name
        where that is narrower."""
        need = 0
        for column in self.columns:
            widest = self._measure_column(console, options, column).maximum
            narrowest = max(
                names or self.NARROWEST, column.min_width or 0
            ) + self._get_padding_width(0)
            if column in (whole or ()):  # its widest cell, its header may wrap
                narrowest = max(
                    [
                        *(
                            Measurement.get(console, options, cell).maximum
                            for cell in column._cells
                        ),
                        0,
                    ]
                ) + self._get_padding_width(0)
            need += widest if column.width is not None else min(widest, narrowest)
        return need + self._extra_width


def _plain(header: RenderableType) -> str:
    """A column header as one line of plain text (its markup and line breaks gone)."""
    text = header.plain if isinstance(header, Text) else Text.from_markup(str(header)).plain
    return " ".join(text.split())


#: a space that joins a number to its unit ("12.3 %", "4.29 ms", "0.84 x"): never a line break
_UNIT_AFTER = re.compile(r"(?:%|ms|µs|us|s|x|pt|MiB|GiB|GB/s|MHz|W|C)(?![\w/])")


def break_points(plain: str, width: int, indent: int = 2) -> list[tuple[int, int]]:
    """Where a paragraph's lines start and end at ``width`` columns (the lines after the first
    ``indent`` columns in): at spaces only, never inside a path, a field name or a command (a
    word longer than the line overflows whole), nor between a number and its unit, nor before
    a kernel name's bracketed part (``elementwise_kernel [direct_copy…]``)."""
    spaces = [
        i
        for i, c in enumerate(plain)
        if c == " "
        and plain[i + 1 : i + 2] != "["
        and not (i and plain[i - 1].isdigit() and _UNIT_AFTER.match(plain, i + 1))
    ]
    lines, start, room = [], 0, max(width, 20)
    while len(plain) - start > room:
        fitting = [i for i in spaces if start < i <= start + room]
        cut = fitting[-1] if fitting else next((i for i in spaces if i > start), None)
        if cut is None:
            break
        lines.append((start, cut))
        start, room = cut + 1, max(width - indent, 20)
    lines.append((start, len(plain)))
    return lines


def print_prose(console: Console, markup: str, indent: int = 2) -> None:
    """A paragraph (rich markup) wrapped to the console's width (the terminal's, or COLUMNS)
    by break_points, its lines after the first indented ``indent`` columns."""
    text = Text.from_markup(markup)
    out = Text()
    for k, (start, end) in enumerate(break_points(text.plain, console.width, indent)):
        if k:
            out.append("\n" + " " * indent)
        out.append_text(text[start:end])
    console.print(out, soft_wrap=True, highlight=False)
