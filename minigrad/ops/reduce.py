"""Reductions over dims (None = all, int or tuple; keepdim) and the softmax family.

float32 sum / mean accumulate in float64 (`sum_accurate`). log_softmax is (x - m) - log(sum(exp(x - m))),
m the max, so a large shared offset does not swamp the small differences.

Backwards (k = the input broadcast shape of a keepdim result, N = number of reduced elements):
    sum: gx = g             mean: gx = g / N
    max / min (amax / amin): gx = g [x == y] / count(x == y): ties split the gradient evenly; where
        y is NaN the NaNs are the selected elements (as PyTorch's max())
    max_along / min_along (x.max(dim), PyTorch's (values, indices)): gx = g at the index picked
        (the first extreme), 0 elsewhere
    var: gx = g 2 (x - mean) / (N - correction)
    std: gx = g (x - mean) / ((N - correction) std), 0 where std = 0 (PyTorch's choice)
    logsumexp: gx = g exp(x - y)
    softmax: gx = y (g - sum(g y))      log_softmax: gx = g - exp(y) sum(g)
"""
import collections

import numpy as np

from minigrad.autograd.engine import sum_accurate
from minigrad.autograd.function import Function
from minigrad.ops._common import expand_to, kept_shape, normalize_dim, normalize_dims, wrap
from minigrad.ops.cast import cast


class _Reduction(Function):
    """Shared bookkeeping: remember the input shape, reduced dims and keepdim shape on ctx."""

    @staticmethod
    def setup(ctx, x, dims):
        ctx.shape = x.shape
        ctx.dims = dims

    @staticmethod
    def kshape(ctx):
        return kept_shape(ctx.shape, ctx.dims)


class Sum(_Reduction):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        Sum.setup(ctx, x, dims)
        if x.dtype.kind == "u":      # numpy would give uint64; PyTorch sums every integer type in int64
            return x.sum(axis=dims, keepdims=keepdim, dtype=np.int64)
        return sum_accurate(x, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        return expand_to(g, _Reduction.kshape(ctx), ctx.shape), None, None


class Mean(_Reduction):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        Mean.setup(ctx, x, dims)
        ctx.count = _count(x.shape, dims)
        with np.errstate(invalid="ignore"):             # empty dims: 0 / 0 = nan, as torch
            return sum_accurate(x, dims, keepdim) / ctx.count

    @staticmethod
    def backward(ctx, g):
        return expand_to(g / ctx.count, _Reduction.kshape(ctx), ctx.shape), None, None


class _Extreme(_Reduction):
    """max / min over dims; backward splits the gradient evenly between tied maxima."""

    ufunc = None

    @classmethod
    def forward(cls, ctx, x, dims, keepdim):
        cls.setup(ctx, x, dims)
        _check_nonempty(cls.__name__.lower(), x.shape, dims)
        y = cls.ufunc.reduce(x, axis=dims, keepdims=True)
        ctx.save_for_backward(x, y)
        return y if keepdim else y.reshape(_dropped(x.shape, dims))

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        mask = (x == y) | (np.isnan(x) & np.isnan(y))
        count = mask.sum(axis=ctx.dims, keepdims=True)
        return mask * (g.reshape(_Reduction.kshape(ctx)) / count), None, None


class Max(_Extreme):
    ufunc = np.maximum


class Min(_Extreme):
    ufunc = np.minimum


class TakeAlong(Function):
    """y = x at `index` (int64, x's shape with 1 at `dim`) along dim; gx = g put back there, 0 elsewhere."""

    @staticmethod
    def forward(ctx, x, index, dim, keepdim):
        ctx.shape, ctx.index, ctx.dim = x.shape, index, dim
        y = np.take_along_axis(x, index, dim)
        return y if keepdim else y.squeeze(dim)

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, g.dtype)
        np.put_along_axis(gx, ctx.index, g.reshape(ctx.index.shape), ctx.dim)
        return gx, None, None, None


ValuesIndices = collections.namedtuple("ValuesIndices", "values indices")


class Var(_Reduction):
    """Variance with Bessel-style `correction` (1 = unbiased, PyTorch's default)."""

    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        d, var = _centered_var(ctx, x, dims, correction)
        ctx.save_for_backward(d)
        return var if keepdim else var.reshape(_dropped(x.shape, dims))

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        scale = 2.0 / ctx.denom if ctx.denom > 0 else np.inf
        return g.reshape(_Reduction.kshape(ctx)) * scale * d, None, None, None


class Std(_Reduction):
    """sqrt(var) as one op, so that a constant slice (std 0) gets gradient 0 as in PyTorch, not
    the 0 / 0 of sqrt's backward."""

    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        d, var = _centered_var(ctx, x, dims, correction)
        std = np.sqrt(var)
        ctx.save_for_backward(d, std)
        return std if keepdim else std.reshape(_dropped(x.shape, dims))

    @staticmethod
    def backward(ctx, g):
        d, std = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            gx = g.reshape(_Reduction.kshape(ctx)) * d / (ctx.denom * std)
        if ctx.denom > 0:                   # N - correction <= 0 stays nan, as the forward
            gx = np.where(std == 0, 0, gx)
        return gx, None, None, None


