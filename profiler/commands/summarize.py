"""`summarize`: resolve the target, summarize it, join ncu measurements, print, export."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import UserError
from ..runs import resolve_target

VIEWS = ("all", "overview", "kernels", "categories", "operators", "phases")


def run(target: str, view: str = "all", top: int = 20, out: Path | None = None,
        json_out: bool = False, ncu: str | None = None) -> None:
    if view not in VIEWS:
        raise UserError(f"unknown --view {view!r}; choose one of: {', '.join(VIEWS)}")
    if top < 0:
        raise UserError(f"--top must be 0 (all) or more (got {top})")
    resolved = resolve_target(target)
    if resolved.note:
        print(resolved.note, file=sys.stderr)
    summary = resolved.summary()
    joined = agreement = None
    ncu_path = _ncu_csv(target, ncu)
    if ncu_path is not None:
        from ..trace.hardware import agreement_share, hardware_join, read_ncu_csv

        print(f"Nsight Compute measurements: {ncu_path}", file=sys.stderr)
        joined = hardware_join(summary.kernels.table, read_ncu_csv(ncu_path))
        agreement = agreement_share(joined)
    if out is not None:
        from ..fsutil import write_text_atomic
        from ..report.export import export

        written = export(summary, out, top=0)
        if joined is not None:
            from ..report.hardware_view import export_columns

            write_text_atomic(out / "hardware.csv", export_columns(joined).to_csv(index=False))
            written.append(out / "hardware.csv")
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    if json_out:
        data = summary.to_dict(top=top)
        if joined is not None:
            from ..trace.summary import _clean
            from ..report.hardware_view import export_columns

            rows = export_columns(joined[joined["rules_vs_hardware"] != "not profiled"])
            data["hardware"] = _clean({"ncu_csv": str(ncu_path), **agreement.to_dict(),
                                       "kernels": rows.to_dict(orient="records")})
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    from ..report.console import make_console
    from ..report.tables import print_summary

    console = make_console()
    print_summary(summary, view=view, top=top, console=console)
    if joined is not None and view in ("all", "kernels"):
        from ..report.hardware_view import print_hardware

        print_hardware(joined, agreement, top, console)


def _ncu_csv(target: str, ncu: str | None) -> Path | None:
    """--ncu (a CSV, or a run folder holding ncu.csv), else ncu.csv in the target's run folder."""
    from ..runs import ncu_csv_of

    if ncu is None:
        return ncu_csv_of(target)
    found = ncu_csv_of(ncu)
    if found is None:
        raise UserError(f"--ncu {ncu}: not a CSV file, nor a run folder with ncu.csv")
    return found
