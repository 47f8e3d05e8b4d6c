"""The floors of the package, held by its imports (docs/architecture.md).

Bottom to top: the ground (errors, fsutil, signals, notices, units); runs/ and trace/, which
never import each other; analysis/; collect/, report/ and tools/, which never import each other;
sweep/; commands/; cli/. A module imports only its own floor and the floors below it, nothing
imports in a loop, and only collect/ imports torch. Read from the source (ast), so a lazy import
inside a function counts the same as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT

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


def test_every_floor_imports_only_the_floors_below_it():
    wrong = []
    for name, found in graph().items():
        mine = floor(name)
        allowed = {mine, "ground", "__init__"} | MAY_IMPORT.get(mine, set())
        if mine in ("ground", "__init__"):
            allowed = {"ground", "__init__"}
        for target, line in found:
            if target.split(".")[0] != "profiler":
                continue
            if floor(target) not in allowed:
                wrong.append(f"{name}:{line} imports {target} ({mine} -> {floor(target)})")
    assert not wrong, "imports that run up or across floors:\n" + "\n".join(wrong)


def test_only_collect_imports_torch():
    wrong = [
        f"{name}:{line} imports {target}"
        for name, found in graph().items()
        for target, line in found
        if target.split(".")[0] in TORCH and floor(name) != "collect"
    ]
    assert not wrong, "\n".join(wrong)


def find_loop(edges: dict[str, set[str]]) -> list[str] | None:
    """One import loop of the graph as a path a -> b -> ... -> a, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (loop := visit(nxt)):
                return loop
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (loop := visit(node)):
            return loop
    return None


def test_no_import_loops():
    known = modules()
    edges = {
        name: {target for target, _ in found if target in known and target != name}
        for name, found in graph().items()
    }
    loop = find_loop(edges)
    assert loop is None, "import loop: " + " -> ".join(loop)


def test_the_loop_finder_names_a_loop():
    assert find_loop({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_loop({"a": {"b"}, "b": set()}) is None


def test_no_private_name_crosses_modules():
    """``from x import _name`` reaches into another module's insides."""
    known = modules()
    wrong = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("profiler"):
                wrong += [
                    f"{name}:{node.lineno} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert not wrong, "\n".join(wrong)


def test_no_module_at_the_root_but_the_ground():
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in GROUND)
    assert not loose, f"modules at the root of profiler/ that belong on a floor: {loose}"
