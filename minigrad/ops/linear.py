"""linear(x, weight, bias) = x @ weight.T + bias, as one op (one GEMM each way, no transposed copies)."""
import numpy as np

from minigrad.autograd.engine import sum_accurate
from minigrad.autograd.function import Function
from minigrad.blas import gemm
from minigrad.kernels.validate import FLOAT_DTYPES
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
        if arr.dtype not in FLOAT_DTYPES:
            raise TypeError(f"linear: {name} must be float32 or float64, got {arr.dtype}")
        if arr.dtype != x.dtype:        # raw numpy arrays: Function.apply checks only Tensors
            raise TypeError(f"linear: {name} has dtype {arr.dtype} but input is {x.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be (out, in), got shape {weight.shape}")
    if x.ndim < 1:
        raise ValueError(f"linear: input must have at least 1 dim (..., in_features), got a 0-d {x.dtype} "
                         "array")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} @ weight.T {weight.shape[::-1]}: "
                         f"last dim {x.shape[-1]} and in_features {weight.shape[1]} differ")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")


def linear(x, weight, bias=None):
    """y = x @ weight.T + bias over the last dim of x (PyTorch's F.linear)."""
    return Linear.apply(x, weight, bias)
