"""A folder of rank traces on the terminal, in HTML and in Markdown (summary.md): each rank's
step, kernel and communication time, the TensorBoard plugin's Distributed view split, the
straggler and its cost; two such folders compared rank by rank and as a whole. Formatting only:
the figures are profiler.analysis.rank_records'."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from profiler.analysis.rank_records import (
    RankComparisonFigures,
    RankRunFigures,
    Straggler,
)
from profiler.analysis.records import plain
from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.report import html
from profiler.report.console import FitTable, print_prose
from profiler.report.export import markdown_table, write_json, write_table
from profiler.report.fmt import count, ratio, safe, time

#: the plugin's figures, as the views head them; what the mark beside them says
PLUGIN_MARK = "†"
PLUGIN_NOTE = (
    f"{PLUGIN_MARK} the TensorBoard plugin's Distributed view gives these too "
    "(torch-tb-profiler 0.4.3, its Computation/Communication Overview as it reads the tb-compat "
    "copy of each trace: computation and communication without their overlap, overlapping, "
    "other; they add up to the step); the other figures are this tool's"
)
#: this tool's figures, in words
TOOL_NOTE = (
    "kernel: the union of non-communication kernels; comm.: the union of communication "
    "kernels (in a trace without kernels, of the collective operators' spans on the steps' "
    "threads: gloo:, nccl:, c10d::, _c10d_functional:: with its wait_tensor); "
    "exposed: the communication no other kernel overlaps; busy: the step without it"
)
#: per-rank columns: record field -> header
RANK_COLUMNS = {
    "step_ms": "step",
    "kernel_ms": "kernel",
    "comm_ms": "comm.",
    "exposed_comm_ms": "exposed comm.",
    "busy_ms": "busy",
    "computation_ms": f"computation{PLUGIN_MARK}",
    "overlapping_ms": f"overlapping{PLUGIN_MARK}",
    "communication_ms": f"communication{PLUGIN_MARK}",
    "other_ms": f"other{PLUGIN_MARK}",
}


def _ms(value: float | None) -> str:
    return time(value, "ms", decimals=3, labelled=False)


def heading(f: RankRunFigures) -> str:
    """The folder in one line: ranks, world, backend, the steps the figures are over."""
    from profiler.analysis.rank_run import spans

    steps = f.common_steps
    over = f"{steps[0]} to {steps[-1]}" if len(steps) > 1 else (steps[0] if steps else "none")
    world = f" of a world of {f.world_size}" if f.world_size is not None else ""
    return (
        f"{f.folder}: {len(f.ranks)} rank traces (ranks {spans(f.ranks)}{world}"
        + (f", {f.backend}" if f.backend else "")
        + f"); {len(steps)} common step(s): {over}"
    )


def straggler_line(s: Straggler | None) -> str:
    if s is None:
        return "straggler: none (fewer than two ranks, or no step every rank holds)"
    return (
        f"straggler: rank {s.rank}, busy {time(s.busy_ms)} per step against the others' "
        f"{time(s.others_busy_ms)}, slowest in {s.slowest_in} of {s.steps} step(s); it costs the "
        f"others {time(s.cost_ms)} per step of waiting in communication (least "
        f"{time(s.cost_min_ms)}, most {time(s.cost_max_ms)} over the steps)"
    )


def ranks_table(f: RankRunFigures) -> Table:
    t = FitTable(title="Ranks (ms per step, mean over the common steps)")
    t.add_column("rank", number=True)
    t.add_column("steps", number=True, optional=True)
    for field, header in RANK_COLUMNS.items():
        t.add_column(header, number=True, optional=field in ("kernel_ms", "comm_ms"))
    for r in f.per_rank:
        t.add_row(
            str(r.rank),
            count(r.steps),
            *(_ms(getattr(r, field)) for field in RANK_COLUMNS),
        )
    return t


def print_ranks(f: RankRunFigures, console: Console) -> None:
    print_prose(console, safe(heading(f)))
    console.print(ranks_table(f))
    print_prose(console, f"[dim]{safe(PLUGIN_NOTE)}; {safe(TOOL_NOTE)}[/]")


def print_straggler(f: RankRunFigures, console: Console) -> None:
    print_prose(console, safe(straggler_line(f.straggler)))


def print_rank_notes(f: RankRunFigures, console: Console) -> None:
    for note in f.notes:
        print_prose(console, f"[yellow]note:[/yellow] {safe(note)}")


def rank_frame(f: RankRunFigures) -> pd.DataFrame:
    """One row per rank: rank, its trace's file name, steps and the mean figures (ms)."""
    return pd.DataFrame(
        [
            {
                "rank": r.rank,
                "trace": Path(r.trace).name,
                "steps": r.steps,
                **{RANK_COLUMNS[k] + " ms": getattr(r, k) for k in RANK_COLUMNS},
            }
            for r in f.per_rank
        ]
    )


def step_frame(f: RankRunFigures) -> pd.DataFrame:
    """One row per rank and step (ms)."""
    return pd.DataFrame(
        [
            {
                "rank": s.rank,
                "step": s.step,
                **{RANK_COLUMNS[k] + " ms": getattr(s, k) for k in RANK_COLUMNS},
            }
            for s in f.per_step
        ]
    )


