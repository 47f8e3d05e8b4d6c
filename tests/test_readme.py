"""The README stays short, its links resolve, and every command it shows is real: a command that
reads committed fixtures runs here (in one process, through the CLI) and prints the lines the
README quotes; a command that needs a GPU or writes runs quotes a committed log, named by the
`<!-- source: PATH -->` comment above its block, and the quoted lines are in that log."""

import re
import shlex

import pytest

from .conftest import ROOT

README = ROOT / "README.md"
#: commands the README shows from a committed log instead of running them here (and any command
#: of a block that names its log and reads no committed fixture: the CPU quick start's compare)
FROM_LOGS = {"run", "sweep", "ncu", "nsys", "noise", "peaks"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
BLOCK = re.compile(r"(?:<!-- source: (\S+) -->\n)?```[a-z]*\n(.*?)```", re.S)


def shown_commands(text: str) -> list[tuple[list[str], list[str], str | None]]:
    """(arguments after `python profile.py`, the quoted output lines, the named source) for
    each command in a code block."""
    shown = []
    for source, body in BLOCK.findall(text):
        lines = body.rstrip("\n").split("\n")
        for i, line in enumerate(lines):
            command = re.match(r"(?:\$ )?python profile\.py (.*?)(?:\s+#.*)?$", line)
            if command:
                quoted = lines[i + 1 :] if line.startswith("$ ") else []
                shown.append((shlex.split(command.group(1)), quoted, source or None))
    return shown


def test_readme_is_under_12_kb():
    assert len(README.read_bytes()) < 12_000


@pytest.mark.parametrize(
    "page",
    [README, *sorted((ROOT / "docs" / "guide").glob("*.md"))],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_every_local_link_resolves(page):
    missing = [
        target
        for target in LINK.findall(page.read_text())
        if not re.match(r"[a-z]+:", target)
        and not target.startswith("#")
        and not (page.parent / target.split("#")[0]).exists()
    ]
    assert not missing, missing


def test_readme_keeps_the_set_up_and_test_commands_the_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = "".join(body for _, body in BLOCK.findall(README.read_text()))
    for command in ('pip install -e ".[dev]"', "python -m pytest"):
        assert command in ci and re.search(rf"^{re.escape(command)}(\s|$)", blocks, re.M)


def test_every_readme_command_runs_or_quotes_its_log(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    shown = shown_commands(README.read_text())
    assert {args[0] for args, _, _ in shown} >= {
        "run",
        "summarize",
        "compare",
        "sweep",
        "report",
        "advise",
    }
    for args, quoted, source in shown:
        # a block that names its log quotes it for every command that reads no committed
        # fixture (the CPU quick start's compare of the two runs it made)
        from_log = source and not any(a.startswith("tests/") for a in args[1:])
        if args[0] in FROM_LOGS or "--try" in args or from_log:
            assert source and quoted, f"{args}: no source log named, or no output quoted"
            out = (ROOT / source).read_text()
        else:
            args = [str(ROOT / a) if a.startswith("tests/") else a for a in args]
            done = cli(*args)
            assert done.code == 0, (args, done.stderr)
            out = done.stdout + done.stderr
        for line in quoted:
            assert line.rstrip() in out, (args, line)
