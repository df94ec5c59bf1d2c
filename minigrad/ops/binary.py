"""Binary (and ternary `where`) elementwise ops with numpy broadcasting.

Either operand may be a Python scalar (it takes the tensor's dtype). Backwards return grads of the
broadcast shape; the engine sums them back to each input's shape.

    add: (g, g)    sub: (g, -g)    mul: (g b, g a)    div: (g / b, -g a / b^2)
    pow: (g b a^(b-1), g y log a)  (0 where b == 0, resp. where a == 0 and b >= 0, like PyTorch)
    maximum / minimum: g to the larger / smaller operand, split evenly (g/2 each) on ties; an
        operand loses only where it compares smaller / larger, so at a NaN both get g (PyTorch)
    where: (g [cond], g [not cond])
    remainder: (g, -g floor_divide(a, b)) (as PyTorch)
    logaddexp: (g / (1 + exp(b - a)), g / (1 + exp(a - b))) (PyTorch's formula)
floor_divide (`//`) has no gradient (zero almost everywhere): its result never requires grad.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import no_grad
from minigrad.ops._common import array_of, operand, run_broadcasting
from minigrad.tensor import Tensor


class Add(Function):
    """y = a + b."""

    @staticmethod
    def forward(ctx, a, b):
        return run_broadcasting("add", "+", np.add, a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (g if need_a else None), (g if need_b else None)


class Sub(Function):
    """y = a - b."""

    @staticmethod
    def forward(ctx, a, b):
        return run_broadcasting("sub", "-", np.subtract, a, b)

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
        return run_broadcasting("mul", "*", np.multiply, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (g * b if need_a else None), (g * a if need_b else None)


class Div(Function):
    """y = a / b; ga = g / b, gb = -(g / b) y."""

    @staticmethod
    def forward(ctx, a, b):
        y = run_broadcasting("div", "/", np.true_divide, a, b)
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
        y = run_broadcasting("pow", "**", np.power, a, b)
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
    """y = maximum(a, b) (or minimum); g goes to each operand that does not lose, half on a tie."""

    ufunc = None
    loses = None

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return run_broadcasting(cls.__name__.lower(), ",", cls.ufunc, a, b)

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        share = np.where(a == b, g * 0.5, g)
        ga = np.where(cls.loses(a, b), 0, share) if ctx.needs_input_grad[0] else None
        gb = np.where(cls.loses(b, a), 0, share) if ctx.needs_input_grad[1] else None
        return ga, gb


class Maximum(_Extremum):
    ufunc = staticmethod(np.maximum)
    loses = staticmethod(np.less)


class Minimum(_Extremum):
    ufunc = staticmethod(np.minimum)
    loses = staticmethod(np.greater)


class Where(Function):
    """y = cond ? a : b (cond a bool Tensor, not differentiated: saved, so changing it in place
    before backward raises as for any saved tensor)."""

    @staticmethod
    def forward(ctx, cond, a, b):
        y = run_broadcasting("where", ",", np.where, cond, a, b)
        ctx.save_for_backward(cond)
        return y

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, need_a, need_b = ctx.needs_input_grad
        zero = np.zeros((), dtype=g.dtype)
        return (None, np.where(cond, g, zero) if need_a else None,
                np.where(cond, zero, g) if need_b else None)


def _division_operands(op, a, b):
    """a, b (arrays or Python scalars) as PyTorch divides them: a float division happens in the float
    dtype of the array operands (float32 when none is float: `int_tensor % 1.1` uses float32(1.1)).
    Bool / bool raises, as in PyTorch; so does an integer division by zero (numpy would give 0)."""
    kind = np.result_type(a, b).kind
    if kind == "b":
        raise TypeError(f"{op}: not implemented for bool tensors")
    if kind == "f":
        floats = [x.dtype for x in (a, b) if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
        dtype = floats[0] if floats else np.dtype(np.float32)
        return tuple(x.astype(dtype, copy=False) if isinstance(x, np.ndarray) else dtype.type(x)
                     for x in (a, b))
    if np.any(np.asarray(b) == 0):
        raise ZeroDivisionError(f"{op}: integer division by zero")
    return a, b


def _floor_divide(a, b):
    """floor(a / b) as Python's `//` (and torch.floor_divide): float32 / float64 as numpy's
    floor_divide, which rounds as CPython and PyTorch do (fmod, then the quotient snapped to an
    integer); b == 0 gives inf / nan for floats."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, b)


