"""Joining and cutting: cat, stack, split, chunk, pad.

Backwards: cat -> split g at the input boundaries; stack -> take slice i of g; split -> cat of the
output grads (zeros for unused outputs); pad -> the grad cropped to where x was written.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import as_tensor, normalize_dim, operand, shape_str
from minigrad.ops.indexing import SetItem


class Cat(Function):
    """y = concatenate(xs, axis); args are (*xs, axis)."""

    @staticmethod
    def forward(ctx, *args):
        *xs, axis = args
        ctx.axis = axis
        ctx.bounds = np.cumsum([x.shape[axis] for x in xs])[:-1]
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx, g):
        parts = np.split(g, ctx.bounds, axis=ctx.axis)
        return tuple(np.ascontiguousarray(p) for p in parts) + (None,)


class Stack(Function):
    """y = stack(xs, axis); args are (*xs, axis)."""

    @staticmethod
    def forward(ctx, *args):
        *xs, axis = args
        ctx.axis = axis
        return np.stack(xs, axis=axis)

    @staticmethod
    def backward(ctx, g):
        n = g.shape[ctx.axis]
        return tuple(np.ascontiguousarray(np.take(g, i, axis=ctx.axis)) for i in range(n)) + (None,)


class Split(Function):
    """(y_0, y_1, ...) = pieces of x along axis with the given sizes (views of x, or copies that
    write back to x when written in place)."""

    returns_views = True

    @staticmethod
    def forward(ctx, x, sizes, axis):
        ctx.axis, ctx.bounds = axis, np.concatenate([[0], np.cumsum(sizes)]).tolist()
        return tuple(np.split(x, ctx.bounds[1:-1], axis=axis))

    @staticmethod
    def backward(ctx, *gs):
        return np.concatenate(gs, axis=ctx.axis), None, None

    @staticmethod
    def rebuild(ctx, i):
        index = (slice(None),) * ctx.axis + (slice(ctx.bounds[i], ctx.bounds[i + 1]),)
        return lambda source, value: SetItem.apply(source, value, index)


class Pad(Function):
    """y = x with `lo[d]` / `hi[d]` entries of `value` added before / after each dim d (negative
    amounts crop). gx = g at the positions x was copied to (zero where x was cropped away)."""

    @staticmethod
    def forward(ctx, x, pairs, value):
        out_shape = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, pairs))
        src, dst = [], []
        for s, n, (lo, _) in zip(x.shape, out_shape, pairs):
            j0 = max(lo, 0)                   # output j holds input j - lo where both exist
            j1 = max(min(s + lo, n), j0)
            src.append(slice(j0 - lo, j1 - lo))
            dst.append(slice(j0, j1))
        ctx.shape, ctx.src, ctx.dst = x.shape, tuple(src), tuple(dst)
        y = np.full(out_shape, value, dtype=x.dtype)
        y[ctx.dst] = x[ctx.src]
        return y

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, dtype=g.dtype)
        gx[ctx.src] = g[ctx.dst]
        return gx, None, None


def _tensors(op, tensors):
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors")
    return [as_tensor(operand(t)) for t in tensors]


def cat(tensors, dim=0):
    """Concatenate along an existing dim; every other dim must match."""
    xs = _tensors("cat", tensors)
    first = xs[0]
    if first.ndim == 0:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    axis = normalize_dim("cat", dim, first.ndim, first.shape)
    for i, x in enumerate(xs[1:], 1):
        others = x.shape[:axis] + x.shape[axis + 1:]
        if x.ndim != first.ndim or others != first.shape[:axis] + first.shape[axis + 1:]:
            raise ValueError(f"cat: tensor {i} has shape {shape_str(x.shape)} but tensor 0 has shape "
                             f"{shape_str(first.shape)}; sizes must match except in dim {axis}")
    return Cat.apply(*xs, axis)          # a new tensor even for one input, as in PyTorch


def stack(tensors, dim=0):
    """Stack equally shaped tensors along a new dim."""
    xs = _tensors("stack", tensors)
    first = xs[0]
    axis = normalize_dim("stack", dim, first.ndim, first.shape, extra=1)
    for i, x in enumerate(xs[1:], 1):
        if x.shape != first.shape:
            raise ValueError(f"stack: tensor {i} has shape {shape_str(x.shape)} but tensor 0 has shape "
                             f"{shape_str(first.shape)}; all must be equal")
    return Stack.apply(*xs, axis)


def _check_not_0d(op, x):
    if x.ndim == 0:
        raise ValueError(f"{op}: expects a tensor with at least 1 dimension, got a 0-d tensor")


def split(x, split_size_or_sections, dim=0):
    """PyTorch's split: an int gives pieces of that size (the last may be smaller); a list gives
    the sizes, which must add up to the dim's size. Returns a tuple of tensors."""
    _check_not_0d("split", x)
    axis = normalize_dim("split", dim, x.ndim, x.shape)
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0:
            raise ValueError(f"split: split_size must be positive, got {size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        sizes = sizes or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"split: sizes {sizes} do not add up to {n}, the size of dim {axis} of "
                             f"shape {shape_str(x.shape)}")
    return Split.apply(x, tuple(sizes), axis)


def chunk(x, chunks, dim=0):
    """PyTorch's chunk: pieces of size ceil(n / chunks) (so possibly fewer than `chunks`)."""
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    _check_not_0d("chunk", x)
    axis = normalize_dim("chunk", dim, x.ndim, x.shape)
    n = x.shape[axis]
    return split(x, max(-(-n // chunks), 1), axis)


def pad(x, pad, mode="constant", value=0.0):
    """PyTorch's F.pad: `pad` = (left, right) for the last dim, then (left, right) for the one before,
    ...; negative amounts crop. Only mode='constant'."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported (only 'constant')")
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise ValueError(f"pad: the pad tuple {tuple(pad)} must have an even length")
    if len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: pad {tuple(pad)} covers {len(pad) // 2} dims but the input has shape "
                         f"{shape_str(x.shape)}")
    pairs = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        pairs[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    for d, (s, (lo, hi)) in enumerate(zip(x.shape, pairs)):
        if s + lo + hi < 0:
            raise ValueError(f"pad: pad {tuple(pad)} gives dim {d} of shape {shape_str(x.shape)} a "
                             f"negative size {s + lo + hi}")
    return Pad.apply(x, tuple(pairs), value)
