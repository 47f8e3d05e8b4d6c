"""The floors of the package, held by its imports (docs/architecture.md): a module imports only
its own floor and the floors below it, nothing imports in a loop, and only collect/ imports torch.
The floors, their rules and the reading of every import (ast, a lazy import inside a function
counted as one at the top) are scripts/_lib/floors.py's, which scripts/architecture_counts.py
counts with.
"""

from __future__ import annotations

import ast

# scripts/_lib: tests/conftest.py puts scripts/ on the path
from _lib.floors import GROUND, MAY_IMPORT, PACKAGE, TORCH, floor, graph, modules


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
