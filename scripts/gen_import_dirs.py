"""Write profiler/collect/import_dirs.py: the folders an eager run imports from, in the order a
run first imports from them (profiler.collect.bytecode.precompile compiles them in that order on
a fresh machine).

    python scripts/gen_import_dirs.py

It runs ``profile.py run --backend pytorch_fp32 --bs 1`` (a short CPU run in a scratch folder,
with an empty cache: the FLOP count runs, as on a fresh machine) and lists the folder of every
module in ``sys.modules`` at its exit, in insertion order (the order the imports started), under
the root it lives in: ``site`` (the libraries), ``stdlib`` or ``project``. Run it again when the
imports change much; a folder a newer library lacks is skipped at compile time, one it adds is
compiled by the import as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "profiler" / "collect" / "import_dirs.py"

_CHILD = """
import atexit, json, os, runpy, sys
out = sys.argv[1]
def _dump():
    with open(out, "w") as f:
        json.dump([getattr(m, "__file__", None) for m in list(sys.modules.values())], f)
atexit.register(_dump)
_exit = os._exit
os._exit = lambda code: (_dump(), _exit(code))  # profile.py may end without the atexit hooks
sys.argv = [sys.argv[2], "run", "--backend", "pytorch_fp32", "--bs", "1", "--iters", "3",
            "--warmup", "1", "--active", "1", "--runs-dir", "runs", "--tb-dir", "tb", "-q"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from profiler.collect.bytecode import roots

    with tempfile.TemporaryDirectory() as scratch:
        dump = Path(scratch) / "modules.json"
        environ = {**os.environ, "INFER_PROFILER_CACHE": str(Path(scratch) / "cache")}
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(dump), str(ROOT / "profile.py")],
            cwd=scratch,
            check=True,
            stdout=subprocess.DEVNULL,
            env=environ,
        )
        files = json.loads(dump.read_text())
    where = roots()
    order = sorted(where.items(), key=lambda item: -len(str(item[1])))  # deepest root first
    dirs: dict[str, None] = {}
    for file in files:
        if not file or not file.endswith(".py"):
            continue
        folder = Path(file).resolve().parent
        for name, root in order:
            if folder.is_relative_to(root.resolve()):
                label = "site" if name == "platsite" else name
                dirs.setdefault(f"{label}:{folder.relative_to(root.resolve()).as_posix()}")
                break
    lines = [f'    "{entry}",' for entry in dirs]
    OUT.write_text(
        '"""The folders an eager run imports from, in first-import order (written by\n'
        'scripts/gen_import_dirs.py; read by profiler.collect.bytecode.precompile)."""\n\n'
        "DIRS = (\n" + "\n".join(lines) + "\n)\n"
    )
    print(f"{OUT.relative_to(ROOT)}: {len(dirs)} folders")


if __name__ == "__main__":
    main()
