"""Vectorised erf / erfc / normal CDF on numpy arrays, accurate to a few ulps in float64.

numpy has no erf (scipy's is not used here: this one keeps float32 inputs in float32). Two pieces:

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
import scipy.special as _sp
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


# ---- gamma family and erfinv: scipy.special (a dependency, for its BLAS too), with torch's values
# where they differ: lgamma(-inf) = inf, polygamma(1, -inf) = nan, erfinv keeps the sign of a zero.


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def lgamma(x):
    """log|Gamma(x)|, elementwise (inf at the poles and at +-inf, as torch)."""
    x = _f64(x)
    return np.where(np.isneginf(x), np.inf, _sp.gammaln(x))


def digamma(x):
    """psi(x) = d/dx lgamma(x), elementwise (torch's values at the poles and infinities:
    psi(+-0) = -+inf, nan at the negative integers and at -inf)."""
    return _sp.psi(_f64(x))


def trigamma(x):
    """psi'(x) (polygamma(1, x)), elementwise: inf at the poles, 0 at +inf, nan at -inf."""
    return polygamma(1, x)


def erfinv(y):
    """The inverse of erf on [-1, 1] (+-inf at +-1, nan outside; -0 stays -0, as torch)."""
    y = _f64(y)
    return np.where(y == 0, y, _sp.erfinv(y))


REFLECT_BELOW = 64.0


def _cot_pi(r):
    """cot(pi r) for r in [-1/2, 1/2], accurate near +-1/2 too (where it is tan(pi (1/2 - |r|)),
    1/2 - |r| exact) as well as near 0 (1 / tan(pi r))."""
    near_zero = np.abs(r) < 0.25
    with np.errstate(divide="ignore"):
        return np.where(near_zero, 1.0 / np.tan(math.pi * r),
                        np.sign(r) * np.tan(math.pi * (0.5 - np.abs(r))))


def _cot_derivative_poly(n):
    """P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)): P_0(c) = c, P_k+1 = -(1 + c^2) P_k'."""
    poly = np.polynomial.Polynomial([0.0, 1.0])
    for _ in range(n):
        poly = -np.polynomial.Polynomial([1.0, 0.0, 1.0]) * poly.deriv()
    return poly


def polygamma(n, x):
    """psi^(n)(x), the n-th derivative of digamma (n = 0: digamma), elementwise: +-inf at the poles
    (the sign of torch's), 0 at +inf (the limit; torch gives nan for n >= 2). x < -REFLECT_BELOW
    by reflection, psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)): scipy's Hurwitz
    zeta walks up to q > 0 one step at a time (0.3 s at x = -1e7); nearer 0 that walk is cheap and
    exact, where the reflection's two terms can cancel."""
    x = _f64(x)
    if n == 0:
        return digamma(x)
    with np.errstate(all="ignore"):
        neg = np.isfinite(x) & (x < -REFLECT_BELOW) & (np.floor(x) != x)
        out = _sp.polygamma(n, np.where(neg, 1.0, x))
        if neg.any():
            xn = x[neg]
            cot = _cot_pi(xn - np.round(xn))
            out[neg] = (-1.0) ** n * _sp.polygamma(n, 1.0 - xn) - math.pi ** (n + 1) * \
                _cot_derivative_poly(n)(cot)
    return np.where(np.isneginf(x), np.nan, out) if n == 1 else out
