"""matmul with numpy's semantics (1-D operands, batched, broadcast batch dims), GEMMs in BLAS.

Forward y = a @ b. With 1-D operands promoted (a (k,) -> (1, k), b (k,) -> (k, 1)):
    ga = g @ b^T    gb = a^T @ g
summed over broadcast batch dims, then the promoted dims dropped again. When one side is a plain
matrix, the batch dims of the other are folded into rows so each product is one GEMM.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import as_tensor, operand, rows, shape_str


def _matmul_error(a_shape, b_shape):
    head = f"matmul: {shape_str(a_shape)} @ {shape_str(b_shape)}"
    if len(a_shape) == 0 or len(b_shape) == 0:
        return ValueError(f"{head}: both operands need at least 1 dimension")
    ka = a_shape[-1]
    kb = b_shape[0] if len(b_shape) == 1 else b_shape[-2]
    if ka != kb:
        return ValueError(f"{head}: inner dimensions {ka} and {kb} differ")
    return ValueError(f"{head}: batch dimensions {shape_str(a_shape[:-2])} and {shape_str(b_shape[:-2])} "
                      "cannot be broadcast")


def _mm(a, b):
    """a @ b; a (..., m, k) @ b (k, n) runs as one (M, k) @ (k, n) GEMM."""
    if b.ndim == 2 and a.ndim > 2:
        return (rows(a) @ b).reshape(a.shape[:-1] + (b.shape[1],))
    return np.matmul(a, b)


def _sum_to(g, shape):
    """Sum the leading batch dims g has beyond `shape` and the batch dims `shape` broadcast."""
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape[:-2]) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise _matmul_error(a.shape, b.shape)
        try:
            y = _mm(a, b)
        except ValueError:
            raise _matmul_error(a.shape, b.shape) from None
        need_a, need_b = ctx.needs_input_grad
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        ctx.shapes = a.shape, b.shape
        return y

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        a_shape, b_shape = ctx.shapes
        a2_shape = (1,) + a_shape if len(a_shape) == 1 else a_shape
        b2_shape = b_shape + (1,) if len(b_shape) == 1 else b_shape
        g2 = g
        if len(b_shape) == 1:
            g2 = g2.reshape(g2.shape + (1,))
        if len(a_shape) == 1:
            g2 = g2.reshape(g2.shape[:-1] + (1, g2.shape[-1]))
        ga = gb = None
        if ctx.needs_input_grad[0]:
            bT = np.swapaxes(b.reshape(b2_shape), -1, -2)
            ga = _sum_to(_mm(g2, bT), a2_shape).reshape(a_shape)
        if ctx.needs_input_grad[1]:
            a2 = a.reshape(a2_shape)
            if len(b2_shape) == 2:   # fold every batch dim of a and g into the GEMM's inner dim
                gb = rows(a2).T @ rows(g2)
            else:
                gb = _sum_to(np.matmul(np.swapaxes(a2, -1, -2), g2), b2_shape)
            gb = gb.reshape(b_shape)
        return ga, gb


def matmul(a, b):
    """a @ b with numpy's matmul semantics."""
    return MatMul.apply(as_tensor(operand(a)), as_tensor(operand(b)))
