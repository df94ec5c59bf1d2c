"""RMSNorm over the last dimension: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).

The residual variant first adds a branch to the residual stream and normalises the sum, as every
pre-norm transformer block does: s = x + r, y = rms_norm(s). Its backward takes the gradient of
both outputs; since ds/dx = ds/dr = I, one array g = gs + (the rms_norm gradient of gy) serves as
the gradient of x and of r.

Rows are independent, so both passes run `prange` over rows, handed out dynamically (a thread
preempted by another job then does not hold up the pass). The weight gradient is a sum over rows:
the rows are cut into at most GW_BLOCKS fixed blocks, each summed into its own (C,) partial, and the
partials are added in block order afterwards, so the result does not depend on the thread count
or on which thread ran which block.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.stdlib cimport calloc, free

from minigrad.kernels._rowsum cimport row_dot, row_dot3
from minigrad.kernels.validate import check_kernel_args


cdef inline floating _norm_row(const floating* x, const floating* res, floating* s, const floating* w,
                               double eps, floating* y, Py_ssize_t C) noexcept nogil:
    """y = s * rstd * w with s = x (+ res, stored into s, when res is not NULL); returns rstd."""
    cdef Py_ssize_t c
    cdef floating r
    if res != NULL:
        for c in range(C):
            s[c] = x[c] + res[c]
        x = s
    r = <floating>(1.0 / sqrt(row_dot(x, x, C) / C + eps))
    for c in range(C):
        y[c] = x[c] * r * w[c]
    return r


cdef void _forward(const floating[:, ::1] x, const floating* res, floating* s,
                   const floating[::1] weight, double eps, floating[:, ::1] y,
                   floating[::1] rstd) noexcept nogil:
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], n
    for n in prange(N, schedule="dynamic", chunksize=32):
        rstd[n] = _norm_row(&x[n, 0], res + n * C if res != NULL else NULL,
                            s + n * C if s != NULL else NULL, &weight[0], eps, &y[n, 0], C)


# x: (N, C), weight: (C,) -> y: (N, C), rstd: (N,)
def rms_norm_forward(const floating[:, ::1] x, const floating[::1] weight, double eps,
                     floating[:, ::1] y, floating[::1] rstd):
    """y[n, c] = x[n, c] * rstd[n] * w[c] with rstd[n] = (mean_c x[n, c]^2 + eps)^-1/2."""
    check_kernel_args("rms_norm_forward", "x:N,C weight:C y:N,C rstd:N", x, weight, y, rstd)
    with nogil:
        _forward(x, <floating*>NULL, <floating*>NULL, weight, eps, y, rstd)


# x, r: (N, C), weight: (C,) -> s, y: (N, C), rstd: (N,)
def add_rms_norm_forward(const floating[:, ::1] x, const floating[:, ::1] r, const floating[::1] weight,
                         double eps, floating[:, ::1] s, floating[:, ::1] y, floating[::1] rstd):
    """s = x + r; y = s * rstd * w with rstd = (mean_c s^2 + eps)^-1/2 per row."""
    check_kernel_args("add_rms_norm_forward", "x:N,C r:N,C weight:C s:N,C y:N,C rstd:N",
                      x, r, weight, s, y, rstd)
    if x.shape[0] * x.shape[1] == 0:
        return
    with nogil:
        _forward(x, &r[0, 0], &s[0, 0], weight, eps, y, rstd)


cdef enum:
    GW_BLOCKS = 64


cdef void _backward(const floating[:, ::1] gy, const floating* gs, const floating[:, ::1] x,
                    const floating[::1] weight, const floating[::1] rstd, floating[:, ::1] gx,
                    floating* acc, Py_ssize_t nblocks, bint need_gx, bint need_gw) noexcept nogil:
    """gx (+= gs when gs is not NULL) per row; block j adds its rows' gy * xhat into acc[j]."""
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], n, c, j, lo, hi
    cdef Py_ssize_t chunk = (N + nblocks - 1) // nblocks
    cdef floating* accr
    cdef const floating* xr
    cdef const floating* gyr
    cdef const floating* gsr
    cdef floating* gxr
    cdef floating r, m
    for j in prange(nblocks, schedule="dynamic", chunksize=1):
        lo = j * chunk
        hi = min(lo + chunk, N)
        accr = acc + j * C
        for n in range(lo, hi):
            xr = &x[n, 0]
            gyr = &gy[n, 0]
            r = rstd[n]
            if need_gw:
                for c in range(C):
                    accr[c] += gyr[c] * xr[c] * r
            if need_gx:
                gxr = &gx[n, 0]
                m = <floating>(row_dot3(gyr, &weight[0], xr, C) * r * r / C)
                if gs != NULL:
                    gsr = gs + n * C
                    for c in range(C):
                        gxr[c] = gsr[c] + r * (gyr[c] * weight[c] - xr[c] * m)
                else:
                    for c in range(C):
                        gxr[c] = r * (gyr[c] * weight[c] - xr[c] * m)