class FloorDivide(Function):
    """y = floor(a / b) (run under no_grad: the result never requires grad)."""

    @staticmethod
    def forward(ctx, a, b):
        a, b = _division_operands("floor_divide", a, b)
        return run_broadcasting("floor_divide", "//", _floor_divide, a, b)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("floor_divide has no gradient")


class Remainder(Function):
    """y = a - b floor(a / b), with the sign of b (Python's `%`, torch.remainder); floats as PyTorch:
    fmod(a, b), plus b where that is nonzero with the sign of a differing from b's."""

    @staticmethod
    def forward(ctx, a, b):
        a, b = _division_operands("remainder", a, b)
        if ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b)
        if np.result_type(a, b).kind != "f":
            return run_broadcasting("remainder", "%", np.remainder, a, b)
        with np.errstate(invalid="ignore"):
            mod = run_broadcasting("remainder", "%", np.fmod, a, b)
            return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        gb = None
        if need_b:
            a, b = ctx.saved_tensors
            gb = -g * _floor_divide(a, b)
        return (g if need_a else None), gb


class LogAddExp(Function):
    """y = log(exp(a) + exp(b)) (numpy's overflow-free logaddexp)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return run_broadcasting("logaddexp", ",", np.logaddexp, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with np.errstate(over="ignore", invalid="ignore"):
            ga = g / (1.0 + np.exp(b - a)) if ctx.needs_input_grad[0] else None
            gb = g / (1.0 + np.exp(a - b)) if ctx.needs_input_grad[1] else None
        return ga, gb


def _binary(fn, a, b):
    return fn.apply(operand(a), operand(b))


def _scaled(b, alpha):
    """torch's `alpha=`: b * alpha (alpha == 1: b itself)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"alpha must be a number, got {type(alpha).__name__}")
    if alpha == 1:
        return b
    return b * alpha if isinstance(b, (int, float)) else mul(b, alpha)


def add(a, b, *, alpha=1):
    """a + alpha b (torch.add)."""
    return _binary(Add, a, _scaled(operand(b), alpha))


def sub(a, b, *, alpha=1):
    """a - alpha b (torch.sub)."""
    return _binary(Sub, a, _scaled(operand(b), alpha))


def mul(a, b):
    return _binary(Mul, a, b)


def div(a, b):
    return _binary(Div, a, b)


def pow(a, b):  # noqa: A001 - PyTorch's name
    return _binary(Pow, a, b)


def floor_divide(a, b):
    """a // b rounded toward -inf (torch.floor_divide, Python's `//`); no grad."""
    with no_grad():
        return _binary(FloorDivide, a, b)


def remainder(a, b):
    """a % b with the sign of b (torch.remainder, Python's `%`); grads g and -g floor(a / b)."""
    return _binary(Remainder, a, b)


def maximum(a, b):
    """Elementwise max; on ties the gradient is split evenly between a and b (as PyTorch does)."""
    return _binary(Maximum, a, b)


def minimum(a, b):
    """Elementwise min; on ties the gradient is split evenly between a and b."""
    return _binary(Minimum, a, b)


def logaddexp(a, b):
    """torch.logaddexp: log(exp(a) + exp(b)) without overflow; float inputs."""
    a, b = operand(a), operand(b)
    for x in (a, b):
        if isinstance(x, Tensor) and x.dtype.kind != "f":
            raise TypeError(f"logaddexp: expects floating-point tensors, got {x.dtype}")
    return LogAddExp.apply(a, b)


def lerp(input, end, weight):  # noqa: A002
    """torch.lerp: input + weight (end - input) (weight a number or a Tensor); grads
    (1 - weight) g, weight g and (end - input) g."""
    return add(input, mul(weight, sub(end, input)))


def bool_mask(cond, op):
    """`cond` as a bool Tensor: a bool Tensor as it is, a bool array or nested list as a private copy
    (a caller's numpy array cannot change behind the version check). A float or int mask is a
    TypeError, as in PyTorch, not read as "nonzero" (an additive 0 / -inf mask would select everywhere)."""
    if isinstance(cond, Tensor) and cond.dtype == np.bool_:
        return cond
    values = np.asarray(array_of(operand(cond)))
    if values.dtype != np.bool_:
        raise TypeError(f"{op}: the mask must be bool, got {values.dtype} (compare it, e.g. mask != 0)")
    return Tensor(values.copy())


def where(cond, a, b):
    """Elementwise cond ? a : b with broadcasting; a and b may be Tensors or scalars; cond is bool."""
    return Where.apply(bool_mask(cond, "where"), operand(a), operand(b))
