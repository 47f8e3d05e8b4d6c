"""The run options of the CLI, generated from RunConfig's field declarations (config.option).

``@run_options(...)`` gives a command one keyword parameter per RunConfig field (its flag, help,
panel, choices and default as declared there) and hands the command the values back as one
``options`` dict, field name -> value. A field added to RunConfig with ``option()`` becomes a
flag of every command decorated here, with nothing else to write.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar

import typer
import typer.core

from profiler.cli.output import Output
from profiler.runs.config import CliOption, RunConfig, run_options as declared_options

R = TypeVar("R")

try:  # typer 0.2x carries its own copy of click; earlier ones use click itself
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as _click_errors  # type: ignore[no-redef]  # the same module

if TYPE_CHECKING:  # what _ReadableHelp is mixed into: a command or a group (typer's click)
    from typer._click.core import Command as _Command, Context, Parameter
    from typer._click.formatting import HelpFormatter
else:
    _Command = object

MissingParameter, UsageError = _click_errors.MissingParameter, _click_errors.UsageError
NoArgsIsHelpError = getattr(_click_errors, "NoArgsIsHelpError", ())  # click >= 8.2


def _no_flag_metavars(params: list[Parameter]) -> list[Parameter]:
    """On/off flags show no ``<bool>`` in --help (the option's name says it all)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


#: the only rich markup the help texts mean (the examples in bold); any other ``[...]``, such as
#: the extra in ``pip install -e ".[cluster]"``, is text
_MEANT_MARKUP = ("[b]", "[/b]")


def paragraphs(text: str | None) -> str | None:
    """Help text as paragraphs: the lines of a paragraph (a docstring's hard wrap) joined, so
    that the terminal wraps them at its width; paragraphs stay apart (a blank line)."""
    if not text:
        return text
    parts = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(part.split("\n")) for part in parts)


def escape_markup(text: str | None) -> str | None:
    """``text`` with every ``[...]`` shown as written, but the bold of the examples."""
    if not text:
        return text
    from rich.markup import escape

    text = escape(text)
    for tag in _MEANT_MARKUP:
        text = text.replace("\\" + tag, tag)
    return text


@contextlib.contextmanager
def _escaped_help(command: _Command, ctx: Context) -> Iterator[None]:
    """Escape the markup of the help texts while --help is drawn (completion shows them raw)."""
    objects: list[Any] = [command, *command.get_params(ctx)]
    if isinstance(command, typer.core.TyperGroup):
        objects += [command.get_command(ctx, name) for name in command.list_commands(ctx)]
    saved = [(obj, obj.help) for obj in objects if obj is not None]
    try:
        for obj, text in saved:
            obj.help = escape_markup(text)
        yield
    finally:
        for obj, text in saved:
            obj.help = text


class _ReadableHelp(_Command):
    """--help that reads well at any width: no ``<bool>`` on flags, arguments named in the usage
    line (``compare [OPTIONS] A B``), docstrings reflowed as paragraphs, markup escaped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 (click's own)
        super().__init__(*args, **kwargs)
        self.help = paragraphs(self.help)
        params: list[Any] = self.params  # options and typer's arguments have a help text
        for param in params:
            param.help = paragraphs(getattr(param, "help", None))

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _no_flag_metavars(super().get_params(ctx))

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        with _escaped_help(self, ctx):
            super().format_help(ctx, formatter)


class HelpCommand(_ReadableHelp, typer.core.TyperCommand):
    """Every command: readable --help (_ReadableHelp)."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.name.upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class OneLineErrors(HelpCommand):
    """A command whose refused option values (a choice not among those listed, a number that
    is not one) are one ``error:`` line on stderr and exit status 2, as every user error is."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        given = list(args)  # parsing consumes the list
        try:
            return super().parse_args(ctx, args)
        except MissingParameter:  # no value to quote: OneLineUsage says it
            raise
        except typer.BadParameter as error:
            Output().error(refusal(error, given))
            raise typer.Exit(2) from None


class OneLineUsage(_ReadableHelp, typer.core.TyperGroup):
    """The app: a usage mistake (an unknown command or option, a missing argument) is one
    ``error:`` line on stderr and exit status 2 instead of click's usage box."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        with _usage_in_one_line():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Context) -> Any:  # noqa: ANN401 (click's) resolves the command and parses its arguments
        with _usage_in_one_line():
            return super().invoke(ctx)


