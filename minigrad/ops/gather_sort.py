"""gather, scatter / scatter_add, index_select / index_add, flip / roll, prod, cumsum / cumprod,
sort / argsort, repeat, unbind and the vector norm, with PyTorch's semantics.

Backwards:
    gather: gx = zeros(x.shape); gx[.., index, ..] += g along dim (repeated indices accumulate)
    scatter: gx = g with the written positions zeroed; gsrc = g gathered at index
    scatter_add: gx = g; gsrc = g gathered at index
    index_select: gx = zeros(x.shape); gx[.., index, ..] += g along dim
    index_add: gx = g; gsource = alpha g[.., index, ..] along dim
    flip / roll: gx = g flipped / rolled back
    prod: the last entry of cumprod along dim, so exact at zeros (cumprod's backward)
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


def _scatter_index(op, x, dim, index, src_shape=None):
    """Validate torch.scatter's index (int64/int32, x's number of dims, no dim larger than src's nor,
    outside `dim`, than x's; values in [0, x.size(dim))) -> (dim, a private int64 copy of index)."""
    index = np.array(index.data if isinstance(index, Tensor) else index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer tensor, got {index.dtype}")
    if index.dtype == np.uint64 and index.size and index.max() > np.iinfo(np.int64).max:
        raise IndexError(f"{op}: index {index.max()} is out of bounds")
    index = index.astype(np.int64, copy=False)
    if x.ndim == 0 and index.ndim <= 1 and index.size <= 1:
        index = index.reshape(index.size)
    d = normalize_dim(op, dim, x.ndim, x.shape)
    if index.ndim != max(x.ndim, 1):
        raise ValueError(f"{op}: index {shape_str(index.shape)} and input {shape_str(x.shape)} must have the "
                         "same number of dims")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape or (1,))) if k != d):
        raise ValueError(f"{op}: index {shape_str(index.shape)} is larger than input {shape_str(x.shape)} "
                         f"outside dim {d}")
    if src_shape is not None and (len(src_shape) != index.ndim
                                  or any(i > s for i, s in zip(index.shape, src_shape))):
        raise ValueError(f"{op}: index {shape_str(index.shape)} is larger than src {shape_str(src_shape)}")
    n = x.shape[d] if x.ndim else 1
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = index.min() if index.min() < 0 else index.max()
        raise IndexError(f"{op}: index {bad} is out of bounds for dim {d} with size {n}")
    return d, index


def _src_part(src, index):
    """The leading index.shape block of src (scatter reads only that much of it)."""
    return src[tuple(slice(0, n) for n in index.shape)]


def _src_grad(g_part, src_shape):
    """g_part (index.shape) padded with zeros to src_shape."""
    if g_part.shape == tuple(src_shape):
        return g_part
    gs = np.zeros(src_shape, g_part.dtype)
    gs[tuple(slice(0, n) for n in g_part.shape)] = g_part
    return gs


class Scatter(Function):
    """y = x with y[.., index[i,j,k], ..] = src[i,j,k] along dim (src an array or a scalar).
    gx = g zeroed where written; gsrc = g gathered at index (zeros past index's shape)."""

    @staticmethod
    def forward(ctx, x, src, index, dim):
        ctx.where = _full_index(index, dim)
        ctx.src_shape = np.shape(src)
        y = x.copy()
        y[ctx.where] = _src_part(src, index) if np.ndim(src) else src
        return y

    @staticmethod
    def backward(ctx, g):
        gx = gs = None
        if ctx.needs_input_grad[0]:
            gx = g.copy()
            gx[ctx.where] = 0
        if ctx.needs_input_grad[1]:
            gs = _src_grad(g[ctx.where], ctx.src_shape)
        return gx, gs, None, None


class ScatterAdd(Function):
    """y = x; y[.., index[i,j,k], ..] += src[i,j,k] along dim (repeats add up).
    gx = g; gsrc = g gathered at index (zeros past index's shape)."""

    @staticmethod
    def forward(ctx, x, src, index, dim):
        ctx.where = _full_index(index, dim)
        ctx.src_shape = src.shape
        y = x.copy()
        np.add.at(y, ctx.where, _src_part(src, index))
        return y

    @staticmethod
    def backward(ctx, g):
        gs = _src_grad(g[ctx.where], ctx.src_shape) if ctx.needs_input_grad[1] else None
        return (g if ctx.needs_input_grad[0] else None), gs, None, None


