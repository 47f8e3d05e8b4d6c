"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in the input or the environment that the message tells the user how to fix."""


class Interrupted(Exception):
    """Ctrl-C, after what was finished was kept. The CLI prints it as one line, exit status 130."""
