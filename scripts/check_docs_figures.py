"""Every figure quoted in README.md and docs/**/*.md is found in its source.

A figure is a number with a unit (`4.30 ms`, `38.4 %`, `0.60x`, `1,979 TOPS`), a number with
thousands separators, or an interval `[0.92, 1.09]`. Its sources, for the section it sits in
(from one heading to the next):

- `<!-- source: PATH -->` comments in the section (before the first heading: the whole file);
  PATH is relative to the repository root or to the doc, a file (`.gz` is read unpacked) or a
  folder (every file under it);
- `<!-- source: command: python profile.py ... -->`: that command's output, run here;
- every existing path the section names (in backticks or as a link target);
- the files beside the doc, for a doc among measured logs (docs/gpu, docs/sweep ...);
- the command outputs the doc quotes in its own code blocks (a fenced block whose first line
  is `$ command`, which tests/test_readme.py checks against the command or its log, or an
  indented block: what a command named beside it printed).

A figure is found when a number of a source, rounded to the figure's decimals (or, for a %,
times 100), equals it; thousands separators and trailing zeros do not matter. Not figures:
numbers in code (inline or blocks), in links and comments, flag values (`--bs 8`), versions,
thresholds and targets (after <, >, ≤, ≥, ±-free words such as "above", "within", "at most"),
and a line ending in `<!-- figures: skip -->` or a region between `<!-- figures: off -->` and
`<!-- figures: on -->`. Prints each figure not found with its file and line; exit 1 if any.

    python scripts/check_docs_figures.py [FILE ...]
"""

from __future__ import annotations

import bisect
import gzip
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
UNIT = (
    r"ms|µs|us|ns|s|min|%|x|×|TOPS|TFLOP/s|TFLOPS|GB/s|GiB|GB|MB|MiB|KB|kB|MHz|W|pt|"
    r"samples/s|tokens/s"
)
#: a figure: a number, or a range / pair of numbers, with its unit
FIGURE = re.compile(
    rf"(?<![\w.,/#-])(?P<nums>(?:{NUM})(?:\s*(?:-|–|/|to|and)\s*(?:{NUM}))?)"
    rf"(?![.,]?\d)\s?(?P<unit>{UNIT})(?![\w/])"
)
PLAIN = re.compile(r"(?<![\w.,/#-])(?P<nums>\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?![.,]?\d)")
PAIR = re.compile(rf"\[(?P<nums>(?:{NUM}),\s*(?:{NUM}))\]")
#: what comes right before a number that is a rule or a target, not a measurement
NOT_MEASURED = re.compile(
    r"(?:[<>≤≥]=?|--[\w-]+[ =]|\b(?:above|below|within|at most|at least|up to|beyond|under|"
    r"more than|less than|target|targets|default|defaults|exceeds?|"
    r"budget|limit|threshold)\s*[:~]?)\s*[±+-]?$"
)
SKIP_LINE = "<!-- figures: skip -->"
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
MEASURED_FOLDERS = ("docs/gpu", "docs/sweep", "docs/report")


def numbers_in(text: str) -> frozenset[float]:
    """Every number in ``text`` (thousands separators dropped), and each x100 (a share printed
    as a fraction matches its percent)."""
    values = set()
    for raw in set(NUMBER.findall(text.replace(",", ""))):
        try:
            value = float(raw)
        except ValueError:
            continue
        values.add(value)
        values.add(value * 100)
    return frozenset(values)


class Found:
    """The numbers of a section's sources, sorted: a figure printed with d decimals is found
    when a source number rounds to it at d decimals."""

    def __init__(self, values) -> None:
        self.values = sorted(values)

    def __contains__(self, wanted: tuple[float, int]) -> bool:
        value, decimals = wanted
        half = 0.5 * 10**-decimals * (1 + 1e-9)
        i = bisect.bisect_left(self.values, value - half)
        return i < len(self.values) and self.values[i] <= value + half


@cache
def source_keys(spec: str) -> frozenset:
    if spec.startswith("command:"):
        args = spec.split(":", 1)[1].split()
        if args[:2] == ["python", "profile.py"]:
            return numbers_in(_in_process(args[2:]))
        env = dict(os.environ, COLUMNS="250")
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
        return numbers_in(done.stdout + done.stderr)
    path = Path(spec)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    keys: set = set()
    for file in files[:3000]:
        if (
            file.suffix in (".png", ".pt", ".onnx", ".parquet", ".ncu-rep")
            or file.stat().st_size > 20_000_000
        ):
            continue
        data = file.read_bytes()
        if file.suffix == ".gz":
            try:
                data = gzip.decompress(data)
            except OSError:
                continue
        keys |= numbers_in(data.decode("utf-8", "replace"))
    return frozenset(keys)


def _in_process(args: list[str]) -> str:
    """`python profile.py ARGS` from the repository root, run in this process (250 columns):
    its stdout and stderr."""
    from typer.testing import CliRunner

    from profiler.cli.app import app

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        done = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    finally:
        os.chdir(here)
    return done.stdout + done.stderr


def resolve(token: str, doc: Path) -> Path | None:
    token = token.strip().split("#")[0].rstrip(".,;:)")
    if not token or token.startswith(("http", "-")) or " " in token:
        return None
    for base in (ROOT, doc.parent):
        path = (base / token).resolve()
        try:
            path.relative_to(ROOT)
        except ValueError:
            continue
        if path.exists() and path != ROOT:
            return path
    return None


