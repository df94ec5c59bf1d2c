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


def logical_xor(a, b):
    return wrap(np.logical_xor(array_of(operand(a)), array_of(operand(b))))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """torch.isclose: |input - other| <= atol + rtol |other| elementwise (bool, broadcast); infinities
    are close to themselves, NaNs only with equal_nan. The dtypes must match (as torch)."""
    a, b = operand(input), operand(other)
    if hasattr(a, "dtype") and hasattr(b, "dtype") and a.dtype != b.dtype:
        raise TypeError(f"isclose: {a.dtype} did not match {b.dtype}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    x, y = array_of(a), array_of(b)
    return wrap(run_broadcasting("isclose", ",", lambda p, q: np.isclose(p, q, rtol, atol, equal_nan), x, y))


def equal(input, other):  # noqa: A002
    """torch.equal: a Python bool, True when both have the same shape and equal elements (NaN is not
    equal to itself)."""
    a, b = array_of(operand(input)), array_of(operand(other))
    return bool(np.shape(a) == np.shape(b) and np.array_equal(a, b))


def isreal(x):
    """torch.isreal: True everywhere for real tensors (bool, no grad)."""
    return wrap(np.ones(np.shape(array_of(x)), dtype=bool))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """torch.isin: whether each element of `elements` is in `test_elements` (bool, elements' shape)."""
    return wrap(np.isin(array_of(operand(elements)), array_of(operand(test_elements)), invert=invert))
