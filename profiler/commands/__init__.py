"""What each command does, behind the CLI: find the target, compute, write the files, print
through report/, and say the exit status. cli.py only parses arguments and calls one of these;
report/ only renders (tables, exports, figures)."""

import contextlib
import resource

from profiler.errors import UserError, first_line


@contextlib.contextmanager
def loading_torch():
    """Around the first import of profiler.collect (torch): a library that cannot be mapped,
    under an address-space limit too small for torch (``ulimit -v``), is one line naming the
    limit, not an ImportError traceback."""
    try:
        yield
    except (ImportError, OSError, MemoryError) as error:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY and not isinstance(error, MemoryError):
            raise
        limit = "no limit" if soft == resource.RLIM_INFINITY else f"{soft >> 20} MiB"
        raise UserError(f"torch cannot be loaded ({first_line(error) or type(error).__name__}) "
                        f"under this address-space limit (ulimit -v: {limit}); raise it, e.g. "
                        "ulimit -v unlimited") from None
