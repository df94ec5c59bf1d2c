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


class _BareDecorator(_GradMode):
    """A grad mode that also decorates without parentheses: `@no_grad` as well as `@no_grad()`."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if fn is None:
            return self
        if not callable(fn):
            raise TypeError(f"{cls.__name__}() takes no arguments (or the function it decorates), "
                            f"got {fn!r}")
        return self(fn)

    def __init__(self, fn=None):
        pass


class no_grad(_BareDecorator):
    """Run ops without recording the tape: `with no_grad(): ...`, `@no_grad()` or `@no_grad`."""

    mode = False


class enable_grad(_BareDecorator):
    """Re-enable recording inside a `no_grad` block: `with enable_grad(): ...` or as a decorator."""

    mode = True


class set_grad_enabled(_GradMode):
    """Grad mode on or off by a flag, as PyTorch's: a plain call `set_grad_enabled(False)` switches
    it at once (until switched back); `with set_grad_enabled(flag): ...` restores the previous mode
    on exit; `@set_grad_enabled(flag)` applies it inside the decorated function only."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._prev = is_grad_enabled()
        _set_enabled(self.mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        _set_enabled(self._prev)          # as a decorator, nothing changes outside the function
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
