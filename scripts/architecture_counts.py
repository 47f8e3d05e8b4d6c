"""The counts docs/architecture.md quotes, read from the source with ast.

    python scripts/architecture_counts.py           # write them into docs/architecture.md
    python scripts/architecture_counts.py --check   # exit 1 when the doc's counts are stale
    python scripts/architecture_counts.py --print   # print them, write nothing

The counts stand in the doc between ``<!-- counts: begin -->`` and ``<!-- counts: end -->``; the
script writes that part and nothing else. The floors' rules and the reading of imports are
scripts/_lib/floors.py's (tests/test_floors.py holds the package to them). What is counted:

- import loops: the groups of modules that import each other, directly or through others;
- imports that run up or across the floors, private names (``from x import _name``) that cross
  modules, modules outside collect/ that import torch, modules at the root of profiler/;
- modules and lines per floor; the functions over 60 lines (from ``def`` to the last line);
- numeric format specs in profiler/: a replacement field of an f-string or of a ``str.format``
  template whose spec has a numeric type (``{x:.3f}``, ``{n:,}``, ``{s:.1%}``), a %-style spec
  of a string a ``%`` formats (``"%.3f" % x``), and a spec written alone (``".3f"``, ``",.0f"``:
  a format table's entry, the spec of ``format(x, spec)``);
- imports that stand inside functions, per floor: of the package's own modules and of others.
"""

from __future__ import annotations

import argparse
import ast
import re
import string
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from _lib.floors import MAY_IMPORT, PACKAGE, ROOT, TORCH, floor, graph, modules

DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- counts: begin -->"
END = "<!-- counts: end -->"
#: a function longer than this many lines is named
LONG = 60
#: the floors, bottom to top, as the doc's table lists them
FLOORS = ["ground", "runs", "trace", "analysis", "collect", "report", "tools", "sweep"]
FLOORS += ["commands", "cli"]

#: a spec of the format mini-language with a numeric type or a thousands separator (hexadecimal,
#: octal and binary are an id or a color, not a figure)
NUMERIC_SPEC = re.compile(
    r"(?:.?[<>=^])?[-+ ]?z?#?0?\d*(?:[,_](?:\.\d+)?[deEfFgGn%]?|(?:\.\d+)?[deEfFgGn%])"
)
#: a spec written alone, as a string: with a precision or a thousands separator, so that a plain
#: "e" or "3d" is no spec
ALONE_SPEC = re.compile(r"[-+ ]?#?0?\d*(?:[,_]?\.\d+[eEfFgGn%]|[,_]d)")
#: a %-style conversion with a numeric type
PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[dieEfFgG]")
#: a string that is one replacement field of a template: "{:.2f}"
ONE_FIELD = re.compile(r"\{[^{}]*\}")


def name_of(path: Path) -> str:
    """profiler/trace/load.py -> trace/load.py"""
    return path.relative_to(PACKAGE).as_posix()


# --- numeric format specs


def _spec_text(spec: ast.JoinedStr) -> str:
    """A replacement field's spec as text; a nested field (``{x:.{n}f}``) reads as one digit."""
    return "".join(
        str(part.value) if isinstance(part, ast.Constant) else "1" for part in spec.values
    )