@contextlib.contextmanager
def _usage_in_one_line() -> Iterator[None]:
    try:
        yield
    except NoArgsIsHelpError:  # no arguments at all: the help, as before
        raise
    except UsageError as error:
        message = error.format_message().rstrip(".")
        where = (
            f"; see '{error.ctx.command_path} --help'"
            if error.ctx is not None and not message.endswith("?")
            else ""
        )  # "Did you mean"
        Output().error(f"{message[:1].lower()}{message[1:]}{where}")
        raise typer.Exit(2) from None


def refusal(error: typer.BadParameter, args: list[str]) -> str:
    """``unknown --flag 'value'; choose one of: a, b`` for a choice, else ``--flag: why``."""
    param = error.param
    flag = param.opts[0] if param is not None and param.opts else "an option"
    choices = getattr(getattr(param, "type_descriptor", None), "choices", None)
    value = _given(param.opts if param is not None else [], args)
    if choices and value is not None:
        return f"unknown {flag} {value!r}; choose one of: {', '.join(map(str, choices))}"
    return f"{flag}: {error.message.removeprefix('Value error, ')}"


def _given(opts: list[str], args: list[str]) -> str | None:
    """The last value given on the command line to an option spelled one of ``opts``."""
    value = None
    for index, arg in enumerate(args):
        for opt in opts:
            if arg == opt and index + 1 < len(args):
                value = args[index + 1]
            elif arg.startswith(opt + "="):
                value = arg[len(opt) + 1 :]
    return value


def _annotation(field_type: object, spec: CliOption) -> object:
    """A type typer understands (``X | None`` as Optional[X]); fixed choices as a Literal, so
    that --help lists them and shell completion offers them."""
    if isinstance(spec.choices, tuple):
        return Literal[spec.choices]
    if spec.parse is not None:  # text the declaration turns into the value (--budget 5m)
        return Optional[str]  # noqa: UP045 (typer reads the annotation at run time)
    args = [a for a in typing.get_args(field_type) if a is not type(None)]
    if args:
        return Optional[args[0]]  # noqa: UP045 (as above)
    return field_type


def _parameters(
    skip: tuple[str, ...], defaults: dict[str, Any], helps: dict[str, str], lists: bool
) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(RunConfig)
    default_config = RunConfig()
    found = []
    for name, spec in declared_options().items():
        if name in skip:
            continue
        default = defaults.get(name, getattr(default_config, name))
        annotation, help = _annotation(hints[name], spec), helps.get(name, spec.help)
        if lists and spec.axis:  # a sweep axis: one value, or a comma-separated list
            annotation, default = str, str(default)
            help += " A comma-separated list (e.g. 16,64) runs one cell per value."
        complete = None if not callable(spec.choices) else _completion(spec.choices)
        metavar = None
        if spec.choices is not None:  # a short metavar; the choices in the help text (those
            # a callable gives now: a backend registered at run time is not listed, but runs)
            metavar = f"<{spec.key.split('_')[-1]}>"
            listed = spec.choices() if callable(spec.choices) else spec.choices
            if not all(choice in help for choice in listed):
                help += f" One of: {', '.join(listed)}."
        option = typer.Option(
            default,
            *spec.flags,
            help=help,
            rich_help_panel=spec.panel,
            envvar=spec.envvar,
            autocompletion=complete,
            metavar=metavar,
        )
        found.append(
            inspect.Parameter(
                spec.key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
            )
        )
    return found


def _completion(source: Callable[[], list[str]]) -> Callable[[str], list[str]]:
    """Shell completion from a list asked for only when completing (the backend registry,
    whose names the registry itself checks, in one line)."""

    def complete(incomplete: str) -> list[str]:
        return [value for value in source() if value.startswith(incomplete)]

    return complete


