"""index_fill / index_copy (out of place) and the in-place scatter_, scatter_add_, scatter_reduce_,
index_add_, index_fill_, index_copy_ (torch's Tensor methods).

index_fill: input (*S), index 1-D int (values in [0, S[dim])), value a number or a 0-d Tensor -> S;
    where(mask, value, input) with mask True at index along dim, so gx = g zeroed at the filled
    positions and gvalue = the sum of g over them.
index_copy: input (*S), source S with len(index) at dim -> S; scatter along dim of source with index
    broadcast to source's shape, so gx = g zeroed at the written positions, gsource = g taken at
    index along dim.

The in-place methods compute the out-of-place op and write it into the tensor through
`inplace._update`: the version is bumped, a leaf that requires grad raises in grad mode, and in the
graph the tensor takes over the new node (see minigrad/ops/inplace.py). Errors are raised before
anything is written.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops import binary, gather_sort, inplace, scatter_reduce
from minigrad.ops._common import as_tensor, normalize_dim, operand, shape_str
from minigrad.ops.gather_sort import _vector_index
from minigrad.ops.indexing import SetItem, getitem_error, normalize_index
from minigrad.tensor import Tensor


def _index_mask(x, d, index):
    """bool (1, .., S[d], .., 1): True at index along dim d."""
    mask = np.zeros(x.shape[d] if x.ndim else 1, bool)
    mask[index] = True
    return mask.reshape([-1 if k == d else 1 for k in range(x.ndim)])


def _fill_value(op, x, value):
    value = operand(value)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"{op}: only a 0-dim value tensor is supported, got shape "
                             f"{shape_str(value.shape)}")
        return value.to(x.dtype) if value.dtype != x.dtype else value
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"{op}: value must be a number or a 0-d Tensor, got {type(value).__name__}")
    return x.dtype.type(value).item() if x.dtype.kind in "iub" else value    # cast, as torch


def index_fill(input, dim, index, value):  # noqa: A002
    """torch.index_fill: a copy of input with every entry at `index` (1-D int) along `dim` set to
    `value` (a number or a 0-d Tensor, which gets the summed gradient of the filled entries)."""
    x = as_tensor(input)
    d, idx = _vector_index("index_fill", x, dim, index)
    value = _fill_value("index_fill", x, value)
    return binary.where(_index_mask(x, d, idx), value, x)


def index_copy(input, dim, index, source):  # noqa: A002
    """torch.index_copy: a copy of input with input[.., index[i], ..] = source[.., i, ..] along `dim`
    (index 1-D int; source input's shape with len(index) at dim). With repeated indices which write
    wins is unspecified, as torch."""
    op = "index_copy"
    x, src = as_tensor(input), as_tensor(source)
    if src.dtype != x.dtype:
        raise TypeError(f"{op}: source dtype {src.dtype} differs from input dtype {x.dtype}")
    d, idx = _vector_index(op, x, dim, index)
    if x.ndim == 0:
        return index_copy(x.reshape(1), 0, idx, src.reshape(-1)).reshape(())
    want = tuple(len(idx) if k == d else s for k, s in enumerate(x.shape))
    if tuple(src.shape) != want:
        raise ValueError(f"{op}: source {shape_str(src.shape)} must have shape {shape_str(want)} (input "
                         f"{shape_str(x.shape)} with {len(idx)} entries at dim {d})")
    full = np.broadcast_to(idx.reshape([-1 if k == d else 1 for k in range(x.ndim)]), want).copy()
    return gather_sort.scatter(x, d, full, src)


def _tensor_or_none(v):
    return v if isinstance(v, Tensor) else None


def _inplace(op, fn, operand_of):
    """A Tensor method t.op(*args) writing fn(t, *args) into t; operand_of(args, kwargs) is the Tensor
    operand written into t (checked for requiring grad), or None."""
    def method(self, *args, **kwargs):
        other = _tensor_or_none(operand_of(args, kwargs))
        return inplace._update(op, self, other, lambda old: fn(old, *args, **kwargs))

    method.__name__ = op
    method.__doc__ = f"In-place {fn.__name__} (see minigrad.{fn.__name__}); returns self."
    return method


def _arg(position, name):
    """The argument at `position` (after self) or keyword `name`."""
    return lambda args, kwargs: args[position] if len(args) > position else kwargs.get(name)


scatter_ = _inplace("scatter_", gather_sort.scatter,
                    lambda args, kwargs: _arg(2, "src")(args, kwargs) if "value" not in kwargs else None)
scatter_add_ = _inplace("scatter_add_", gather_sort.scatter_add, _arg(2, "src"))
scatter_reduce_ = _inplace("scatter_reduce_", scatter_reduce.scatter_reduce, _arg(2, "src"))
index_add_ = _inplace("index_add_", gather_sort.index_add, _arg(2, "source"))
index_fill_ = _inplace("index_fill_", index_fill, _arg(2, "value"))
index_copy_ = _inplace("index_copy_", index_copy, _arg(2, "source"))


# ---- *_scatter, index_put, masked_scatter: out-of-place writes (SetItem: gx = g zeroed where written,
# gsrc = g taken there) ----------------------------------------------------------------------------
def _embed(op, x, src, index, want):
    """x with x[index] = src, src of exactly the shape `want` of x[index] (as torch checks)."""
    src = as_tensor(operand(src))
    if tuple(src.shape) != tuple(want):
        raise ValueError(f"{op}: expected src to have a size equal to the slice of self. src size = "
                         f"{shape_str(src.shape)}, slice size = {shape_str(want)}")
    if src.dtype != x.dtype:
        raise TypeError(f"{op}: src dtype {src.dtype} differs from input dtype {x.dtype}")
    return SetItem.apply(x, src, index)


def select_scatter(input, src, dim, index):  # noqa: A002
    """torch.select_scatter: input with input.select(dim, index) replaced by src."""
    x = as_tensor(input)
    if x.ndim == 0:
        raise IndexError("select_scatter: cannot be applied to a 0-dim tensor")
    d = normalize_dim("select_scatter", dim, x.ndim, x.shape)
    n = x.shape[d]
    index = int(index)
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} out of range for tensor of size "
                         f"{shape_str(x.shape)} at dimension {d}")
    where_ = (slice(None),) * d + (index % n,)
    return _embed("select_scatter", x, src, where_, np.empty(x.shape)[where_].shape)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """torch.slice_scatter: input with input[.., start:end:step, ..] (along dim) replaced by src."""
    x = as_tensor(input)
    d = normalize_dim("slice_scatter", dim, x.ndim, x.shape)
    if step is None:
        step = 1
    if int(step) <= 0:
        raise ValueError(f"slice_scatter: slice step must be positive, got {step}")
    where_ = (slice(None),) * d + (slice(start, end, int(step)),)
    return _embed("slice_scatter", x, src, where_, np.empty(x.shape)[where_].shape)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """torch.diagonal_scatter: input with its `offset` diagonal of dims (dim1, dim2) replaced by src
    (shaped as torch.diagonal's result: the other dims, then the diagonal)."""
    from minigrad.ops.shape import movedim

    x = as_tensor(input)
    d1 = normalize_dim("diagonal_scatter", dim1, x.ndim, x.shape)
    d2 = normalize_dim("diagonal_scatter", dim2, x.ndim, x.shape)
    if d1 == d2:
        raise ValueError(f"diagonal_scatter: diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = int(offset)
    y = movedim(x, (d1, d2), (-2, -1))
    n, m = y.shape[-2:]
    k = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    rows = np.arange(k) + max(-offset, 0)
    out = _embed("diagonal_scatter", y, src, (Ellipsis, rows, rows + offset), y.shape[:-2] + (k,))
    return movedim(out, (-2, -1), (d1, d2))


class IndexPutAdd(Function):
    """y = x with v added at `index` (numpy's add.at: repeated positions accumulate);
    gx = g, gv = g[index] (summed to v's shape by the engine)."""

    @staticmethod
    def forward(ctx, x, v, index):
        y = x.copy()
        try:
            np.add.at(y, index, v)
        except (IndexError, ValueError) as err:
            raise getitem_error("index_put", x.shape, index, err) from None
        ctx.index = index
        return y

    @staticmethod
    def backward(ctx, g):
        gv = np.ascontiguousarray(g[ctx.index]) if ctx.needs_input_grad[1] else None
        return (g if ctx.needs_input_grad[0] else None), gv, None


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """torch.index_put: input with input[indices] = values (indices a tuple of integer or bool
    tensors; values broadcast); accumulate=True adds instead, repeated indices adding up."""
    x = as_tensor(input)
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
    index = normalize_index(tuple(indices))
    v = as_tensor(operand(values))
    if v.dtype != x.dtype:
        raise TypeError(f"index_put: values dtype {v.dtype} differs from input dtype {x.dtype}")
    if accumulate:
        return IndexPutAdd.apply(x, v, index)
    return SetItem.apply(x, v, index)


def masked_scatter(input, mask, source):  # noqa: A002
    """torch.masked_scatter: input (broadcast with mask) with the positions where the bool mask is
    True filled, in C order, by the first elements of source."""
    x = as_tensor(input)
    m = binary.bool_mask(mask, "masked_scatter")
    src = as_tensor(operand(source))
    if src.dtype != x.dtype:
        raise TypeError(f"masked_scatter: source dtype {src.dtype} differs from input dtype {x.dtype}")
    try:
        shape = np.broadcast_shapes(x.shape, m.shape)
    except ValueError:
        raise ValueError(f"masked_scatter: input {shape_str(x.shape)} and mask {shape_str(m.shape)} do "
                         "not broadcast") from None
    mb = np.broadcast_to(m.data, shape).copy()
    count = int(mb.sum())
    if src.numel() < count:
        raise ValueError(f"masked_scatter: number of elements of source ({src.numel()}) < number of ones "
                         f"in mask ({count})")
    xb = x.expand(shape) if tuple(x.shape) != shape else x
    return SetItem.apply(xb, src.reshape(-1)[:count], (mb,))


index_put_ = inplace.method("index_put_", index_put)
masked_scatter_ = inplace.method("masked_scatter_", masked_scatter)


def put(input, index, source, accumulate=False):  # noqa: A002
    """torch.put: input with the elements of the flattened input at `index` (negative from the end)
    set to (accumulate: increased by) the elements of source, in order."""
    x = as_tensor(input)
    idx = index.data if isinstance(index, Tensor) else np.asarray(index)
    src = as_tensor(operand(source))
    if idx.dtype.kind not in "iu":
        raise TypeError(f"put: expected an integer index, got {idx.dtype}")
    if idx.size != src.numel():
        raise ValueError(f"put: expected source and index to have the same number of elements, but got "
                         f"source.numel() = {src.numel()}, index.numel() = {idx.size}")
    n = x.numel()
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx.min() if idx.min() < -n else idx.max()
        raise IndexError(f"put: index {bad} is out of bounds for a tensor of {n} elements")
    flat = index_put(x.reshape(-1), (Tensor(idx.reshape(-1) % max(n, 1)),), src.reshape(-1), accumulate)
    return flat.reshape(x.shape)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """torch.index_reduce: input with source[.., i, ..] reduced into input[.., index[i], ..] along
    `dim` by 'prod' | 'mean' | 'amax' | 'amin' (scatter_reduce with index spread over source)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"index_reduce: reduce argument must be either prod, mean, amax or amin, got "
                         f"{reduce!r}")
    x, src = as_tensor(input), as_tensor(operand(source))
    d, idx = _vector_index("index_reduce", x, dim, index)
    if x.ndim == 0:
        return index_reduce(x.reshape(1), 0, idx, src.reshape(-1), reduce,
                            include_self=include_self).reshape(())
    want = tuple(len(idx) if k == d else s for k, s in enumerate(x.shape))
    if tuple(src.shape) != want:
        raise ValueError(f"index_reduce: source {shape_str(src.shape)} must have shape {shape_str(want)}")
    full = np.broadcast_to(idx.reshape([-1 if k == d else 1 for k in range(x.ndim)]), want).copy()
    return scatter_reduce.scatter_reduce(x, d, full, src, reduce, include_self=include_self)


put_ = inplace.method("put_", put)
index_reduce_ = inplace.method("index_reduce_", index_reduce)
