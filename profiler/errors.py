"""Errors a user can fix. The CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in the input or the environment that the message tells the user how to fix."""
