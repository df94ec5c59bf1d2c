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
    atan2: (g b / r, -g a / r), r = a^2 + b^2 (0 where r == 0, as PyTorch)
    hypot: (g a / y, g b / y)    xlogy: (g log(b), 0 where a == 0 and b <= 0; g a / b)
    copysign: (g y / a (0 at a == 0), 0)
    fmax / fmin: g to a where a wins or ties or b is NaN, else to b (PyTorch's rule; no split on ties)
    fmod: (g, -g trunc(a / b))    logaddexp2: (g / (1 + 2^(b - a)), g / (1 + 2^(a - b)))
floor_divide (`//`) and heaviside have no gradient (zero almost everywhere): its result never requires grad.
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


class _UfuncBinary(Function):
    """y = cls.ufunc(a, b), broadcast, both operands saved; subclasses give the backward."""

    ufunc = None

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return run_broadcasting(cls.__name__.lower(), ",", cls.ufunc, a, b)


class _Extremum(_UfuncBinary):
    """y = maximum(a, b) (or minimum); g goes to each operand that does not lose, half on a tie."""

    loses = None

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


class LogAddExp(_UfuncBinary):
    """y = log(exp(a) + exp(b)) (numpy's overflow-free logaddexp; LogAddExp2 the same in base 2).
    Backward: ga = g / (1 + base^(b - a)), gb = g / (1 + base^(a - b))."""

    ufunc, power = staticmethod(np.logaddexp), staticmethod(np.exp)

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        with np.errstate(over="ignore", invalid="ignore"):
            ga = g / (1.0 + cls.power(b - a)) if ctx.needs_input_grad[0] else None
            gb = g / (1.0 + cls.power(a - b)) if ctx.needs_input_grad[1] else None
        return ga, gb


class Atan2(Function):
    """y = atan2(a, b) (the angle of the point (b, a))."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return run_broadcasting("atan2", ",", np.arctan2, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        r = a * a + b * b
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(r == 0, 0.0, 1.0 / r)
        return (g * b * inv if ctx.needs_input_grad[0] else None,
                -g * a * inv if ctx.needs_input_grad[1] else None)


class Hypot(Function):
    """y = sqrt(a^2 + b^2) without overflow."""

    @staticmethod
    def forward(ctx, a, b):
        y = run_broadcasting("hypot", ",", np.hypot, a, b)
        ctx.save_for_backward(a, b, y)
        return y

    @staticmethod
    def backward(ctx, g):
        a, b, y = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            return (g * a / y if ctx.needs_input_grad[0] else None,
                    g * b / y if ctx.needs_input_grad[1] else None)


class Xlogy(Function):
    """y = a log(b), 0 where a == 0 (unless b is NaN)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = run_broadcasting("xlogy", ",", lambda u, v: u * np.log(v), a, b)
            return np.where((np.asarray(a) == 0) & ~np.isnan(b), 0.0, y)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            ga = gb = None
            if ctx.needs_input_grad[0]:      # xlogy(g, b), 0 where a == 0 and b <= 0 (PyTorch)
                ga = np.where((g == 0) & ~np.isnan(b), 0.0, g * np.log(b))
                ga = np.where((np.asarray(a) == 0) & (np.asarray(b) <= 0), 0.0, ga)
            if ctx.needs_input_grad[1]:
                gb = g * a / b
        return ga, gb


class Copysign(Function):
    """y = |a| with the sign of b (of -0.0 too); ga = g y / a (0 where a == 0), gb = 0."""

    @staticmethod
    def forward(ctx, a, b):
        y = run_broadcasting("copysign", ",", np.copysign, a, b)
        ctx.save_for_backward(a, y)
        return y

    @staticmethod
    def backward(ctx, g):
        a, y = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            ga = np.where(np.asarray(a) == 0, 0.0, g * (y / a)) if ctx.needs_input_grad[0] else None
        return ga, (np.zeros_like(g) if ctx.needs_input_grad[1] else None)


class _NanExtremum(_UfuncBinary):
    """y = fmax(a, b) (or fmin): a NaN loses to a number. g goes to a where a wins or ties or b is
    NaN (PyTorch), else to b."""

    wins = None

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        to_a = cls.wins(a, b) | np.isnan(b)
        return (np.where(to_a, g, 0) if ctx.needs_input_grad[0] else None,
                np.where(to_a, 0, g) if ctx.needs_input_grad[1] else None)


class Fmax(_NanExtremum):
    ufunc = staticmethod(np.fmax)
    wins = staticmethod(np.greater_equal)


class Fmin(_NanExtremum):
    ufunc = staticmethod(np.fmin)
    wins = staticmethod(np.less_equal)


class Fmod(Function):
    """y = a - b trunc(a / b), with the sign of a (C's fmod; torch.fmod)."""

    @staticmethod
    def forward(ctx, a, b):
        a, b = _division_operands("fmod", a, b)
        if ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b)
        with np.errstate(invalid="ignore", divide="ignore"):
            return run_broadcasting("fmod", ",", np.fmod, a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        gb = None
        if need_b:
            a, b = ctx.saved_tensors
            with np.errstate(invalid="ignore", divide="ignore"):
                gb = -g * np.trunc(np.true_divide(a, b))
        return (g if need_a else None), gb


class LogAddExp2(LogAddExp):
    """y = log2(2^a + 2^b)."""

    ufunc, power = staticmethod(np.logaddexp2), staticmethod(np.exp2)


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


def _float_operands(op, a, b):
    """Operands of an op PyTorch defines for floating-point tensors only (hypot, logaddexp2)."""
    a, b = operand(a), operand(b)
    for x in (a, b):
        if isinstance(x, Tensor) and x.dtype.kind != "f":
            raise TypeError(f"{op}: expects floating-point tensors, got {x.dtype}")
    return a, b


def _promoted(a, b):
    """Operands of an op with a float result: without a float Tensor among them, integer and bool
    Tensors become float32 (torch computes there; numpy would compute bool and int8 in float16)."""
    a, b = operand(a), operand(b)
    tensors = [x for x in (a, b) if isinstance(x, Tensor)]
    if any(x.dtype.kind == "f" for x in tensors):
        return a, b
    return tuple(x.float() if isinstance(x, Tensor) else x for x in (a, b))


def atan2(input, other):  # noqa: A002
    """torch.atan2: the angle of (other, input) in (-pi, pi] (integers give float32)."""
    return Atan2.apply(*_promoted(input, other))


arctan2 = atan2


def hypot(input, other):  # noqa: A002
    """torch.hypot: sqrt(input^2 + other^2) (float tensors only)."""
    return Hypot.apply(*_float_operands("hypot", input, other))


def logaddexp2(input, other):  # noqa: A002
    """torch.logaddexp2: log2(2^input + 2^other) without overflow (float tensors only)."""
    return LogAddExp2.apply(*_float_operands("logaddexp2", input, other))


def xlogy(input, other):  # noqa: A002
    """torch.xlogy: input * log(other), 0 where input == 0 unless other is NaN."""
    return Xlogy.apply(*_promoted(input, other))


def copysign(input, other):  # noqa: A002
    """torch.copysign: |input| with the sign of other (integers give float32)."""
    return Copysign.apply(*_promoted(input, other))


def fmax(input, other):  # noqa: A002
    """torch.fmax: elementwise maximum where a NaN loses to a number (NaN only if both are)."""
    return _binary(Fmax, input, other)


def fmin(input, other):  # noqa: A002
    """torch.fmin: elementwise minimum where a NaN loses to a number."""
    return _binary(Fmin, input, other)


def fmod(input, other):  # noqa: A002
    """torch.fmod: the remainder of a truncating division (the sign of input); grads g and
    -g trunc(input / other)."""
    return _binary(Fmod, input, other)


def float_power(input, exponent):  # noqa: A002
    """torch.float_power: input ** exponent computed in float64 (always a float64 result)."""
    def f64(x):
        x = operand(x)
        return x.to(np.float64) if isinstance(x, Tensor) else float(x)
    return pow(f64(input), f64(exponent))


def ldexp(input, other):  # noqa: A002
    """torch.ldexp: input * 2 ** other (integers give float32)."""
    a, b = operand(input), operand(other)
    floats = [x.dtype for x in (a, b) if isinstance(x, Tensor) and x.dtype.kind == "f"]
    dtype = floats[0] if floats else np.dtype(np.float32)
    if isinstance(b, Tensor):
        b = pow(2.0, b) if b.dtype.kind == "f" else \
            Tensor(np.asarray(np.exp2(b.data.astype(np.float64)), dtype))
    else:
        b = 2.0 ** b
    if isinstance(a, Tensor) and a.dtype.kind != "f":
        a = a.to(dtype)
    return mul(a, b)


def heaviside(input, values):  # noqa: A002
    """torch.heaviside: 0 where input < 0 (and at NaN), values where input == 0, 1 where input > 0;
    input and values of one dtype (as torch). No gradient (torch does not define one)."""
    x, v = operand(input), operand(values)
    if not isinstance(x, Tensor) or not isinstance(v, Tensor):
        raise TypeError("heaviside: input and values must be Tensors")
    if x.dtype != v.dtype:
        raise TypeError(f"heaviside: input and values must have the same dtype, got {x.dtype} and {v.dtype}")
    a = run_broadcasting("heaviside", ",", lambda p, q: np.where(p == 0, q, p > 0), x.data, v.data)
    return Tensor._from_op(np.asarray(a.astype(x.dtype, copy=False), order="C"))


def _integer_arrays(op, a, b):
    a, b = array_of(operand(a)), array_of(operand(b))
    for x in (a, b):
        if np.asarray(x).dtype.kind not in "iu":
            raise TypeError(f"{op}: expects integer tensors, got {np.asarray(x).dtype}")
    return a, b


def gcd(input, other):  # noqa: A002
    """torch.gcd: the greatest common divisor (non-negative) of integer tensors; no grad."""
    a, b = _integer_arrays("gcd", input, other)
    return Tensor._from_op(np.asarray(run_broadcasting("gcd", ",", np.gcd, a, b), order="C"))


def lcm(input, other):  # noqa: A002
    """torch.lcm: the least common multiple (non-negative) of integer tensors; no grad."""
    a, b = _integer_arrays("lcm", input, other)
    return Tensor._from_op(np.asarray(run_broadcasting("lcm", ",", np.lcm, a, b), order="C"))


def _shift(op, ufunc, a, b):
    """a << b or a >> b as torch: a shift by the bit width or more gives 0 (left) or the sign (right);
    the dtype of both tensors promoted (a Python int takes the tensor's)."""
    x, y = _integer_arrays(op, a, b)
    tensors = [np.asarray(v) for v in (x, y) if isinstance(v, np.ndarray)]
    dtype = np.result_type(*tensors)
    x, y = np.asarray(x, dtype=dtype), np.asarray(y, dtype=dtype)
    bits = 8 * dtype.itemsize
    with np.errstate(all="ignore"):
        out = run_broadcasting(op, ",", ufunc, x, np.clip(y, 0, bits - 1).astype(dtype))
        if ufunc is np.left_shift:
            out = np.where(y >= bits, 0, out)
    return Tensor._from_op(np.asarray(np.asarray(out).astype(dtype, copy=False), order="C"))


def bitwise_left_shift(input, other):  # noqa: A002
    """torch.bitwise_left_shift: input << other (integer tensors, input's dtype); no grad."""
    return _shift("bitwise_left_shift", np.left_shift, input, other)


def bitwise_right_shift(input, other):  # noqa: A002
    """torch.bitwise_right_shift: input >> other, arithmetic (the sign fills); no grad."""
    return _shift("bitwise_right_shift", np.right_shift, input, other)


def nextafter(input, other):  # noqa: A002
    """torch.nextafter: the next float after input towards other (float tensors of one dtype); no grad."""
    a, b = _float_operands("nextafter", input, other)
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype != b.dtype:
        raise TypeError(f"nextafter: expects tensors of one dtype, got {a.dtype} and {b.dtype}")
    dtype = (a if isinstance(a, Tensor) else b).dtype
    x, y = (np.asarray(array_of(v), dtype=dtype) for v in (a, b))
    return Tensor._from_op(np.asarray(run_broadcasting("nextafter", ",", np.nextafter, x, y), order="C"))
