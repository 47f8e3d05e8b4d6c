"""`history`: the results history across commits (a SQLite database), its change points and
the CI gate: `history add`, `history check`, `history confirm`, `history list`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import typer

from profiler.cli.guard import exit_with, user_errors
from profiler.cli.options import HelpCommand, OneLineErrors, OneLineUsage
from profiler.cli.output import Output
from profiler.runs.history_store import DEFAULT_DB, SCHEMA_VERSION

#: the figure the gate reads
GateFigure = Literal["gpu_time", "latency"]
DB_HELP = (
    f"The history database (SQLite, history schema {SCHEMA_VERSION}; created by `history add`, "
    "upgraded when an older one is written to)."
)


#: the database a command reads, as its one argument
DB_ARGUMENT: Path = typer.Argument(DEFAULT_DB, help=DB_HELP)


app = typer.Typer(
    cls=OneLineUsage,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Results across commits: record runs and sweeps into a history database (SQLite, "
    f"history schema {SCHEMA_VERSION}, default {DEFAULT_DB}), find the change points in each "
    "config's series with the kernels behind them, re-time a change to confirm it, and gate CI "
    "on regressions.",
)


@user_errors
def add(
    targets: list[str] = typer.Argument(
        ..., help="Run folders, run names or sweeps (a sweep: each finished cell)."
    ),
    db: Path = typer.Option(DEFAULT_DB, "--db", help=DB_HELP),
    commit: str | None = typer.Option(
        None,
        "--commit",
        help="The commit the runs measured (default: git HEAD of --repo, of a "
        "package.module:function model's folder, or of the current folder).",
    ),
    repo: Path | None = typer.Option(
        None, "--repo", help="The model's git checkout, whose HEAD is the commit."
    ),
) -> None:
    """Record runs and sweeps into the history: the commit, the time, the machine, GPU and
    driver, the config key, each process's latency, GPU time and enqueue medians, and the kernel
    table by category with the top kernels, per profiled step. A run already there (the same
    run id) is not added again. Two writers at once queue on the database's lock.

    Example: [b]python profile.py history add runs/pytorch_fp16_bs8 --commit $GITHUB_SHA[/b]
    """
    from profiler.commands.history import add as add_command

    exit_with(add_command(db, targets, commit, repo, Output()))


@user_errors
def check(
    db: Path = DB_ARGUMENT,
    config: str | None = typer.Option(
        None, "--config", help="One config key (as `history list` prints it); default: every one."
    ),
    figure: GateFigure = typer.Option(
        "gpu_time", "--figure", help="The figure the gate reads: gpu_time or latency."
    ),
    max_slowdown: float = typer.Option(
        2.0, "--max-slowdown", help="The slowdown in % the gate lets through on --figure."
    ),
    recent: int = typer.Option(
        5, "--recent", help="The gate looks at the changes among each series' last N commits."
    ),
    since: str | None = typer.Option(
        None, "--since", help="The gate looks at the changes after this commit instead."
    ),
    until: str | None = typer.Option(
        None,
        "--until",
        help="Check each series as it stood at this commit, its later commits left out: the "
        "check a CI job ran then, replayed.",
    ),
    markdown: Path | None = typer.Option(
        None,
        "--markdown",
        help="Write the Markdown summary here (it is appended to $GITHUB_STEP_SUMMARY too, "
        "where set).",
    ),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML here."),
    json_out: bool = typer.Option(False, "--json", help="Print the check as JSON on stdout."),
) -> None:
    """Find the change points of each config's series and gate on them.

    Each commit's level is the geometric mean of its runs' per-process medians; Apache Otava's
    E-divisive means detection runs on GPU time and on latency. For each change point: the
    commit range, the size of both figures with a 95 % interval from the processes on both
    sides, which moved, and the categories and kernels whose time per profiled step moved
    most. Exit status 1 when a change the gate looks at (--recent, --since) is a regression
    beyond --max-slowdown on --figure and `history confirm` did not refute it; 0 otherwise; 2
    on an error.

    Example: [b]python profile.py history check runs/history.sqlite --max-slowdown 2 --junit history.xml[/b]
    """
    from profiler.commands.history import check as check_command

    exit_with(
        check_command(
            db,
            config=config,
            figure=figure,
            max_slowdown=max_slowdown,
            recent=recent,
            since=since,
            until=until,
            markdown=markdown,
            junit=junit,
            sink=Output(json=json_out),
        )
    )


@user_errors
def confirm(
    db: Path = DB_ARGUMENT,
    change: int = typer.Option(
        ..., "--change", help="The change's number, as `history check` printed it."
    ),
    config: str | None = typer.Option(
        None, "--config", help="The config key `history check` was given, if one was."
    ),
    a_tree: Path | None = typer.Option(
        None, "--a-tree", help="A checkout of the commit before the change (its profile.py runs)."
    ),
    b_tree: Path | None = typer.Option(None, "--b-tree", help="A checkout of the commit after."),
    a_cmd: str | None = typer.Option(
        None, "--a-cmd", help="The command that starts the before commit's profile.py."
    ),
    b_cmd: str | None = typer.Option(None, "--b-cmd", help="The same for the commit after."),
    processes: int = typer.Option(20, "--processes", help="Fresh processes a side."),
    reach: int = typer.Option(
        1,
        "--reach",
        help="Re-time the commit this many before the change's last one and this many after its "
        "first, so that a change placed one commit off still lies between them.",
    ),
    same_within: float = typer.Option(
        1.0, "--same-within", help="The equivalence margin in % of the verdicts."
    ),
) -> None:
    """Re-time the two commits of a change in fresh interleaved processes; both verdicts.

    Each process is a `run` of the config the history recorded, from the commit's code: a
    checkout of it (--a-tree/--b-tree), a command that starts its profile.py (--a-cmd/--b-cmd),
    or the model file each commit's record names when it is still there unchanged (same path,
    same SHA-256). A built-in model's code is the profiler's own: it needs a checkout or a
    command. The verdicts are kept in the database: `history check` marks the change confirmed
    (its verdict on the gated figure is slower or faster) or refuted (the gate then lets it
    through).

    Example: [b]python profile.py history confirm runs/history.sqlite --change 1 --a-tree ../before --b-tree .[/b]
    """
    from profiler.commands.history import confirm as confirm_command

    exit_with(
        confirm_command(
            db,
            change,
            config=config,
            a_cmd=a_cmd,
            b_cmd=b_cmd,
            a_tree=a_tree,
            b_tree=b_tree,
            processes=processes,
            reach=reach,
            same_within=same_within,
            sink=Output(),
        )
    )


@user_errors
def list_command(db: Path = DB_ARGUMENT) -> None:
    """The configs the history holds, with their records and commits."""
    from profiler.commands.history import list_series

    exit_with(list_series(db, Output()))


for name, cls, command in (
    ("add", OneLineErrors, add),
    ("check", OneLineErrors, check),
    ("confirm", OneLineErrors, confirm),
    ("list", HelpCommand, list_command),
):
    app.command(name, cls=cls)(command)
