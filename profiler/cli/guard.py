"""What every command call runs inside: a user error as one ``error:`` line and exit status 2
(the traceback under it with -v), Ctrl-C as status 130, a closed pipe as silence, -q/--quiet and
-v/--verbose set for the call; and the program's name as the user typed it.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import typing
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from profiler import notices, signals
from profiler.cli.output import VERBOSITY, Output
from profiler.errors import Interrupted, UserError, os_error_line

P = ParamSpec("P")
R = TypeVar("R")

#: -q/--quiet and -v/--verbose, taken by every command (and before it: `profile.py -q run ...`)
QUIET_HELP = "No progress or notes on stderr; warnings, errors and the results stay."
VERBOSE_HELP = (
    "More on stderr: the files each target resolved to, a run's full config, and "
    "the traceback under an error line."
)


def print_version(value: bool) -> None:
    if value:
        from profiler import package_version

        typer.echo(f"{prog_name()} (infer-profiler) {package_version()}")
        raise typer.Exit()


def exit_with(code: int) -> None:
    if code:
        raise typer.Exit(code)


def say(line: str) -> None:
    """One line on stderr, escaped (Output.say): the error, interrupted and notice lines."""
    Output().say(line)


def set_verbosity(quiet: bool, verbose: bool) -> None:
    if quiet and verbose:
        raise UserError("-q/--quiet and -v/--verbose exclude each other")
    VERBOSITY["level"] = -1 if quiet else 1 if verbose else 0


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn a UserError into one line on stderr and exit status 2 (with -v, the traceback
    after it); Ctrl-C into status 130. The command also takes -q/--quiet and -v/--verbose
    (profiler.cli.output.Output reads them)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        quiet, verbose = bool(kwargs.pop("quiet", False)), bool(kwargs.pop("verbose", False))
        try:
            if quiet or verbose:  # else as given before the command (main_options)
                set_verbosity(quiet, verbose)
            with notices.told(say, quiet=lambda: VERBOSITY["level"] < 0):
                return _file_errors_as_user_errors(functools.partial(command, *args, **kwargs))
        except UserError as error:
            say(f"error: {error}")
            if VERBOSITY["level"] > 0:
                _traceback(error)
            raise typer.Exit(2) from None
        except BrokenPipeError:  # `| head`: the reader has what it wanted, nothing to say
            _stdout_to_devnull()
            raise typer.Exit(0) from None
        except Interrupted as stop:
            say(f"interrupted: {stop}")
            raise typer.Exit(stop.exit_code) from None
        except KeyboardInterrupt as stop:  # Ctrl-C; SIGTERM and SIGHUP inside as_interrupts()
            by = "" if signals.describe(stop) == "Ctrl-C" else f" by {signals.describe(stop)}"
            if not signals.quiet_stop():  # else the parent that stopped us says it
                say(f"interrupted{by}: nothing was written for the unfinished run")
            raise typer.Exit(signals.exit_code(stop)) from None
        finally:  # the next command called in this process starts from the default
            VERBOSITY["level"] = 0

    signature = inspect.signature(command)
    added = [
        inspect.Parameter(
            "quiet",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
        ),
        inspect.Parameter(
            "verbose",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(False, "-v", "--verbose", help=VERBOSE_HELP),
        ),
    ]
    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]  # typer reads it
        parameters=[*signature.parameters.values(), *added]
    )
    wrapper.__annotations__ = {**typing.get_type_hints(command), "quiet": bool, "verbose": bool}
    del wrapper.__wrapped__  # typer reads __signature__, not the undecorated command
    return wrapper


def _stdout_to_devnull() -> None:
    """After the reader of stdout left: what is still buffered goes nowhere, so that exiting
    (which flushes stdout) raises no second BrokenPipeError."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor (a test's)
        pass


def _traceback(error: BaseException) -> None:
    """The traceback of a user error and of what it came from (-v: for a bug report)."""
    import traceback

    error.__suppress_context__ = False
    try:
        Output().detail("".join(traceback.format_exception(error)).rstrip("\n"))
    except OSError:
        pass


def _file_errors_as_user_errors(call: Callable[[], R]) -> R:
    """A file that cannot be written or read (a read-only or occupied output folder, a full
    disk, a name too long) is the user's environment, not a bug: one line, like a UserError."""
    try:
        return call()
    except BrokenPipeError:  # `| head`: the reader is gone, nothing to say
        raise
    except OSError as error:  # as the shell says it: "<file>: <reason>"
        raise UserError(os_error_line(error)) from None


def tolerant_output() -> None:
    """Characters the terminal's encoding cannot show (µ, …, unicode paths on an ASCII stdout)
    are escaped instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (stream.encoding or "").lower() not in (
            "utf-8",
            "utf8",
        ):
            stream.reconfigure(errors="replace")


def prog_name() -> str:
    """The name the user typed: ``infer-profile`` for the installed console script, else
    ``profile.py`` (``python profile.py``). Completion scripts are written for this name."""
    invoked = os.path.basename(sys.argv[0] if sys.argv else "")
    return "infer-profile" if invoked.startswith("infer-profile") else "profile.py"


def command_name() -> str:
    """How the user started the program, as hints should spell it: ``infer-profile`` or
    ``python profile.py``."""
    return "infer-profile" if prog_name() == "infer-profile" else "python profile.py"
