"""One sweep cell, run by any executor: the job (what to run), its outcome, and the runner.

Temporary stand-in for the cell runner of the worker executors: ``run_job`` runs the cell as a
``profile.py run`` subprocess (``sweep.run_cell``). The types and the function signature are the
shared executor contract; only the body of ``run_job`` is meant to change.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CellJob:
    name: str
    backend: str
    batch_size: int
    argv: list[str]  # `profile.py run` arguments, without interpreter and script
    log_path: str
    timeout_s: float | None = None


@dataclass
class CellOutcome:
    status: str  # ok | failed | oom | timeout | interrupted
    reason: str | None
    exit_code: int | None
    elapsed_s: float
    gpu: str | None = None
    node: str | None = None


def run_job(job: CellJob) -> CellOutcome:
    from .sweep import ENTRY, run_cell

    done = run_cell([sys.executable, str(ENTRY), *job.argv], Path(job.log_path), job.timeout_s)
    return CellOutcome(done.status, done.reason, done.exit_code, done.elapsed_s,
                       gpu=os.environ.get("CUDA_VISIBLE_DEVICES") or None,
                       node=socket.gethostname())