cdef int _backward_driver(const floating[:, ::1] gy, const floating* gs, const floating[:, ::1] x,
                          const floating[::1] weight, const floating[::1] rstd, floating[:, ::1] gx,
                          floating[::1] gw, bint need_gx, bint need_gw) except -1:
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], c, j
    cdef Py_ssize_t nblocks = max(1, min(N, GW_BLOCKS))
    cdef floating* acc = <floating*>calloc(nblocks * C + 1, sizeof(floating))
    if acc == NULL:
        raise MemoryError("rms_norm_backward: cannot allocate weight-grad scratch")
    with nogil:
        _backward(gy, gs, x, weight, rstd, gx, acc, nblocks, need_gx, need_gw)
        if need_gw:
            for c in range(C):
                gw[c] = 0
            for j in range(nblocks):
                for c in range(C):
                    gw[c] += acc[j * C + c]
    free(acc)
    return 0


# gy, x: (N, C), weight: (C,), rstd: (N,) -> gx: (N, C), gw: (C,)
def rms_norm_backward(const floating[:, ::1] gy, const floating[:, ::1] x,
                      const floating[::1] weight, const floating[::1] rstd,
                      floating[:, ::1] gx, floating[::1] gw, bint need_gx, bint need_gw):
    """With xhat = x * rstd and g = gy * w (per row):
        gx = rstd * (g - xhat * mean_c(g * xhat))
        gw = sum_n gy * xhat
    """
    check_kernel_args("rms_norm_backward", "gy:N,C x:N,C weight:C rstd:N gw:C", gy, x, weight, rstd, gw)
    check_kernel_args("rms_norm_backward", "gx:N,C" if need_gx else "gx:*,*", gx,
                      N=x.shape[0], C=x.shape[1])
    _backward_driver(gy, <floating*>NULL, x, weight, rstd, gx, gw, need_gx, need_gw)


# gy, gs, s: (N, C), weight: (C,), rstd: (N,) -> g: (N, C), gw: (C,)
def add_rms_norm_backward(const floating[:, ::1] gy, const floating[:, ::1] gs,
                          const floating[:, ::1] s, const floating[::1] weight,
                          const floating[::1] rstd, floating[:, ::1] g, floating[::1] gw, bint need_gw):
    """s = x + r, y = rms_norm(s): with shat = s * rstd,
        g = gs + rstd * (gy * w - shat * mean_c(gy * w * shat))   (the gradient of x and of r)
        gw = sum_n gy * shat
    """
    check_kernel_args("add_rms_norm_backward", "gy:N,C gs:N,C s:N,C weight:C rstd:N g:N,C gw:C",
                      gy, gs, s, weight, rstd, g, gw)
    if s.shape[0] * s.shape[1] == 0:
        gw[:] = 0
        return
    _backward_driver(gy, &gs[0, 0], s, weight, rstd, g, gw, True, need_gw)
