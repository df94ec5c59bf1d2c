# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""A user-written fused kernel: swish with a learnable per-channel slope, y = x * sigmoid(beta * x).

With s = sigmoid(beta * x) and ds/dz = s (1 - s):
    dy/dx    = s + beta * x * s * (1 - s)
    dy/dbeta = x * x * s * (1 - s)
Backward writes gbeta per element, shape (N, C); the Function returns it as it is and minigrad's
engine sums it over N back to beta's shape (C,).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, expf


cdef inline floating _sigmoid(floating z) noexcept nogil:
    if floating is float:
        return 1 / (1 + expf(-z))
    else:
        return 1 / (1 + exp(-z))


# x: (N, C), beta: (C,) -> y: (N, C)
def swish_forward(const floating[:, ::1] x, const floating[::1] beta, floating[:, ::1] y):
    """y = x * sigmoid(beta * x), one row per parallel iteration."""
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], n, c
    cdef const floating* xr
    cdef floating* yr
    with nogil:
        for n in prange(N, schedule="static"):
            xr = &x[n, 0]
            yr = &y[n, 0]
            for c in range(C):
                yr[c] = xr[c] * _sigmoid(beta[c] * xr[c])


# gy, x: (N, C), beta: (C,) -> gx: (N, C), gbeta: (N, C) (summed over N by the engine)
def swish_backward(const floating[:, ::1] gy, const floating[:, ::1] x, const floating[::1] beta,
                   floating[:, ::1] gx, floating[:, ::1] gbeta):
    """gx = gy * (s + beta x s (1 - s)),  gbeta = gy * x^2 s (1 - s),  s = sigmoid(beta x)."""
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], n, c
    cdef const floating* xr
    cdef const floating* gyr
    cdef floating* gxr
    cdef floating* gbr
    cdef floating s, ds
    with nogil:
        for n in prange(N, schedule="static"):
            xr = &x[n, 0]
            gyr = &gy[n, 0]
            gxr = &gx[n, 0]
            gbr = &gbeta[n, 0]
            for c in range(C):
                s = _sigmoid(beta[c] * xr[c])
                ds = s * (1 - s)
                gxr[c] = gyr[c] * (s + beta[c] * xr[c] * ds)
                gbr[c] = gyr[c] * xr[c] * xr[c] * ds
