"""What each command does, behind the CLI: find the target, compute, write the files, print
through report/, and say the exit status. cli.py only parses arguments and calls one of these;
report/ only renders (tables, exports, figures)."""

import contextlib
import importlib.util
import os
import resource
import sys
from collections.abc import Iterator

from profiler.errors import UserError, first_line
from profiler.runs.config import parse_duration

#: what a plain install lacks to run models, and how to get it
NO_TORCH = (
    'torch is not installed here: pip install -e ".[run]" (reading, '
    "summarizing and comparing traces does not need it)"
)


def torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except ValueError:  # torch blocked (sys.modules["torch"] = None)
        return False


#: the device files of a GPU torch could use: NVIDIA's driver, AMD's ROCm (kfd), WSL's (dxg)
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def no_gpu_here(device_files: tuple[str, ...] = GPU_DEVICE_FILES) -> str | None:
    """Why torch will see no GPU on this machine, decided without importing torch (which takes
    seconds on a first start): CUDA_VISIBLE_DEVICES hides every GPU, or Linux has no GPU
    driver's device file. None when there may be a GPU: then torch decides."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return "CUDA_VISIBLE_DEVICES hides every GPU"
    if sys.platform.startswith("linux") and not any(map(os.path.exists, device_files)):
        return "this machine has no GPU driver (no /dev/nvidiactl)"
    return None


def loading_line(what: str) -> str | None:
    """The progress line before the first import of torch in this process (seconds on a first
    start, with nothing else to show), None when torch is loaded already."""
    return None if "torch" in sys.modules else f"loading torch {what} ..."


@contextlib.contextmanager
def loading_torch() -> Iterator[None]:
    """Around the first import of profiler.collect (torch): a library that cannot be mapped,
    under an address-space limit too small for torch (``ulimit -v``), is one line naming the
    limit, not an ImportError traceback."""
    try:
        yield
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing not in ("torch", "torchvision"):
            raise
        raise UserError(f"running a model needs {missing}; {NO_TORCH}") from None
    except (ImportError, OSError, MemoryError) as error:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY and not isinstance(error, MemoryError):
            raise
        limit = "no limit" if soft == resource.RLIM_INFINITY else f"{soft >> 20} MiB"
        raise UserError(
            f"torch cannot be loaded ({first_line(error) or type(error).__name__}) "
            f"under this address-space limit (ulimit -v: {limit}); raise it, e.g. "
            "ulimit -v unlimited"
        ) from None


def parse_budget(text: str | None) -> float | None:
    """--budget: seconds, or a number with s, m or h ("300", "90s", "5m", "1h"), as `run`
    takes it too (profiler.runs.config.parse_duration)."""
    return parse_duration(text, "--budget")
