"""Indexing: x[index] with numpy semantics (ints, slices, None, Ellipsis, integer arrays, boolean
masks; Tensors allowed as indices) and the scatter-add that is its backward.

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
    """Tensors -> arrays, lists -> arrays; always a tuple. Index arrays are private copies (GetItem
    and SetItem keep them for backward; the caller may change its index tensor in place later)."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, Tensor):
            item = item.data.copy()
        elif isinstance(item, np.ndarray):
            item = item.copy()
        elif isinstance(item, list):
            item = np.asarray(item)
            if item.size == 0:
                item = item.astype(np.int64)
        if isinstance(item, np.ndarray) and item.dtype.kind not in "iub":
            raise IndexError(f"getitem: index arrays must be integer or bool, got {item.dtype}")
        out.append(item)
    return tuple(out)


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
    """y = x[index]; gx = scatter-add of g into zeros at index."""

    @staticmethod
    def forward(ctx, x, index):
        try:
            y = x[index]
        except (IndexError, ValueError, TypeError) as err:
            raise getitem_error("getitem", x.shape, index, err) from None
        ctx.shape, ctx.index = x.shape, index
        return y

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, dtype=g.dtype)
        index = ctx.index
        rows = _single_int_array(index)
        if rows is not None:
            ids = rows.reshape(-1)
            ids = np.where(ids < 0, ids + ctx.shape[0], ids)
            scatter_add_rows(gx, ids, g.reshape((ids.size,) + ctx.shape[1:]))
        elif _repeats_possible(index):
            np.add.at(gx, index, g)
        else:
            gx[index] = g
        return gx, None


class SetItem(Function):
    """y = x with y[index] = v (out of place; the in-place wrapper copies y back into x).

    gx = g with g[index] = 0; gv = g[index] (summed to v's shape by the engine).
    """

    @staticmethod
    def forward(ctx, x, v, index):
        y = x.copy()
        try:
            y[index] = v
        except (IndexError, ValueError, TypeError) as err:
            raise getitem_error("setitem", x.shape, index, err) from None
        ctx.index = index
        return y

    @staticmethod
    def backward(ctx, g):
        gx = gv = None
        if ctx.needs_input_grad[0]:
            gx = g.copy()
            gx[ctx.index] = 0
        if ctx.needs_input_grad[1]:
            gv = np.ascontiguousarray(g[ctx.index])
        return gx, gv, None


def getitem(x, index):
    index = normalize_index(index)
    return GetItem.apply(x, index)