def _scatter_src(op, x, src):
    if isinstance(src, (Tensor, np.ndarray, list, tuple)):
        t = as_tensor(src)
        if t.dtype != as_tensor(x).dtype:
            raise TypeError(f"{op}: src dtype {t.dtype} differs from input dtype {as_tensor(x).dtype}")
        return t
    if isinstance(src, (bool, int, float, np.generic)):
        return None
    raise TypeError(f"{op}: src must be a Tensor or a number, got {type(src).__name__}")


def scatter(input, dim, index, src=None, *, value=None, reduce=None):  # noqa: A002
    """torch.scatter: a copy of input with input[.., index[i,j,k], ..] = src[i,j,k] along `dim` (src a
    Tensor of at least index's size, or a number; torch's `value=` too). index as in `gather`; with
    repeated indices which write wins is unspecified (as torch). reduce='add' is scatter_add,
    reduce='multiply' scatter_reduce(..., 'prod') with input included (torch's legacy reduce)."""
    op = "scatter"
    x = as_tensor(input)
    if (src is None) == (value is None):
        raise TypeError(f"{op}: pass exactly one of src and value")
    src = value if src is None else src
    if reduce not in (None, "add", "multiply"):
        raise ValueError(f"{op}: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    t = _scatter_src(op, x, src)
    if x.ndim == 0 and t is not None and t.ndim == 0:
        t = t.reshape(1)
    if reduce is not None:
        if t is None:
            t = x.new_full(np.shape(index.data if isinstance(index, Tensor) else index), src)
        if reduce == "add":
            return scatter_add(x, dim, index, t)
        from minigrad.ops.scatter_reduce import scatter_reduce  # (it imports this module)

        return scatter_reduce(x, dim, index, t, "prod", include_self=True)
    d, index = _scatter_index(op, x, dim, index, None if t is None else t.shape)
    if x.ndim == 0:
        return scatter(x.reshape(1), 0, index, t.reshape(1) if t is not None else src).reshape(())
    if t is None:
        return Scatter.apply(x, x.dtype.type(src), index, d)
    return Scatter.apply(x, t, index, d)


def scatter_operands(op, x, dim, index, src):
    """(src Tensor, dim, checked index) of a scatter that needs a src Tensor; a 0-d src of a 0-d input
    as shape (1,), for the caller's 1-element retry. TypeError when src is not a Tensor."""
    t = _scatter_src(op, x, src)
    if t is None:
        raise TypeError(f"{op}: src must be a Tensor, got {type(src).__name__}")
    if x.ndim == 0 and t.ndim == 0:
        t = t.reshape(1)
    d, index = _scatter_index(op, x, dim, index, t.shape)
    return t, d, index


def scatter_add(input, dim, index, src):  # noqa: A002
    """torch.scatter_add: a copy of input with input[.., index[i,j,k], ..] += src[i,j,k] along `dim`
    (repeats accumulate). index as in `gather`; src a Tensor at least as large as index."""
    op = "scatter_add"
    x = as_tensor(input)
    t, d, index = scatter_operands(op, x, dim, index, src)
    if x.ndim == 0:
        return scatter_add(x.reshape(1), 0, index, t.reshape(1)).reshape(())
    return ScatterAdd.apply(x, t, index, d)


def _vector_index(op, x, dim, index):
    """index_select / index_add's index: a 1-D (or 0-d) integer tensor of values in [0, size(dim))."""
    index = np.array(index.data if isinstance(index, Tensor) else index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an int64 or int32 tensor, got {index.dtype}")
    if index.ndim > 1:
        raise ValueError(f"{op}: index must be a vector (1-D), got shape {shape_str(index.shape)}")
    if index.dtype == np.uint64 and index.size and index.max() > np.iinfo(np.int64).max:
        raise IndexError(f"{op}: index {index.max()} is out of bounds")
    index = index.reshape(-1).astype(np.int64, copy=False)
    d = normalize_dim(op, dim, x.ndim, x.shape)
    n = x.shape[d] if x.ndim else 1
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = index.min() if index.min() < 0 else index.max()
        raise IndexError(f"{op}: index {bad} is out of bounds for dim {d} with size {n}")
    return d, index


class IndexSelect(Function):
    """y = x[.., index, ..] along dim; gx = zeros, gx[.., index, ..] += g (repeats accumulate)."""

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.shape, ctx.where = x.shape, (slice(None),) * dim + (index,)
        return np.take(x, index, axis=dim)

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, g.dtype)
        np.add.at(gx, ctx.where, g)
        return gx, None, None


def index_select(input, dim, index):  # noqa: A002
    """torch.index_select: the entries of input at `index` (1-D int tensor, values in [0, size(dim)))
    along `dim`; the gradient scatter-adds back."""
    x = as_tensor(input)
    d, index = _vector_index("index_select", x, dim, index)
    if x.ndim == 0:
        return IndexSelect.apply(x.reshape(1), index, 0).reshape(index.shape[:0] if index.size == 1 else (0,))
    return IndexSelect.apply(x, index, d)


class IndexAdd(Function):
    """y = x; y[.., index[i], ..] += alpha source[.., i, ..] along dim (repeats add up).
    gx = g; gsource = alpha g[.., index, ..] along dim."""

    @staticmethod
    def forward(ctx, x, source, index, dim, alpha):
        ctx.where, ctx.alpha = (slice(None),) * dim + (index,), alpha
        y = x.copy()
        np.add.at(y, ctx.where, source * x.dtype.type(alpha) if alpha != 1 else source)
        return y

    @staticmethod
    def backward(ctx, g):
        gs = None
        if ctx.needs_input_grad[1]:
            gs = g[ctx.where]
            if ctx.alpha != 1:
                gs = gs * g.dtype.type(ctx.alpha)
        return (g if ctx.needs_input_grad[0] else None), gs, None, None, None


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """torch.index_add: a copy of input with input[.., index[i], ..] += alpha * source[.., i, ..]
    along `dim`. index 1-D int (values in [0, size(dim))), source input's shape with len(index) at dim."""
    op = "index_add"
    x, src = as_tensor(input), as_tensor(source)
    if src.dtype != x.dtype:
        raise TypeError(f"{op}: source dtype {src.dtype} differs from input dtype {x.dtype}")
    d, index = _vector_index(op, x, dim, index)
    want = tuple(len(index) if k == d else s for k, s in enumerate(x.shape))
    if x.ndim and tuple(src.shape) != want:
        raise ValueError(f"{op}: source {shape_str(src.shape)} must have shape {shape_str(want)} (input "
                         f"{shape_str(x.shape)} with {len(index)} entries at dim {d})")
    if x.ndim == 0:
        return index_add(x.reshape(1), 0, index, src.reshape(-1), alpha=alpha).reshape(())
    return IndexAdd.apply(x, src, index, d, alpha)


class Flip(Function):
    """y = x reversed along dims; gx = g reversed along dims."""

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return np.flip(x, dims).copy()

    @staticmethod
    def backward(ctx, g):
        return np.flip(g, ctx.dims).copy(), None


def flip(input, *dims):  # noqa: A002
    """torch.flip: input reversed along `dims` (several ints or one sequence; a copy, as torch)."""
    x = as_tensor(input)
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if not dims:
        raise TypeError("flip: missing the dims to flip")
    return Flip.apply(x, normalize_dims("flip", dims, x.ndim, x.shape))


class Roll(Function):
    """y = x rolled by shifts along dims (None: flattened); gx = g rolled back by -shifts."""

    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return np.roll(x, shifts, dims)

    @staticmethod
    def backward(ctx, g):
        back = -ctx.shifts if ctx.dims is None else tuple(-s for s in ctx.shifts)
        return np.roll(g, back, ctx.dims), None, None


def roll(input, shifts, dims=None):  # noqa: A002
    """torch.roll: entries shifted by `shifts` along `dims` (ints or sequences of equal length),
    wrapping around; dims=None rolls the flattened tensor and keeps the shape."""
    x = as_tensor(input)
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            if len(shifts) != 1:
                raise ValueError("roll: with dims=None, shifts must be one int")
            shifts = shifts[0]
        return Roll.apply(x, check_int("roll", "shifts", shifts), None)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    shifts = tuple(check_int("roll", "shifts", s) for s in shifts)
    dims = tuple(normalize_dim("roll", d, x.ndim, x.shape) for d in dims)
    return Roll.apply(x, shifts, dims)


def prod(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """torch.prod: the product over one `dim` (None: every element); integer and bool inputs give
    int64. The gradient is cumprod's, exact with zeros."""
    x = as_tensor(input)
    if dtype is not None:
        x = x.to(dtype)
    if dim is None:
        flat = x.reshape(-1)
        if flat.shape[0] == 0:                       # 1, with a zero gradient (as torch)
            return flat.sum() * 0 + 1
        return cumprod(flat, 0)[-1]
    d = normalize_dim("prod", dim, x.ndim, x.shape)
    if x.ndim == 0:
        return cumprod(x, 0)
    if x.shape[d] == 0:
        return x.sum(d, keepdim=bool(keepdim)) * 0 + 1
    last = (slice(None),) * d + (slice(-1, None) if keepdim else -1,)
    return cumprod(x, d)[last]


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


# ---- composed of flip / transpose / indexing (their gradients) -----------------------------------
def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """torch.rot90: rotated k quarter turns in the plane of `dims`, from the first dim towards the
    second (a flip and a transpose)."""
    from minigrad.ops.shape import transpose

    x = as_tensor(input)
    dims = tuple(dims)
    if len(dims) != 2:
        raise ValueError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise ValueError(f"rot90: expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = (normalize_dim("rot90", d, x.ndim, x.shape) for d in dims)
    if d0 == d1:
        raise ValueError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} and "
                         f"dim1 = {d1}")
    k = check_int("rot90", "k", k) % 4
    if k == 1:
        return transpose(flip(x, d1), d0, d1)
    if k == 2:
        return flip(x, d0, d1)
    if k == 3:
        return transpose(flip(x, d0), d0, d1)
    return x.clone()


def fliplr(input):  # noqa: A002
    """torch.fliplr: reversed along dim 1 (>= 2 dims)."""
    x = as_tensor(input)
    if x.ndim < 2:
        raise ValueError(f"fliplr: input must be >= 2-d, got shape {shape_str(x.shape)}")
    return flip(x, 1)


def flipud(input):  # noqa: A002
    """torch.flipud: reversed along dim 0 (>= 1 dim)."""
    x = as_tensor(input)
    if x.ndim < 1:
        raise ValueError("flipud: input must be >= 1-d, got a 0-d tensor")
    return flip(x, 0)


def take(input, index):  # noqa: A002
    """torch.take: the elements of the flattened input at `index` (an integer tensor, negative ids
    from the end), shaped as index; the gradient scatter-adds back."""
    x = as_tensor(input)
    idx = np.array(index.data if isinstance(index, Tensor) else index)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"take: expected an integer tensor for index, but got {idx.dtype}")
    n = x.numel()
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx.min() if idx.min() < -n else idx.max()
        raise IndexError(f"take: index {bad} out of range for tensor of size {shape_str(x.shape)}")
    return x.reshape(-1)[idx.astype(np.int64)]


