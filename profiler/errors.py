"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in the input or the environment that the message tells the user how to fix."""


class OutOfMemory(UserError):
    """Running out of GPU (``kind`` "CUDA") or host (``kind`` "host") memory: one line, as a
    UserError, that a sweep records as its own kind of failure."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM, SIGHUP), after what was finished was kept. The CLI prints it as one
    line, exit status ``exit_code`` (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def first_line(error: BaseException) -> str:
    """The first non-blank line of an exception's message ("" when it has none): what a
    one-line error quotes of a library's multi-line failure."""
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def os_error_line(error: OSError) -> str:
    """A file that cannot be written or read, as the shell says it: ``<file>: <reason>``."""
    where = f"{error.filename} -> {error.filename2}" if error.filename2 else error.filename
    return f"{where}: {error.strerror or error}" if where else str(error)
