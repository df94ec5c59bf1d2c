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

from minigrad.ops import binary, gather_sort, inplace, scatter_reduce
from minigrad.ops._common import as_tensor, operand, shape_str
from minigrad.ops.gather_sort import _vector_index
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
