import subprocess
import sys

from .conftest import ROOT, V100_TRACE


def test_analysis_half_never_imports_torch():
    code = (
        "import sys, pkgutil, importlib, profiler.trace, profiler.report, profiler.commands\n"
        "for pkg in (profiler.trace, profiler.report, profiler.commands):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(pkg.__name__ + '.' + m.name)\n"
        "from profiler.cli.app import app\n"
        "import profiler.sweep.runner, profiler.report.plots\n"
        "import profiler.sweep.cell, profiler.sweep.executors.local\n"
        "from profiler.trace.summary import summarize\n"
        f"summarize({str(V100_TRACE)!r})\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_report_only_renders():
    """report/ draws and exports what commands/ computed: it resolves no target, runs no sweep
    and calls no command."""
    for path in sorted((ROOT / "profiler" / "report").glob("*.py")):
        text = path.read_text()
        for word in ("resolve_target", "run_sweep", "profiler.commands", "..commands"):
            assert word not in text, f"{path.name} uses {word}"
