"""Numbers are spelled in one place: numeric format specs (``{x:.3f}``, ``{n:,}``, ``".1f"``,
``"%.6g"``, as scripts/architecture_counts.py reads them) stand only in profiler/units.py (the
ground's spellings, for every floor's messages and files) and profiler/report/fmt.py (the views'
per-column tables and markup, built on units)."""

import ast
import importlib.util
import sys

from .conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "architecture_counts", ROOT / "scripts" / "architecture_counts.py"
)
script = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = script  # (a dataclass looks its module up)
spec.loader.exec_module(script)

PACKAGE = ROOT / "profiler"
#: the files a numeric format spec may stand in (the issue's target: 3 at most)
ALLOWED = {"units.py", "report/fmt.py"}


def files_with_specs(package=PACKAGE) -> dict[str, int]:
    """Module (relative to ``package``) -> its numeric format specs, for those that have any."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if specs := script.format_specs(ast.parse(path.read_text(encoding="utf-8"))):
            found[path.relative_to(package).as_posix()] = sum(specs.values())
    return found


def test_numeric_format_specs_stand_in_three_files_at_most():
    assert len(ALLOWED) <= 3
    outside = {name: n for name, n in files_with_specs().items() if name not in ALLOWED}
    assert not outside, (
        "numeric format specs outside " + ", ".join(sorted(ALLOWED)) + " (spell the number "
        "with profiler.units or profiler.report.fmt): "
        + ", ".join(f"{name} {n}" for name, n in sorted(outside.items()))
    )


def test_a_planted_spec_is_found(tmp_path):
    package = tmp_path / "profiler"
    (package / "sweep").mkdir(parents=True)
    (package / "sweep" / "clean.py").write_text(
        "def line(x, name):\n    return f'{name}: {x} ms ({name!r:>10})'\n", encoding="utf-8"
    )
    assert files_with_specs(package) == {}
    kinds = {
        "field.py": "def line(x):\n    return f'p50 {x:.3f} ms'\n",
        "template.py": "def line(n):\n    return 'calls {:,}'.format(n)\n",
        "alone.py": "SPEC = '.1f'\n",
        "percent.py": "def line(x):\n    return '%.6g' % x\n",
    }
    for name, text in kinds.items():
        (package / "sweep" / name).write_text(text, encoding="utf-8")
    assert files_with_specs(package) == {f"sweep/{name}": 1 for name in kinds}


def test_the_views_formatter_reexports_the_ground_spellings_never_copies_them():
    from profiler import units
    from profiler.report import fmt

    names = [n for n in vars(units) if not n.startswith("_") and n not in ("annotations", "math")]
    shared = {n for n in names if hasattr(fmt, n)}
    assert {"pct", "ms", "trimmed", "missing", "seconds", "CSV_FLOATS"} <= shared
    # fmt's own significant only adds rich markup (a value that is not finite, in red)
    assert sorted(n for n in shared if getattr(fmt, n) is not getattr(units, n)) == ["significant"]
    assert fmt.significant(0.012345) == units.significant(0.012345) == "0.0123"
