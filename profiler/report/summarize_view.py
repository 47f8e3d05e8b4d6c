"""The `summarize` command behind the CLI: resolve the target, summarize, print, export."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UserError
from ..trace.summary import resolve_target, summarize
from .tables import VIEWS


def run(target: str, view: str = "all", top: int = 20, out: Path | None = None,
        json_out: bool = False) -> None:
    if view not in VIEWS:
        raise UserError(f"unknown --view {view!r}; choose one of: {', '.join(VIEWS)}")
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    resolved = resolve_target(target)
    if resolved.note:
        print(resolved.note, file=sys.stderr)
    summary = summarize(resolved.path, resolved.context)
    if out is not None:
        from .export import export

        written = export(summary, out, top=0)
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if json_out:
        json.dump(summary.to_dict(top=top), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    from .console import make_console
    from .tables import print_summary

    print_summary(summary, view=view, top=top, console=make_console())
