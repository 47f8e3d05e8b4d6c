"""Facts about the machine and software a run used, for result.json."""

from __future__ import annotations

import concurrent.futures
import platform
import socket
import subprocess
import sys
from importlib import metadata as importlib_metadata
from pathlib import Path

from profiler import SOURCE_ROOT
from profiler.runs.noise_floor import cpu_model

# distributions whose versions matter to a result, when installed
_DISTRIBUTIONS = (
    "torch",
    "torchvision",
    "triton",
    "transformers",
    "nvtx",
    "torch-tensorrt",
    "torch-tensorrt-rtx",
    "tensorrt",
    "tensorrt-cu12",
    "tensorrt-cu13",
    "tensorrt-rtx",
    "tensorrt-rtx-cu13",
)


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _DISTRIBUTIONS:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def _run(args: list[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> dict | None:
    root = SOURCE_ROOT
    commit = _run(["git", "rev-parse", "HEAD"], cwd=root)
    if not commit:
        return None
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    return {"commit": commit, "dirty": bool(dirty)}


# the answers of the slow queries (git, nvidia-smi), started by ``prefetch`` so that they run
# while the model is measured instead of after
_ANSWERS: dict[str, concurrent.futures.Future] = {}


def prefetch() -> None:
    """Start asking git and nvidia-smi now, in the background; ``environment`` and
    ``gpu_facts`` then read the answers instead of asking again."""
    if _ANSWERS:
        return
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="metadata")
    _ANSWERS["git"] = pool.submit(git_commit)
    _ANSWERS["driver"] = pool.submit(driver_version)
    pool.shutdown(wait=False)


def settle() -> None:
    """Wait for the prefetched answers: called before the measured windows, so that no query
    runs beside them."""
    concurrent.futures.wait(list(_ANSWERS.values()))


def _answer(name: str, ask):
    future = _ANSWERS.get(name)
    return future.result() if future is not None else ask()


def driver_version() -> str | None:
    """The NVIDIA driver's version (one per host), or None without nvidia-smi."""
    answer = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return answer.splitlines()[0].strip() if answer else None


def gpu_facts(torch) -> dict | None:
    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    driver = _answer("driver", driver_version)
    return {
        "name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "driver": driver,
        "device_index": index,
    }


def this_command_line() -> list[str]:
    """This process's command line as result.json records it: the program's file name, then
    its arguments."""
    return [Path(sys.argv[0]).name, *sys.argv[1:]]


def environment(torch, command_line: list[str] | None = None) -> dict:
    """What the run ran on, and ``command_line``: the command that runs it (default: this
    process's)."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "gpu": gpu_facts(torch),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": cudnn,
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "command_line": list(command_line) if command_line is not None else this_command_line(),
        "git": _answer("git", git_commit),
    }
