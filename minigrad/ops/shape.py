"""Shape ops: reshape/view, flatten, squeeze, unsqueeze, permute/transpose, expand.

Backwards: reshape -> reshape back; permute -> the inverse permutation; expand -> g as is (the engine
sums broadcast grads back to the input's shape).
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import normalize_dim, shape_str


def _sizes(shape):
    """reshape(2, 3) and reshape((2, 3)) both mean (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


class Reshape(Function):
    """y = x viewed with a new shape (shares memory: x is C-contiguous)."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise ValueError(f"reshape: cannot view shape {shape_str(x.shape)} ({x.size} elements) "
                             f"as {tuple(shape)}") from None

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


class Permute(Function):
    """y = x.transpose(dims) (copied to C order; in-place writes reach x); gx = g.transpose(argsort(dims))."""

    returns_views = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.inverse = tuple(int(d) for d in np.argsort(dims))
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        return np.ascontiguousarray(g.transpose(ctx.inverse)), None

    @staticmethod
    def rebuild(ctx, i):
        inverse = ctx.inverse
        return lambda source, value: Permute.apply(value, inverse)


class Expand(Function):
    """y = x broadcast to `shape` (copied when elements repeat; then y may not be written in place,
    as in PyTorch); gx = g, summed back by the engine."""

    returns_views = True

    @staticmethod
    def forward(ctx, x, shape):
        if np.prod(shape) == x.size:         # only size-1 dims added: a view, as any reshape
            return x.reshape(shape)
        return np.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, g):
        return g, None

    @staticmethod
    def rebuild(ctx, i):
        return None                          # never used: a repeated-element copy cannot write back


def reshape(x, *shape):
    shape = _sizes(shape)
    if shape == x.shape:
        return x
    return Reshape.apply(x, shape)


view = reshape


def flatten(x, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one (a 0-d tensor becomes shape (1,))."""
    if x.ndim == 0:
        return reshape(x, 1)
    s = normalize_dim("flatten", start_dim, x.ndim, x.shape)
    e = normalize_dim("flatten", end_dim, x.ndim, x.shape)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"for shape {shape_str(x.shape)}")
    return reshape(x, x.shape[:s] + (-1,) + x.shape[e + 1:])


def squeeze(x, dim=None):
    """Drop size-1 dims (all of them, or those in `dim`; a dim whose size is not 1 is kept)."""
    if dim is None:
        dims = {i for i, s in enumerate(x.shape) if s == 1}
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {i for i in (normalize_dim("squeeze", d, x.ndim, x.shape) for d in dims)
                if x.ndim and x.shape[i] == 1}
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in dims))