#: the options of the commands that time configs again in fresh processes (sweep, compare),
#: declared once: field name -> its flag, and its help in each command (what a process is there)
FRESH_PROCESS_OPTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "processes": (
        "--processes",
        {
            "sweep": "Rounds after the cells: each round is one fresh process timing every cell "
            "once (latency and GPU time), the order rotated, so drift hits every cell alike and "
            "two cells of one round pair up. Both verdicts and their intervals rest on them "
            "(default 5 on GPUs; 3 is the quick mode; 1: the cells' own windows only, the default "
            "on a CPU). With several --gpus the rounds run at once, one process per GPU; the cells "
            "a verdict compares always share a process, so a GPU.",
            "compare": "Time both configs again in N fresh processes, each timing A and B (A B, "
            "B A, ...), and base every figure and both verdicts on those windows (the run folders "
            "are not changed; 5 is the default when --target-noise is given, 3 the quick mode). "
            "Without it the verdicts use the processes each run recorded (--repeat-runs, a sweep's "
            "--processes); with one process a side the figure's floor (`noise`, else the worst "
            "case measured on an H100) stands in for the spread.",
        },
    ),
    "target_noise": (
        "--target-noise",
        {
            "sweep": "Two stages: the --processes rounds as a pilot choose how many fresh rounds "
            "each cell's interval needs for ±P % (e.g. 2; GPU time where measured), within "
            "--budget; the verdicts use only the fresh rounds.",
            "compare": "Two stages: the --processes rounds as a pilot choose how many fresh "
            "processes each side's interval needs for ±P % (e.g. 2), within --budget; the verdicts "
            "use only the fresh ones.",
        },
    ),
    "budget": (
        "--budget",
        {  # text: profiler.commands.parse_budget reads it
            "sweep": "How long the --target-noise rounds may take (300, 90s, 5m, 1h; default "
            "10m); without --target-noise, how long undecided cells may go on past --processes "
            "rounds (sequential rounds; none past them by default).",
            "compare": "How long the --target-noise processes may take (300, 90s, 5m, 1h; default "
            "10m).",
        },
    ),
}


def fresh_process_option(name: str, command: str) -> Any:  # noqa: ANN401 (typer's Option)
    """The typer option ``name`` of FRESH_PROCESS_OPTIONS as ``command`` takes it (no
    default: the command's own default applies)."""
    flag, helps = FRESH_PROCESS_OPTIONS[name]
    return typer.Option(None, flag, help=helps[command])


def run_options(
    *,
    skip: tuple[str, ...] = (),
    defaults: dict[str, Any] | None = None,
    helps: dict[str, str] | None = None,
    lists: bool = False,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Add every declared run option to a command, except the fields named in ``skip``;
    ``defaults`` and ``helps`` (field name -> value) change one for this command. With
    ``lists`` (a sweep), an option declared with an ``axis`` takes text: one value or a
    comma-separated list. The command takes ``options``: field name -> value, for every field
    not skipped."""
    defaults, helps = defaults or {}, helps or {}

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        hints = typing.get_type_hints(command)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.name != "options"
        ]
        added = _parameters(skip, defaults, helps, lists)
        keys = {spec.key: name for name, spec in declared_options().items() if name not in skip}
        parsers = {
            name: spec.parse
            for name, spec in declared_options().items()
            if name not in skip and spec.parse is not None
        }

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> R:  # noqa: ANN401 (the command's own options)
            options = {keys[key]: kwargs.pop(key) for key in list(kwargs) if key in keys}
            for name, parse in parsers.items():
                if isinstance(options.get(name), str):
                    options[name] = parse(options[name])
            return command(options=options, **kwargs)

        wrapper.__signature__ = inspect.Signature(own + added)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
        del wrapper.__wrapped__  # typer reads __signature__, not the undecorated command
        return wrapper

    return decorate


#: run and sweep --history DB: their runs recorded into the results history as they finish
#: (profiler.runs.history_store; `history add` does it afterwards)
HISTORY_OPTION: Any = typer.Option(
    None,
    "--history",
    help="Also record the results into this history.",
    rich_help_panel="Output",
)
#: --commit beside --history: the commit the runs measured
COMMIT_OPTION: Any = typer.Option(
    None,
    "--commit",
    help="With --history: the commit (default: git HEAD).",
    rich_help_panel="Output",
)
