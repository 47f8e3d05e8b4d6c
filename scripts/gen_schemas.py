#!/usr/bin/env python3
"""Write the JSON Schemas of result.json, sweep.json and every `--json` output into docs/schema/,
generated from their types (profiler/cli/documents.py, profiler/runs/result.py, manifest.py).

    python scripts/gen_schemas.py            # (re)write docs/schema/*.json
    python scripts/gen_schemas.py --check    # exit 1 when docs/schema/ is out of date

Run it after changing one of those types; tests/test_cli_output.py fails until you do.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = parser.parse_args()
    if args.check:
        differ = stale()
        for name in differ:
            print(f"docs/schema/{name} is out of date with the types", file=sys.stderr)
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