def unfold(input, dimension, size, step):  # noqa: A002
    """Tensor.unfold: every window of `size` entries along `dimension`, `step` apart, as a new last
    dim: that dim becomes (n - size) // step + 1 long. Overlapping windows add up in the gradient."""
    x = as_tensor(input)
    d = normalize_dim("unfold", dimension, x.ndim, x.shape)
    size, step = check_int("unfold", "size", size), check_int("unfold", "step", step)
    n = x.shape[d] if x.ndim else 1
    if step <= 0:
        raise ValueError(f"unfold: step is {step} but must be > 0")
    if not 0 <= size <= n:
        raise ValueError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if x.ndim == 0:
        return x.reshape(1)[np.zeros(size, np.int64)]
    windows = np.arange(0, n - size + 1, step)[:, None] + np.arange(size)[None, :]
    y = x[(slice(None),) * d + (windows,)]
    from minigrad.ops.shape import movedim

    return movedim(y, d + 1, -1)


def renorm(input, p, dim, maxnorm):  # noqa: A002
    """torch.renorm: each slice along `dim` (input.select(dim, i)) whose p-norm exceeds maxnorm scaled
    by maxnorm / (norm + 1e-7); the gradient is that of x * factor(x) (through the norm too)."""
    from minigrad.ops.binary import where

    x = as_tensor(input)
    if x.dtype.kind != "f":
        raise TypeError(f"renorm: expects a floating-point tensor, got {x.dtype}")
    if not p > 0:
        raise ValueError(f"renorm: non-positive-norm not supported, got p={p}")
    if not maxnorm >= 0:
        raise ValueError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if x.ndim <= 1:
        raise ValueError(f"renorm: input needs at least 2 dimensions, got {x.ndim} dimensions")
    d = normalize_dim("renorm", dim, x.ndim, x.shape)
    others = tuple(k for k in range(x.ndim) if k != d)
    n = norm(x, p, others, keepdim=True)
    return x * where(n.data > maxnorm, maxnorm / (n + 1e-7), 1.0)
