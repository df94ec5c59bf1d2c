"""Fused SwiGLU gate h = silu(gate) * up (kernels/swiglu.pyx)."""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import swiglu as _k
from minigrad.kernels.validate import check_float
from minigrad.ops._common import rows


class SwiGLU(Function):
    """gate, up (..., F) -> silu(gate) * up; saves gate, up.

    Backward (s = sigmoid(gate)): ggate = gh * up * s * (1 + gate * (1 - s)),  gup = gh * (gate * s).
    """

    @staticmethod
    def forward(ctx, gate, up):
        check_float("swiglu", "gate", gate)
        check_float("swiglu", "up", up, shape=gate.shape, dtype=gate.dtype)
        g2, u2 = _rows(gate), _rows(up)
        h = np.empty_like(g2)
        _k.swiglu_forward(g2, u2, h)
        ctx.save_for_backward(g2, u2)
        ctx.shape = gate.shape
        return h.reshape(gate.shape)

    @staticmethod
    def backward(ctx, gh):
        g2, u2 = ctx.saved_tensors
        gg, gu = np.empty_like(g2), np.empty_like(u2)
        _k.swiglu_backward(np.ascontiguousarray(gh.reshape(g2.shape)), g2, u2, gg, gu)
        return gg.reshape(ctx.shape), gu.reshape(ctx.shape)


def _rows(x):
    return rows(x) if x.ndim else x.reshape(1, 1)


class SwiGLUPacked(Function):
    """h (..., 2F) = [gate | up] (one packed projection) -> silu(gate) * up (..., F); saves h.
    Same maths as SwiGLU; the gradient comes back packed as (..., 2F)."""

    @staticmethod
    def forward(ctx, h):
        check_float("swiglu_packed", "h", h)
        if h.ndim < 1 or h.shape[-1] % 2:
            raise ValueError(f"swiglu_packed: last dim must be even (gate | up), got shape {h.shape}")
        h2 = _rows(h)
        F = h2.shape[1] // 2
        out = np.empty((h2.shape[0], F), h.dtype)
        _k.swiglu_forward(h2[:, :F], h2[:, F:], out)
        ctx.save_for_backward(h2)
        ctx.shape = h.shape
        return out.reshape(h.shape[:-1] + (F,))

    @staticmethod
    def backward(ctx, gout):
        (h2,) = ctx.saved_tensors
        F = h2.shape[1] // 2
        gh = np.empty_like(h2)
        _k.swiglu_backward(np.ascontiguousarray(rows(gout)), h2[:, :F], h2[:, F:],
                           gh[:, :F], gh[:, F:])
        return gh.reshape(ctx.shape)


def swiglu_packed(h):
    """silu(h[..., :F]) * h[..., F:] for h (..., 2F): a gate/up pair from one packed GEMM."""
    return SwiGLUPacked.apply(h)


def swiglu(gate, up):
    """silu(gate) * up, elementwise (gate and up of the same shape)."""
    return SwiGLU.apply(gate, up)