def _centered_var(ctx, x, dims, correction):
    """(x - mean, keepdim var = sum (x - mean)^2 / (N - correction)); N - correction <= 0 gives
    inf / nan as in PyTorch. Sets ctx.shape, ctx.dims and ctx.denom."""
    _Reduction.setup(ctx, x, dims)
    d = x - np.mean(x, axis=dims, keepdims=True)
    ctx.denom = _count(x.shape, dims) - correction
    with np.errstate(divide="ignore", invalid="ignore"):
        return d, np.sum(d * d, axis=dims, keepdims=True) / (ctx.denom if ctx.denom > 0 else 0)


def _check_nonempty(op, shape, dims):
    """max / min have no value over nothing (PyTorch raises too)."""
    for d in dims:
        if shape[d] == 0:
            raise ValueError(f"{op}: cannot reduce dim {d} of size 0 (shape {tuple(shape)})")


def _dropped(shape, dims):
    return [s for i, s in enumerate(shape) if i not in dims]


class LogSumExp(_Reduction):
    """y = m + log(sum(exp(x - m))), m = max(x) (0 where m is infinite), computed without overflow."""

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        LogSumExp.setup(ctx, x, dims)
        y = _logsumexp(x, dims)
        ctx.save_for_backward(x, y)
        return y if keepdim else y.reshape(_dropped(x.shape, dims))

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g.reshape(_Reduction.kshape(ctx)) * np.exp(x - y), None, None


def _logsumexp(x, dims):
    """keepdim logsumexp of x over dims."""
    m = _shift(x, dims)
    return _log_sum_exp(x - m, dims) + m


def _shift(x, dims):
    """keepdim max of x over dims, 0 where it is infinite or the dims are empty (no inf - inf)."""
    m = np.max(x, axis=dims, keepdims=True) if x.size else np.zeros(kept_shape(x.shape, dims), x.dtype)
    return np.where(np.isfinite(m), m, 0)


