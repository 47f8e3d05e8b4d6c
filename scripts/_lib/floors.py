"""The floors of the package and their rules (docs/architecture.md), and the imports of every
module, read from the source with ast, so a lazy import inside a function counts the same as one
at the top.

Bottom to top: the ground (errors, fsutil, signals, notices, units); runs/ and trace/, which
never import each other; analysis/; collect/, report/ and tools/, which never import each other;
sweep/; commands/; cli/. A module imports only its own floor and the floors below it (MAY_IMPORT),
and only collect/ imports torch and its libraries (TORCH). tests/test_floors.py holds the package
to these rules; scripts/architecture_counts.py counts against them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "profiler"
GROUND = {"errors", "fsutil", "signals", "notices", "units", "__init__"}
#: floor -> the floors it may import (besides its own and the ground)
MAY_IMPORT = {
    "runs": set(),
    "trace": set(),
    "analysis": {"runs", "trace"},
    "collect": {"runs", "trace", "analysis"},
    "report": {"runs", "trace", "analysis"},
    "tools": {"runs", "trace", "analysis"},
    "sweep": {"runs", "trace", "analysis", "collect", "report", "tools"},
    "commands": {"runs", "trace", "analysis", "collect", "report", "tools", "sweep"},
    "cli": {"runs", "trace", "analysis", "collect", "report", "tools", "sweep", "commands"},
}
TORCH = {
    "torch",
    "torchvision",
    "torch_tensorrt",
    "torchao",
    "modelopt",
    "tensorrt",
    "tensorrt_rtx",
    "transformers",
    "onnxruntime",
    "triton",
}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def floor(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return "ground" if parts[1] in GROUND else parts[1]


def imports(name: str, path: Path, known: dict) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file; ``from a import b`` names a.b when
    that is a module of the package."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, f"{path}:{node.lineno}: relative import"
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((full if full in known else node.module, node.lineno))
    return found


def graph() -> dict[str, list[tuple[str, int]]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}