def _template_specs(text: str) -> int:
    """The numeric specs of a ``str.format`` template."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return 0
    return sum(
        1
        for _, name, spec, _ in fields
        if name is not None and spec and NUMERIC_SPEC.fullmatch(spec)
    )


def format_specs(tree: ast.AST) -> Counter[str]:
    """The numeric format specs of a module, by kind: ``field`` (of an f-string or of a template
    that ``.format`` fills), ``alone`` (a spec as a string of its own) and ``percent``."""
    in_fstring: set[int] = set()  # the string parts of an f-string: text, never a template
    percent: set[int] = set()  # the left side of a ``%``
    template: set[int] = set()  # the string of a ``"...".format(...)``
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            in_fstring.update(id(part) for part in ast.walk(node) if part is not node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            percent.add(id(node.left))
        elif isinstance(node, ast.Attribute) and node.attr in ("format", "format_map"):
            template.add(id(node.value))
    found: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
            found["field"] += bool(NUMERIC_SPEC.fullmatch(_spec_text(node.format_spec)))
        elif not isinstance(node, ast.Constant) or id(node) in in_fstring:
            continue  # (an f-string's text is never a template)
        elif not isinstance(node.value, str):
            continue
        elif id(node) in percent:
            found["percent"] += len(PERCENT_SPEC.findall(node.value))
        elif id(node) in template or ONE_FIELD.fullmatch(node.value):
            found["field"] += _template_specs(node.value)
        elif ALONE_SPEC.fullmatch(node.value):
            found["alone"] += 1
        elif PERCENT_SPEC.fullmatch(node.value):
            found["percent"] += 1
    return +found


# --- the counts


@dataclass
class Counts:
    loops: list[list[str]] = field(default_factory=list)
    across: list[str] = field(default_factory=list)
    private: list[str] = field(default_factory=list)
    torch_outside: list[str] = field(default_factory=list)
    root: list[str] = field(default_factory=list)
    #: floor -> (modules, lines)
    floors: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: module -> lines, the largest first
    largest: list[tuple[str, int]] = field(default_factory=list)
    #: (module, function, lines), the longest first
    long_functions: list[tuple[str, str, int]] = field(default_factory=list)
    #: module -> numeric format specs, by kind
    specs: dict[str, Counter[str]] = field(default_factory=dict)
    #: floor -> imports inside functions: of the package's modules, of torch's family, of others
    lazy_own: Counter[str] = field(default_factory=Counter)
    lazy_torch: Counter[str] = field(default_factory=Counter)
    lazy_other: Counter[str] = field(default_factory=Counter)


def loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules on an import loop (each module reaches every other of its group)."""
    reach: dict[str, set[str]] = {}
    for start in edges:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += edges.get(node, ())
        reach[start] = seen
    groups = {
        tuple(sorted(other for other in reach[node] if node in reach.get(other, ())))
        for node in edges
        if node in reach[node]
    }
    return sorted(list(group) for group in groups)


