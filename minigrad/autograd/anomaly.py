"""Anomaly detection: find the op (and the line that called it) that first produced NaN/inf.

    with minigrad.autograd.detect_anomaly():
        loss = model(x).sum(); loss.backward()      # raises naming the op and its call site
"""
import threading
import traceback

import numpy as np

_local = threading.local()


def is_enabled():
    return getattr(_local, "enabled", False)


class detect_anomaly:
    """Context manager (and decorator) that checks every forward output and backward grad for NaN/inf."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = is_enabled()
        _local.enabled = self.check_nan
        return self

    def __exit__(self, *exc):
        _local.enabled = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


def callsite():
    """The first stack frame outside minigrad's own autograd/ops machinery, as 'file:line in func'."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        f = frame.filename.replace("\\", "/")
        if "/minigrad/autograd/" in f or "/minigrad/ops/" in f or f.endswith("/minigrad/tensor.py"):
            continue
        return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return "<unknown>"


def _bad(arr):
    if arr is None:
        return False
    arr = np.asarray(arr)
    return arr.dtype.kind == "f" and not np.isfinite(arr).all()


def check_forward(op_name, outputs, inputs=()):
    """Raise on the first output with NaN/inf; say so when an input already had them (the NaN
    then came from outside the recorded graph: data, weights, or an op run without anomaly mode)."""
    for i, out in enumerate(outputs):
        if _bad(out.data):
            fed = [j for j, a in enumerate(inputs) if isinstance(a, np.ndarray) and _bad(a)]
            origin = (f"; its input {fed[0]} already contained NaN/inf (from data, weights or an op "
                      "run outside detect_anomaly)" if fed else "")
            raise FloatingPointError(f"anomaly: {op_name} produced NaN/inf in forward output {i} "
                                     f"(shape {out.shape}) at {callsite()}{origin}")


def check_backward(node, grads):
    for i, g in enumerate(grads):
        if _bad(g):
            where = node.callsite or "<call site not recorded>"
            raise FloatingPointError(f"anomaly: {node.name}.backward produced NaN/inf in the gradient "
                                     f"of input {i} (shape {g.shape}); the op was called at {where}")
