"""dtype casts and copies."""
import numpy as np

from minigrad.autograd.function import Function


class Cast(Function):
    """y = x.astype(dtype); dx = dy.astype(x.dtype)."""

    changes_dtype = True

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.in_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.astype(ctx.in_dtype), None


class Clone(Function):
    """y = copy(x); dx = dy."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad


def cast(x, dtype):
    """`x` as `dtype`. Float -> float casts are differentiable; anything else is a plain copy."""
    from minigrad.tensor import Tensor

    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype not in (np.float32, np.float64):
        raise TypeError(f"to: unsupported float dtype {dtype}; use float32 or float64")
    if dtype.kind not in "fiub":
        raise TypeError(f"to: unsupported dtype {dtype}")
    if dtype == x.dtype:
        return x
    if dtype.kind == "f" and x.dtype.kind == "f":
        return Cast.apply(x, dtype)
    return Tensor(x.data.astype(dtype))


def clone(x):
    return Clone.apply(x)
