"""Running extremes and log-sum-exp along a dim: cummax, cummin, logcumsumexp (torch's semantics).

Shapes: input (*S), dim any of its dims; every result has input's shape (indices int64).

Backward:
    cummax / cummin: values = input gathered at indices along dim, so gx = g scatter-added back at
        the indices (an element that stays the running extreme collects the grads of all its
        positions).
    logcumsumexp: y_j = log sum_{i <= j} exp(x_i), gx_k = sum_{j >= k} g_j exp(x_k - y_j), summed in
        the log domain separately for g > 0 and g < 0 (as torch) so that it neither overflows nor
        underflows: gx_k = exp(x_k + R(log g+ - y)_k) - exp(x_k + R(log g- - y)_k), R the reversed
        logcumsumexp.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import as_tensor, normalize_dim, wrap
from minigrad.ops.gather_sort import gather
from minigrad.ops.reduce import ValuesIndices


def _running_extreme_index(a, dim, extreme):
    """int64 indices of the running extreme (extreme = np.maximum or np.minimum) along dim: a later
    element equal to the current extreme takes over (torch), and NaN, once seen, is the extreme (a
    later NaN takes over). An element takes over exactly where it equals the running extreme, so the
    index is the running maximum of those positions."""
    running = extreme.accumulate(a, axis=dim)          # NaN propagates
    take = a == running
    if a.dtype.kind == "f":
        take |= np.isnan(a)
    positions = np.arange(a.shape[dim]).reshape([-1 if k == dim else 1 for k in range(a.ndim)])
    return np.maximum.accumulate(np.where(take, positions, 0), axis=dim).astype(np.int64, copy=False)


def _cum_extreme(op, extreme):
    def fn(input, dim):  # noqa: A002
        x = as_tensor(input)
        d = normalize_dim(op, dim, x.ndim, x.shape)
        if x.ndim == 0:
            values, indices = fn(x.reshape(1), 0)
            return ValuesIndices(values.reshape(()), indices.reshape(()))
        index = _running_extreme_index(x.data, d, extreme)
        return ValuesIndices(gather(x, d, index), wrap(index))

    fn.__name__ = op
    fn.__doc__ = (f"torch.{op}: (values, indices) of the running {op[3:]}imum along `dim` (int64 indices; "
                  "ties take the later index and NaN propagates, as torch). The gradient goes back to "
                  "the indices (scatter-add).")
    return fn


cummax = _cum_extreme("cummax", np.maximum)
cummin = _cum_extreme("cummin", np.minimum)


def _reverse_logcumsumexp(a, dim):
    return np.flip(np.logaddexp.accumulate(np.flip(a, dim), axis=dim), dim)


class LogCumSumExp(Function):
    """y_j = log sum_{i <= j} exp(x_i) along dim (see the module docstring for the backward)."""

    @staticmethod
    def forward(ctx, x, dim):
        y = np.logaddexp.accumulate(x, axis=dim) if x.size else x.copy()
        ctx.dim = dim
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        if x.size == 0:
            return np.zeros_like(x), None
        d = ctx.dim
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            pos = _reverse_logcumsumexp(np.log(np.where(g > 0, g, 0)) - y, d)
            neg = _reverse_logcumsumexp(np.log(np.where(g < 0, -g, 0)) - y, d)
            gx = np.exp(x + pos) - np.exp(x + neg)
        return gx.astype(x.dtype, copy=False), None


def logcumsumexp(input, dim):  # noqa: A002
    """torch.logcumsumexp: log(cumsum(exp(input))) along `dim`, computed stably (float inputs only)."""
    x = as_tensor(input)
    if x.dtype.kind != "f":
        raise TypeError(f"logcumsumexp: expects a floating-point tensor, got {x.dtype}")
    d = normalize_dim("logcumsumexp", dim, x.ndim, x.shape)
    if x.ndim == 0:
        return LogCumSumExp.apply(x.reshape(1), 0).reshape(())
    return LogCumSumExp.apply(x, d)
