"""The terminal every view prints to."""

from rich.console import Console


def make_console(stderr: bool = False) -> Console:
    """A console that does not squeeze tables into 80 columns when output goes to a file or a
    pipe (rich's default there); a real terminal keeps its own width."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=max(console.width, 160))
    return console
