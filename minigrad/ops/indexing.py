"""Indexing: x[index] with PyTorch's semantics (ints, slices, None, Ellipsis, integer arrays, boolean
masks; Tensors allowed as indices) and the scatter-add that is its backward.

numpy and PyTorch differ in one case: PyTorch applies integer indices first, as basic indexing (a
select), and the array indices to what is left, while numpy counts an int beside an array as an
array, which moves the result's dims (t[1, :, [0, 3]] is (3, 2) in PyTorch, (2, 3) in numpy). So an
index with both is applied as x[ints][rest] (`select_ints`); x[ints] is a view, which the backward
and setitem write through.

Backward of y = x[index]: gx = zeros(x.shape); gx[index] += g. Without integer arrays no position
repeats, so a plain assignment does; with them repeated positions must accumulate (scatter-add).
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import scatter as _scatter
from minigrad.kernels.validate import FLOAT_DTYPES
from minigrad.ops._common import shape_str
from minigrad.tensor import Tensor


def scatter_add_rows(out, ids, rows):
    """out[ids[i]] += rows[i] for a 1-D int array `ids` in [0, len(out)), repeats accumulating in
    order of i (in place on `out`; deterministic). A Cython pass (kernels/scatter.pyx) for float32/64
    rows; other dtypes through np.add.at.
    """
    if len(rows) != ids.size:
        raise ValueError(f"scatter_add_rows: rows has {len(rows)} rows for {ids.size} ids")
    if ids.size == 0:
        return out
    if out.dtype in FLOAT_DTYPES and rows.dtype == out.dtype and out.flags.c_contiguous:
        width = int(np.prod(out.shape[1:]))
        _scatter.scatter_add_rows(out.reshape(out.shape[0], width), np.ascontiguousarray(ids, np.int64),
                                  np.ascontiguousarray(rows).reshape(ids.size, width))
    else:
        np.add.at(out, ids, rows)
    return out


def normalize_index(index):
    """Tensors -> arrays, lists -> arrays, 0-d integer arrays -> ints (as PyTorch); always a tuple.
    Index arrays are private copies (GetItem and SetItem keep them for backward; the caller may
    change its index tensor in place later), integer ones as int64 (the backward adds the dim's
    size to negative ids, which would overflow an int8 index)."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, Tensor):
            item = item.data
        if isinstance(item, list):
            item = np.asarray(item)
            if item.size == 0:
                item = item.astype(np.int64)
        if isinstance(item, np.ndarray):
            if item.dtype.kind not in "iub":
                raise IndexError(f"getitem: index arrays must be integer or bool, got {item.dtype}")
            if item.dtype.kind == "b":
                item = item.copy()
            elif item.ndim == 0:
                item = int(item)
            else:
                item = item.astype(np.int64)
        out.append(item)
    return tuple(out)


def _is_int(item):
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def select_ints(arr, index):
    """(arr[ints], rest) with arr[ints][rest] PyTorch's arr[index] (see the module docstring);
    (arr, index) when there is no int beside an array, where numpy already agrees."""
    if not (any(_is_int(i) for i in index) and any(isinstance(i, np.ndarray) and i.ndim for i in index)):
        return arr, index
    ints, rest = [], []
    for item in index:
        if _is_int(item):
            ints.append(item)
            continue
        rest.append(item)
        if item is Ellipsis:
            ints.append(Ellipsis)
        elif isinstance(item, np.ndarray):         # the dims it indexes stay for rest
            ints.extend([slice(None)] * (item.ndim if item.dtype == np.bool_ else 1))
        elif isinstance(item, slice):
            ints.append(slice(None))
    return arr[tuple(ints)], tuple(rest)


def _single_int_array(index):
    """The int array when `index` is exactly (int_array, [full slices...]), else None."""
    first = index[0] if index else None
    if not (isinstance(first, np.ndarray) and first.dtype.kind in "iu"):
        return None
    if any(not (isinstance(i, slice) and i == slice(None)) and i is not Ellipsis for i in index[1:]):
        return None
    return first


def _repeats_possible(index):
    return any(isinstance(i, np.ndarray) and i.dtype.kind in "iu" and i.size > 1 for i in index)


def getitem_error(op, shape, index, err):
    return IndexError(f"{op}: index {_describe(index)} is invalid for shape {shape_str(shape)}: {err}")


def _describe(index):
    parts = []
    for i in index:
        if isinstance(i, np.ndarray):
            parts.append(f"{i.dtype} array{shape_str(i.shape)}")
        elif i is Ellipsis:
            parts.append("...")
        elif isinstance(i, slice):
            parts.append(":".join("" if v is None else str(v) for v in (i.start, i.stop, i.step)).rstrip(":")
                         or ":")
        else:
            parts.append(repr(i))
    return "[" + ", ".join(parts) + "]"


class GetItem(Function):
    """y = x[index]; gx = scatter-add of g into zeros at index. Without index arrays y is a view
    of x (or a copy that writes back to x when written in place), as in PyTorch."""

    returns_views = True

    @staticmethod
    def rebuild(ctx, i):
        index = ctx.index
        return lambda source, value: SetItem.apply(source, value, index)

    @staticmethod
    def forward(ctx, x, index):
        try:
            view, rest = select_ints(x, index)
            y = view[rest]
        except (IndexError, ValueError, TypeError) as err:
            raise getitem_error("getitem", x.shape, index, err) from None
        ctx.shape, ctx.index = x.shape, index
        return y

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, dtype=g.dtype)
        out, index = select_ints(gx, ctx.index)
        rows = _single_int_array(index)
        if rows is not None:
            ids = rows.reshape(-1)
            ids = np.where(ids < 0, ids + out.shape[0], ids)
            scatter_add_rows(out, ids, g.reshape((ids.size,) + out.shape[1:]))
        elif _repeats_possible(index):
            np.add.at(out, index, g)
        else:
            out[index] = g
        return gx, None


class SetItem(Function):
    """y = x with y[index] = v (out of place; the in-place wrapper copies y back into x).

    gx = g with g[index] = 0; gv = g[index] (summed to v's shape by the engine; v may have extra
    leading size-1 dims, which assignment drops).
    """

    @staticmethod
    def forward(ctx, x, v, index):
        y = x.copy()
        assign(y, index, v)
        ctx.index, ctx.v_shape = index, np.shape(v)
        return y

    @staticmethod
    def backward(ctx, g):
        gx = gv = None
        if ctx.needs_input_grad[0]:
            gx = g.copy()
            out, index = select_ints(gx, ctx.index)
            out[index] = 0
        if ctx.needs_input_grad[1]:
            view, index = select_ints(g, ctx.index)
            gv = np.ascontiguousarray(view[index])
            extra = len(ctx.v_shape) - gv.ndim
            if extra > 0:
                gv = gv.reshape((1,) * extra + gv.shape)
        return gx, gv, None


def assign(arr, index, value):
    """arr[index] = value in place, PyTorch's indexing (`select_ints`); errors name the shapes."""
    try:
        view, rest = select_ints(arr, index)
        view[rest] = value
    except (IndexError, ValueError, TypeError) as err:
        raise getitem_error("setitem", arr.shape, index, err) from None


def getitem(x, index):
    index = normalize_index(index)
    return GetItem.apply(x, index)