def unsqueeze(x, dim):
    """Insert a size-1 dim at `dim` (in -ndim-1 .. ndim)."""
    d = normalize_dim("unsqueeze", dim, x.ndim, x.shape, extra=1)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def permute(x, *dims):
    dims = _sizes(dims)
    if len(dims) != x.ndim:
        raise ValueError(f"permute: {len(dims)} dims {dims} given for shape {shape_str(x.shape)}")
    norm = tuple(normalize_dim("permute", d, x.ndim, x.shape) for d in dims)
    if sorted(norm) != list(range(x.ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of the dims of shape {shape_str(x.shape)}")
    if norm == tuple(range(x.ndim)):
        return x
    return Permute.apply(x, norm)


def transpose(x, dim0, dim1):
    """Swap two dims."""
    d0 = normalize_dim("transpose", dim0, x.ndim, x.shape)
    d1 = normalize_dim("transpose", dim1, x.ndim, x.shape)
    if x.ndim == 0:                      # transpose(0, -1) of a 0-d tensor is itself (PyTorch)
        return x
    dims = list(range(x.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, dims)


def T(x):
    """All dims reversed (the usual transpose for a matrix)."""
    return permute(x, tuple(range(x.ndim - 1, -1, -1)))


def expand(x, *sizes):
    """Broadcast size-1 dims (and new leading dims) to `sizes`; -1 keeps a dim (PyTorch's expand)."""
    sizes = _sizes(sizes)
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: cannot expand shape {shape_str(x.shape)} to fewer dims {sizes}")
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise ValueError(f"expand: -1 is not allowed for the new leading dim {i} in {sizes}")
            s = x.shape[i - lead]
        elif i >= lead and x.shape[i - lead] not in (1, s):
            raise ValueError(f"expand: shape {shape_str(x.shape)} cannot expand to {sizes}: dim {i} "
                             f"has size {x.shape[i - lead]}, not 1")
        shape.append(s)
    shape = tuple(shape)
    if shape == x.shape:
        return x
    return Expand.apply(x, shape)


def movedim(x, source, destination):
    """torch.movedim: dims `source` (an int or a sequence) moved to positions `destination`, the
    others keeping their order (a permute)."""
    src = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {src} and destination {dst} must have the same length")
    src = [normalize_dim("movedim", d, x.ndim, x.shape) for d in src]
    dst = [normalize_dim("movedim", d, x.ndim, x.shape) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in source {tuple(src)} or destination {tuple(dst)}")
    if x.ndim == 0:
        return x
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    return permute(x, [next(rest) if o is None else o for o in order])


def swapaxes(x, axis0, axis1):
    """torch.swapaxes / swapdims: transpose(axis0, axis1)."""
    return transpose(x, axis0, axis1)


def unflatten(x, dim, sizes):
    """torch.unflatten: dim `dim` split into `sizes` (one may be -1)."""
    d = normalize_dim("unflatten", dim, x.ndim, x.shape)
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise ValueError("unflatten: sizes must be non-empty")
    known = int(np.prod([s for s in sizes if s != -1]))
    if sizes.count(-1) > 1 or (-1 not in sizes and known != x.shape[d]) or (
            -1 in sizes and (known == 0 or x.shape[d] % known)):
        raise ValueError(f"unflatten: sizes {sizes} do not multiply to {x.shape[d]}, the size of dim {d} "
                         f"of shape {shape_str(x.shape)}")
    return reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])


def broadcast_to(x, *shape):
    """torch.broadcast_to: expand to `shape` (-1 keeps a dim)."""
    return expand(x, *shape)


def diag_embed(x, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: a tensor with one more dim whose (dim1, dim2) matrices hold x's last dim on
    their `offset` diagonal, zeros elsewhere; gx = g's diagonal (SetItem into zeros)."""
    from minigrad.ops.indexing import SetItem
    from minigrad.tensor import Tensor

    offset = int(offset)
    k = x.shape[-1] if x.ndim else 1
    n = k + abs(offset)
    d1 = normalize_dim("diag_embed", dim1, x.ndim + 1, x.shape)
    d2 = normalize_dim("diag_embed", dim2, x.ndim + 1, x.shape)
    if d1 == d2:
        raise ValueError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    rows = np.arange(k) + max(-offset, 0)
    base = Tensor(np.zeros(x.shape[:-1] + (n, n), dtype=x.dtype))
    y = SetItem.apply(base, x.reshape(1) if x.ndim == 0 else x, (Ellipsis, rows, rows + offset))
    return movedim(y, (-2, -1), (d1, d2))


def diag(x, diagonal=0):
    """torch.diag: a 1-D tensor -> the square matrix with it on the `diagonal`-th diagonal; a 2-D
    tensor -> its `diagonal`-th diagonal (1-D)."""
    if x.ndim == 1:
        return diag_embed(x, diagonal)
    if x.ndim == 2:
        from minigrad.ops.api import diagonal as take_diagonal

        return take_diagonal(x, diagonal)
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {shape_str(x.shape)}")


def diagflat(x, offset=0):
    """torch.diagflat: the flattened input on the `offset` diagonal of a square matrix."""
    return diag_embed(reshape(x, -1), offset)


def ravel(x):
    """torch.ravel: the flattened tensor (a view)."""
    return reshape(x, -1)


def meshgrid(*tensors, indexing="ij"):
    """torch.meshgrid: N 1-D (or 0-d) tensors -> N tensors of shape (len_0, ..., len_N-1) ('ij') or
    with the first two dims swapped ('xy'); each the input broadcast (expand) along the others."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors:
        raise ValueError("meshgrid: expects a non-empty list of tensors")
    for t in tensors:
        if t.ndim > 1:
            raise ValueError(f"meshgrid: expects 0D or 1D tensors, got shape {shape_str(t.shape)}")
        if t.dtype != tensors[0].dtype:
            raise TypeError(f"meshgrid: expects all tensors to have the same dtype, got {tensors[0].dtype} "
                            f"and {t.dtype}")
    vecs = [reshape(t, -1) for t in tensors]
    sizes = tuple(v.shape[0] for v in vecs)
    grids = [expand(reshape(v, tuple(-1 if i == j else 1 for j in range(len(vecs)))), sizes)
             for i, v in enumerate(vecs)]
    if indexing == "xy" and len(vecs) >= 2:          # the 'ij' grids with the first two dims swapped
        grids = [transpose(g, 0, 1) for g in grids]
    return tuple(grids)