def _log_sum_exp(d, dims):
    """keepdim log(sum(exp(d))) over dims, for d already shifted by the max."""
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(d), axis=dims, keepdims=True))


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        e = np.exp(x - (np.max(x, axis=dim, keepdims=True) if x.size else 0))   # the dim may be empty
        y = e / np.sum(e, axis=dim, keepdims=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        gy = g * y
        return gy - y * np.sum(gy, axis=ctx.dim, keepdims=True), None


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        d = x - _shift(x, dim)
        y = d - _log_sum_exp(d, dim)
        if x.size and np.isposinf(x).any():      # a slice holding +inf is all nan, as PyTorch's (and
            y = np.where(np.isposinf(np.max(x, axis=dim, keepdims=True)), np.nan, y)   # as softmax)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g - np.exp(y) * np.sum(g, axis=ctx.dim, keepdims=True), None


def _count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def _dims(op, x, dim):
    return normalize_dims(op, dim, x.ndim, x.shape)


def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 - PyTorch's name
    """Sum over `dim`; with `dtype`, x is cast to it first (as torch; float casts differentiable)."""
    x = x if dtype is None else cast(x, dtype)
    return Sum.apply(x, _dims("sum", x, dim), bool(keepdim))


def mean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean over `dim`; with `dtype` (float32 or float64), x is cast to it first, as torch."""
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise TypeError(f"mean: dtype must be a float dtype, got {np.dtype(dtype)}")
    x = x if dtype is None else cast(x, dtype)
    return Mean.apply(x, _dims("mean", x, dim), bool(keepdim))


def all(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Whether every element (over `dim`: None or () every dim, an int or a tuple) is nonzero; a bool
    tensor, no grad (NaN counts as nonzero; over nothing: True)."""
    return wrap(np.all(x.data, axis=_dims("all", x, dim), keepdims=bool(keepdim)))


def any(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Whether some element (over `dim`, as `all`) is nonzero; a bool tensor, no grad (over nothing:
    False)."""
    return wrap(np.any(x.data, axis=_dims("any", x, dim), keepdims=bool(keepdim)))


def max(x, dim=None, keepdim=False):  # noqa: A001
    """Max over `dim` (values only; ties share the gradient evenly)."""
    return Max.apply(x, _dims("max", x, dim), bool(keepdim))


def min(x, dim=None, keepdim=False):  # noqa: A001
    """Min over `dim` (values only; ties share the gradient evenly)."""
    return Min.apply(x, _dims("min", x, dim), bool(keepdim))


def max_along(x, dim, keepdim=False):
    """PyTorch's x.max(dim): (values, indices) over one dim, the first max on ties; the gradient
    goes to that index only."""
    return _extreme_along("max", np.argmax, x, dim, keepdim)


def min_along(x, dim, keepdim=False):
    """PyTorch's x.min(dim): (values, indices), as `max_along`."""
    return _extreme_along("min", np.argmin, x, dim, keepdim)


def _extreme_along(op, arg, x, dim, keepdim):
    if x.ndim == 0:
        values, indices = _extreme_along(op, arg, x.reshape(1), dim, keepdim=False)
        return ValuesIndices(values.reshape(()), indices.reshape(()))
    d = normalize_dim(op, dim, x.ndim, x.shape)
    _check_nonempty(op, x.shape, (d,))
    index = arg(x.data, axis=d, keepdims=True)
    values = TakeAlong.apply(x, index, d, bool(keepdim))
    return ValuesIndices(values, wrap(index if keepdim else index.squeeze(d)))


def var(x, dim=None, correction=None, keepdim=False, unbiased=None):
    """Variance over `dim`, dividing by N - correction (default 1; `unbiased=False` means 0)."""
    return Var.apply(x, _dims("var", x, dim), _correction("var", correction, unbiased), bool(keepdim))


def _correction(op, correction, unbiased):
    if correction is not None and unbiased is not None:
        raise TypeError(f"{op}: pass correction or unbiased, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return correction


def std(x, dim=None, correction=None, keepdim=False, unbiased=None):
    """sqrt(var(...)); backward g (x - mean) / ((N - correction) std), 0 where std = 0."""
    return Std.apply(x, _dims("std", x, dim), _correction("std", correction, unbiased), bool(keepdim))


def logsumexp(x, dim=None, keepdim=False):
    return LogSumExp.apply(x, _dims("logsumexp", x, dim), bool(keepdim))


def softmax(x, dim=-1, *, dtype=None):
    """exp(x) / sum(exp(x)) along one dim (max-shifted, so it never overflows); `dtype=` casts x
    first (torch's argument)."""
    x = x if dtype is None else x.to(dtype)
    return Softmax.apply(x, _one_dim("softmax", x, dim))


def log_softmax(x, dim=-1, *, dtype=None):
    """x - logsumexp(x) along one dim, as (x - max) - log(sum(exp(x - max))); `dtype=` casts x first."""
    x = x if dtype is None else x.to(dtype)
    return LogSoftmax.apply(x, _one_dim("log_softmax", x, dim))


def _one_dim(op, x, dim):
    """A single dim as a 1-tuple of axes (() for a 0-d tensor, where softmax is over nothing)."""
    return normalize_dims(op, normalize_dim(op, dim, x.ndim, x.shape), x.ndim, x.shape)


def _arg(op, fn, x, dim, keepdim):
    if dim is None:
        return wrap(fn(x.data.reshape(-1), keepdims=False).reshape((1,) * x.ndim if keepdim else ()))
    d = normalize_dim(op, dim, x.ndim, x.shape)
    if x.ndim == 0:                      # 0-d: index 0 as a 0-d tensor, also with keepdim (PyTorch)
        return wrap(fn(x.data.reshape(1), axis=0).reshape(()))
    return wrap(fn(x.data, axis=d, keepdims=keepdim))


def argmax(x, dim=None, keepdim=False):
    """Index of the max (first on ties) over `dim`, or into the flattened tensor; int64, no grad."""
    return _arg("argmax", np.argmax, x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    return _arg("argmin", np.argmin, x, dim, keepdim)


# ---- NaN-ignoring and counting reductions (composed: their gradients are those of where and sum) ----
def nansum(x, dim=None, keepdim=False, *, dtype=None):
    """torch.nansum: sum over `dim` with NaNs counted as 0; gx = g where x is not NaN, else 0."""
    from minigrad.ops.binary import where

    x = x if dtype is None else cast(x, dtype)
    if x.dtype.kind == "f":
        x = where(np.isnan(x.data), 0.0, x)
    return sum(x, dim, keepdim)


def nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """torch.nanmean: the mean of the non-NaN elements over `dim` (NaN where there are none); float
    inputs only."""
    x = x if dtype is None else cast(x, dtype)
    if x.dtype.kind != "f":
        raise TypeError(f"nanmean: expected input to have a floating point dtype, got {x.dtype}")
    count = np.sum(~np.isnan(x.data), axis=_dims("nanmean", x, dim), keepdims=bool(keepdim))
    with np.errstate(invalid="ignore", divide="ignore"):
        return nansum(x, dim, keepdim) / count.astype(x.dtype)


def count_nonzero(x, dim=None):
    """torch.count_nonzero: the number of nonzero elements over `dim` (None: all; an int or a tuple);
    int64, no grad (NaN counts as nonzero)."""
    return wrap(np.count_nonzero(x.data, axis=_dims("count_nonzero", x, dim)).astype(np.int64))


MinMax = collections.namedtuple("aminmax", "min max")


def aminmax(x, *, dim=None, keepdim=False):
    """torch.aminmax: (min, max) over `dim` (None: every element), a named tuple; each as amin / amax
    (ties share the gradient evenly)."""
    if x.numel() == 0 and dim is None:
        raise ValueError("aminmax: cannot compute aminmax of an empty tensor (specify a non-empty dim)")
    if dim is not None:
        dim = normalize_dim("aminmax", dim, x.ndim, x.shape)
    return MinMax(min(x, dim, keepdim), max(x, dim, keepdim))
