"""Counting ops without gradient: unique, unique_consecutive, bincount and histc (torch's semantics).

unique / unique_consecutive: input (*S) -> the distinct values (1-D; with dim, the distinct slices
    along dim), optionally the inverse (int64: S, or (S[dim],) with dim) and the counts (int64, one
    per value). unique sorts first; unique_consecutive only merges runs of equal neighbours. NaN
    never equals NaN (each NaN is its own value, as torch); which NaN gets which inverse entry, and
    where slices holding NaN sort (dim), are unspecified (torch's too).
bincount: input (n,) non-negative ints -> (max(max + 1, minlength),) counts (int64) or sums of
    `weights` (n,) (the weights' float dtype; float64 for integer weights).
histc: float input (*S) -> (bins,) counts in input's dtype over `bins` equal-width bins of [min, max]
    (the data's range when min == max); elements outside the range and NaN are ignored. An element's
    bin is int((x - min) * bins / (max - min)) in input's dtype (torch's arithmetic, so elements on
    a bin edge land where torch's do), max itself in the last bin.
"""
import numpy as np

from minigrad.kernels.validate import check_int, check_number
from minigrad.ops._common import as_tensor, normalize_dim, shape_str, wrap


def _slices(op, a, dim):
    """a as rows (n, m): its elements (dim None) or its slices along dim, and that dim (or None)."""
    if dim is None:
        return a.reshape(-1, 1), None
    if a.ndim == 0:
        raise ValueError(f"{op}: dim given for a 0-d tensor")
    d = normalize_dim(op, dim, a.ndim, a.shape)
    return np.moveaxis(a, d, 0).reshape(a.shape[d], -1), d


