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
    asin: 1/sqrt(1 - x^2)    acos: -1/sqrt(1 - x^2)    atan: 1/(1 + x^2)    tan: 1 + y^2
    sinh: cosh(x)    cosh: sinh(x)    asinh: 1/sqrt(x^2 + 1)    acosh: 1/sqrt((x - 1)(x + 1))
    atanh: 1/(1 - x^2)    erfc: -2/sqrt(pi) exp(-x^2)    erfinv: sqrt(pi)/2 exp(y^2)
    lgamma: digamma(x)    digamma: trigamma(x)    polygamma(n): polygamma(n + 1, x)
    sinc: (cos(pi x) - y) / x (0 at 0)    frac: 1    angle (real): 0    frexp: 2^-exponent
    logit: 1/(x (1 - x)) (with eps: 0 outside [eps, 1 - eps]; without: nan outside [0, 1])
"""
import collections
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


def _quiet(f):
    """f with numpy's floating-point warnings off (domain errors give nan / inf, as in torch)."""
    def run(*args):
        with np.errstate(all="ignore"):
            return f(*args)
    return run


def _float_unary(name, f, df, saves, doc):
    """`_unary` for a float-valued function defined on part of the line (nan / inf elsewhere)."""
    return _unary(name, _quiet(f), _quiet(df), saves, doc)


Asin = _float_unary("Asin", np.arcsin, lambda x, y, g: g / np.sqrt(1.0 - x * x), "x",
                    "y = asin(x); gx = g / sqrt(1 - x^2).")
Acos = _float_unary("Acos", np.arccos, lambda x, y, g: -g / np.sqrt(1.0 - x * x), "x",
                    "y = acos(x); gx = -g / sqrt(1 - x^2).")
Atan = _float_unary("Atan", np.arctan, lambda x, y, g: g / (1.0 + x * x), "x",
                    "y = atan(x); gx = g / (1 + x^2).")
Tan = _float_unary("Tan", np.tan, lambda x, y, g: g * (1.0 + y * y), "y", "y = tan(x); gx = g (1 + y^2).")
Sinh = _float_unary("Sinh", np.sinh, lambda x, y, g: g * np.cosh(x), "x", "y = sinh(x); gx = g cosh(x).")
Cosh = _float_unary("Cosh", np.cosh, lambda x, y, g: g * np.sinh(x), "x", "y = cosh(x); gx = g sinh(x).")
Asinh = _float_unary("Asinh", np.arcsinh, lambda x, y, g: g / np.sqrt(x * x + 1.0), "x",
                     "y = asinh(x); gx = g / sqrt(x^2 + 1).")
Acosh = _float_unary("Acosh", np.arccosh, lambda x, y, g: g / np.sqrt((x - 1.0) * (x + 1.0)), "x",
                     "y = acosh(x); gx = g / sqrt((x - 1)(x + 1)).")
Atanh = _float_unary("Atanh", np.arctanh, lambda x, y, g: g / (1.0 - x * x), "x",
                     "y = atanh(x); gx = g / (1 - x^2).")
Erfc = _unary("Erfc", special.erfc, lambda x, y, g: g * (-2.0 / math.sqrt(math.pi)) * np.exp(-x * x), "x",
              "y = erfc(x); gx = -g 2/sqrt(pi) exp(-x^2).")
Erfinv = _float_unary("Erfinv", special.erfinv, lambda x, y, g: g * (math.sqrt(math.pi) / 2) * np.exp(y * y),
                      "y", "y = erfinv(x); gx = g sqrt(pi)/2 exp(y^2).")
Lgamma = _float_unary("Lgamma", special.lgamma, lambda x, y, g: g * special.digamma(x), "x",
                      "y = log|Gamma(x)|; gx = g digamma(x).")
Digamma = _float_unary("Digamma", special.digamma, lambda x, y, g: g * special.trigamma(x), "x",
                       "y = digamma(x); gx = g trigamma(x).")


def _sinc(x):
    px = math.pi * x
    return np.where(x == 0, 1.0, np.sin(px) / np.where(x == 0, 1.0, px))


