import subprocess
import sys

from .conftest import ROOT, V100_TRACE


def test_analysis_half_never_imports_torch():
    code = (
        "import sys, pkgutil, importlib, profiler.trace, profiler.report\n"
        "for pkg in (profiler.trace, profiler.report):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(pkg.__name__ + '.' + m.name)\n"
        "from profiler.cli import app\n"
        "import profiler.sweep, profiler.report.plots\n"
        "from profiler.trace.summary import summarize\n"
        f"summarize({str(V100_TRACE)!r})\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)
