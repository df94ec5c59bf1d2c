"""gather, cumsum / cumprod, sort / argsort, repeat, unbind and the vector norm, with PyTorch's semantics.

Backwards:
    gather: gx = zeros(x.shape); gx[.., index, ..] += g along dim (repeated indices accumulate)
    cumsum: gx = reversed cumsum of g along dim
    cumprod: gx = reversed cumsum of g y, divided by x; exact at zeros (see CumProd)
    sort: the values are x taken along dim at the sorted indices (reduce.TakeAlong): gx = g put back
        at those positions
    repeat: gx = g summed over the tiles
    unbind: gx = stack of the grads (zeros for an unused piece)
    norm (p > 0 finite): gx = g sgn(x) |x|^(p-1) / y^(p-1), 0 where x = 0 or y = 0 (PyTorch's
        choice: a zero vector has gradient 0); p = inf: g sgn(x) [|x| = y] / count, ties split evenly
"""
import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels.validate import check_int
from minigrad.ops._common import as_tensor, kept_shape, normalize_dim, normalize_dims, shape_str, wrap
from minigrad.ops.indexing import SetItem
from minigrad.ops.reduce import TakeAlong, ValuesIndices
from minigrad.tensor import Tensor


def _full_index(index, dim):
    """The fancy index (open grids, `index` at `dim`) selecting x's elements gather picks."""
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


class Gather(Function):
    """y[i][j][k] = x[i][index[i][j][k]][k] (dim 1); gx = scatter-add of g at those positions."""

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.shape, ctx.where = x.shape, _full_index(index, dim)
        return x[ctx.where]

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, g.dtype)
        np.add.at(gx, ctx.where, g)
        return gx, None, None


def gather(input, dim, index):  # noqa: A002 - PyTorch's name
    """torch.gather: out[..., j, ...] = input[..., index[..., j, ...], ...] along `dim`. `index` is an
    int64 tensor with input's number of dims and no dim (other than `dim`) larger than input's; its
    values must lie in [0, input.size(dim)) (no negative indices, as torch)."""
    x = as_tensor(input)
    index = np.array(index.data if isinstance(index, Tensor) else index)   # a private copy
    if index.dtype != np.int64:
        raise TypeError(f"gather: expected an int64 index, got {index.dtype}")
    if x.ndim == 0 and index.ndim == 0:
        return gather(x.reshape(1), dim, index.reshape(1)).reshape(())
    d = normalize_dim("gather", dim, x.ndim, x.shape)
    if index.ndim != x.ndim:
        raise ValueError(f"gather: index {shape_str(index.shape)} and input {shape_str(x.shape)} must have "
                         "the same number of dims")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d):
        raise ValueError(f"gather: index {shape_str(index.shape)} is larger than input {shape_str(x.shape)} "
                         f"outside dim {d}")
    n = x.shape[d]
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = index.min() if index.min() < 0 else index.max()
        raise IndexError(f"gather: index {bad} is out of bounds for dim {d} with size {n}")
    return Gather.apply(x, index, d)


def _int64_if_integer(x):
    """The accumulator dtype of cumsum / cumprod: int64 for integer and bool inputs (as torch)."""
    return np.int64 if x.dtype.kind in "biu" else None


def _reverse_cumsum(a, axis):
    return np.flip(np.cumsum(np.flip(a, axis), axis=axis), axis)


class CumSum(Function):
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        return np.cumsum(x, axis=dim, dtype=_int64_if_integer(x))

    @staticmethod
    def backward(ctx, g):
        return _reverse_cumsum(g, ctx.dim).copy(), None


class CumProd(Function):
    """y_j = prod_{i <= j} x_i. With z the first zero of a slice (n if none):
    gx_k = sum_{j >= k} g_j y_j / x_k for k < z; sum_{j >= z} g_j prod_{i <= j, i != z} x_i for k = z;
    0 for k > z (every such product holds x_z), exact with zeros as torch's."""

    @staticmethod
    def forward(ctx, x, dim):
        y = np.cumprod(x, axis=dim, dtype=_int64_if_integer(x))
        ctx.dim = dim
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        d = ctx.dim
        if x.size == 0:
            return np.zeros_like(x), None
        zero = x == 0
        z = np.where(zero.any(axis=d, keepdims=True), np.argmax(zero, axis=d, keepdims=True), x.shape[d])
        pos = np.arange(x.shape[d]).reshape([-1 if i == d else 1 for i in range(x.ndim)])
        before, at = pos < z, pos == z
        with np.errstate(divide="ignore", invalid="ignore"):
            gx = np.where(before, _reverse_cumsum(g * y, d) / np.where(before, x, 1), 0)
        y_skip = np.cumprod(np.where(at, 1, x), axis=d)          # the products without x_z
        return np.where(at, _reverse_cumsum(g * y_skip, d), gx), None


def _scan(op, function, what):
    def scan(input, dim):  # noqa: A002
        x = as_tensor(input)
        d = normalize_dim(op, dim, x.ndim, x.shape)
        if x.ndim == 0:
            return function.apply(x.reshape(1), 0).reshape(())
        return function.apply(x, d)

    scan.__name__ = op
    scan.__doc__ = f"torch.{op}: running {what} along `dim` (integer and bool inputs give int64, as torch)."
    return scan


cumsum = _scan("cumsum", CumSum, "sums")
cumprod = _scan("cumprod", CumProd, "products")


