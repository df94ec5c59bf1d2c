"""Pooling (torch.nn.functional's signatures): max_pool1d/2d, avg_pool1d/2d, adaptive_avg_pool1d/2d,
adaptive_max_pool1d/2d.

Max pooling loops over the kernel taps (never over output positions), reading each tap's strided
slice of the input padded with -inf, and keeps torch's CPU rule exactly: a tap replaces the running
max when it is strictly greater or NaN (so ties go to the first max, NaN to the last NaN), and the
index starts at the window's first in-bounds position (a window of -inf points there). The backward
routes each output's grad to its argmax with one bincount (overlapping windows add up).
Average pooling sums the taps' slices of the zero-padded input and divides by torch's divisor; its
backward adds the scaled grad back into each tap's slice. Adaptive average pooling is a product with
a (out, L) averaging matrix per dim (composed ops, the backward comes from the tape); adaptive max
pooling gathers each tap of the variable windows by index.
"""
import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops.conv import check_float_input, ntuple, tap_slices
from minigrad.tensor import Tensor


def _pool_out(L, k, s, p, dl, ceil_mode):
    """torch's pooling_output_shape for one dim."""
    num = L + 2 * p - dl * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= L + p:
        out -= 1            # the last window must start inside the input or the left padding
    return out


def _check_input(op, x, d):
    arr = check_float_input(op, "input", x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if arr.ndim not in (d + 1, d + 2) or arr.size == 0 and any(n == 0 for n in arr.shape[-d - 1:]):
        raise ValueError(f"{op}: expected a non-empty {d + 1}D (unbatched) or {d + 2}D (batched) input, "
                         f"got shape {tuple(arr.shape)}")
    return arr


def _geometry(op, x, d, kernel_size, stride, padding, dilation, ceil_mode, max_pool):
    k = ntuple(op, "kernel_size", kernel_size, d, low=1)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        ntuple(op, "stride", stride, d, low=1)
    p = ntuple(op, "padding", padding, d, low=0)
    dl = ntuple(op, "dilation", dilation, d, low=1)
    for kk, pp in zip(k, p):
        if pp > kk // 2:            # torch's rule for both poolings, whatever the dilation
            raise ValueError(f"{op}: pad should be at most half of kernel size, but got pad={pp} and "
                             f"kernel_size={kk}")
    L = x.shape[-d:]
    out = tuple(_pool_out(n, kk, ss, pp, dd, bool(ceil_mode)) for n, kk, ss, pp, dd in zip(L, k, s, p, dl))
    if any(o < 1 for o in out):
        raise ValueError(f"{op}: given input of shape {tuple(x.shape)}, the calculated output size {out} is "
                         "too small")
    return k, s, p, dl, out


def _padded(x, d, p, k, s, dl, out, value):
    """x (..., *L) padded with `value`: p before each spatial dim, and after it p or as much as the
    last (ceil_mode) window needs."""
    L = x.shape[-d:]
    hi = tuple(max(pp, (o - 1) * ss + dd * (kk - 1) + 1 - n - pp)
               for n, kk, ss, pp, dd, o in zip(L, k, s, p, dl, out))
    if not any(p) and not any(hi):
        return x
    xp = np.full(x.shape[:-d] + tuple(n + lo + h for n, lo, h in zip(L, p, hi)), value, dtype=x.dtype)
    xp[(Ellipsis,) + tuple(slice(lo, lo + n) for n, lo in zip(L, p))] = x
    return xp


def _first_valid(o, s, p, dl):
    """Per output position along one dim, the first kernel tap landing inside the input."""
    start = o * s - p
    return np.where(start < 0, (-start + dl - 1) // dl, 0)


def _scatter_to_argmax(g, flat, in_shape):
    """gx (in_shape, spatial dims flattened last) with g added at each output's flat input index."""
    Lsz = math.prod(in_shape[2:])
    rows = g.shape[0] * g.shape[1]
    offs = (np.arange(rows, dtype=np.int64) * Lsz).reshape(g.shape[:2] + (1,) * (g.ndim - 2))
    gx = np.bincount((flat + offs).ravel(), weights=g.ravel(), minlength=rows * Lsz)
    return gx.astype(g.dtype, copy=False).reshape(in_shape)


def _max_update(m, idx, v, t, has_nan, upd, tmp):
    """torch's rule for tap t with values v: take it when v > max or v is NaN. Branch-free (masked
    copies with random masks mispredict): m = maximum(m, v) (NaN wins either way; m only serves the
    comparisons, the values are gathered at the argmax at the end, so even the sign of a zero is
    torch's), idx -= (idx - t) * upd. upd (bool) and tmp (idx's dtype): scratch of m's shape."""
    np.greater(v, m, out=upd)
    if has_nan:
        upd |= np.isnan(v)
    np.maximum(m, v, out=m)
    np.subtract(idx, t, out=tmp)
    tmp *= upd
    idx -= tmp


def _max_scratch(shape):
    return np.empty(shape, dtype=bool), np.empty(shape, dtype=np.int32)


def _gather_max(x, flat):
    """x (N, C, *L) at the flat spatial indices flat (N, C, *out): the pooled values."""
    N, C = x.shape[:2]
    vals = np.take_along_axis(x.reshape(N, C, -1), flat.reshape(N, C, -1), axis=2)
    return vals.reshape(flat.shape)


class MaxPoolNd(Function):
    """x (N, C, *L) -> (values (N, C, *out), flat input indices (N, C, *out) int64)."""

    @staticmethod
    def forward(ctx, x, k, s, p, dl, out):
        d = len(k)
        xp = _padded(x, d, p, k, s, dl, out, -np.inf)
        lead = x.shape[:2]
        m = np.full(lead + out, -np.inf, dtype=x.dtype)
        # the tap index (flat over k) starts at the first in-bounds tap of each window
        firsts = np.meshgrid(*[_first_valid(np.arange(o), ss, pp, dd) for o, ss, pp, dd in
                               zip(out, s, p, dl)], indexing="ij")
        tap = np.empty(lead + out, dtype=np.int32)
        tap[...] = np.ravel_multi_index(tuple(firsts), k)
        has_nan = bool(np.isnan(x).any())
        scratch = _max_scratch(tap.shape)
        for t, j in enumerate(np.ndindex(*k)):
            v = xp[(Ellipsis,) + tap_slices(j, dl, s, out)]
            _max_update(m, tap, v, t, has_nan, *scratch)
        # flat input index: per dim o*s - p + j*dl. A dilated window can miss the input in some
        # dim (every tap in the padding): its max is -inf, as torch's, and it passes no gradient.
        # The returned index of such a window is torch's arithmetic (it may lie outside the input);
        # the values are gathered, and the gradient sent, at an index clipped into it.
        js = np.unravel_index(tap, k)
        flat, raw = np.zeros(lead + out, dtype=np.int64), np.zeros(lead + out, dtype=np.int64)
        empty = np.zeros(out, dtype=bool)
        L = x.shape[2:]
        for a, (jj, n, ss, pp, dd, o, kk) in enumerate(zip(js, L, s, p, dl, out, k)):
            shape = (o,) + (1,) * (d - 1 - a)
            starts = np.arange(o) * ss - pp
            taps = starts[:, None] + np.arange(kk) * dd
            empty |= ~((taps >= 0) & (taps < n)).any(1).reshape(shape)
            pos = starts.reshape(shape) + jj * dd
            flat *= n
            flat += np.clip(pos, 0, n - 1)
            raw *= n
            raw += pos
        ctx.save_for_backward(flat)
        ctx.in_shape, ctx.empty = x.shape, empty if empty.any() else None
        y = _gather_max(x, flat)
        if ctx.empty is None:
            return y, flat
        y[..., empty] = -np.inf
        return y, raw

    @staticmethod
    def backward(ctx, g, _gidx):
        (flat,) = ctx.saved_tensors
        if ctx.empty is not None:
            g = np.where(ctx.empty, 0, g)
        return _scatter_to_argmax(g, flat, ctx.in_shape), None, None, None, None, None


def _batched(x, d):
    """(x as (N, C, *L), whether it was unbatched)."""
    if x.ndim == d + 1:
        return x.unsqueeze(0), True
    return x, False


def _max_pool(op, d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):  # noqa: A002
    x = _check_input(op, input, d)
    k, s, p, dl, out = _geometry(op, x, d, kernel_size, stride, padding, dilation, ceil_mode, True)
    xb, unbatched = _batched(input, d)
    y, idx = MaxPoolNd.apply(xb, k, s, p, dl, out)
    if unbatched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return (y, idx) if return_indices else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """torch.nn.functional.max_pool1d: (N, C, L) or (C, L) -> (N, C, L_out); stride defaults to
    kernel_size; with return_indices also the argmax positions (int64, into L)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """torch.nn.functional.max_pool2d: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out); with
    return_indices also the argmax positions (int64, h * W + w)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


class AvgPoolNd(Function):
    """x (N, C, *L) -> (N, C, *out): the sum over each window of the zero-padded input / divisor."""

    @staticmethod
    def forward(ctx, x, k, s, p, out, count_include_pad, divisor_override):
        d = len(k)
        ones = (1,) * d
        xp = _padded(x, d, p, k, s, ones, out, 0)
        acc = np.zeros(x.shape[:2] + out, dtype=x.dtype)
        for j in np.ndindex(*k):
            acc += xp[(Ellipsis,) + tap_slices(j, ones, s, out)]
        if divisor_override is not None:
            div = np.asarray(divisor_override, dtype=x.dtype)
        else:
            div = np.ones((1,) * d, dtype=x.dtype)
            for a, (n, kk, ss, pp, o) in enumerate(zip(x.shape[2:], k, s, p, out)):
                start = np.arange(o) * ss - pp
                end = np.minimum(start + kk, n + pp)            # torch's pool_size clips to the padding
                if not count_include_pad:
                    start, end = np.maximum(start, 0), np.minimum(end, n)
                div = div * (end - start).astype(x.dtype).reshape((o,) + (1,) * (d - 1 - a))
        ctx.geom = (x.shape, k, s, p, out, xp.shape)
        ctx.div = div
        return acc / div

    @staticmethod
    def backward(ctx, g):
        in_shape, k, s, p, out, padded_shape = ctx.geom
        d = len(k)
        ones = (1,) * d
        gd = g / ctx.div
        gxp = np.zeros(padded_shape, dtype=g.dtype)
        for j in np.ndindex(*k):
            gxp[(Ellipsis,) + tap_slices(j, ones, s, out)] += gd
        gx = gxp[(Ellipsis,) + tuple(slice(pp, pp + n) for n, pp in zip(in_shape[2:], p))]
        return np.ascontiguousarray(gx), None, None, None, None, None, None


def _avg_pool(op, d, input, kernel_size, stride, padding, ceil_mode, count_include_pad,  # noqa: A002
              divisor_override=None):
    x = _check_input(op, input, d)
    k, s, p, _, out = _geometry(op, x, d, kernel_size, stride, padding, 1, ceil_mode, False)
    if divisor_override is not None:
        if isinstance(divisor_override, (bool, np.bool_)) or not isinstance(divisor_override,
                                                                               (int, np.integer)):
            raise TypeError(f"{op}: divisor_override must be an int or None, got {divisor_override!r}")
        if divisor_override == 0:
            raise ValueError(f"{op}: divisor must be not zero")
        divisor_override = int(divisor_override)
    xb, unbatched = _batched(input, d)
    y = AvgPoolNd.apply(xb, k, s, p, out, bool(count_include_pad), divisor_override)
    return y.squeeze(0) if unbatched else y


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """torch.nn.functional.avg_pool1d: (N, C, L) or (C, L) -> (N, C, L_out)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """torch.nn.functional.avg_pool2d: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out)."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ---- adaptive pooling --------------------------------------------------------------------------
def _adaptive_sizes(op, x, d, output_size):
    """torch's output_size (an int, or a d-sequence whose None entries keep the input size)."""
    if isinstance(output_size, (list, tuple)):
        vals = tuple(output_size)
        if len(vals) == 1 and d > 1:
            vals = vals * d
        if len(vals) != d:
            raise ValueError(f"{op}: output_size must be an int or a tuple of {d} ints, got {output_size!r}")
    else:
        vals = (output_size,) * d
    L = x.shape[-d:]
    out = []
    for v, n in zip(vals, L):
        if v is None:
            out.append(int(n))
            continue
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: output_size must contain ints or None, got {output_size!r}")
        if v < 0:
            raise ValueError(f"{op}: output_size must be non-negative, got {output_size!r}")
        out.append(int(v))
    return tuple(out)