def _distinct(a, rows, d, order, return_inverse, return_counts):
    """The runs of equal neighbours of rows[order] (a NaN starts a run of its own): their values taken
    from a, the inverse (each row's run, in a's layout) and the run lengths, as torch's tuple."""
    n = rows.shape[0]
    ordered = rows[order]
    start = np.ones(n, bool)
    start[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    first = order[start]
    values = a.reshape(-1)[first] if d is None else np.take(a, first, axis=d)
    out = (wrap(values),)
    if return_inverse:
        inverse = np.empty(n, np.int64)
        inverse[order] = np.cumsum(start) - 1
        out += (wrap(inverse.reshape(a.shape if d is None else (n,))),)
    if return_counts:
        out += (wrap(np.diff(np.flatnonzero(np.append(start, True))).astype(np.int64)),)
    return out[0] if len(out) == 1 else out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique: the distinct values of input, sorted (also with sorted=False, as torch on CPU);
    dim=None flattens, an int dim gives the distinct slices along it (lexicographic order). Returns the
    values, or a tuple (values, inverse?, counts?) when return_inverse / return_counts. No gradient."""
    a = as_tensor(input).data
    rows, d = _slices("unique", a, dim)
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(rows.shape[0])
    return _distinct(a, rows, d, order, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique_consecutive: input with each run of equal consecutive elements (dim=None, flattened)
    or slices along `dim` kept once; the tuple (values, inverse?, counts?) as unique. No gradient."""
    a = as_tensor(input).data
    rows, d = _slices("unique_consecutive", a, dim)
    return _distinct(a, rows, d, np.arange(rows.shape[0]), return_inverse, return_counts)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """torch.bincount: how often each value 0, 1, ... occurs in the 1-D non-negative integer input
    (int64), or the sum of `weights` (same length) per value; at least `minlength` bins. No grad."""
    a = as_tensor(input).data
    if a.dtype.kind not in "iub":
        raise TypeError(f"bincount: input must be an integer tensor, got {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"bincount: input must be 1-D, got shape {shape_str(a.shape)}")
    if a.size and a.min() < 0:
        raise ValueError(f"bincount: input must be non-negative, got {a.min()}")
    minlength = check_int("bincount", "minlength", minlength, low=0)
    if weights is None:
        return wrap(np.bincount(a, minlength=minlength).astype(np.int64, copy=False))
    w = as_tensor(weights).data
    if w.shape != a.shape:
        raise ValueError(f"bincount: weights {shape_str(w.shape)} must have input's shape "
                         f"{shape_str(a.shape)}")
    dtype = w.dtype if w.dtype.kind == "f" else np.float64
    return wrap(np.bincount(a, weights=w.astype(np.float64), minlength=minlength).astype(dtype))


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """torch.histc: the histogram of the float input over `bins` equal-width bins between min and max
    (the data's min and max when they are equal; widened by 1 each way if still equal). The last bin
    includes max; elements outside [min, max] and NaN are not counted. Returns (bins,) in input's
    dtype. No gradient."""
    op = "histc"
    a = as_tensor(input).data
    if a.dtype.kind != "f":
        raise TypeError(f"{op}: expects a floating-point tensor, got {a.dtype}")
    bins = check_int(op, "bins", bins, low=1)
    lo, hi = check_number(op, "min", min), check_number(op, "max", max)
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{op}: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise ValueError(f"{op}: max ({hi}) must be larger than min ({lo})")
    lo, hi = a.dtype.type(lo), a.dtype.type(hi)
    if not lo < hi:
        raise ValueError(f"{op}: the range [{min}, {max}] is empty in {a.dtype}")
    flat = a.reshape(-1)
    flat = flat[(flat >= lo) & (flat <= hi)]
    # torch's rule (linear interpolation in input's dtype, no search among the bin edges)
    pos = np.minimum(((flat - lo) * a.dtype.type(bins) / (hi - lo)).astype(np.int64), bins - 1)
    return wrap(np.bincount(pos, minlength=bins).astype(a.dtype))


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted: for each value the index at which it would be inserted into the innermost
    dim of sorted_sequence (a 1-D tensor for all values, or one row per leading index of values);
    side 'left' (the first such index) or 'right' (right=True). int64 (int32 with out_int32). No grad."""
    from minigrad.tensor import Tensor

    seq = as_tensor(sorted_sequence).data
    scalar = not isinstance(values, Tensor) and np.ndim(values) == 0
    vals = np.asarray(values.data if isinstance(values, Tensor) else values)
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side can only be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side and right can't be set to opposites, got side of left "
                             "while right was True")
        right = side == "right"
    if seq.ndim == 0:
        raise ValueError("searchsorted: input value can't be a 0-d tensor")
    order = None if sorter is None else np.asarray(sorter.data if isinstance(sorter, Tensor) else sorter)
    if order is not None:
        if order.shape != seq.shape:
            raise ValueError(f"searchsorted: sorter {shape_str(order.shape)} and sorted_sequence "
                             f"{shape_str(seq.shape)} must have the same shape")
        seq = np.take_along_axis(seq, order.astype(np.int64), -1)
    kind = "right" if right else "left"
    if seq.ndim == 1:
        out = np.searchsorted(seq, vals, side=kind)
    else:
        if vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]:
            raise ValueError(f"searchsorted: boundaries {shape_str(seq.shape)} and input "
                             f"{shape_str(vals.shape)} must have the same leading dims (or boundaries 1-D)")
        rows_s, rows_v = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1])
        out = np.zeros(rows_v.shape, np.int64)
        for i, (s, v) in enumerate(zip(rows_s, rows_v)):
            out[i] = np.searchsorted(s, v, side=kind)
        out = out.reshape(vals.shape)
    out = np.asarray(out, dtype=np.int32 if out_int32 else np.int64)
    return wrap(out.reshape(()) if scalar else out)


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """torch.bucketize: the index of the bucket of each input value among the sorted 1-D boundaries
    (right=False: boundaries[i-1] < x <= boundaries[i]); searchsorted with the roles swapped."""
    b = as_tensor(boundaries)
    if b.ndim != 1:
        raise ValueError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right)