def _sinc_grad(x, y, g):
    return np.where(x == 0, 0.0, g * (np.cos(math.pi * x) - y) / np.where(x == 0, 1.0, x))


Sinc = _float_unary("Sinc", _sinc, _sinc_grad, "xy",
                    "y = sin(pi x) / (pi x) (1 at 0); gx = g (cos(pi x) - y) / x (0 at 0).")
Frac = _float_unary("Frac", lambda x: x - np.trunc(x), lambda x, y, g: g, "", "y = x - trunc(x); gx = g.")


class Logit(Function):
    """y = log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given. Backward (torch):
    gx = g / (x (1 - x)), 0 outside [eps, 1 - eps] with eps, nan outside [0, 1] without."""

    @staticmethod
    def forward(ctx, x, eps):
        ctx.save_for_backward(x)
        ctx.eps = eps
        z = x if eps is None else np.clip(x, eps, 1.0 - eps)
        with np.errstate(all="ignore"):
            return np.log(z / (1.0 - z))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        eps = ctx.eps
        with np.errstate(all="ignore"):
            gx = g / (x * (1.0 - x))
        if eps is None:
            return np.where((x < 0) | (x > 1), np.nan, gx), None
        return np.where((x < eps) | (x > 1.0 - eps), 0.0, gx), None


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


def _float_in(x):
    """Integer and bool tensors are computed in float32, as torch does (numpy would compute bool and
    int8 in float16, and int64 in float64)."""
    return x.float() if isinstance(x, Tensor) and x.dtype.kind != "f" else x


def reciprocal(x):
    """torch.reciprocal: 1 / x (integers give float32)."""
    return Reciprocal.apply(x)


def log2(x):
    return Log2.apply(_float_in(x))


def log10(x):
    return Log10.apply(_float_in(x))


def exp2(x):
    return Exp2.apply(_float_in(x))


def sign(x):
    """torch.sign: -1, 0 or 1 (0 at NaN, as torch), the input's dtype; gradient 0."""
    x = as_tensor(x)
    if x.dtype.kind == "b":
        return x.clone()
    return Sign.apply(x)


def exp(x):
    return Exp.apply(_float_in(x))


def log(x):
    return Log.apply(_float_in(x))


def sqrt(x):
    return Sqrt.apply(_float_in(x))


def rsqrt(x):
    return Rsqrt.apply(_float_in(x))


def abs(x):  # noqa: A001 - PyTorch's name
    return Abs.apply(x)


def tanh(x):
    return Tanh.apply(_float_in(x))


def sin(x):
    return Sin.apply(_float_in(x))


def cos(x):
    return Cos.apply(_float_in(x))


def log1p(x):
    return Log1p.apply(_float_in(x))


def expm1(x):
    return Expm1.apply(_float_in(x))


def sigmoid(x):
    return Sigmoid.apply(_float_in(x))


def relu(x):
    return Relu.apply(x)


def silu(x):
    return Silu.apply(x)


def erf(x):
    return Erf.apply(_float_in(x))


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


def _float_op(name, fn):
    """torch.<name>: fn applied elementwise; integer and bool inputs are computed in float32, as torch
    (numpy would compute bool and int8 in float16)."""
    def op(x):
        return fn.apply(_float_in(as_tensor(x)))

    op.__name__ = name
    op.__doc__ = f"torch.{name}: {fn.__doc__}"
    return op


asin = _float_op("asin", Asin)
acos = _float_op("acos", Acos)
atan = _float_op("atan", Atan)
tan = _float_op("tan", Tan)
sinh = _float_op("sinh", Sinh)
cosh = _float_op("cosh", Cosh)
asinh = _float_op("asinh", Asinh)
acosh = _float_op("acosh", Acosh)
atanh = _float_op("atanh", Atanh)
erfc = _float_op("erfc", Erfc)
erfinv = _float_op("erfinv", Erfinv)
lgamma = _float_op("lgamma", Lgamma)
digamma = _float_op("digamma", Digamma)
sinc = _float_op("sinc", Sinc)
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


def frac(x):
    """torch.frac: x - trunc(x) (float tensors only, as torch); gradient g."""
    x = as_tensor(x)
    if x.dtype.kind != "f":
        raise TypeError(f"frac: expects a floating-point tensor, got {x.dtype}")
    return Frac.apply(x)


