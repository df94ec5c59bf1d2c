"""Unary elementwise ops and activations. Each backward is gx = g * f'(x), f' from x or y = f(x).

Derivative table (y = f(x)):
    exp: y    log: 1/x    sqrt: 1/(2y)    rsqrt: -y^3/2    abs: sign(x) (0 at 0 and NaN)    tanh: 1 - y^2
    log1p: 1/(1 + x)    expm1: y + 1    sin: cos(x)    cos: -sin(x)
    sigmoid: y(1 - y)    relu: [not y <= 0] (1 at NaN)    silu: s(1 + x(1 - s)), s = sigmoid(x)
    erf: 2/sqrt(pi) exp(-x^2)    neg: -1
    gelu (exact): Phi(x) + x phi(x)    gelu (tanh): see Gelu
    softplus: sigmoid(beta x), 1 above the threshold    clamp: [min <= x <= max]
    reciprocal: -y^2    log2: 1/(x ln 2)    log10: 1/(x ln 10)    exp2: y ln 2
    sign, floor, ceil, round, trunc: 0    nan_to_num: [x finite]
    clamp with Tensor bounds: x [lo <= x <= hi], lo [x < lo <= hi], hi [max(x, lo) > hi] (PyTorch)
"""
import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops import special
from minigrad.ops._common import as_tensor, operand, run_broadcasting
from minigrad.tensor import Tensor


