#!/usr/bin/env python3
"""Write the JSON Schemas of result.json, sweep.json and every `--json` output into docs/schema/,
generated from their types (profiler/cli/documents.py, profiler/runs/result.py, manifest.py).

    python scripts/gen_schemas.py            # (re)write docs/schema/*.json
    python scripts/gen_schemas.py --check    # exit 1 when docs/schema/ is out of date

Run it after changing one of those types; tests/test_cli_output.py fails until you do. When
that test fails and no type changed, check the installed msgspec first (the message names it):
the schemas are the same under every version pyproject.toml allows.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "docs" / "schema"
sys.path.insert(0, str(ROOT))

from profiler.cli.documents import all_schemas  # noqa: E402


def expected() -> dict[str, str]:
    """file name -> the text docs/schema/<name> should hold."""
    return {name: json.dumps(schema, indent=2) + "\n" for name, schema in all_schemas().items()}


def stale(folder: Path = SCHEMA_DIR) -> list[str]:
    """The files of ``folder`` that differ from the types, are missing, or name no type."""
    want = expected()
    have = {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()
    differ = [
        name
        for name, text in want.items()
        if not (folder / name).is_file() or (folder / name).read_text() != text
    ]
    return sorted(differ + list(have - set(want)))


def library_line() -> str:
    """The version of msgspec that wrote the schemas here and the versions pyproject.toml allows:
    the first thing to check when docs/schema/ differs and no type was changed."""
    from importlib.metadata import version

    found = re.search(r'"(msgspec[^"]*)"', (ROOT / "pyproject.toml").read_text())
    allowed = found.group(1) if found else "msgspec"
    return f"msgspec {version('msgspec')} is installed ({allowed} allowed)"


def stale_message(differ: list[str]) -> str:
    """What to do about stale schemas: the library's version first (an upgraded msgspec writes
    them differently), regenerating only after a change of type."""
    return (
        f"docs/schema/ differs from the types in {', '.join(differ)}. {library_line()}: if no "
        "type changed, the installed msgspec writes schemas differently; install the versions "
        'pyproject.toml allows (pip install -e ".[dev]") and do not regenerate. If a type '
        "changed, run: python scripts/gen_schemas.py"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = parser.parse_args()
    if args.check:
        differ = stale()
        if differ:
            print(stale_message(differ), file=sys.stderr)
        return 1 if differ else 0
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for name in {p.name for p in SCHEMA_DIR.glob("*.json")} - set(expected()):
        (SCHEMA_DIR / name).unlink()
    for name, text in expected().items():
        (SCHEMA_DIR / name).write_text(text)
    print(f"wrote {len(expected())} schemas to {SCHEMA_DIR.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
