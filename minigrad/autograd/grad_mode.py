"""Grad modes: whether applying a Function records a node on the tape (thread-local)."""
import functools
import threading

_local = threading.local()


def is_grad_enabled():
    """True when ops record the tape in this thread (the default)."""
    return getattr(_local, "enabled", True)


def _set_enabled(flag):
    _local.enabled = bool(flag)


class _GradMode:
    """Context manager and decorator that sets grad mode to `self.mode` and restores it after."""

    mode = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _set_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Run ops without recording the tape: `with no_grad(): ...` or `@no_grad()`."""

    mode = False


class enable_grad(_GradMode):
    """Re-enable recording inside a `no_grad` block: `with enable_grad(): ...` or `@enable_grad()`."""

    mode = True


class set_grad_enabled(_GradMode):
    """`with set_grad_enabled(flag): ...` — grad mode on or off by a flag."""

    def __init__(self, mode):
        self.mode = bool(mode)

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