def _sigmoid(x):
    """Overflow-free logistic: exp(-|x|) never overflows."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def _unary(name, f, df, saves, doc):
    """Build a Function y = f(x) with gx = g * df(x, y); `saves` is 'x', 'y' or '' (what df reads)."""
    def forward(ctx, x):
        y = f(x)
        ctx.save_for_backward(x if "x" in saves else None, y if "y" in saves else None)
        return y

    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return df(x, y, g)

    return type(name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward),
                                    "__doc__": doc, "__module__": __name__})


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _silu(x):
    return x * _sigmoid(x)


def _silu_grad(x, _, g):
    s = _sigmoid(x)
    return g * s * (1.0 + x * (1.0 - s))


Exp = _unary("Exp", np.exp, lambda x, y, g: g * y, "y", "y = exp(x); gx = g y.")
Log = _unary("Log", np.log, lambda x, y, g: g / x, "x", "y = log(x); gx = g / x.")
Sqrt = _unary("Sqrt", np.sqrt, lambda x, y, g: g * 0.5 / y, "y", "y = sqrt(x); gx = g / (2y).")
Rsqrt = _unary("Rsqrt", _rsqrt, lambda x, y, g: g * -0.5 * y * y * y, "y", "y = x^-1/2; gx = -g y^3 / 2.")
Abs = _unary("Abs", np.abs, lambda x, y, g: np.where(x > 0, g, np.where(x < 0, -g, 0)), "x",
             "y = |x|; gx = g sign(x) (0 at 0 and, as PyTorch's sign, at NaN).")
Tanh = _unary("Tanh", np.tanh, lambda x, y, g: g * (1.0 - y * y), "y", "y = tanh(x); gx = g (1 - y^2).")
Sin = _unary("Sin", np.sin, lambda x, y, g: g * np.cos(x), "x", "y = sin(x); gx = g cos(x).")
Cos = _unary("Cos", np.cos, lambda x, y, g: -g * np.sin(x), "x", "y = cos(x); gx = -g sin(x).")
Log1p = _unary("Log1p", np.log1p, lambda x, y, g: g / (1.0 + x), "x", "y = log(1 + x); gx = g / (1 + x).")
Expm1 = _unary("Expm1", np.expm1, lambda x, y, g: g * (y + 1.0), "y", "y = exp(x) - 1; gx = g (y + 1).")
Sigmoid = _unary("Sigmoid", _sigmoid, lambda x, y, g: g * y * (1.0 - y), "y",
                 "y = 1 / (1 + exp(-x)); gx = g y (1 - y).")
Relu = _unary("Relu", lambda x: np.maximum(x, 0), lambda x, y, g: np.where(y <= 0, 0, g), "y",
              "y = max(x, 0); gx = g [not y <= 0] (0 at 0, g at NaN, like PyTorch).")
Silu = _unary("Silu", _silu, _silu_grad, "x", "y = x sigmoid(x); gx = g s (1 + x (1 - s)).")
Erf = _unary("Erf", special.erf, lambda x, y, g: g * (2.0 / math.sqrt(math.pi)) * np.exp(-x * x), "x",
             "y = erf(x); gx = g 2/sqrt(pi) exp(-x^2).")
Neg = _unary("Neg", np.negative, lambda x, y, g: -g, "", "y = -x; gx = -g.")
Reciprocal = _unary("Reciprocal", lambda x: 1.0 / np.asarray(x, np.result_type(x, np.float32)),
                    lambda x, y, g: -g * y * y, "y", "y = 1 / x; gx = -g y^2.")
Log2 = _unary("Log2", np.log2, lambda x, y, g: g / (x * math.log(2.0)), "x",
              "y = log2(x); gx = g / (x ln 2).")
Log10 = _unary("Log10", np.log10, lambda x, y, g: g / (x * math.log(10.0)), "x",
               "y = log10(x); gx = g / (x ln 10).")
Exp2 = _unary("Exp2", np.exp2, lambda x, y, g: g * y * math.log(2.0), "y", "y = 2^x; gx = g y ln 2.")
Sign = _unary("Sign", lambda x: np.nan_to_num(np.sign(x), nan=0.0), lambda x, y, g: np.zeros_like(g), "",
              "y = sign(x) (0 at 0 and, as torch.sign, at NaN); gx = 0.")

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


class Gelu(Function):
    """gelu(x) = x Phi(x) (exact, Phi the normal CDF via erf) or the tanh approximation
    0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).

    Backward: exact gx = g (Phi(x) + x phi(x)), phi(x) = exp(-x^2/2)/sqrt(2 pi);
    tanh: gx = g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)), t = tanh(u).
    """

    @staticmethod
    def forward(ctx, x, approximate):
        if approximate == "none":
            cdf = special.ndtr(x)
        elif approximate == "tanh":
            cdf = 0.5 * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x)))
        else:
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        ctx.save_for_backward(x, cdf)
        ctx.approximate = approximate
        return x * cdf

    @staticmethod
    def backward(ctx, g):
        x, cdf = ctx.saved_tensors
        if ctx.approximate == "none":
            d = cdf + x * _INV_SQRT_2PI * np.exp(-0.5 * x * x)
        else:
            t = 2.0 * cdf - 1.0
            d = cdf + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * x * x)
        return g * d, None


class Softplus(Function):
    """y = log(1 + exp(beta x)) / beta, and y = x where beta x > threshold (PyTorch's rule).

    Backward: gx = g sigmoid(beta x) (g where beta x > threshold).
    """

    @staticmethod
    def forward(ctx, x, beta, threshold):
        z = x * beta
        ctx.save_for_backward(z)
        ctx.threshold = threshold
        return np.where(z > threshold, x, np.logaddexp(0.0, z) / beta)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * np.where(z > ctx.threshold, 1.0, _sigmoid(z)).astype(g.dtype, copy=False), None, None


class Clamp(Function):
    """y = min(max(x, lo), hi); gx = g [lo <= x <= hi] (the gradient passes inside the closed range)."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return np.clip(x, lo, hi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        inside = np.ones(x.shape, dtype=bool)
        if ctx.lo is not None:
            inside &= x >= ctx.lo
        if ctx.hi is not None:
            inside &= x <= ctx.hi
        return g * inside, None, None


class ClampTensor(Function):
    """y = min(max(x, lo), hi) with lo / hi arrays (or None), broadcast. As PyTorch:
    gx = g [lo <= x <= hi], glo = g [x < lo <= hi], ghi = g [max(x, lo) > hi]."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x, lo, hi)
        y = x if lo is None else run_broadcasting("clamp", ",", np.maximum, x, lo)
        return y if hi is None else run_broadcasting("clamp", ",", np.minimum, y, hi)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        inside = np.ones(np.shape(g), dtype=bool)
        if lo is not None:
            inside &= x >= lo
        if hi is not None:
            inside &= x <= hi
        glo = ghi = None
        if lo is not None and ctx.needs_input_grad[1]:
            glo = g * ((x < lo) & (True if hi is None else lo <= hi))
        if hi is not None and ctx.needs_input_grad[2]:
            ghi = g * ((x if lo is None else np.maximum(x, lo)) > hi)
        return g * inside, glo, ghi


class _Rounding(Function):
    """y = f(x) for a piecewise-constant f (floor, ceil, round, trunc); gx = 0."""

    @staticmethod
    def forward(ctx, x, f):
        return f(x)

    @staticmethod
    def backward(ctx, g):
        return np.zeros_like(g), None


def _rounding(name, f):
    def op(x):
        x = as_tensor(x)
        if x.dtype.kind in "biu":          # integers are already whole (torch keeps the dtype)
            return x.clone() if x.dtype.kind != "b" else x.long()
        return _Rounding.apply(x, f)

    op.__name__ = name
    op.__doc__ = f"torch.{name}: elementwise {name} (integer tensors unchanged); gradient 0."
    return op


floor = _rounding("floor", np.floor)
ceil = _rounding("ceil", np.ceil)
trunc = _rounding("trunc", np.trunc)


def round(x, decimals=0):  # noqa: A001 - PyTorch's name
    """torch.round: half to even (numpy's and torch's rule), at `decimals` digits; gradient 0."""
    decimals, x = int(decimals), as_tensor(x)
    if x.dtype.kind in "biu" and decimals >= 0:
        return x.clone() if x.dtype.kind != "b" else x.long()
    return _Rounding.apply(x, np.round if decimals == 0 else lambda a: np.round(a, decimals))


class NanToNum(Function):
    """y = x with NaN, +inf, -inf replaced by nan, posinf, neginf; gx = g [x finite] (PyTorch)."""

    @staticmethod
    def forward(ctx, x, nan, posinf, neginf):
        ctx.save_for_backward(x)
        return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * np.isfinite(x), None, None, None


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """torch.nan_to_num: NaN -> nan, +inf -> posinf, -inf -> neginf (None: the dtype's largest /
    lowest finite value)."""
    x = as_tensor(x)
    if x.dtype.kind != "f":
        return x.clone()
    return NanToNum.apply(x, float(nan), posinf, neginf)


def reciprocal(x):
    """torch.reciprocal: 1 / x (integers give float32)."""
    return Reciprocal.apply(x)


def log2(x):
    return Log2.apply(x)


def log10(x):
    return Log10.apply(x)


def exp2(x):
    return Exp2.apply(x)


def sign(x):
    """torch.sign: -1, 0 or 1 (0 at NaN, as torch), the input's dtype; gradient 0."""
    x = as_tensor(x)
    if x.dtype.kind == "b":
        return x.clone()
    return Sign.apply(x)


def exp(x):
    return Exp.apply(x)


def log(x):
    return Log.apply(x)


def sqrt(x):
    return Sqrt.apply(x)


def rsqrt(x):
    return Rsqrt.apply(x)


def abs(x):  # noqa: A001 - PyTorch's name
    return Abs.apply(x)


def tanh(x):
    return Tanh.apply(x)


def sin(x):
    return Sin.apply(x)


def cos(x):
    return Cos.apply(x)


def log1p(x):
    return Log1p.apply(x)


def expm1(x):
    return Expm1.apply(x)


def sigmoid(x):
    return Sigmoid.apply(x)


def relu(x):
    return Relu.apply(x)


def silu(x):
    return Silu.apply(x)


def erf(x):
    return Erf.apply(x)


def neg(x):
    return Neg.apply(x)


def gelu(x, approximate="none"):
    """GELU; approximate='none' is the exact erf form, 'tanh' the tanh approximation."""
    return Gelu.apply(x, approximate)


def softplus(x, beta=1.0, threshold=20.0):
    return Softplus.apply(x, float(beta), float(threshold))


def clamp(x, min=None, max=None):  # noqa: A002 - PyTorch's names
    """Clamp into [min, max] (either may be None); the gradient passes where min <= x <= max."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    lo = None if min is None else operand(min)
    hi = None if max is None else operand(max)
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        # torch's clamp(Tensor min/max): broadcasting, and each bound gets the gradient where it is
        # the result. A number next to a Tensor bound becomes a 0-d array of x's dtype.
        def bound(b):
            return b if b is None or isinstance(b, Tensor) else np.asarray(b, x.dtype)
        return ClampTensor.apply(x, bound(lo), bound(hi))
    for bound in (lo, hi):
        if bound is not None and not isinstance(bound, (int, float)):
            raise TypeError(f"clamp: min and max must be numbers, got {type(bound).__name__}")
    return Clamp.apply(x, lo, hi)
