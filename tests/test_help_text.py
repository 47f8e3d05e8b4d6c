"""Every command's --help reads well at 80 columns: no metavar on on/off flags, arguments named in
the usage line, descriptions reflowed as paragraphs (no line ends early, no word is broken),
markup shown as written, one spelling of the install hint."""

import re

import pytest
from typer.testing import CliRunner

from profiler.cli.app import app
from tests.conftest import ROOT

COMMANDS = (
    "run",
    "backends",
    "summarize",
    "tb-compat",
    "tensorboard",
    "nsys",
    "ncu",
    "sweep",
    "compare",
    "advise",
    "plot",
    "report",
    "peaks",
    "noise",
)
BOX = "│╭╮╰╯─┬┴┼├┤"


def help_text(command: str, columns: int) -> str:
    args = [command, "--help"] if command else ["--help"]
    done = CliRunner().invoke(
        app, args, env={"COLUMNS": str(columns), "TERMINAL_WIDTH": None}, prog_name="profile.py"
    )
    assert done.exit_code == 0, done.output
    return done.output


def words(text: str) -> list[str]:
    return re.sub(f"[{BOX}]", " ", text).split()


@pytest.mark.parametrize("command", ("", *COMMANDS))
def test_help_at_80_columns_reads_well(command):
    text = help_text(command, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, command
    assert "<bool>" not in text and "<boolean>" not in text, command
    usage = next(line for line in lines if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    # no word broken across lines: every word at 80 columns is a word of the unwrapped help
    whole = set(words(help_text(command, 1000)))
    assert [word for word in words(text) if word not in whole] == [], command
    # the description (above the first panel) is reflowed: a line ends only where the next
    # word would not have fit in the 78 columns inside the margins
    description = lines[lines.index(usage) + 1 :]
    description = description[: next(i for i, line in enumerate(description) if "╭" in line)]
    for line, after in zip(description, description[1:]):
        if line.strip() and after.strip():
            assert len(line.strip()) + 1 + len(after.split()[0]) > 78, (command, line, after)


def test_usage_names_the_arguments():
    assert "Usage: profile.py compare [OPTIONS] A B" in help_text("compare", 80)
    assert "Usage: profile.py report [OPTIONS] TARGET [TARGET_B]" in help_text("report", 80)


def test_markup_in_help_is_shown_as_written():
    sweep = " ".join(words(help_text("sweep", 80)))
    assert 'pip install -e ".[cluster]"' in sweep
    main = help_text("", 80)  # the meant markup (bold) is still drawn, not printed
    assert "[b]" not in main and "run profiles one model" in " ".join(words(main))


def test_install_hints_have_one_spelling():
    """`pip install -e ".[extra]"` everywhere: in the help and in every message of the code."""
    helps = " ".join(" ".join(words(help_text(command, 200))) for command in ("", *COMMANDS))
    assert "pip install '" not in helps and "pip install -e '" not in helps
    for path in (ROOT / "profiler").rglob("*.py"):
        source = path.read_text()
        for other in ("pip install '", "pip install -e '", "infer-profiler["):
            assert other not in source, (path, other)
