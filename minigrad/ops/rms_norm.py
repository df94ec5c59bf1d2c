"""Fused RMSNorm over the last dim, alone or after a residual add (kernels/rms_norm.pyx)."""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import rms_norm as _k
from minigrad.kernels.validate import check_finite_scalar, check_float
from minigrad.ops._common import rows


class RMSNormFn(Function):
    """x (..., C), weight (C,) -> y = x / sqrt(mean(x^2) + eps) * weight; saves x, weight, rstd (N,).

    Backward (xhat = x * rstd, g = gy * weight):
        gx = rstd * (g - xhat * mean(g * xhat)),   gweight = sum over rows of gy * xhat.
    """

    @staticmethod
    def forward(ctx, x, weight, eps):
        eps = _check("rms_norm", x, weight, eps)
        x2 = rows(x)
        y = np.empty_like(x2)
        rstd = np.empty(x2.shape[0], x.dtype)
        _k.rms_norm_forward(x2, weight, eps, y, rstd)
        ctx.save_for_backward(x2, weight, rstd)
        ctx.shape = x.shape
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x2, weight, rstd = ctx.saved_tensors
        need_gx, need_gw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        gy2 = np.ascontiguousarray(gy.reshape(x2.shape))
        gx = np.empty_like(x2) if need_gx else np.empty((1, x2.shape[1]), x2.dtype)
        gw = np.empty_like(weight)
        _k.rms_norm_backward(gy2, x2, weight, rstd, gx, gw, need_gx, need_gw)
        return (gx.reshape(ctx.shape) if need_gx else None), (gw if need_gw else None), None


def _check(op, x, weight, eps):
    """Validate x (..., C) and weight (C,); returns eps as a float."""
    check_float(op, "x", x)
    if x.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got shape {x.shape}")
    check_float(op, "weight", weight, shape=(x.shape[-1],), dtype=x.dtype)
    eps = check_finite_scalar(op, "eps", eps)
    if eps < 0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")
    return eps


class AddRMSNorm(Function):
    """x, r (..., C), weight (C,) -> (s = x + r, y = rms_norm(s, weight)); saves s, weight, rstd.

    A pre-norm block's residual add and the next norm in one pass. Backward, with shat = s * rstd:
        g = gs + rstd * (gy * w - shat * mean(gy * w * shat))   for both x and r,
        gweight = sum over rows of gy * shat.
    """

    @staticmethod
    def forward(ctx, x, r, weight, eps):
        op = "add_rms_norm"
        eps = _check(op, x, weight, eps)
        check_float(op, "r", r, shape=x.shape, dtype=x.dtype)
        x2, r2 = rows(x), rows(r)
        s, y = np.empty_like(x2), np.empty_like(x2)
        rstd = np.empty(x2.shape[0], x.dtype)
        _k.add_rms_norm_forward(x2, r2, weight, eps, s, y, rstd)
        ctx.save_for_backward(s, weight, rstd)
        ctx.shape = x.shape
        return s.reshape(x.shape), y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gs, gy):
        s, weight, rstd = ctx.saved_tensors
        g, gw = np.empty_like(s), np.empty_like(weight)
        need_gw = ctx.needs_input_grad[2]
        _k.add_rms_norm_backward(np.ascontiguousarray(gy.reshape(s.shape)),
                                 np.ascontiguousarray(gs.reshape(s.shape)), s, weight, rstd, g, gw, need_gw)
        g = g.reshape(ctx.shape)
        need_x, need_r = ctx.needs_input_grad[:2]
        return (g if need_x else None), (g if need_r else None), (gw if need_gw else None), None


def add_rms_norm(x, r, weight, eps=1e-5):
    """(s, y) = (x + r, rms_norm(x + r, weight, eps)): a residual add fused with the next RMSNorm."""
    return AddRMSNorm.apply(x, r, weight, eps)


def rms_norm(x, weight, eps=1e-5):
    """RMSNorm over the last dim: x / sqrt(mean(x^2, -1) + eps) * weight."""
    return RMSNormFn.apply(x, weight, eps)
