"""Keep compiled bytecode between runs where the environment says not to write it.

Python compiles every module it imports to bytecode and, unless told not to, keeps the result in
``__pycache__`` beside the source. Containers often set ``PYTHONDONTWRITEBYTECODE=1`` (the GPU
machine this project is measured on does): then every process compiles torch, torchvision and
their dependencies again. Measured on an H100 host: ``builtins.compile`` took 7.6 s of a 16 s
eager ResNet50 run (2,437 modules), and the run took 19.5 s cold, 5.3-7.2 s once the bytecode
was kept. So the entry point, the sweep worker and the Ray cell task keep it under the cache
folder (``<cache>/pycache``, never beside
the sources, which is what the variable usually protects), unless
``INFER_PROFILER_PYCACHE=off`` asks for the environment's behaviour. A prefix the user set
(``PYTHONPYCACHEPREFIX``) is left alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

OPT_OUT = "INFER_PROFILER_PYCACHE"


def keep_bytecode(environ=os.environ) -> Path | None:
    """Set ``sys.pycache_prefix`` to the cache folder's ``pycache`` when bytecode would not be
    written; returns that folder, or None when nothing changed. Call before the heavy imports."""
    if environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    from profiler.collect.engine_cache import entries_dir

    folder = entries_dir(None, "pycache")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable cache: compile as the environment asked
        return None
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False
    return folder
