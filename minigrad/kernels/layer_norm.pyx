"""LayerNorm over the last dimension: y = (x - mean) rstd w + b, rstd = 1 / sqrt(var + eps).

Rows are independent: prange over rows. Weight/bias grads are sums over rows, accumulated in
per-thread (2, C) rows of `acc` that the caller sums (deterministic for a fixed thread count).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt

from minigrad.kernels._openmp cimport omp_get_max_threads
from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

# Below this many rows a parallel region costs more than it saves (one token at a time: every
# region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_ROWS = 64


def num_threads():
    """Rows of the per-thread accumulator layer_norm_backward needs."""
    return omp_get_max_threads()


# x: (M, C), weight, bias: (C,) -> y: (M, C), mean, rstd: (M,)
def layer_norm_forward(const floating[:, ::1] x, const floating[::1] weight,
                       const floating[::1] bias, double eps, floating[:, ::1] y,
                       floating[::1] mean, floating[::1] rstd):
    """mean = mean_c x;  var = mean_c (x - mean)^2 (biased);  y = (x - mean) rstd w + b."""
    check_kernel_args("layer_norm_forward", "x:N,C weight:C bias:C y:N,C mean:N rstd:N",
                      x, weight, bias, y, mean, rstd)
    cdef Py_ssize_t M = x.shape[0], C = x.shape[1], m, c
    cdef double mu, var, d, rs
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            mu = 0.0
            for c in range(C):
                mu = mu + x[m, c]
            mu = mu / C
            var = 0.0
            for c in range(C):
                d = x[m, c] - mu
                var = var + d * d
            rs = 1.0 / sqrt(var / C + eps)
            mean[m] = <floating>mu
            rstd[m] = <floating>rs
            for c in range(C):
                y[m, c] = <floating>((x[m, c] - mu) * rs * weight[c] + bias[c])


# gy, x: (M, C), weight: (C,), mean, rstd: (M,) -> gx: (M, C), acc: (nthreads, 2, C) (gw, gb)
def layer_norm_backward(const floating[:, ::1] gy, const floating[:, ::1] x,
                        const floating[::1] weight, const floating[::1] mean,
                        const floating[::1] rstd, floating[:, ::1] gx,
                        floating[:, :, ::1] acc, bint need_gx):
    """With xhat = (x - mean) rstd and g = gy w:
        gx = rstd (g - mean_c(g) - xhat mean_c(g xhat));  gw = sum_m gy xhat;  gb = sum_m gy
    """
    check_kernel_args("layer_norm_backward", "gy:N,C x:N,C weight:C mean:N rstd:N gx:N,C acc:P,2,C",
                      gy, x, weight, mean, rstd, gx, acc)
    check_kernel_scalar("layer_norm_backward", "acc.shape[0]", acc.shape[0], 1)
    cdef Py_ssize_t M = x.shape[0], C = x.shape[1]
    cdef int nthreads = acc.shape[0]
    cdef Py_ssize_t rows = (M + nthreads - 1) // nthreads
    cdef Py_ssize_t tid, m, c, lo, hi
    cdef double mu, rs, xh, gv, s1, s2
    cdef floating* agw
    cdef floating* agb
    with nogil:
        for tid in prange(nthreads, schedule="static", num_threads=nthreads,
                          use_threads_if=M >= PARALLEL_MIN_ROWS):
            agw = &acc[tid, 0, 0]
            agb = &acc[tid, 1, 0]
            for c in range(2 * C):
                agw[c] = 0
            lo = tid * rows
            hi = min(lo + rows, M)
            for m in range(lo, hi):
                mu = mean[m]
                rs = rstd[m]
                s1 = 0.0
                s2 = 0.0
                for c in range(C):
                    xh = (x[m, c] - mu) * rs
                    agw[c] = agw[c] + <floating>(gy[m, c] * xh)
                    agb[c] = agb[c] + gy[m, c]
                    gv = <double>gy[m, c] * weight[c]
                    s1 = s1 + gv
                    s2 = s2 + gv * xh
                if need_gx:
                    s1 = s1 / C
                    s2 = s2 / C
                    for c in range(C):
                        xh = (x[m, c] - mu) * rs
                        gx[m, c] = <floating>(rs * (<double>gy[m, c] * weight[c] - s1 - xh * s2))
