"""RMSNorm over the last dimension: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).

Rows are independent, so both passes run `prange` over rows. The weight gradient is a sum over
rows: each thread owns a contiguous slice of rows and a private (C,) accumulator, and the
accumulators are added in thread order afterwards (deterministic for a fixed thread count).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.stdlib cimport calloc, free

from minigrad.kernels._openmp cimport omp_get_max_threads
from minigrad.kernels._vmath cimport mg_dot3_f, mg_dot_f
from minigrad.kernels.validate import check_kernel_args


# x: (N, C), weight: (C,) -> y: (N, C), rstd: (N,)
def rms_norm_forward(const floating[:, ::1] x, const floating[::1] weight, double eps,
                     floating[:, ::1] y, floating[::1] rstd):
    """y[n, c] = x[n, c] * rstd[n] * w[c] with rstd[n] = (mean_c x[n, c]^2 + eps)^-1/2."""
    check_kernel_args("rms_norm_forward", "x:N,C weight:C y:N,C rstd:N", x, weight, y, rstd)
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], n, c
    cdef const floating* xr
    cdef floating* yr
    cdef double ss
    cdef floating r
    with nogil:
        for n in prange(N, schedule="static"):
            xr = &x[n, 0]
            yr = &y[n, 0]
            if floating is float:
                ss = mg_dot_f(xr, xr, C)
            else:
                ss = 0.0
                for c in range(C):
                    ss = ss + xr[c] * xr[c]
            r = <floating>(1.0 / sqrt(ss / C + eps))
            rstd[n] = r
            for c in range(C):
                yr[c] = xr[c] * r * weight[c]


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
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], n, c, t, lo, hi
    cdef int nthreads = omp_get_max_threads()
    cdef Py_ssize_t chunk = (N + nthreads - 1) // nthreads
    cdef floating* acc = NULL
    cdef floating* accr
    cdef const floating* xr
    cdef const floating* gyr
    cdef floating* gxr
    cdef double dot
    cdef floating r, m
    if need_gw:
        acc = <floating*>calloc(nthreads * C + 1, sizeof(floating))
        if acc == NULL:
            raise MemoryError("rms_norm_backward: cannot allocate weight-grad scratch")
    with nogil:
        for t in prange(nthreads, schedule="static", num_threads=nthreads):
            lo = t * chunk
            hi = min(lo + chunk, N)
            accr = acc + t * C
            for n in range(lo, hi):
                xr = &x[n, 0]
                gyr = &gy[n, 0]
                r = rstd[n]
                if need_gw:
                    for c in range(C):
                        accr[c] += gyr[c] * xr[c] * r
                if need_gx:
                    gxr = &gx[n, 0]
                    if floating is float:
                        dot = mg_dot3_f(gyr, &weight[0], xr, C)
                    else:
                        dot = 0.0
                        for c in range(C):
                            dot = dot + gyr[c] * weight[c] * xr[c]
                    m = <floating>(dot * r * r / C)
                    for c in range(C):
                        gxr[c] = r * (gyr[c] * weight[c] - xr[c] * m)
        if need_gw:
            for c in range(C):
                gw[c] = 0
            for t in range(nthreads):
                for c in range(C):
                    gw[c] += acc[t * C + c]
    free(acc)
