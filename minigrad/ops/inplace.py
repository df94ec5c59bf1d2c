"""In-place updates (`+=`, `x[i] = v`, add_, zero_ ...): write into the tensor's array and bump its
version counter, so a backward that saved the old array raises instead of using stale values.

* Outside the graph (no_grad, or nothing involved requires grad): a numpy ufunc with `out=`.
* In the graph: a leaf that requires grad may not be modified (as in PyTorch). Any other tensor is
  recomputed out of place from a copy of its old value (so ops saving that value stay correct),
  the result is written into its array, and the tensor takes over the new node.

Views are not tracked: a tensor made by reshape/view shares memory with its source but not its
version counter.
"""
import numpy as np

from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.ops import binary
from minigrad.ops._common import array_of, operand, shape_str
from minigrad.ops.indexing import SetItem, getitem_error, normalize_index
from minigrad.tensor import Tensor


def _check_dtypes(op, t, other):
    floats = isinstance(other, Tensor) and t.dtype.kind == other.dtype.kind == "f"
    if floats and other.dtype != t.dtype:
        raise TypeError(f"{op}: cannot write {other.dtype} values into a {t.dtype} tensor in place; "
                        "convert with .to(dtype) first")


def _recording(t, other):
    return is_grad_enabled() and (t.requires_grad or (isinstance(other, Tensor) and other.requires_grad))


def _snapshot(t):
    """A tensor standing for t's current value and graph position, with its own copy of the array."""
    old = Tensor._from_op(t.data.copy())
    old.requires_grad, old._node, old._out_index = t.requires_grad, t._node, t._out_index
    return old


def _in_graph(op, t, compute):
    """Run compute(old_t) -> Tensor out of place, then make t that result, in place."""
    if t.requires_grad and t.is_leaf:
        raise RuntimeError(f"{op}: a leaf tensor that requires grad cannot be modified in place; "
                           "do it under minigrad.no_grad() or on a .detach()ed / .clone()d tensor")
    out = compute(_snapshot(t))
    if out.shape != t.shape:
        raise ValueError(f"{op}: the result has shape {shape_str(out.shape)} but the tensor being "
                         f"updated has shape {shape_str(t.shape)}")
    np.copyto(t.data, out.data)
    t._bump_version()
    t.requires_grad, t._node, t._out_index = out.requires_grad, out._node, out._out_index
    return t


_UFUNCS = {binary.Add: np.add, binary.Sub: np.subtract, binary.Mul: np.multiply,
           binary.Div: np.true_divide, binary.Pow: np.power}
_SYMBOLS = {binary.Add: "+=", binary.Sub: "-=", binary.Mul: "*=", binary.Div: "/=", binary.Pow: "**="}


def binary_inplace(fn, t, other):
    """t op= other for fn in Add, Sub, Mul, Div, Pow; returns t."""
    op = fn.__name__.lower() + "_"
    other = operand(other)
    _check_dtypes(op, t, other)
    if _recording(t, other):
        return _in_graph(op, t, lambda old: fn.apply(old, old if other is t else other))   # x *= x
    try:
        _UFUNCS[fn](t.data, array_of(other), out=t.data)
    except ValueError:
        raise ValueError(f"{op}: {shape_str(t.shape)} {_SYMBOLS[fn]} {shape_str(np.shape(array_of(other)))}: "
                         "the right side must broadcast to the left side's shape") from None
    t._bump_version()
    return t


def setitem(t, index, value):
    """t[index] = value, in place."""
    index = normalize_index(index)
    value = operand(value)
    _check_dtypes("setitem", t, value)
    if _recording(t, value):
        _in_graph("setitem", t, lambda old: SetItem.apply(old, value, index))
        return
    try:
        t.data[index] = array_of(value)
    except (IndexError, ValueError) as err:
        raise getitem_error("setitem", t.shape, index, err) from None
    t._bump_version()


def fill_(t, value):
    """Every element set to `value` (in place)."""
    setitem(t, Ellipsis, value)
    return t


def zero_(t):
    return fill_(t, 0)


def copy_(t, src):
    """t's values replaced by src's (broadcast to t's shape, cast to t's dtype), in place."""
    src = operand(src)
    if isinstance(src, Tensor) and src.dtype != t.dtype:
        src = src.to(t.dtype)
    setitem(t, Ellipsis, src)
    return t
