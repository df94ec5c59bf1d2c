"""Vectorised erf / erfc / normal CDF on numpy arrays, accurate to a few ulps in float64.

numpy has no erf, and scipy is not a dependency. Two pieces:

* |z| < 0.5: the Taylor series erf(z) = 2/sqrt(pi) * sum_n (-1)^n z^(2n+1) / (n! (2n+1)), 14 terms
  (truncation < 1e-19 there).
* z >= 0.5: erfc(z) = t * exp(-z^2 + P(4t - 2)) with t = 2 / (2 + z) (the mapping of Numerical
  Recipes' `erfccheb`), P a Chebyshev series. Its coefficients are not a table copied from
  somewhere: they are computed once at import by interpolating log(erfcx(z) / t) at Chebyshev
  nodes, with erfcx(z) = exp(z^2) erfc(z) from `math.erfc` for z < 2 and from its continued
  fraction (evaluated to convergence) above. Float32 inputs use the shortest prefix of the series
  whose tail is below float32 resolution, and stay float32 throughout.
"""
import math

import numpy as np
from numpy.polynomial import chebyshev

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_HALF = math.sqrt(0.5)
_TAYLOR = [_TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(14)]
_SMALL = 0.5


def _erfcx_reference(z):
    """exp(z^2) erfc(z) for z >= 0 in double precision (scalar, import-time only)."""
    if z < 2.0:
        return math.erfc(z) * math.exp(z * z)
    # erfc(z) = exp(-z^2)/sqrt(pi) / (z + (1/2)/(z + (2/2)/(z + (3/2)/(z + ...)))), evaluated bottom-up
    r = z
    for n in range(4000, 0, -1):
        r = z + 0.5 * n / r
    return 1.0 / (math.sqrt(math.pi) * r)


def _fit(degree=40):
    def target(u):                      # u in (-1, 1): t = (u + 1) / 2, z = 2/t - 2
        t = (u + 1.0) / 2.0
        z = 2.0 / t - 2.0
        return math.log(_erfcx_reference(z) / t)

    coef = chebyshev.chebinterpolate(np.vectorize(target), degree)
    # the series is evaluated in ty = 4t - 2 = 2u in [-2, 2], Clenshaw with the recurrence in 2u
    return [float(c) for c in coef]


_CHEB = _fit()


def _terms(dtype):
    """How many Chebyshev terms `dtype` needs: drop the tail below its resolution."""
    eps = np.finfo(dtype).eps * 0.05
    n = len(_CHEB)
    while n > 1 and sum(abs(c) for c in _CHEB[n - 1:]) < eps:
        n -= 1
    return n


_NTERMS = {np.dtype(np.float32): _terms(np.float32), np.dtype(np.float64): _terms(np.float64)}


def _erfc_large(z):
    """erfc(z) for z >= 0 (array; accurate to ~1e-16 relative on [0, 0.5] too); dtype preserved.

    Clenshaw's recurrence with three rotating buffers and in-place ufuncs: no per-term allocation.
    """
    if z.ndim == 0:                    # numpy turns 0-d arithmetic into scalars; keep arrays
        return _erfc_large(z.reshape(1)).reshape(())
    t = 2.0 / (2.0 + z)
    ty = 4.0 * t - 2.0                 # = 2u, the Chebyshev variable doubled
    coef = _CHEB[:_NTERMS.get(z.dtype, len(_CHEB))]
    b0, b1, b2 = np.empty_like(z), np.zeros_like(z), np.zeros_like(z)
    for c in coef[:0:-1]:
        np.multiply(ty, b1, out=b0)    # b0 = 2u b1 - b2 + c
        b0 -= b2
        b0 += c
        b0, b1, b2 = b2, b0, b1
    ty *= 0.5                          # p = u b1 - b2 + c0
    ty *= b1
    ty -= b2
    ty += coef[0]
    ty -= z * z                        # log(erfc(z) / t)
    with np.errstate(over="ignore", under="ignore"):
        np.exp(ty, out=ty)
    ty *= t
    return ty


