"""Comparisons (bool tensors) and `nonzero` (int64 indices): results that never require grad (they are
not recorded on the tape)."""
import numpy as np

from minigrad.ops._common import array_of, operand, run_broadcasting, wrap


def _compare(op, symbol, ufunc):
    def compare(a, b):
        return wrap(run_broadcasting(op, symbol, ufunc, array_of(operand(a)), array_of(operand(b))))

    compare.__name__ = op
    compare.__doc__ = f"Elementwise a {symbol} b as a bool tensor (no grad)."
    return compare


lt = _compare("lt", "<", np.less)
le = _compare("le", "<=", np.less_equal)
gt = _compare("gt", ">", np.greater)
ge = _compare("ge", ">=", np.greater_equal)
eq = _compare("eq", "==", np.equal)
ne = _compare("ne", "!=", np.not_equal)


def logical_not(x):
    return wrap(np.logical_not(array_of(x)))


def logical_and(a, b):
    return wrap(np.logical_and(array_of(operand(a)), array_of(operand(b))))


def logical_or(a, b):
    return wrap(np.logical_or(array_of(operand(a)), array_of(operand(b))))


def isfinite(x):
    return wrap(np.isfinite(array_of(x)))


def isnan(x):
    return wrap(np.isnan(array_of(x)))


def isinf(x):
    """torch.isinf: True at +inf and -inf (bool, no grad)."""
    return wrap(np.isinf(array_of(x)))


def isposinf(x):
    return wrap(np.isposinf(array_of(x)))


def isneginf(x):
    return wrap(np.isneginf(array_of(x)))


def nonzero(x, *, as_tuple=False):
    """The indices of the nonzero elements, as torch.nonzero: an int64 (n, ndim) tensor in row-major
    order (a 0-d tensor gives (1, 0) or (0, 0)); `as_tuple=True`: one 1-D int64 tensor per dim (a 0-d
    tensor counts as 1-D)."""
    arr = array_of(x)
    if as_tuple:
        return tuple(wrap(i.astype(np.int64, copy=False)) for i in np.nonzero(np.atleast_1d(arr)))
    return wrap(np.argwhere(arr).astype(np.int64, copy=False))
