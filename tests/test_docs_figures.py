"""scripts/check_docs_figures.py: every figure in README.md and docs/**/*.md is found in the
source its section names (a committed log or fixture, or a command's output)."""

import importlib.util

import pytest

from .conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "check_docs_figures", ROOT / "scripts" / "check_docs_figures.py"
)
checker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checker)


@pytest.mark.parametrize("doc", checker.docs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_figure_is_found_in_its_source(doc):
    missing = checker.check(doc)
    assert not missing, "\n".join(missing)


def test_a_figure_missing_from_its_source_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(checker, "ROOT", tmp_path)
    (tmp_path / "run.log").write_text("p50 4.287 ms, CV 1.2 %, 1979.0 TOPS\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# A\n\n<!-- source: run.log -->\np50 4.29 ms, CV 1.20 %, 1,979 TOPS.\n\n"
        "# B\n\n`run.log` says 4.30 ms; `--bs 8` and above 10 % are no figures.\n"
    )
    assert checker.check(doc) == ["doc.md:8: '4.30 ms' not found in run.log"]
    assert checker.main([str(doc)]) == 1