def _erf_small(z):
    zz = z * z
    acc = np.full_like(z, _TAYLOR[-1])
    for c in _TAYLOR[-2::-1]:
        acc = acc * zz + c
    return z * acc


def _piecewise(x, small_fn, large_fn):
    """small_fn on |x| < 0.5, large_fn elsewhere (each sees only its own elements)."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    out = np.empty_like(x)
    small = np.abs(x) < _SMALL
    if small.all():
        return small_fn(x)
    out[small] = small_fn(x[small])
    big = ~small
    out[big] = large_fn(x[big])
    return out


def erfc(x):
    """Complementary error function, elementwise."""
    def large(v):
        e = _erfc_large(np.abs(v))
        return np.where(v < 0, 2.0 - e, e)
    return _piecewise(x, lambda v: 1.0 - _erf_small(v), large)


def erf(x):
    """Error function, elementwise."""
    def large(v):
        e = 1.0 - _erfc_large(np.abs(v))
        return np.where(v < 0, -e, e)
    return _piecewise(x, _erf_small, large)


def ndtr(x):
    """Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, accurate in both tails.

    One erfc evaluation on |x| / sqrt 2 for every element (no small-argument branch: Phi is near 1/2
    there, so erfc's relative accuracy is all that is needed).
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    half_tail = _erfc_large(np.abs(x) * _SQRT_HALF)
    half_tail *= 0.5
    return np.where(x < 0, half_tail, 1.0 - half_tail)


# ---- gamma family and erfinv -------------------------------------------------------------------
# Evaluated in float64 (numpy has no lgamma / digamma; scipy is not a dependency): math.lgamma per
# element, digamma and trigamma by the recurrence up to x >= 10 then their asymptotic series (error
# < 1e-15 there), negative x by reflection. Poles follow torch: lgamma = inf at 0, -1, -2, ...;
# digamma(+-0) = -+inf and nan at the negative integers; trigamma = inf at the poles.

_LGAMMA = np.frompyfunc(math.lgamma, 1, 1)


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def _poles(x):
    """x is 0 or a negative integer."""
    return (x <= 0) & (np.floor(x) == x)


def lgamma(x):
    """log|Gamma(x)|, elementwise (inf at the poles and at +-inf, as torch)."""
    x = _f64(x)
    bad = _poles(x) | np.isinf(x)
    safe = np.where(bad | np.isnan(x), 1.0, x)
    out = np.asarray(_LGAMMA(safe), dtype=np.float64)
    out = np.where(bad, np.inf, out)
    return np.where(np.isnan(x), np.nan, out)


def _shift_up(x, step):
    """(x moved up to >= 10 by the recurrence, the sum of step(x_k) over the moves), x > 0."""
    acc = np.zeros_like(x)
    for _ in range(10):
        low = x < 10.0
        if not low.any():
            break
        acc += np.where(low, step(np.where(low, x, 1.0)), 0.0)
        x = np.where(low, x + 1.0, x)
    return x, acc


def _digamma_pos(x):
    x, acc = _shift_up(x, lambda v: -1.0 / v)
    r = 1.0 / (x * x)
    series = r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (1 / 240 - r * (1 / 132 - r * (
        691 / 32760 - r / 12))))))
    return acc + np.log(x) - 0.5 / x - series


