"""Command line: the Typer app, assembled from the commands' declarations; no logic lives here.

The commands are declared by family (run_commands, read_commands, verdict_commands,
machine_commands), each call wrapped by profiler.cli.guard. Heavy modules (torch, the harness)
are imported inside the commands that need them, so ``summarize`` and ``--help`` start fast and
work on machines without torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import typer

from profiler import signals
from profiler.cli import (
    history_commands,
    machine_commands,
    read_commands,
    run_commands,
    verdict_commands,
)
from profiler.cli.guard import (
    QUIET_HELP,
    VERBOSE_HELP,
    print_version,
    prog_name,
    say,
    set_verbosity,
    tolerant_output,
)
from profiler.cli.options import HelpCommand, OneLineErrors, OneLineUsage
from profiler.errors import UserError

app = typer.Typer(
    cls=OneLineUsage,
    add_completion=True,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Kernel-level profiling for GPU inference.\n\n"
    "[b]run[/b] profiles one model x backend x batch size and writes a TensorBoard trace under "
    "tb_logs/ and timed results under runs/. [b]summarize[/b] turns any PyTorch profiler (Kineto) "
    "trace into kernel, Tensor Core, occupancy and step-time tables. [b]sweep[/b] runs a backend x "
    "batch-size matrix with speedups; [b]compare[/b] diffs two runs kernel by kernel; [b]plot[/b] "
    "draws a sweep or a run.\n\nTables fit the terminal (narrow ones leave out minor columns); "
    "output to a pipe or a file is $COLUMNS wide when set, else 160.",
)


@app.callback()
def main_options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    verbose: bool = typer.Option(False, "-v", "--verbose", help=VERBOSE_HELP),
) -> None:
    """Kernel-level profiling for GPU inference."""
    try:
        set_verbosity(quiet, verbose)
    except UserError as error:
        say(f"error: {error}")
        raise typer.Exit(2) from None


#: every command, in the order --help lists them: its name, its click class (OneLineErrors: a
#: refused option value is one line that quotes what was given) and its declaration
COMMANDS: list[tuple[str, type[HelpCommand], Callable[..., object]]] = [
    ("run", OneLineErrors, run_commands.run),
    ("backends", HelpCommand, machine_commands.backends),
    ("summarize", OneLineErrors, read_commands.summarize),
    ("tb-compat", HelpCommand, read_commands.tb_compat_command),
    ("tensorboard", HelpCommand, read_commands.tensorboard),
    ("nsys", OneLineErrors, run_commands.nsys),
    ("ncu", OneLineErrors, run_commands.ncu),
    ("sweep", OneLineErrors, verdict_commands.sweep),
    ("compare", HelpCommand, verdict_commands.compare),
    ("advise", HelpCommand, verdict_commands.advise),
    ("plot", HelpCommand, read_commands.plot),
    ("report", HelpCommand, read_commands.report),
    ("peaks", HelpCommand, machine_commands.peaks),
    ("noise", HelpCommand, machine_commands.noise),
]
for name, cls, command in COMMANDS:
    app.command(name, cls=cls)(command)
#: the commands of a group of their own: `history add | check | confirm | list`
app.add_typer(history_commands.app, name="history")


def main(argv: list[str] | None = None) -> int:
    """The command line: SIGTERM and SIGHUP raise where Ctrl-C would from the first instruction
    on (profiler.signals), and nothing this process started outlives it."""
    with signals.as_interrupts():
        try:
            tolerant_output()
            try:
                app(args=argv, prog_name=prog_name())
            except SystemExit as done:
                return int(done.code or 0) if not isinstance(done.code, str) else 1
            return 0
        except KeyboardInterrupt as stop:  # before or after a command's own handling
            by = "" if signals.describe(stop) == "Ctrl-C" else f" by {signals.describe(stop)}"
            if not signals.quiet_stop():
                say(f"interrupted{by}")
            return signals.exit_code(stop)
        finally:
            end_children()


def end_children() -> None:
    """What this process started in the background (profiler.collect.bytecode's compilation),
    ended: on every way out of a command."""
    bytecode = sys.modules.get("profiler.collect.bytecode")
    if bytecode is not None:
        bytecode.stop_precompile(others=False)


if __name__ == "__main__":
    sys.exit(main())
