"""Kernel-level profiling harness for GPU inference.

Collection (``harness``, ``backends``, ``models``) imports torch; analysis (``trace``,
``report``) never does, so traces can be summarized on any machine.
"""

from pathlib import Path

DISTRIBUTION = "infer-profiler"


def package_version() -> str:
    """The installed distribution's version; pyproject.toml's where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]
