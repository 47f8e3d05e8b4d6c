"""The Python API snippet (docs/guide/reading-a-run.md) runs as written, without torch, and
gives DataFrames."""

import re
import subprocess
import sys

from .conftest import ROOT


def readme_snippet() -> str:
    text = (ROOT / "docs" / "guide" / "reading-a-run.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_snippet_runs_without_torch():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # importing torch would fail\n"
        + readme_snippet()
        + "import pandas as pd\n"
        "for frame in (run.kernels, run.categories, run.operators, trace.categories,\n"
        "              run.layers[0].layers):\n"
        "    assert isinstance(frame, pd.DataFrame) and len(frame)\n"
        "assert run.result.backend.name == 'ttrt_fp16' and run.headline is not None\n"
        "assert trace.result is None and trace.headline is None and trace.roofline is None\n"
        "assert set(run.categories['category']) <= set(run.kernels['category'])\n"
        "assert abs(run.categories['total_us'].sum() - run.kernels['total_us'].sum()) < 1e-6 * "
        "run.kernels['total_us'].sum()\n"
        "assert [k for k in sys.modules if k.split('.')[0] == 'torch'] == ['torch']\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_facade_parses_the_trace_once_and_caches_its_parts():
    from profiler.analysis.run_analysis import RunAnalysis

    run = RunAnalysis(str(ROOT / "tests" / "fixtures" / "h200" / "runs" / "pytorch_fp16_bs8"))
    assert run.summary is run.summary and run.trace is run.trace
    assert run.summary.trace_path == run.path
    assert run.context.precision == "fp16"
    assert run.layers == [] and run.layer_times is None  # not a TensorRT run


def test_commands_gather_through_the_facade_not_through_each_other():
    """summarize, compare, report and plot read a run through profiler.analysis (RunAnalysis,
    Comparison, SweepAnalysis): no command imports another, none resolves a target itself, and
    none turns a RunResult back into a dict."""
    # (sink: the Protocol of the output sink the commands share, not a command)
    commands = {p.stem for p in (ROOT / "profiler" / "commands").glob("*.py")} - {
        "__init__",
        "sink",
    }
    for name in ("summarize", "compare", "report", "plot"):
        text = (ROOT / "profiler" / "commands" / f"{name}.py").read_text()
        # the package's own helpers (loading_torch, NO_TORCH) are shared; another command is not
        for sub, names in re.findall(r"profiler\.commands(?:\.(\w+))? import ([\w, ]+)", text):
            assert sub in ("", "sink") and not {n.strip() for n in names.split(",")} & commands, (
                name
            )
        assert "import profiler.commands" not in text, name
        assert "resolve_target" not in text and "result_to_dict" not in text, name
        assert (
            "profiler.analysis.run_analysis import" in text
            or "profiler.analysis.sweep_analysis import" in text
        )
