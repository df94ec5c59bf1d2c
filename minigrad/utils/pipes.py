"""Output to a pipe whose reader went away (`python -m minigrad sample ... | head`)."""
import os
import sys


def stdout_closed(e):
    """True when `e` is a BrokenPipeError: the reader of stdout left, which is no error to report.
    stdout then points at /dev/null, so the interpreter's final flush cannot fail a second time."""
    if not isinstance(e, BrokenPipeError):
        return False
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):     # no real stdout (captured, replaced)
        pass
    return True