def ranks_sections(f: RankRunFigures) -> list[html.Section]:
    notes = "".join(html.note("note: " + n) for n in f.notes)
    return [
        html.Section(
            "Ranks (ms per step, mean over the common steps)",
            html.note(heading(f))
            + html.table(rank_frame(f))
            + html.note(PLUGIN_NOTE)
            + html.note(TOOL_NOTE),
        ),
        html.Section("Straggler", html.note(straggler_line(f.straggler))),
        html.Section("Each rank's steps (ms)", html.table(step_frame(f)) + notes),
    ]


def ranks_markdown(f: RankRunFigures) -> str:
    """summary.md of a rank folder."""
    md = [
        f"# Rank traces: `{f.folder}`\n",
        f"- {heading(f)}",
        f"- {straggler_line(f.straggler)}",
        *(f"- note: {n}" for n in f.notes),
        f"- {PLUGIN_NOTE}",
        f"- {TOOL_NOTE}",
        "\n## Ranks (ms per step, mean over the common steps)\n",
        markdown_table(rank_frame(f)),
        "\n## Each rank's steps (ms)\n",
        markdown_table(step_frame(f)),
    ]
    return "\n".join(md)


# ---- two folders ------------------------------------------------------------------------


def _change(a: float | None, b: float | None) -> str:
    return (
        "-" if a is None or b is None else time(b - a, "ms", decimals=3, sign=True, labelled=False)
    )


def compare_ranks_table(c: RankComparisonFigures) -> Table:
    t = FitTable(title="Rank by rank (ms per step, mean over each run's common steps; B - A)")
    t.add_column("rank", number=True)
    for name in ("step", "busy", "exposed comm.", "kernel", "comm."):
        t.add_column(f"{name} A", number=True, optional=name in ("kernel", "comm."))
        t.add_column(f"{name} B", number=True, optional=name in ("kernel", "comm."))
        t.add_column(f"{name} B-A", number=True, optional=name != "step")
    for d in c.ranks:
        cells = [str(d.rank)]
        for field in ("step", "busy", "exposed_comm", "kernel", "comm"):
            a, b = getattr(d, f"{field}_ms_a"), getattr(d, f"{field}_ms_b")
            cells += [_ms(a), _ms(b), _change(a, b)]
        t.add_row(*cells)
    return t


def whole_lines(c: RankComparisonFigures) -> list[str]:
    """The runs as a whole: the job's step (the slowest rank's) and each run's straggler."""
    return [
        f"job step (the slowest rank's step, mean): A {time(c.job_step_ms_a)}, "
        f"B {time(c.job_step_ms_b)}, B/A {ratio(c.job_step_ratio, 3)}",
        f"A: {straggler_line(c.a.straggler)}",
        f"B: {straggler_line(c.b.straggler)}",
    ]


def print_rank_comparison(c: RankComparisonFigures, console: Console) -> None:
    print_prose(console, safe(f"A = {heading(c.a)}"))
    print_prose(console, safe(f"B = {heading(c.b)}"))
    for line in whole_lines(c):
        print_prose(console, safe(line))
    console.print(compare_ranks_table(c))
    for note in c.notes + [f"A: {n}" for n in c.a.notes] + [f"B: {n}" for n in c.b.notes]:
        print_prose(console, f"[yellow]note:[/yellow] {safe(note)}")


def delta_frame(c: RankComparisonFigures) -> pd.DataFrame:
    rows = []
    for d in c.ranks:
        row: dict[str, object] = {"rank": d.rank}
        for field in ("step", "busy", "exposed_comm", "kernel", "comm"):
            a, b = getattr(d, f"{field}_ms_a"), getattr(d, f"{field}_ms_b")
            row[f"{field} ms A"], row[f"{field} ms B"] = a, b
            row[f"{field} ms B-A"] = None if a is None or b is None else b - a
        rows.append(row)
    return pd.DataFrame(rows)


def compare_ranks_sections(c: RankComparisonFigures) -> list[html.Section]:
    notes = c.notes + [f"A: {n}" for n in c.a.notes] + [f"B: {n}" for n in c.b.notes]
    whole = "".join(html.note(line) for line in [f"A = {heading(c.a)}", f"B = {heading(c.b)}"])
    whole += "".join(html.note(line) for line in whole_lines(c))
    return [
        html.Section("The runs as a whole", whole),
        html.Section(
            "Rank by rank (ms per step, mean over each run's common steps)",
            html.table(delta_frame(c)) + "".join(html.note("note: " + n) for n in notes),
        ),
    ]


def export_ranks(f: RankRunFigures, out: Path) -> list[Path]:
    """ranks.csv, steps.csv, summary.json and summary.md of a rank folder in ``out``."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --out folder {out}: {error.strerror}") from None
    written = [
        write_table(out / "ranks.csv", rank_frame(f)),
        write_table(out / "steps.csv", step_frame(f)),
    ]
    written.append(write_json(out / "summary.json", plain(f)))
    write_text_atomic(out / "summary.md", ranks_markdown(f))
    return [*written, out / "summary.md"]
