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


def _along(d, s):
    """An index selecting `s` (a slice or int) along dim d."""
    return (slice(None),) * d + (s,)


def tensor_split(x, indices_or_sections, dim=0):
    """torch.tensor_split: an int n gives n pieces, the first n % size one longer; a sequence (or a
    1-D int tensor) gives the split points, as slices x[i_k : i_k+1] (so pieces may be empty).
    Views of x (or copies that write back), as split's."""
    from minigrad.tensor import Tensor

    _check_not_0d("tensor_split", x)
    d = normalize_dim("tensor_split", dim, x.ndim, x.shape)
    n = x.shape[d]
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype.kind not in "iu" or spec.ndim > 1:
            raise TypeError(f"tensor_split: expected tensor_indices_or_sections to be a 0-d or 1-d int "
                            f"tensor, got {spec.dtype} of shape {shape_str(spec.shape)}")
        spec = spec.item() if spec.ndim == 0 else spec.tolist()
    if isinstance(spec, (int, np.integer)):
        k = int(spec)
        if k <= 0:
            raise ValueError(f"tensor_split: number of sections must be larger than 0, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        return Split.apply(x, tuple(sizes), d)
    points = [int(i) for i in spec]
    bounds = [None] + points + [None]
    return tuple(x[_along(d, slice(a, b))] for a, b in zip(bounds[:-1], bounds[1:]))


def _directional_split(op, x, sections, dim, min_ndim):
    if x.ndim < min_ndim:
        raise ValueError(f"{op}: requires a tensor with at least {min_ndim} dimension, but got a tensor "
                         f"with {x.ndim} dimensions")
    if isinstance(sections, (int, np.integer)):
        if sections <= 0 or x.shape[dim] % sections:
            raise ValueError(f"{op}: attempted to split along dimension {dim}, but the size of the "
                             f"dimension {x.shape[dim]} is not divisible by the split_size {sections}!")
    return tensor_split(x, sections, dim)


def hsplit(x, sections):
    """torch.hsplit: tensor_split along dim 1 (dim 0 of a 1-D tensor); an int must divide it."""
    return _directional_split("hsplit", x, sections, 1 if x.ndim > 1 else 0, 1)


def vsplit(x, sections):
    """torch.vsplit: tensor_split along dim 0 of a tensor of >= 2 dims."""
    return _directional_split("vsplit", x, sections, 0, 2)


def dsplit(x, sections):
    """torch.dsplit: tensor_split along dim 2 of a tensor of >= 3 dims."""
    return _directional_split("dsplit", x, sections, 2, 3)


def split_with_sizes(x, split_sizes, dim=0):
    """torch.split_with_sizes: split into pieces of the given sizes (which must add up)."""
    return split(x, list(split_sizes), dim)


def diff(x, n=1, dim=-1, prepend=None, append=None):
    """torch.diff: the n-th forward difference along `dim` (x[1:] - x[:-1], n times) after
    prepend / append are concatenated; bool tensors give x[1:] != x[:-1]."""
    _check_not_0d("diff", x)
    d = normalize_dim("diff", dim, x.ndim, x.shape)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    if n == 0:
        return x                                  # torch ignores prepend / append then
    parts = [as_tensor(operand(p)) for p in (prepend, x, append) if p is not None]
    for p in parts:
        if p.ndim != x.ndim:
            raise ValueError(f"diff: prepend / append must have the same number of dims as input, got "
                             f"{shape_str(p.shape)} for {shape_str(x.shape)}")
    y = cat(parts, d) if len(parts) > 1 else x
    for _ in range(n):
        if y.shape[d] == 0:
            break
        hi, lo = y[_along(d, slice(1, None))], y[_along(d, slice(None, -1))]
        y = hi != lo if y.dtype.kind == "b" else hi - lo
    return y
