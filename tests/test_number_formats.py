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
#: the two files a numeric format spec may stand in: the quantity formatters and the views' tables
ALLOWED = {"units.py", "report/fmt.py"}


def files_with_specs(package=PACKAGE) -> dict[str, int]:
    """Module (relative to ``package``) -> its numeric format specs, for those that have any."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if specs := script.format_specs(ast.parse(path.read_text(encoding="utf-8"))):
            found[path.relative_to(package).as_posix()] = sum(specs.values())
    return found


def test_numeric_format_specs_stand_in_the_two_formatter_files_alone():
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
    quantities = {"time", "rate", "size", "percent", "ratio", "count", "number", "significant"}
    assert quantities | {"missing", "CSV_FLOATS"} <= shared
    assert sorted(n for n in shared if getattr(fmt, n) is not getattr(units, n)) == []
    assert fmt.significant(0.012345) == "0.0123"
    assert fmt.significant(None) == "not finite"
    assert fmt.significant(None, not_finite=fmt.NOT_FINITE) == "[red]not finite[/]"


def test_a_time_is_shown_in_its_unit_or_the_largest_it_reaches():
    from profiler.units import time

    assert time(5.7912) == "5.791 ms"
    assert time(1150.0534, labelled=False) == "1,150.053"
    assert time(1150.0534, thousands=False, labelled=False) == "1150.053"
    assert time(None) == "-" and time(float("nan"), blank="") == ""
    assert time(12.5, "s", decimals=1) == "12.5 s"
    # a trace's µs: the largest unit of those offered that the value reaches 1 of
    every = ("s", "ms", "µs")
    assert time(2_487_216.94, "µs", every, decimals=2) == "2.49 s"
    assert time(2_487.2, "µs", every, decimals=2) == "2.49 ms"
    assert time(999.94, "µs", every, decimals=2) == "999.9 µs"
    assert time(1_000.0, "µs", ("ms", "µs")) == "1.000 ms"
    assert time(2_500_000.0, "µs", ("ms", "µs")) == "2,500.000 ms"
    assert time(0.0025, "s", "ms", decimals=1) == "2.5 ms"
    # the figures a latency's noise allows: fewer as its CV grows, never fewer than its digits
    assert time(7.231, decimals=None, noise=1.8) == "7.2 ms"
    assert time(7.231, decimals=None, noise=0.01) == "7.23 ms"
    assert time(1150.053, decimals=None, noise=0.01) == "1,150 ms"
    assert time(-1.5, sign=True) == "-1.500 ms" and time(1.5, sign=True) == "+1.500 ms"


def test_rate_size_percent_ratio_and_count_each_keep_their_unit():
    from profiler.units import count, percent, rate, ratio, size

    assert rate(1234.56, "GB/s") == "1,234.6 GB/s"
    assert rate(12.345, "TFLOP/s", 2) == "12.35 TFLOP/s"
    assert rate(1234.56, "tokens/s", thousands=False, labelled=False) == "1234.6"
    assert size(1234.5, "MiB") == "1,234.5 MiB"
    assert size(12_300_000, unit="MB") == "12.3 MB"
    assert size(3 * 2**30, unit="GiB", decimals=0) == "3 GiB"
    assert size(None, "MiB", blank="no CUDA") == "no CUDA"
    assert percent(42.14) == "42.1 %" and percent(0.4234, 2) == "0.42 %"
    assert percent(12.5, sign=True) == "+12.5 %" and percent(0.62, 0, of_one=True) == "62 %"
    assert percent(1.5, unit="pt") == "1.5 pt" and percent(float("inf"), sign=True) == "+inf %"
    assert ratio(4.031) == "4.03x" and ratio(3.94, 1) == "3.9x"
    assert ratio(0.8751, 3, suffix="") == "0.875" and ratio(float("nan")) == "-"
    assert count(1234) == "1,234" and count(1234.0) == "1,234" and count(2.5) == "2.50"
    assert count(2.5, fractions=1) == "2.5" and count(3.0, 1) == "3.0"
    assert count(1234.0, 0, thousands=False) == "1234"


def test_a_signed_difference_keeps_its_unit():
    from profiler.report.fmt import signed

    assert signed(1500.0) == "[red]+1.500 ms[/]"
    assert signed(-12.5) == "[green]-12.5 µs[/]"
    assert signed(2.0, "%") == "[red]+2.0 pt[/]"
    assert signed(-3.0, "") == "[green]-3[/]" and signed(0.0, "ms") == "±0.000 ms"
    # a unit the overview has no rule for is still written beside the figure
    assert signed(2.5, "MiB") == "[red]+2.5 MiB[/]"
    assert signed(-1234.5, "samples/s") == "[green]-1,234.5 samples/s[/]"


def test_numbers_are_spelled_by_quantity_not_by_spelling():
    """The formatters named by a spelling (``ms_plain``, ``pct_fine``, ...) are gone: a figure is
    one of the quantities, its unit and decimals given to it."""
    from profiler import units
    from profiler.report import fmt

    by_spelling = (
        "pct", "pct_fine", "change_pct", "times", "us", "us_fine", "ms", "ms_unit", "ms_plain",
        "csv_ms", "seconds", "seconds_unit", "seconds_figure", "tenths", "tenths_plain",
        "fraction", "rounded", "host_load", "mib", "mib_figure", "finite", "trimmed", "share",
        "thousands", "ratio_fine", "md_figure", "layer_ms", "megabytes", "tflops", "gbs",
    )  # fmt: skip
    assert [n for n in by_spelling if hasattr(units, n) or hasattr(fmt, n)] == []


def test_an_interval_with_a_bound_missing_is_a_dash_not_a_crash():
    from profiler.report.fmt import interval

    assert interval(3.164, 19.7) == "[3.16-19.70]"
    assert interval(None, 2.0) == interval(1.0, float("nan")) == "[-]"
