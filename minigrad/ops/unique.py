"""Counting ops without gradient: unique and bincount (torch's semantics).

unique: input (*S) -> the sorted distinct values (1-D; with dim, the distinct slices along dim),
    optionally the inverse (int64: S, or (S[dim],) with dim) and the counts (int64, one per value).
bincount: input (n,) non-negative ints -> (max(max + 1, minlength),) counts (int64) or sums of
    `weights` (n,) (the weights' float dtype; float64 for integer weights).
"""
import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.ops._common import as_tensor, normalize_dim, shape_str, wrap


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique: the distinct values of input, sorted (also with sorted=False: a valid result);
    dim=None flattens, an int dim gives the distinct slices along it. Returns the values, or a tuple
    (values, inverse?, counts?) when return_inverse / return_counts. No gradient."""
    x = as_tensor(input)
    a = x.data
    if dim is None:
        values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        inverse = inverse.reshape(a.shape)
    else:
        d = normalize_dim("unique", dim, a.ndim, a.shape)
        if a.ndim == 0:
            raise ValueError("unique: dim given for a 0-d tensor")
        if a.shape[d] == 0:
            values, inverse, counts = a, np.zeros(0, np.int64), np.zeros(0, np.int64)
        else:
            values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d)
            inverse = inverse.reshape(-1)
    out = (wrap(values),)
    if return_inverse:
        out += (wrap(inverse.astype(np.int64, copy=False)),)
    if return_counts:
        out += (wrap(counts.astype(np.int64, copy=False)),)
    return out[0] if len(out) == 1 else out


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
