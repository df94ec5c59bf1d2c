"""Picking elements by order or mask: kthvalue, median, mode, masked_select (torch's semantics).

Shapes: kthvalue / median(dim) / mode take input (*S) and give (values, indices), S without `dim` (kept as
size 1 with keepdim), indices int64; median() of everything gives a 0-d value; masked_select gives
a 1-D tensor of the selected elements of input and mask broadcast together, in C order.

Backward:
    kthvalue / median(dim) / mode: values = input taken at indices along dim: gx = g put back there, 0
        elsewhere.
    median(): gx = g [x == median] / #{x == median}: ties split evenly (torch's rule for the
        median of everything); a NaN median gives its gradient to the NaN elements.
    masked_select: x broadcast (expand: its backward sums) then indexed by the mask (the backward
        scatters g back to the selected positions).
    quantile / nanquantile: the two neighbours taken from x (TakeAlong) and lerped: g (1 - w) and
        g w to them, w the fractional rank.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels.validate import check_int
from minigrad.ops._common import as_tensor, normalize_dim, shape_str, wrap
from minigrad.ops.binary import bool_mask, where
from minigrad.ops.join import stack
from minigrad.ops.reduce import TakeAlong, ValuesIndices
from minigrad.ops.shape import expand
from minigrad.tensor import Tensor


def _kth_index(a, k, dim):
    """int64 indices (keepdims) of the k-th smallest (0-based k) along dim: NaN counts as the
    largest (a stable sort); a slice holding a NaN with k past its numbers gives its first NaN."""
    order = np.argsort(a, axis=dim, kind="stable")
    return np.take(order, [k], axis=dim)


def _pick(op, x, dim, keepdim, index_of):
    """(values, indices) along dim: index_of(array, d) gives the int64 indices (keepdims) of the
    element picked from each slice; values = x taken there (TakeAlong: the gradient goes there)."""
    d = normalize_dim(op, dim, x.ndim, x.shape)
    if x.ndim == 0:
        values, indices = _pick(op, x.reshape(1), 0, keepdim, index_of)
        return ValuesIndices(values.reshape(()), indices.reshape(()))
    if x.shape[d] == 0:
        raise ValueError(f"{op}: cannot select from an empty dim {d} (input {shape_str(x.shape)})")
    index = index_of(x.data, d)
    return ValuesIndices(TakeAlong.apply(x, index, d, bool(keepdim)),
                         wrap(index if keepdim else index.squeeze(d)))


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """torch.kthvalue: (values, indices) of the k-th smallest element (k from 1) along `dim`; NaN
    counts as larger than every number. Among equal values which index is returned is unspecified
    (torch's too). The gradient goes to the returned indices."""
    k = check_int("kthvalue", "k", k)

    def index_of(a, d):
        n = a.shape[d]
        if not 1 <= k <= n:
            raise ValueError(f"kthvalue: k ({k}) is out of range for dim {d} of size {n} "
                             f"(expected 1 <= k <= {n})")
        return _kth_index(a, k - 1, d)

    return _pick("kthvalue", as_tensor(input), dim, keepdim, index_of)


def _median_index(a, d):
    """median(dim)'s indices (keepdims): each slice's lower median, or its first NaN if it has one
    (torch)."""
    lower = _kth_index(a, (a.shape[d] - 1) // 2, d)
    nan = np.isnan(a) if a.dtype.kind == "f" else None
    if nan is None or not nan.any():
        return lower
    return np.where(nan.any(axis=d, keepdims=True), np.argmax(nan, axis=d, keepdims=True), lower)


def _mode_index(a, d):
    """mode's indices (keepdims): in each slice sorted (stably), the first longest run of equal
    values (so the smallest most frequent value) and its last element (the value's last position)."""
    a = np.moveaxis(a, d, -1)
    order = np.argsort(a, axis=-1, kind="stable")
    s = np.take_along_axis(a, order, -1)
    start = np.ones(s.shape, bool)
    start[..., 1:] = s[..., 1:] != s[..., :-1]           # NaN != NaN: each NaN is a run of its own
    end = np.ones(s.shape, bool)
    end[..., :-1] = start[..., 1:]
    j = np.arange(s.shape[-1])
    length = np.where(end, j - np.maximum.accumulate(np.where(start, j, 0), axis=-1) + 1, 0)
    best = np.argmax(length, axis=-1)[..., None]
    return np.moveaxis(np.take_along_axis(order, best, -1), -1, d)


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """torch.mode: (values, indices) of the most frequent value along `dim` (the smallest one among
    equally frequent values) and its last position (torch's CPU result; its sort leaves the position
    unspecified for long slices). Each NaN counts once. The gradient goes to the returned indices."""
    return _pick("mode", as_tensor(input), dim, keepdim, _mode_index)


class MedianAll(Function):
    """y = the lower median of every element (with ignore_nan, of the non-NaN ones; NaN when there are
    none); gx = g [x == y] / #{x == y} (NaN: the NaN elements)."""

    @staticmethod
    def forward(ctx, x, ignore_nan=False):
        flat = x.reshape(-1)
        nan = np.isnan(flat) if x.dtype.kind == "f" else np.zeros(flat.shape, bool)
        if ignore_nan:
            flat = flat[~nan]
            nan = nan[~nan]
        if flat.size == 0:
            y = x.dtype.type(np.nan)
        else:
            k = (flat.size - 1) // 2
            y = flat[nan.argmax()] if nan.any() else np.partition(flat, k)[k]
        ctx.save_for_backward(x)
        ctx.y = y
        return np.asarray(y, x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        hit = np.isnan(x) if np.isnan(ctx.y) else x == ctx.y
        return np.where(hit, g / hit.sum(), 0).astype(g.dtype, copy=False), None


def _nanmedian_index(a, d):
    """nanmedian(dim)'s indices (keepdims): the lower median of each slice's non-NaN values (NaN sorts
    last, stably), the first element of an all-NaN slice."""
    order = np.argsort(a, axis=d, kind="stable")
    valid = (~np.isnan(a)).sum(axis=d, keepdims=True) if a.dtype.kind == "f" else a.shape[d]
    k = np.maximum((np.asarray(valid) - 1) // 2, 0)
    return np.take_along_axis(order, np.broadcast_to(k, order.shape[:d] + (1,) + order.shape[d + 1:]), d)


def _empty_median(op, x):
    """The median of no elements: NaN for a float tensor, as torch (whose integer result is
    arbitrary: an error here). Differentiable: x gets an empty gradient."""
    if x.dtype.kind != "f":
        raise ValueError(f"{op}: cannot compute the median of an empty {x.dtype} tensor")
    return x.sum() * np.nan


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """torch.nanmedian: median ignoring NaN: of every element (0-d; NaN if all are NaN) or
    (values, indices) along `dim`; gradients as median's."""
    return _median("nanmedian", input, dim, keepdim, _nanmedian_index, True)


def median(input, dim=None, keepdim=False):  # noqa: A002
    """torch.median: the lower median (the ((n - 1) // 2)-th smallest, not the mean of the middle
    two). median(x) is a 0-d tensor (NaN if x holds a NaN); median(x, dim) gives (values, indices)
    along `dim`, a slice with a NaN giving NaN at its first NaN. Gradients: see the module docstring."""
    return _median("median", input, dim, keepdim, _median_index, False)


def _median(op, input, dim, keepdim, index_fn, skip_nan):  # noqa: A002
    x = as_tensor(input)
    if dim is not None:
        return _pick(op, x, dim, keepdim, index_fn)
    if x.numel() == 0:
        return _empty_median(op, x)
    return MedianAll.apply(x, skip_nan)


def masked_select(input, mask):  # noqa: A002
    """torch.masked_select: the 1-D tensor of the elements of input where the bool `mask` is True,
    input and mask broadcast together; the gradient is scattered back (summed over broadcast dims)."""
    x = as_tensor(input)
    m = bool_mask(mask, "masked_select")
    try:
        shape = np.broadcast_shapes(x.shape, m.shape)
    except ValueError:
        raise ValueError(f"masked_select: input {shape_str(x.shape)} and mask {shape_str(m.shape)} do not "
                         "broadcast") from None
    xb = expand(x, shape) if tuple(x.shape) != shape else x
    mb = np.broadcast_to(m.data, shape).copy()
    return xb.reshape(-1)[mb.reshape(-1)]


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
_ROUNDING = {"lower": np.floor, "higher": np.ceil, "nearest": np.round}     # the rank used (round: half even)


def _quantile_qs(op, q, dtype):
    """q (a number, a sequence or a 0-d / 1-D Tensor of the input's dtype) as a 1-D array, and
    whether it was a scalar."""
    if isinstance(q, Tensor):
        if q.dtype != dtype:
            raise TypeError(f"{op}: q tensor must be same dtype as the input tensor, got {q.dtype} and "
                            f"{dtype}")
        qs = q.data
    else:
        qs = np.asarray(q, dtype=dtype)
    if qs.ndim > 1:
        raise ValueError(f"{op}: q must be a scalar or 1D tensor, got shape {shape_str(qs.shape)}")
    if not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError(f"{op}: q values must be in the range [0, 1], got {qs.tolist()}")
    return qs.reshape(-1), qs.ndim == 0


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):  # noqa: A002
    x = as_tensor(input)
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: input tensor must be either float or double dtype, got {x.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, got "
                         f"{interpolation!r}")
    qs, scalar = _quantile_qs(op, q, x.dtype)
    if x.numel() == 0:
        raise ValueError(f"{op}: input tensor must be non-empty")
    if dim is None:
        y, d = x.reshape(-1), 0
        out_shape = (1,) * x.ndim if keepdim else ()
    else:
        d = normalize_dim(op, dim, x.ndim, x.shape)
        y = x if x.ndim else x.reshape(1)
        out_shape = tuple(1 if k == d else s for k, s in enumerate(x.shape)) if keepdim else \
            tuple(s for k, s in enumerate(x.shape) if k != d)
    a = y.data
    order = np.argsort(a, axis=d, kind="stable")                    # NaN last
    dtype, n = x.dtype.type, a.shape[d]
    nan = np.isnan(a)
    if ignore_nan:
        last = (n - nan.sum(axis=d, keepdims=True) - 1).astype(x.dtype)
    else:
        last = np.where(nan.any(axis=d, keepdims=True), dtype(np.nan), dtype(n - 1))
    outs = []
    for qv in qs:
        ranks = qv * last
        if ignore_nan:
            ranks = np.maximum(ranks, 0)
        else:                                  # a slice holding NaN: its last (NaN) element
            ranks = np.where(np.isnan(ranks), dtype(n - 1), ranks)
        ranks = _ROUNDING.get(interpolation, np.asarray)(ranks)
        below = ranks.astype(np.int64)
        values = TakeAlong.apply(y, np.take_along_axis(order, below, d), d, True)
        if interpolation in ("linear", "midpoint"):
            above = TakeAlong.apply(y, np.take_along_axis(order, np.ceil(ranks).astype(np.int64), d), d, True)
            w = np.full(ranks.shape, 0.5, x.dtype) if interpolation == "midpoint" else \
                (ranks - below).astype(x.dtype)
            diff = above - values                                   # torch's lerp, both halves
            values = where(w < 0.5, values + diff * w, above - diff * (1 - w))
        outs.append(values.reshape(out_shape))
    return outs[0] if scalar else stack(outs)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """torch.quantile: the q-th quantiles (q a number or a 1-D tensor, prepended as a dim) over `dim`
    (None: every element); interpolation 'linear' | 'lower' | 'higher' | 'midpoint' | 'nearest'
    between the sorted neighbours of rank q (n - 1). A slice holding NaN gives NaN. The gradient
    goes to the one or two elements each quantile is taken from (lerp weights)."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """torch.nanquantile: `quantile` of the non-NaN elements of each slice (NaN if there are none)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def msort(input):  # noqa: A002
    """torch.msort: the values of sort along dim 0."""
    from minigrad.ops.gather_sort import sort

    return sort(input, 0).values
