"""LayerNorm over the last dimension: y = (x - mean) rstd w + b, rstd = 1 / sqrt(var + eps).

Rows are independent: prange over rows, handed out dynamically. Weight/bias grads are sums over
rows, accumulated per fixed block of rows in the (2, C) rows of `acc` that the caller sums in block
order (deterministic for a given number of blocks). float32 rows reduce in vector lanes
(_vmath.h); float64 rows in scalar double loops (that path exists for gradient checks).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt

from minigrad.kernels._openmp cimport omp_get_max_threads
from minigrad.kernels._rowsum cimport row_dot, row_dot_centered, row_sqdev, row_sum
from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

# Below this many rows a parallel region costs more than it saves (one token at a time: every
# region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_ROWS = 64


def grad_blocks():
    """Blocks of the accumulator layer_norm_backward takes: 4 per thread, so a thread that loses
    its core to another process does not hold up the pass."""
    return 4 * omp_get_max_threads()


cdef inline void _norm_row(const floating* x, const floating* w, const floating* b, double eps,
                           floating* y, floating* mean, floating* rstd, Py_ssize_t C) noexcept nogil:
    """One row: mean, rstd (two-pass variance) and y."""
    cdef Py_ssize_t c
    cdef double mu = row_sum(x, C) / C
    cdef double var = row_sqdev(x, C, mu) / C
    cdef floating m = <floating>mu
    cdef floating rs = <floating>(1.0 / sqrt(var + eps))
    mean[0] = m
    rstd[0] = rs
    for c in range(C):
        y[c] = (x[c] - m) * rs * w[c] + b[c]


# x: (M, C), weight, bias: (C,) -> y: (M, C), mean, rstd: (M,)
def layer_norm_forward(const floating[:, ::1] x, const floating[::1] weight,
                       const floating[::1] bias, double eps, floating[:, ::1] y,
                       floating[::1] mean, floating[::1] rstd):
    """mean = mean_c x;  var = mean_c (x - mean)^2 (biased);  y = (x - mean) rstd w + b."""
    check_kernel_args("layer_norm_forward", "x:N,C weight:C bias:C y:N,C mean:N rstd:N",
                      x, weight, bias, y, mean, rstd)
    cdef Py_ssize_t M = x.shape[0], C = x.shape[1], m
    if M == 0 or C == 0:
        return
    with nogil:
        for m in prange(M, schedule="dynamic", chunksize=32, use_threads_if=M >= PARALLEL_MIN_ROWS):
            _norm_row(&x[m, 0], &weight[0], &bias[0], eps, &y[m, 0], &mean[m], &rstd[m], C)


cdef inline void _backward_row(const floating* gy, const floating* x, const floating* w, floating mu,
                               floating rs, floating* gx, floating* agw, floating* agb,
                               Py_ssize_t C, bint need_gx) noexcept nogil:
    """One row: agw += gy xhat, agb += gy and (need_gx) gx, with xhat = (x - mu) rs, g = gy w:
    gx = rs (g - mean_c g - xhat mean_c(g xhat))."""
    cdef Py_ssize_t c
    cdef floating m1, m2
    for c in range(C):
        agw[c] += gy[c] * (x[c] - mu) * rs
        agb[c] += gy[c]
    if not need_gx:
        return
    m1 = <floating>(row_dot(gy, w, C) / C)
    m2 = <floating>(row_dot_centered(gy, w, x, C, mu) * rs / C)
    for c in range(C):
        gx[c] = rs * (gy[c] * w[c] - m1 - (x[c] - mu) * rs * m2)


# gy, x: (M, C), weight: (C,), mean, rstd: (M,) -> gx: (M, C), acc: (nthreads, 2, C) (gw, gb)
def layer_norm_backward(const floating[:, ::1] gy, const floating[:, ::1] x,
                        const floating[::1] weight, const floating[::1] mean,
                        const floating[::1] rstd, floating[:, ::1] gx,
                        floating[:, :, ::1] acc, bint need_gx):
    """With xhat = (x - mean) rstd and g = gy w:
        gx = rstd (g - mean_c(g) - xhat mean_c(g xhat));  gw = sum_m gy xhat;  gb = sum_m gy
    acc[p] holds block p's (gw, gb) partial; block p is a fixed range of rows, so the sums do not
    depend on which thread ran it.
    """
    check_kernel_args("layer_norm_backward", "gy:N,C x:N,C weight:C mean:N rstd:N gx:N,C acc:P,2,C",
                      gy, x, weight, mean, rstd, gx, acc)
    check_kernel_scalar("layer_norm_backward", "acc.shape[0]", acc.shape[0], 1)
    cdef Py_ssize_t M = x.shape[0], C = x.shape[1]
    cdef Py_ssize_t nblocks = acc.shape[0]
    cdef Py_ssize_t rows = (M + nblocks - 1) // nblocks
    cdef Py_ssize_t blk, m, c
    cdef floating* agw
    cdef floating* agb
    if C == 0:
        return
    with nogil:
        for blk in prange(nblocks, schedule="dynamic", use_threads_if=M >= PARALLEL_MIN_ROWS):
            agw = &acc[blk, 0, 0]
            agb = &acc[blk, 1, 0]
            for c in range(C):
                agw[c] = 0
                agb[c] = 0
            for m in range(blk * rows, min(blk * rows + rows, M)):
                _backward_row(&gy[m, 0], &x[m, 0], &weight[0], mean[m], rstd[m], &gx[m, 0],
                              agw, agb, C, need_gx)