def sections(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) line indexes of each section; the part before the first heading is 0."""
    starts = [0] + [i for i, line in enumerate(lines) if re.match(r"#{1,6} ", line) and i]
    return list(zip(starts, starts[1:] + [len(lines)]))


def section_sources(lines: list[str], doc: Path, head: list[str]) -> list[str]:
    text = "\n".join(lines)
    specs = list(head)
    for spec in re.findall(r"<!-- source: (.*?) -->", text):
        spec = spec.strip()
        if spec.startswith("command:"):
            specs.append(spec)
        elif resolve(spec, doc):
            specs.append(str(resolve(spec, doc)))
        else:
            specs.append(f"missing:{spec}")
    for token in re.findall(r"`([^`\s]+)`|\]\(([^)\s]+)\)", text):
        path = resolve(token[0] or token[1], doc)
        if path and path.suffix != ".md" and path != doc:
            specs.append(str(path))
    return specs


def own_sources(doc: Path, lines: list[str]) -> list[str]:
    specs = []
    rel = doc.relative_to(ROOT).as_posix()
    if rel.startswith(MEASURED_FOLDERS):
        specs.append(str(doc.parent))
    return specs


def indented(lines: list[str], i: int) -> bool:
    """Line i is in an indented (4-space) code block: output a doc quotes as printed."""
    if not lines[i].startswith("    ") or lines[i].lstrip().startswith(("-", "*", "|")):
        return False
    j = i
    while j > 0 and lines[j - 1].startswith("    "):
        j -= 1
    return j == 0 or not lines[j - 1].strip()


def quoted_outputs(lines: list[str]) -> str:
    out, inside, quoting = [], False, False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            inside, quoting = not inside, False
            continue
        if inside and line.startswith("$ "):
            quoting = True
            continue
        if (inside and quoting) or (not inside and indented(lines, i)):
            out.append(line)
    return "\n".join(out)


def prose(line: str) -> str:
    """The line without inline code, comments, links' targets and URLs."""
    line = re.sub(r"<!--.*?-->", " ", line)
    line = re.sub(r"`[^`]*`", " ", line)
    line = re.sub(r"\]\([^)]*\)", "]", line)
    return re.sub(r"https?://\S+", " ", line)


def figures(line: str):
    """(text, the numbers as (value, decimals)) of each figure of a prose line."""
    seen = []
    for pattern in (FIGURE, PAIR, PLAIN):
        for match in pattern.finditer(line):
            if any(a <= match.start() < b for a, b in seen):
                continue
            seen.append(match.span())
            if NOT_MEASURED.search(line[: match.start()]) or re.match(
                r"\s*(?:interval|confidence|false discovery)", line[match.end() :]
            ):
                continue  # a rule, a target or a confidence level
            if (
                pattern is FIGURE
                and match["unit"] in ("x", "×")
                and re.match(r"\s?[A-Z]", line[match.end() :])
                and "." not in match["nums"]
            ):
                continue  # 4x H100: a count of devices
            nums = re.findall(NUM, match["nums"])
            keys = []
            for num in nums:
                plain = num.replace(",", "")
                decimals = len(plain.split(".")[1]) if "." in plain else 0
                keys.append((round(float(plain), decimals), decimals))
            yield match.group(0), keys


def check(doc: Path) -> list[str]:
    lines = doc.read_text().split("\n")
    missing = []
    parts = sections(lines)
    head = section_sources(lines[parts[0][0] : parts[0][1]], doc, []) if parts else []
    own = own_sources(doc, lines)
    quoted = numbers_in(quoted_outputs(lines))
    off = False
    for first, end in parts:
        specs = own + (head if first else []) + section_sources(lines[first:end], doc, [])
        keys: Found | None = None
        in_code = False
        for i in range(first, end):
            line = lines[i]
            if line.startswith("```"):
                in_code = not in_code
                continue
            if "<!-- figures: off -->" in line:
                off = True
            if "<!-- figures: on -->" in line:
                off = False
            if in_code or off or line.rstrip().endswith(SKIP_LINE) or indented(lines, i):
                continue
            for text, wanted in figures(prose(line)):
                if keys is None:
                    keys = Found(
                        quoted.union(
                            *(
                                source_keys(spec)
                                for spec in specs
                                if not spec.startswith("missing:")
                            )
                        )
                    )
                lost = [w for w in wanted if w not in keys]
                if lost:
                    named = (
                        ", ".join(
                            sorted(
                                {Path(s).name if not s.startswith("command:") else s for s in specs}
                            )
                        )
                        or "no source named"
                    )
                    missing.append(
                        f"{doc.relative_to(ROOT)}:{i + 1}: {text!r} not found in {named[:300]}"
                    )
    return missing


def docs() -> list[Path]:
    found = [ROOT / "README.md"]
    found += sorted(
        p
        for p in (ROOT / "docs").rglob("*.md")
        if "schema" not in p.relative_to(ROOT / "docs").parts
    )
    return found


def main(argv: list[str]) -> int:
    targets = [Path(a).resolve() for a in argv] or docs()
    missing = [line for doc in targets for line in check(doc)]
    for line in missing:
        print(line)
    print(f"{len(missing)} figure(s) not found in their sources, in {len(targets)} file(s)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
