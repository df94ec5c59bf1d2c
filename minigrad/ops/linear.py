"""linear(x, weight, bias) = x @ weight.T + bias, as one op (one GEMM each way, no transposed copies)."""
import numpy as np

from minigrad.autograd.engine import sum_accurate
from minigrad.autograd.function import Function
from minigrad.blas import gemm
from minigrad.ops._common import rows


class Linear(Function):
    """x (..., in), weight (out, in), bias (out,) or None -> y (..., out).

    Backward with gy (..., out), flattened to X (N, in), G (N, out):
        gx = gy @ weight,  gweight = G.T @ X,  gbias = G.sum(0) (float32 summed in float64).
    """

    @staticmethod
    def forward(ctx, x, weight, bias):
        _check(x, weight, bias)
        x2 = rows(x)
        y = gemm(x2, weight, trans_b=True)
        if bias is not None:
            y += bias
        ctx.save_for_backward(x, weight)
        return y.reshape(x.shape[:-1] + (weight.shape[0],))

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        g2 = rows(gy)
        gx = gemm(g2, weight).reshape(x.shape) if ctx.needs_input_grad[0] else None
        gw = gemm(g2, rows(x), trans_a=True) if ctx.needs_input_grad[1] else None
        gb = sum_accurate(g2, 0) if ctx.needs_input_grad[2] else None
        return gx, gw, gb


def _check(x, weight, bias):
    for name, arr in (("input", x), ("weight", weight), ("bias", bias)):
        if arr is None and name == "bias":
            continue
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"linear: {name} must be a Tensor or numpy array, got {type(arr).__name__}")
        if arr.dtype.kind != "f":
            raise TypeError(f"linear: {name} must be float, got {arr.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be (out, in), got shape {weight.shape}")
    if x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        last = x.shape[-1] if x.ndim else None
        raise ValueError(f"linear: input {x.shape} @ weight.T {weight.shape[::-1]}: "
                         f"last dim {last} and in_features {weight.shape[1]} differ")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")


def linear(x, weight, bias=None):
    """y = x @ weight.T + bias over the last dim of x (PyTorch's F.linear)."""
    return Linear.apply(x, weight, bias)
