"""Embedding lookup: y = weight[ids]; gweight = scatter-add of g into the rows named by ids."""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels.validate import check_index, check_int
from minigrad.ops._common import private_index, rows, shape_str
from minigrad.ops.indexing import scatter_add_rows
from minigrad.tensor import Tensor


class Embedding(Function):
    """ids (...) int, weight (V, D) -> y (..., D). gweight[v] = sum of g rows whose id is v
    (the padding_idx row gets no gradient)."""

    @staticmethod
    def forward(ctx, weight, ids, padding_idx):
        ctx.save_for_backward(ids)
        ctx.weight_shape, ctx.padding_idx = weight.shape, padding_idx
        return np.take(weight, ids, axis=0)

    @staticmethod
    def backward(ctx, g):
        (ids,) = ctx.saved_tensors
        gw = np.zeros(ctx.weight_shape, dtype=g.dtype)
        scatter_add_rows(gw, ids.reshape(-1), rows(g))
        if ctx.padding_idx is not None:
            gw[ctx.padding_idx] = 0
        return gw, None, None


def check_padding_idx(op, padding_idx, num):
    """padding_idx (an int in [-num, num), as torch) as an index in [0, num)."""
    padding_idx = check_int(op, "padding_idx", padding_idx)
    if not -num <= padding_idx < num:
        raise IndexError(f"{op}: padding_idx {padding_idx} is outside [{-num}, {num})")
    return padding_idx % num


def embedding(ids, weight, padding_idx=None):
    """Rows of `weight` (V, D) picked by integer `ids` of any shape -> (*ids.shape, D).

    The backward uses the ids of the forward: they are copied when the caller could still change
    them (an ids Tensor modified in place afterwards does not move the gradient).

    Raises IndexError naming the op when an id is outside [0, V).
    """
    if not isinstance(weight, (Tensor, np.ndarray)):
        raise TypeError(f"embedding: weight must be a Tensor or numpy array, got {type(weight).__name__}")
    if weight.ndim != 2:
        raise ValueError("embedding: weight must be (num_embeddings, dim), "
                         f"got shape {shape_str(weight.shape)}")
    given = ids.data if isinstance(ids, Tensor) else np.asarray(ids)
    num = weight.shape[0]
    ids = check_index("embedding", "ids", given, num).reshape(given.shape)   # (keeps 0-d ids 0-d)
    ids = private_index(ids, given)
    if padding_idx is not None:
        padding_idx = check_padding_idx("embedding", padding_idx, num)
    return Embedding.apply(weight, ids, padding_idx)