def _sort_order(a, dim, descending):
    """Stable argsort along dim: ascending with NaN last, or descending with NaN first (torch, which
    counts NaN as larger than everything); equal values keep their order either way."""
    if not descending:
        return np.argsort(a, axis=dim, kind="stable")
    n = a.shape[dim]          # ascending on the reversed array, read backwards: ties stay in order
    order = np.argsort(np.flip(a, dim), axis=dim, kind="stable")
    return np.ascontiguousarray(np.flip(n - 1 - order, dim))


def sort(input, dim=-1, descending=False, *, stable=False):  # noqa: A002
    """torch.sort: (values, indices) along `dim`; NaN sorts last ascending, first descending. Always
    stable (a valid result for stable=False too). The gradient of the values goes back to the
    positions they came from."""
    x = as_tensor(input)
    if x.ndim == 0:
        values, indices = sort(x.reshape(1), dim, descending, stable=stable)
        return ValuesIndices(values.reshape(()), indices.reshape(()))
    d = normalize_dim("sort", dim, x.ndim, x.shape)
    index = _sort_order(x.data, d, bool(descending))
    return ValuesIndices(TakeAlong.apply(x, index, d, True), wrap(index))


def argsort(input, dim=-1, descending=False, *, stable=False):  # noqa: A002
    """torch.argsort: the indices of `sort` (int64, no grad)."""
    x = as_tensor(input)
    if x.ndim == 0:
        return wrap(np.zeros((), np.int64))
    d = normalize_dim("argsort", dim, x.ndim, x.shape)
    return wrap(_sort_order(x.data, d, bool(descending)))


class Repeat(Function):
    @staticmethod
    def forward(ctx, x, sizes):
        x = x.reshape((1,) * (len(sizes) - x.ndim) + x.shape)
        ctx.shape, ctx.sizes = x.shape, sizes
        return np.tile(x, sizes)

    @staticmethod
    def backward(ctx, g):
        tiles = [v for pair in zip(ctx.sizes, ctx.shape) for v in pair]      # (r0, s0, r1, s1, ...)
        return g.reshape(tiles).sum(axis=tuple(range(0, len(tiles), 2))), None


def repeat(input, *sizes):  # noqa: A002
    """torch's Tensor.repeat: `input` tiled sizes[i] times along dim i (sizes as several ints or one
    sequence; more sizes than dims add leading dims). The gradient sums the tiles."""
    x = as_tensor(input)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = tuple(check_int("repeat", "sizes", s, low=0) for s in sizes)
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: {len(sizes)} sizes for a tensor of shape {shape_str(x.shape)}; the "
                         "number of sizes can not be smaller than the number of dims")
    return Repeat.apply(x, sizes)


class Unbind(Function):
    """(y_0, y_1, ...) = x[:, ..., i] along axis (views, or copies that write back, as Split)."""

    returns_views = True

    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        return tuple(x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis]))

    @staticmethod
    def backward(ctx, *gs):
        return np.stack(gs, axis=ctx.axis), None

    @staticmethod
    def rebuild(ctx, i):
        index = (slice(None),) * ctx.axis + (i,)
        return lambda source, value: SetItem.apply(source, value, index)


def unbind(input, dim=0):  # noqa: A002
    """torch.unbind: the slices along `dim` as a tuple of tensors (that dim removed)."""
    x = as_tensor(input)
    if x.ndim == 0:
        raise ValueError("unbind: expects a tensor with at least 1 dimension, got a 0-d tensor")
    return Unbind.apply(x, normalize_dim("unbind", dim, x.ndim, x.shape))


class Norm(Function):
    @staticmethod
    def forward(ctx, x, p, dims, keepdim):
        ctx.p, ctx.kshape = p, kept_shape(x.shape, dims)
        a = np.abs(x)
        if p == math.inf:
            y = np.max(a, axis=dims, keepdims=True)
        elif p == 1:
            y = np.sum(a, axis=dims, keepdims=True)
        elif p == 2:
            y = np.sqrt(np.sum(x * x, axis=dims, keepdims=True))
        else:
            y = np.sum(a ** p, axis=dims, keepdims=True) ** (1 / p)
        ctx.dims = dims
        ctx.save_for_backward(x, y)
        return y if keepdim else y.reshape([s for i, s in enumerate(x.shape) if i not in dims])

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        g = g.reshape(ctx.kshape)
        if ctx.p == math.inf:
            a = np.abs(x)
            mask = (a == y) | np.isnan(a)
            return np.sign(x) * mask * (g / mask.sum(axis=ctx.dims, keepdims=True)), None, None, None
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(x == 0, 0, np.sign(x) * np.abs(x) ** (ctx.p - 1))
            scale = np.where(y == 0, 0, g / y ** (ctx.p - 1))
        return scaled * scale, None, None, None


def norm(input, p=2, dim=None, keepdim=False):  # noqa: A002
    """torch.norm / linalg.vector_norm: (sum |x|^p)^(1/p) over `dim` (None: every element; an int or
    a tuple), p > 0 or inf ('fro' means 2). Float inputs only. The gradient is 0 at a zero vector."""
    x = as_tensor(input)
    if p == "fro":
        p = 2
    if isinstance(p, str) or not p > 0:
        raise ValueError(f"norm: p must be a number > 0 or inf, got {p!r}")
    if x.dtype.kind != "f":
        raise TypeError(f"norm: expects a floating-point tensor, got {x.dtype}")
    dims = normalize_dims("norm", dim, x.ndim, x.shape)
    if p == math.inf and any(x.shape[d] == 0 for d in dims):
        raise ValueError(f"norm: the inf norm of an empty dim is undefined (shape {shape_str(x.shape)})")
    return Norm.apply(x, float(p), dims, bool(keepdim))
