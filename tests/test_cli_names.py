"""The program answers to the names users type: ``infer-profile`` (the console script) and
``python profile.py``; completion is written for, and completes under, the installed name."""

import os
import subprocess
import sys

from tests.conftest import ROOT


def console_script(tmp_path):
    """An ``infer-profile`` launcher like the one pip writes (the entry point under that name)."""
    script = tmp_path / "infer-profile"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from profiler.cli.app import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def invoke(command, **env):
    return subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, **env}
    )


def test_version_names_the_console_script(tmp_path):
    done = invoke([str(console_script(tmp_path)), "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("infer-profile (infer-profiler) ")


def test_version_names_profile_py():
    done = invoke([sys.executable, "profile.py", "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("profile.py (infer-profiler) ")


def test_completion_script_is_for_infer_profile_and_completes_a_backend(tmp_path):
    script = console_script(tmp_path)
    source = invoke([str(script)], _INFER_PROFILE_COMPLETE="source_bash")
    assert "complete -o default -F _infer_profile_completion infer-profile" in source.stdout
    assert "_INFER_PROFILE_COMPLETE=complete_bash" in source.stdout
    # what that script runs on <TAB> after `infer-profile run --backend pyt`
    done = invoke(
        [str(script)],
        _INFER_PROFILE_COMPLETE="complete_bash",
        COMP_WORDS="infer-profile run --backend pyt",
        COMP_CWORD="3",
    )
    assert done.returncode == 0, done.stderr
    offered = done.stdout.split()
    assert "pytorch_fp32" in offered and all(b.startswith("pyt") for b in offered)


def help_at_80(capsys, monkeypatch, *args: str) -> str:
    """``profile.py ARGS --help`` at 80 columns, in this process: byte for byte what a fresh
    ``python profile.py`` prints (the test of the 80 columns compares the two for `run`)."""
    from profiler.cli.app import main

    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


def test_help_shows_no_bool_metavars(capsys, monkeypatch):
    for args in ([], ["run"], ["sweep"], ["summarize"]):
        text = help_at_80(capsys, monkeypatch, *args)
        assert "<bool>" not in text, args
        assert "--version" in text or args != []


def test_readme_environment_table_lists_every_variable_the_tool_reads():
    import re

    read = set()
    for path in (ROOT / "profiler").rglob("*.py"):
        text = path.read_text()
        read |= set(re.findall(r'environ\.get\(\s*"([A-Z_]+)"', text))
        read |= set(re.findall(r'getenv\(\s*"([A-Z_]+)"', text))
        read |= set(re.findall(r'envvar="([A-Z_]+)"', text))
        read |= set(re.findall(r'locate\("\w+", "([A-Z_]+)"', text))
        read |= set(re.findall(r'^[A-Z_]+ = "(INFER_PROFILER_[A-Z_]+)"', text, re.M))
        read |= set(re.findall(r'^[A-Z_]+_VAR = "([A-Z_]+)"', text, re.M))
    assert {
        "INFER_PROFILER_CACHE",
        "INFER_PROFILER_PYCACHE",
        "COLUMNS",
        "NCU",
        "XDG_CACHE_HOME",
    } <= read
    readme = (ROOT / "docs" / "guide" / "install-and-extras.md").read_text()
    table = readme.split("### Environment", 1)[1].split("\n#", 1)[0]
    missing = {name for name in read if f"`{name}`" not in table and f"`{name}`," not in table}
    assert not missing, missing


COMMANDS = (
    "run",
    "sweep",
    "ncu",
    "nsys",
    "summarize",
    "compare",
    "report",
    "plot",
    "peaks",
    "noise",
    "backends",
    "tb-compat",
    "tensorboard",
)


def test_help_at_80_columns_is_whole_and_run_help_is_short(capsys, monkeypatch):
    """At 80 columns no help text is cut (no word ends in "…"), and `run --help` stays short:
    its options are grouped in panels whose columns leave room for the help text (it was 219
    lines when choices were metavars and every option shared one panel)."""
    run = invoke([sys.executable, "profile.py", "run", "--help"], COLUMNS="80")
    assert run.returncode == 0, run.stderr
    run_help = run.stdout
    assert help_at_80(capsys, monkeypatch, "run") == run_help  # in this process: the same text
    lengths = {}
    for command in ("", *COMMANDS):
        text = help_at_80(capsys, monkeypatch, *([command] if command else []))
        assert "…" not in text, command
        assert max(len(line) for line in text.splitlines()) <= 80, command
        lengths[command] = text.count("\n")
    # (175 before --backend's help listed the backend names: 5 lines at 80 columns)
    assert lengths["run"] <= 180, lengths["run"]
    for panel in ("Output", "Model and batch", "Backend and numerics", "Timing"):
        assert f"─ {panel} ─" in run_help, panel
    assert "One of: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs" in " ".join(
        line.strip("│ ") for line in run_help.splitlines()
    )