def _bounds(n, o):
    """torch's adaptive windows along one dim: [floor(i*n/o), ceil((i+1)*n/o)) for i < o."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def _window_means(t, n, o, dim):
    """The o adaptive-window means of Tensor t along its dim `dim` (length n): each window's taps
    gathered (a shorter window's padding taps masked to 0), summed and divided by its length, so a
    NaN or inf reaches only the windows holding it (a pooling-matrix product would spread it
    through 0 * NaN)."""
    start, end = _bounds(n, o)
    km = int((end - start).max())
    taps = start[:, None] + np.arange(km)                                       # (o, km)
    padding = Tensor(taps >= end[:, None])
    moved = t.movedim(dim, -1)
    window = moved[..., np.minimum(taps, end[:, None] - 1)].masked_fill(padding, 0.0)
    return (window.sum(-1) / Tensor((end - start).astype(moved.dtype))).movedim(-1, dim)


def _averaging_matrix(n, o, dtype):
    """(o, n): row i averages window i (`_bounds`); used only when the input or output is empty."""
    start, end = _bounds(n, o)
    inside = (np.arange(n) >= start[:, None]) & (np.arange(n) < end[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(inside / (end - start)[:, None]).astype(dtype)


def _adaptive_avg(op, d, input, output_size):  # noqa: A002
    x = _check_input(op, input, d)
    out = _adaptive_sizes(op, x, d, output_size)
    y = input
    for k in range(d):
        dim, n = -d + k, x.shape[-d + k]
        if x.size and out[k]:
            y = _window_means(y, n, out[k], dim)
        else:       # nothing to average: the product with the (empty) pooling matrix
            y = (y.movedim(dim, -1) @ Tensor(np.ascontiguousarray(_averaging_matrix(n, out[k], x.dtype).T))
                 ).movedim(-1, dim)
    return y


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """torch.nn.functional.adaptive_avg_pool1d: (N, C, L) or (C, L) -> (N, C, output_size); window i
    averages [floor(i*L/out), ceil((i+1)*L/out))."""
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """torch.nn.functional.adaptive_avg_pool2d: (N, C, H, W) or (C, H, W) -> (N, C, *output_size);
    output_size an int, or a pair whose None entries keep the input size. Separable: the mean over a
    window's rows of its columns' means (every row of a window has the same columns)."""
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


class AdaptiveMaxPoolNd(Function):
    """x (N, C, *L) -> (values (N, C, *out), flat input indices int64): each output's window is
    gathered tap by tap (taps past a shorter window repeat its last element, which changes
    neither the max nor, under torch's rule, the index)."""

    @staticmethod
    def forward(ctx, x, out):
        d = len(out)
        L = x.shape[2:]
        pos, kmax = [], []
        for n, o in zip(L, out):
            start, end = _bounds(n, o)
            km = int((end - start).max())
            kmax.append(km)
            pos.append(np.minimum(start[:, None] + np.arange(km), end[:, None] - 1))    # (o, km)
        lead = x.shape[:2]
        m = np.full(lead + out, -np.inf, dtype=x.dtype)
        tap = np.zeros(lead + out, dtype=np.int32)
        has_nan = bool(np.isnan(x).any())
        scratch = _max_scratch(tap.shape)
        for t, j in enumerate(np.ndindex(*kmax)):
            index = tuple(pp[:, jj].reshape((-1,) + (1,) * (d - 1 - a))
                          for a, (pp, jj) in enumerate(zip(pos, j)))
            _max_update(m, tap, x[(slice(None), slice(None)) + index], t, has_nan, *scratch)
        js = np.unravel_index(tap, tuple(kmax))
        flat = np.zeros(lead + out, dtype=np.int64)
        for a, (jj, pp, n) in enumerate(zip(js, pos, L)):
            o = pp.shape[0]
            rows = np.arange(o).reshape((o,) + (1,) * (d - 1 - a))
            flat *= n
            flat += pp[rows, jj]
        ctx.save_for_backward(flat)
        ctx.in_shape = x.shape
        return _gather_max(x, flat), flat

    @staticmethod
    def backward(ctx, g, _gidx):
        (flat,) = ctx.saved_tensors
        return _scatter_to_argmax(g, flat, ctx.in_shape), None


def _adaptive_max(op, d, input, output_size, return_indices):  # noqa: A002
    x = _check_input(op, input, d)
    out = _adaptive_sizes(op, x, d, output_size)
    if any(o == 0 for o in out) and x.size:
        raise ValueError(f"{op}: output_size must be positive, got {output_size!r}")
    xb, unbatched = _batched(input, d)
    y, idx = AdaptiveMaxPoolNd.apply(xb, out)
    if unbatched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return (y, idx) if return_indices else y


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """torch.nn.functional.adaptive_max_pool1d: (N, C, L) or (C, L) -> (N, C, output_size)."""
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """torch.nn.functional.adaptive_max_pool2d: (N, C, H, W) or (C, H, W) -> (N, C, *output_size)."""
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)
