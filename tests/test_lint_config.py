"""The linter and the type checker are configured in pyproject.toml and run by CI and by the
README's check command; mypy is strict on the floors that hold, read and compute the figures and
on the floors above them that are typed through (sweep/, cli/, commands/, report/), where ruff's
annotation rules hold too, and no module of the project is left out of a check. A view of
report/ that its owner is still annotating is excepted from both, by name, in both places."""

import re

import tomllib

from .conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CI = (ROOT / ".ci" / "run").read_text()
#: the mypy flags of --strict (a per-module section cannot say `strict`)
STRICT_FLAGS = (
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "check_untyped_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "strict_equality",
    "extra_checks",
)


def _ci_commands() -> list[str]:
    return [
        line.strip()
        for line in CI.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_ruff_is_configured_to_the_project_style():
    ruff = PYPROJECT["tool"]["ruff"]
    assert ruff["line-length"] == 100
    assert {"E", "F", "W", "I", "B", "UP"} <= set(ruff["lint"]["select"])
    assert ruff["format"]["quote-style"] == "double"


def test_mypy_is_strict_on_runs_trace_analysis_and_the_sections_and_silences_no_project_module():
    mypy = PYPROJECT["tool"]["mypy"]
    assert set(mypy["files"]) == {"profiler", "profile.py"}
    assert "ignore_missing_imports" not in mypy and "ignore_errors" not in mypy
    strict = [o for o in mypy["overrides"] if o.get("disallow_untyped_defs")]
    assert len(strict) == 1
    assert set(strict[0]["module"]) == {
        "profiler.runs.*",
        "profiler.trace.*",
        "profiler.analysis.*",
        "profiler.sweep.*",
        "profiler.cli.*",
        "profiler.commands.*",
        "profiler.report.*",  # the registry (each row's reader and renderers typed) and views
    }
    assert all(strict[0].get(flag) is True for flag in STRICT_FLAGS)
    assert strict[0].get("implicit_reexport") is False
    for override in mypy["overrides"]:
        modules = (
            override["module"] if isinstance(override["module"], list) else [override["module"]]
        )
        assert "ignore_errors" not in override, modules
        if override.get("ignore_missing_imports"):  # third-party libraries, each named
            assert not any(
                m.split(".")[0] in ("profiler", "profile", "tests", "scripts") for m in modules
            ), modules
            assert "*" not in modules


def test_ruff_requires_annotations_exactly_on_the_strict_floors_above_analysis():
    """ANN is selected for the whole tree and ignored outside the listed floors, so a floor is
    added in one place; each of them is also strict under mypy."""
    lint = PYPROJECT["tool"]["ruff"]["lint"]
    assert "ANN" in lint["select"] and "ANN" not in lint.get("ignore", [])
    (negated,) = [p for p, rules in lint["per-file-ignores"].items() if p.startswith("!")]
    assert lint["per-file-ignores"][negated] == ["ANN"]
    floors = re.fullmatch(r"!profiler/\{([a-z,]+)\}/\*\*", negated)
    assert floors, negated
    unignored = [f"profiler/{floor}" for floor in floors.group(1).split(",")]
    assert unignored == ["profiler/sweep", "profiler/cli", "profiler/commands", "profiler/report"]
    overrides = PYPROJECT["tool"]["mypy"]["overrides"]
    strict = next(o for o in overrides if o.get("disallow_untyped_defs"))
    for folder in unignored:
        assert folder.replace("/", ".") + ".*" in strict["module"], folder


def test_ci_and_the_readme_run_the_linter_and_the_type_checker_before_the_tests():
    commands = _ci_commands()
    for check in ("ruff format --check .", "ruff check .", "mypy"):
        assert commands.index(check) < commands.index("python -m pytest"), check
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^ruff format --check \. && ruff check \. && mypy(\s|$)", readme, re.M)


def test_the_dev_extra_installs_the_tools():
    dev = PYPROJECT["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("ruff>=") for d in dev) and any(d.startswith("mypy>=") for d in dev)


def test_ruff_leaves_out_only_the_output_folders_not_a_package_folder_of_the_same_name():
    """``runs`` unanchored would also leave out profiler/runs/ (the records floor)."""
    import subprocess

    shown = subprocess.run(
        ["ruff", "check", "--show-files", "."], cwd=ROOT, capture_output=True, text=True
    ).stdout
    checked = {line.strip() for line in shown.splitlines()}
    package = {str(p) for p in (ROOT / "profiler").rglob("*.py")}
    assert package <= checked, sorted(package - checked)[:5]
    assert not any("/tests/fixtures/" in line for line in checked)


def test_a_view_still_being_annotated_is_excepted_by_name_from_both_checks_and_nothing_else():
    """report/ is strict, but for the views named in ruff's ANN exceptions; the same modules,
    and no other, are checked by mypy as they were before (every strict flag off); each file
    named exists, so an exception cannot outlive its file."""
    from .conftest import ROOT as root

    lint = PYPROJECT["tool"]["ruff"]["lint"]
    excepted = sorted(
        path
        for path, rules in lint["per-file-ignores"].items()
        if not path.startswith("!") and "ANN" in rules
    )
    assert all(re.fullmatch(r"profiler/report/\w+\.py", path) for path in excepted), excepted
    assert all((root / path).is_file() for path in excepted), excepted
    relaxed = [
        o for o in PYPROJECT["tool"]["mypy"]["overrides"] if o.get("disallow_untyped_defs") is False
    ]
    modules = sorted(m for o in relaxed for m in o["module"])
    assert modules == [p.removesuffix(".py").replace("/", ".") for p in excepted]
    for override in relaxed:
        assert all(override.get(flag) is False for flag in STRICT_FLAGS), override
