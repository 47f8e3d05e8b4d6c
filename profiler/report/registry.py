"""The machinery of report sections (profiler.report.sections holds the rows and the lists):
``ReportSection[Subject, Figure]``, one section (its reader and renderers), the ``Context`` a walk
renders with, and the walks of a list of rows on the terminal and on a page. Loads no pandas and
no view: a view that walks rows of its own (profiler.report.run_view, what `run` prints) needs
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rich.console import Console

if TYPE_CHECKING:
    from profiler.report import html

    #: what a page's renderer gives: its sections, none when it has nothing to show
    Sections = list[html.Section]

#: the facade a row reads (RunAnalysis, Comparison, SweepAnalysis)
S = TypeVar("S")
#: the figure a row reads from it
F = TypeVar("F")
T = TypeVar("T")


@dataclass
class Context(Generic[S]):
    """What a walk renders with: the ``subject`` its rows read (a RunAnalysis, Comparison or
    SweepAnalysis), the terminal's ``console``, ``top`` rows of a long table, the run's
    ``label`` in titles and lines (its name on a run page, A or B beside another run), its
    ``name`` on figures, and a sweep page's ``only_decided``."""

    subject: S
    console: Console | None = None
    top: int = 20
    label: str = ""
    name: str | None = None
    only_decided: bool = False

    @property
    def out(self) -> Console:
        if self.console is None:
            raise ValueError("a terminal walk needs a console")
        return self.console

    def about(self, subject: T, label: str) -> Context[T]:
        """The same walk over another subject (a comparison's side), under ``label``."""
        return Context(subject, self.console, self.top, label, self.name, self.only_decided)


@dataclass(frozen=True)
class ReportSection(Generic[S, F]):
    """One section: its ``name``; the ``subject`` it reads and the ``figure`` it shows (the
    classes: mypy infers the row's types from them, the registry's test checks each figure
    read from the fixtures against ``figure``); ``read``, the figure of a subject (None: the
    section is left out); its ``terminal`` and ``html`` renderers (None: not shown there); and
    ``absent``, what a page shows in place of a missing figure (the terminal leaves the
    section out)."""

    name: str
    subject: type[S]
    figure: type[F]
    read: Callable[[S], F | None]
    terminal: Callable[[F, Context[S]], None] | None = None
    html: Callable[[F, Context[S]], Sections] | None = None
    absent: Callable[[Context[S]], Sections] | None = None

    def print(self, ctx: Context[S]) -> None:
        """The figure of ``ctx.subject`` on the terminal; nothing when there is none."""
        assert self.terminal is not None, f"{self.name}: no terminal renderer"
        figure = self.read(ctx.subject)
        if figure is not None:
            self.terminal(figure, ctx)

    def sections(self, ctx: Context[S]) -> Sections:
        """The figure of ``ctx.subject`` as a page's sections; ``absent``'s when there is
        none."""
        assert self.html is not None, f"{self.name}: no HTML renderer"
        figure = self.read(ctx.subject)
        if figure is not None:
            return self.html(figure, ctx)
        return self.absent(ctx) if self.absent is not None else []


#: rows of one subject, each of its own figure
Rows = Sequence[ReportSection[S, Any]]


def print_sections(rows: Rows[S], ctx: Context[S]) -> None:
    """The terminal: each row's figure read from the subject and printed; None left out."""
    for row in rows:
        row.print(ctx)


def page_sections(rows: Rows[S], ctx: Context[S]) -> Sections:
    """A page's sections: each row's figure read from the subject and rendered; None left
    out, or said where the row has an ``absent`` renderer."""
    found: Sections = []
    for row in rows:
        found += row.sections(ctx)
    return found
