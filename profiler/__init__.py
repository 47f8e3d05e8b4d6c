"""Kernel-level profiling harness for GPU inference.

The package is built in floors (docs/architecture.md): only ``collect`` imports torch, so traces
can be read, summarized and compared on any machine.
"""

import os
import sys
from pathlib import Path

DISTRIBUTION = "infer-profiler"
#: the folder that holds this package (the checkout's root): child processes import from it
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def package_version() -> str:
    """The installed distribution's version; pyproject.toml's where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        if sys.version_info >= (3, 11):
            import tomllib

            pyproject = SOURCE_ROOT / "pyproject.toml"
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        return "unknown"  # Python 3.10: no tomllib to read pyproject.toml with


def child_env() -> dict:
    """This process's environment, with this copy of the package (and the current folder, for
    package.module:function models) importable first: for the child processes the tool starts."""
    paths = [str(SOURCE_ROOT), os.getcwd(), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
