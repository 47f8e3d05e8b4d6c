"""scripts/architecture_counts.py: the counts docs/architecture.md quotes are the code's (read
with ast), and the floors' counts that must hold do."""

import ast
import importlib.util
import sys

import pytest

from .conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "architecture_counts", ROOT / "scripts" / "architecture_counts.py"
)
script = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = script  # (a dataclass looks its module up)
spec.loader.exec_module(script)


@pytest.fixture(scope="module")
def counts():
    return script.count()


def test_the_doc_quotes_the_counts_of_the_code(counts):
    text = script.DOC.read_text(encoding="utf-8")
    assert script.written(counts, text) == text, (
        "docs/architecture.md: its counts are stale; run python scripts/architecture_counts.py"
    )


def test_no_loop_and_no_import_up_or_across_the_floors(counts):
    assert counts.loops == []
    assert counts.across == []
    assert counts.private == []
    assert counts.torch_outside == []
    assert counts.root and all(name != "__init__" for name in counts.root)


def test_check_exits_1_on_a_stale_doc_and_writing_makes_it_current(
    counts, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(script, "count", lambda: counts)
    doc = tmp_path / "architecture.md"
    doc.write_text(f"# A\n\ntext\n\n{script.BEGIN}\n- import loops: 7\n{script.END}\n\nafter\n")
    assert script.main(["--check"], doc) == 1
    assert "stale" in capsys.readouterr().out
    assert script.main([], doc) == 0
    text = doc.read_text()
    assert text.startswith("# A\n\ntext\n\n") and text.endswith(f"{script.END}\n\nafter\n")
    assert "- import loops: 0\n" in text and "loops: 7" not in text
    assert script.main(["--check"], doc) == 0


def test_a_doc_without_the_markers_is_an_error():
    with pytest.raises(SystemExit, match="needs one"):
        script.split("# A\n")
    with pytest.raises(SystemExit, match="needs one"):
        script.split(f"{script.END}\n{script.BEGIN}\n")


def test_numeric_format_specs_by_kind():
    source = '''
"""A docstring with {braces} and 1.5 in it."""
a = f"{x:.3f} {n:,} {s:.1%} {w:>10} {code:02X} {name}"
b = f"{x:,.{digits}f}"
c = "{:.2f} and {}".format(x, y)
d = {"p50_ms": ".3f", "total": ",.0f", "sep": ",", "version": "1.5", "unit": "x"}
e = "%.1f ms, %d runs, %s" % (x, n, s)
f = format(x, ".2e")
g = "{:,d}"
'''
    found = script.format_specs(ast.parse(source))
    assert found == {"field": 6, "alone": 3, "percent": 2}


def test_loops_are_the_groups_of_modules_that_reach_each_other():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert script.loops(edges) == [["a", "b", "c"], ["d", "e"]]
    assert script.loops({"a": {"b"}, "b": set()}) == []