def logit(x, eps=None):
    """torch.logit: log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given."""
    x = as_tensor(x)
    return Logit.apply(x if x.dtype.kind == "f" else x.float(), None if eps is None else float(eps))


def deg2rad(x):
    """torch.deg2rad: x * pi / 180 (integer and bool inputs give float32)."""
    x = as_tensor(x)
    return (x if x.dtype.kind == "f" else x.float()) * (math.pi / 180.0)


def rad2deg(x):
    """torch.rad2deg: x * 180 / pi (integer and bool inputs give float32)."""
    x = as_tensor(x)
    return (x if x.dtype.kind == "f" else x.float()) * (180.0 / math.pi)


def sgn(x):
    """torch.sgn: sign for real tensors."""
    return sign(x)


def signbit(x):
    """torch.signbit: whether the sign bit is set (True at -0.0; bool, no grad)."""
    a = as_tensor(x).data
    return Tensor._from_op(np.signbit(a.astype(np.uint8) if a.dtype.kind == "b" else a))


def positive(x):
    """torch.positive: x itself."""
    return as_tensor(x)


def fix(x):
    """torch.fix: trunc."""
    return trunc(x)


class Polygamma(Function):
    """y = psi^(n)(x) (n = 0: digamma); gx = g psi^(n+1)(x)."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return special.polygamma(n, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with np.errstate(all="ignore"):
            return g * special.polygamma(ctx.n + 1, x), None


def polygamma(n, input):  # noqa: A002
    """torch.polygamma: the n-th derivative of digamma (n >= 0), elementwise (integers give float32).
    Deviation: +inf gives 0 (the limit) where torch gives nan for n >= 2."""
    n = int(n)
    if n < 0:
        raise ValueError(f"polygamma(n, x) does not support negative n, got {n}")
    x = as_tensor(input)
    return Polygamma.apply(x if x.dtype.kind == "f" else x.float(), n)


def mvlgamma(input, p):  # noqa: A002
    """torch.mvlgamma: the log of the multivariate gamma function of dimension p,
    p (p - 1) / 4 log(pi) + sum_i lgamma(x - i / 2), i < p; every element must exceed (p - 1) / 2."""
    x = as_tensor(input)
    x = x if x.dtype.kind == "f" else x.float()
    p = int(p)
    if p < 1:
        raise ValueError(f"mvlgamma: p has to be greater than or equal to 1, got {p}")
    if not np.all(x.data > (p - 1) / 2):
        raise ValueError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    shifts = Tensor(-np.arange(p, dtype=x.dtype) / 2)
    return lgamma(x.unsqueeze(-1) + shifts).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def angle(x):
    """torch.angle of a real tensor: pi where x < 0, 0 elsewhere, NaN at NaN (integers give float32);
    gradient 0, as torch's for real inputs."""
    x = as_tensor(x)
    x = x if x.dtype.kind == "f" else x.float()
    return _Rounding.apply(x, lambda a: np.where(a < 0, math.pi, np.where(np.isnan(a), np.nan, 0.0)))


class Frexp(Function):
    """(mantissa, exponent) with x = mantissa 2^exponent, |mantissa| in [0.5, 1) (exponent int32);
    g_x = g_mantissa / 2^exponent."""

    @staticmethod
    def forward(ctx, x):
        m, e = np.frexp(x)
        e = e.astype(np.int32, copy=False)
        ctx.save_for_backward(e)
        return m, e

    @staticmethod
    def backward(ctx, gm, ge):
        (e,) = ctx.saved_tensors
        return gm / np.exp2(e).astype(gm.dtype)


def frexp(input):  # noqa: A002
    """torch.frexp: (mantissa, exponent) of a float tensor, a named tuple (exponent int32)."""
    x = as_tensor(input)
    if x.dtype.kind != "f":
        raise TypeError(f"frexp: only supports floating-point dtypes, got {x.dtype}")
    return MantissaExponent(*Frexp.apply(x))


MantissaExponent = collections.namedtuple("frexp", "mantissa exponent")
