"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in the input or the environment that the message tells the user how to fix."""


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
