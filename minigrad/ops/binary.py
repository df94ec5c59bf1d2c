"""Binary (and ternary `where`) elementwise ops with numpy broadcasting.

Either operand may be a Python scalar (it takes the tensor's dtype). Backwards return grads of the
broadcast shape; the engine sums them back to each input's shape.

    add: (g, g)    sub: (g, -g)    mul: (g b, g a)    div: (g / b, -g a / b^2)
    pow: (g b a^(b-1), g y log a)  (0 where b == 0, resp. where a == 0 and b >= 0, like PyTorch)
    maximum / minimum: g to the larger / smaller operand, split evenly (g/2 each) on ties
    where: (g [cond], g [not cond])
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import array_of, broadcast_error, operand, wrap
from minigrad.tensor import Tensor


def _run(op, symbol, ufunc, a, b):
    try:
        return ufunc(a, b)
    except ValueError:
        raise broadcast_error(op, symbol, np.shape(a), np.shape(b)) from None


class Add(Function):
    """y = a + b."""

    @staticmethod
    def forward(ctx, a, b):
        return _run("add", "+", np.add, a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (g if need_a else None), (g if need_b else None)


class Sub(Function):
    """y = a - b."""

    @staticmethod
    def forward(ctx, a, b):
        return _run("sub", "-", np.subtract, a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (g if need_a else None), (-g if need_b else None)


class Mul(Function):
    """y = a * b."""

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        return _run("mul", "*", np.multiply, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (g * b if need_a else None), (g * a if need_b else None)


class Div(Function):
    """y = a / b; ga = g / b, gb = -(g / b) y."""

    @staticmethod
    def forward(ctx, a, b):
        y = _run("div", "/", np.true_divide, a, b)
        ctx.save_for_backward(b, y if ctx.needs_input_grad[1] else None)
        return y

    @staticmethod
    def backward(ctx, g):
        b, y = ctx.saved_tensors
        ga = g / b
        return (ga if ctx.needs_input_grad[0] else None), (-ga * y if ctx.needs_input_grad[1] else None)


class Pow(Function):
    """y = a ** b (either may be a scalar)."""

    @staticmethod
    def forward(ctx, a, b):
        y = _run("pow", "**", np.power, a, b)
        ctx.save_for_backward(a, b, y if ctx.needs_input_grad[1] else None)
        return y

    @staticmethod
    def backward(ctx, g):
        a, b, y = ctx.saved_tensors
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ctx.needs_input_grad[0]:
                if np.ndim(b) == 0 and b == 2:
                    ga = g * 2.0 * a
                else:
                    ga = np.where(b == 0, 0.0, g * b * np.power(a, b - 1))
            if ctx.needs_input_grad[1]:
                gb = np.where((a == 0) & (b >= 0), 0.0, g * y * np.log(a))
        return ga, gb


class _Extremum(Function):
    """y = maximum(a, b) (or minimum); g goes to the winning operand, half to each on a tie."""

    ufunc = None
    wins = None

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return _run(cls.__name__.lower(), ",", cls.ufunc, a, b)

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        half = g * 0.5
        tie = half * (a == b)
        ga = g * cls.wins(a, b) + tie if ctx.needs_input_grad[0] else None
        gb = g * cls.wins(b, a) + tie if ctx.needs_input_grad[1] else None
        return ga, gb


class Maximum(_Extremum):
    ufunc = staticmethod(np.maximum)
    wins = staticmethod(np.greater)


class Minimum(_Extremum):
    ufunc = staticmethod(np.minimum)
    wins = staticmethod(np.less)


class Where(Function):
    """y = cond ? a : b (cond a bool array, not differentiated)."""

    @staticmethod
    def forward(ctx, cond, a, b):
        try:
            y = np.where(cond, a, b)
        except ValueError:
            raise broadcast_error("where", ",", np.shape(cond), np.shape(a), np.shape(b)) from None
        ctx.save_for_backward(cond)
        return y

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, need_a, need_b = ctx.needs_input_grad
        zero = np.zeros((), dtype=g.dtype)
        return (None, np.where(cond, g, zero) if need_a else None,
                np.where(cond, zero, g) if need_b else None)


def _binary(fn, a, b):
    return fn.apply(operand(a), operand(b))


def add(a, b):
    return _binary(Add, a, b)


def sub(a, b):
    return _binary(Sub, a, b)


def mul(a, b):
    return _binary(Mul, a, b)


def div(a, b):
    return _binary(Div, a, b)


def pow(a, b):  # noqa: A001 - PyTorch's name
    return _binary(Pow, a, b)


def maximum(a, b):
    """Elementwise max; on ties the gradient is split evenly between a and b (as PyTorch does)."""
    return _binary(Maximum, a, b)


def minimum(a, b):
    """Elementwise min; on ties the gradient is split evenly between a and b."""
    return _binary(Minimum, a, b)


def where(cond, a, b):
    """Elementwise cond ? a : b with broadcasting; a and b may be Tensors or scalars."""
    cond = array_of(operand(cond))
    if not isinstance(cond, np.ndarray) or cond.dtype != np.bool_:
        cond = np.asarray(cond).astype(bool)
    a, b = operand(a), operand(b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return wrap(np.where(cond, a, b))
    return Where.apply(cond, a, b)