def digamma(x):
    """psi(x) = d/dx lgamma(x), elementwise (torch's values at the poles and infinities)."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        neg = x < 0
        pos = np.where(neg, 1.0 - x, np.where(x == 0, 1.0, x))
        pos = np.where(np.isfinite(pos), pos, 1.0)
        out = _digamma_pos(pos)
        out = np.where(neg, out - math.pi / np.tan(math.pi * x), out)
        out = np.where(_poles(x) & (x < 0), np.nan, out)
        out = np.where(x == 0, np.copysign(np.inf, -x), out)
        out = np.where(np.isposinf(x), np.inf, out)
        return np.where(np.isneginf(x) | np.isnan(x), np.nan, out)


def _trigamma_pos(x):
    x, acc = _shift_up(x, lambda v: 1.0 / (v * v))
    r = 1.0 / (x * x)
    tail = 1 / 6 - r * (1 / 30 - r * (1 / 42 - r * (1 / 30 - r * (5 / 66 - r * 691 / 2730))))
    series = 1.0 / x + r / 2 + r / x * tail
    return acc + series


def trigamma(x):
    """psi'(x) (polygamma(1, x)), elementwise: inf at the poles, 0 at +inf."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        neg = x < 0
        pos = np.where(neg, 1.0 - x, np.where(x == 0, 1.0, x))
        pos = np.where(np.isfinite(pos), pos, 1.0)
        out = _trigamma_pos(pos)
        out = np.where(neg, (math.pi / np.sin(math.pi * x)) ** 2 - out, out)
        out = np.where(_poles(x), np.inf, out)
        out = np.where(np.isposinf(x), 0.0, out)
        return np.where(np.isneginf(x) | np.isnan(x), np.nan, out)


def erfinv(y):
    """The inverse of erf on [-1, 1] (+-inf at +-1, nan outside): Giles' single-precision
    approximation refined by two Newton steps on erf (as torch does)."""
    y = _f64(y)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - y) * (1.0 + y))
        small = w < 5.0
        ws = np.where(small, w - 2.5, np.sqrt(np.where(small, 5.0, w)) - 3.0)
        ps = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
        pl = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
        p = np.where(small, ps[0], pl[0])
        for a, b in zip(ps[1:], pl[1:]):
            p = np.where(small, a, b) + p * ws
        x = p * y
        inside = np.abs(y) < 1
        xi = np.where(inside, x, 0.0)
        for _ in range(2):
            xi = xi - (erf(xi) - np.where(inside, y, 0.0)) / (_TWO_OVER_SQRT_PI * np.exp(-xi * xi))
        out = np.where(inside, xi, np.nan)
        return np.where(np.abs(y) == 1, np.copysign(np.inf, y), out)


# Bernoulli numbers B_2j, j = 1..8, for the Euler-Maclaurin tail of the Hurwitz zeta function
_B2J = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _hurwitz_zeta(s, q):
    """zeta(s, q) = sum_k (q + k)^-s for an integer s >= 2 and real q off the poles: the first terms
    summed until q + k >= 10 + s, then the Euler-Maclaurin formula (error < 1e-15 relative)."""
    target = 10.0 + s
    acc = np.zeros_like(q)
    while True:
        low = q < target
        if not low.any():
            break
        acc += np.where(low, np.where(low, q, 1.0) ** -s, 0.0)
        q = np.where(low, q + 1.0, q)
    tail = q ** (1.0 - s) / (s - 1) + 0.5 * q ** -s
    rising, fact = float(s), 2.0                 # s (s + 1) ... (s + 2j - 2) and (2j)!
    power = q ** (-s - 1.0)
    for j, b in enumerate(_B2J, start=1):
        tail += b / fact * rising * power
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        fact *= (2 * j + 1) * (2 * j + 2)
        power = power / (q * q)
    return acc + tail


def polygamma(n, x):
    """psi^(n)(x), the n-th derivative of digamma (n = 0: digamma), elementwise:
    (-1)^(n+1) n! zeta(n + 1, x) for n >= 1; +-inf at the poles (the sign of torch's), 0 at +inf."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return trigamma(x)
    x = _f64(x)
    with np.errstate(all="ignore"):
        pole = _poles(x)
        bad = pole | ~np.isfinite(x)
        z = _hurwitz_zeta(n + 1, np.where(bad, 1.0, x))
        out = (-1.0) ** (n + 1) * math.factorial(n) * z
        out = np.where(pole | np.isneginf(x), (-1.0) ** (n + 1) * np.inf, out)    # -inf as torch
        out = np.where(np.isposinf(x), 0.0, out)
        return np.where(np.isnan(x), np.nan, out)