def function_spans(tree: ast.AST) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every function, nested ones too."""
    return [
        (node.name, node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def count() -> Counts:
    known = modules()
    imports = graph()
    counts = Counts()
    edges = {
        name: {target for target, _ in found if target in known and target != name}
        for name, found in imports.items()
    }
    counts.loops = loops(edges)
    for name, found in imports.items():
        mine = floor(name)
        allowed = {mine, "ground", "__init__"} | MAY_IMPORT.get(mine, set())
        if mine in ("ground", "__init__"):
            allowed = {"ground", "__init__"}
        for target, line in found:
            top = target.split(".")[0]
            if top == "profiler" and floor(target) not in allowed:
                counts.across.append(f"{name}:{line} imports {target}")
            if top in TORCH and mine != "collect":
                counts.torch_outside.append(f"{name}:{line} imports {target}")
    counts.root = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    lines: dict[str, int] = {}
    per_floor: dict[str, list[int]] = {}
    for name, path in known.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        rel = name_of(path)
        lines[rel] = len(text.splitlines())
        per_floor.setdefault(floor(name), []).append(lines[rel])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("profiler"):
                counts.private += [
                    f"{name}:{node.lineno} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
        spans = function_spans(tree)
        counts.long_functions += [
            (rel, fn, last - first + 1) for fn, first, last in spans if last - first + 1 > LONG
        ]
        if specs := format_specs(tree):
            counts.specs[rel] = specs
        inside = {  # (module, line): a ``from`` of several names names its module once
            (target, line)
            for target, line in imports[name]
            if any(first <= line <= last for _, first, last in spans)
        }
        where = floor(name)
        for target, _ in inside:
            top = target.split(".")[0]
            if top == "profiler":
                counts.lazy_own[where] += 1
            elif top in TORCH:
                counts.lazy_torch[where] += 1
            else:
                counts.lazy_other[where] += 1
    order = FLOORS + sorted(set(per_floor) - set(FLOORS))  # a floor the doc lacks comes last
    counts.floors = {f: (len(per_floor[f]), sum(per_floor[f])) for f in order}
    counts.largest = sorted(lines.items(), key=lambda item: (-item[1], item[0]))[:6]
    counts.long_functions.sort(key=lambda item: (-item[2], item[0], item[1]))
    return counts


# --- the doc's part


def _wrap(text: str, indent: str = "") -> list[str]:
    """A paragraph in lines of 100 columns at most, cut at spaces; ``indent`` starts the lines
    after the first."""
    out: list[str] = []
    line = ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > 100:
            out.append(line)
            line = indent + word
        else:
            line = f"{line} {word}" if line else word
    return out + [line]


def _listed(items: list[str]) -> str:
    return ", ".join(items) + "." if items else "none."


def _floor_name(name: str) -> str:
    return {"ground": "ground", "__init__": "`profiler/__init__.py`"}.get(name, f"`{name}/`")


def render(counts: Counts) -> str:
    """The doc's part between the markers (without them)."""
    total = Counter[str]()
    for kinds in counts.specs.values():
        total.update(kinds)
    specs = sum(total.values())
    per_file = sorted(
        ((m, sum(kinds.values())) for m, kinds in counts.specs.items()),
        key=lambda item: (-item[1], item[0]),
    )
    in_fmt = sum(counts.specs.get("report/fmt.py", Counter()).values())
    looped = "; ".join(" ".join(group) for group in counts.loops)
    out = [
        "Written by `python scripts/architecture_counts.py` from the source (`--check` says",
        "whether these lines are stale; `tests/test_architecture_counts.py` runs it).",
        "",
        f"- import loops: {len(counts.loops)}" + (f" ({looped})" if looped else ""),
        f"- imports that run up or across the floors: {len(counts.across)}",
        f"- private names that cross modules (`from x import _name`): {len(counts.private)}",
        f"- modules outside `collect/` that import torch: {len(counts.torch_outside)}",
    ]
    out += _wrap(
        f"- modules at the root of `profiler/`, besides `__init__.py`: {len(counts.root)} ("
        + ", ".join(f"`{m}.py`" for m in counts.root)
        + ")",
        "  ",
    )
    out += ["", "| floor | modules | lines |", "|---|---|---|"]
    out += [
        f"| {_floor_name(f)} | {n} | {lines} |"
        for f, (n, lines) in counts.floors.items()
        if f != "__init__"
    ]
    all_modules = sum(n for n, _ in counts.floors.values())
    all_lines = sum(lines for _, lines in counts.floors.values())
    out += [f"| all, with `profiler/__init__.py` | {all_modules} | {all_lines} |", ""]
    out += _wrap(
        "The largest modules (lines): " + _listed([f"`{m}` {n}" for m, n in counts.largest])
    )
    out.append("")
    out += _wrap(
        f"Functions over {LONG} lines, from `def` to the last line: "
        f"{len(counts.long_functions)}: "
        + _listed([f"`{m}` `{fn}` {n}" for m, fn, n in counts.long_functions])
    )
    out.append("")
    out += _wrap(
        f"Numeric format specs in `profiler/`: {specs} in {len(counts.specs)} files, "
        f"{specs - in_fmt} of them outside `report/fmt.py`. Fields of f-strings and templates "
        f"(`{{x:.3f}}`, `{{n:,}}`): {total['field']}; specs written alone (a format table's "
        f'`".3f"`, the spec of `format(x, spec)`): {total["alone"]}; %-style specs '
        f'(`"%.1f" % x`): {total["percent"]}. Per file: '
        + _listed([f"`{m}` {n}" for m, n in per_file])
    )
    lazy = [
        f for f in counts.floors if counts.lazy_own[f] + counts.lazy_torch[f] + counts.lazy_other[f]
    ]
    out += [
        "",
        "Imports inside functions, per floor (each module an `import` or `from` in a function body",
        "names): of the package's own modules, of torch and its libraries, of other modules.",
        "",
        "| floor | own modules | torch and its libraries | others |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {_floor_name(f)} | {counts.lazy_own[f]} | {counts.lazy_torch[f]} "
        f"| {counts.lazy_other[f]} |"
        for f in lazy
    ]
    own, torch = sum(counts.lazy_own.values()), sum(counts.lazy_torch.values())
    out.append(f"| all | {own} | {torch} | {sum(counts.lazy_other.values())} |")
    return "\n".join(out)


def split(text: str) -> tuple[str, str, str]:
    """The doc as (before the begin marker, between the markers, from the end marker on)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"error: the doc needs one {BEGIN} before one {END}")
    head, rest = text.split(BEGIN)
    body, tail = rest.split(END)
    return head + BEGIN, body, END + tail


def written(counts: Counts, text: str) -> str:
    """The doc's text with ``counts`` between its markers."""
    head, _, tail = split(text)
    return f"{head}\n{render(counts)}\n{tail}"


def main(argv: list[str], path: Path = DOC) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 when the doc is stale")
    what.add_argument("--print", action="store_true", help="print the counts, write nothing")
    args = parser.parse_args(argv)
    counts = count()
    if args.print:
        print(render(counts))
        return 0
    doc = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    text = path.read_text(encoding="utf-8")
    new = written(counts, text)
    if args.check:
        if new != text:
            print(f"{doc}: its counts are stale; run python scripts/architecture_counts.py")
            return 1
        print(f"{doc}: its counts are the code's")
        return 0
    if new != text:
        path.write_text(new, encoding="utf-8")
    print(render(counts))
    print(f"{doc}: " + ("counts written" if new != text else "counts unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
