"""Tables of typed records, one column spec at a time (as torch.utils.benchmark's Compare lays
out its columns of Measurements): a column names its header, the quantity a record holds for
it, the formatter of profiler.units that spells that quantity (its unit and decimals), and
where the figures shown follow the record's noise, how to read that noise. A view lists its
columns and walks its records through them; no frame stands between the record and the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from profiler.units import missing

#: the record a table's rows are
R = TypeVar("R")
#: the quantity a column reads from it
V = TypeVar("V")

#: a quantity's spelling: its value and the record's relative noise (a CV; None: not known or
#: not used) -> the text of one cell
Spelling = Callable[[V, "float | None"], str]


def _no_noise(row: object) -> float | None:
    return None


@dataclass(frozen=True)
class Column(Generic[R, V]):
    """One column: its ``header``; ``read``, the quantity a record holds for it; ``spell``, that
    quantity's formatter (a value and a relative noise -> text); ``noise``, the record's
    relative noise the figure is printed to (the digits it allows: profiler.units
    .figures_allowed), None where the column's figures do not follow it."""

    header: str
    read: Callable[[R], V]
    spell: Callable[[V, float | None], str]
    noise: Callable[[R], float | None] = _no_noise

    def cell(self, row: R) -> str:
        """The text of ``row``'s cell."""
        return self.spell(self.read(row), self.noise(row))


def cells(columns: Sequence[Column[R, Any]], rows: Sequence[R]) -> list[list[str]]:
    """Every row's cells, column by column."""
    return [[column.cell(row) for column in columns] for row in rows]


def text(value: str | None, noise: float | None = None) -> str:
    """A column of words: the text, "-" where there is none."""
    return value if value else "-"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table of text cells (a ``|`` inside a cell escaped); "_(none)_" without a
    row."""
    if not rows:
        return "_(none)_\n"
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def csv_value(value: object, float_format: str, figure: bool = False) -> object:
    """A record's field as a CSV cell: a float (or any number of a ``figure`` field) in
    ``float_format``, None or NaN empty, anything else as it is (the csv module writes it)."""
    if value is None or missing(value):
        return ""
    if isinstance(value, float) or (figure and isinstance(value, int)):
        return float_format % float(value)
    return value
