"""LayerNorm over the last dimension: y = (x - mean) rstd w + b, rstd = 1 / sqrt(var + eps),
optionally fused with the residual add before it (add_layer_norm_forward; its backward is
layer_norm_backward with the residual stream's gradient `gres` added in the same pass).

Rows are independent: prange over rows, handed out dynamically. Weight/bias grads are sums over
rows, accumulated per fixed block of rows in the (2, C) rows of `acc` that the caller sums in block
order (deterministic for a given number of blocks). float32 rows reduce in vector lanes
(_vmath.h); float64 rows in scalar double loops (that path exists for gradient checks).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt

from minigrad.kernels._openmp cimport omp_get_max_threads
from minigrad.kernels._rowsum cimport row_dot, row_dot_centered, row_mean, row_sqdev
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
    """One row: mean (corrected, row_mean), rstd (two-pass variance) and y."""
    cdef Py_ssize_t c
    cdef double mu = row_mean(x, C)
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


# x, r: (M, C), weight, bias: (C,) -> s: (M, C) = x + r, y: (M, C) = layer_norm(s), mean, rstd: (M,)
def add_layer_norm_forward(const floating[:, ::1] x, const floating[:, ::1] r,
                           const floating[::1] weight, const floating[::1] bias, double eps,
                           floating[:, ::1] s, floating[:, ::1] y, floating[::1] mean,
                           floating[::1] rstd):
    """s = x + r (a residual add), then y = layer_norm(s) as layer_norm_forward, in one pass."""
    check_kernel_args("add_layer_norm_forward", "x:N,C r:N,C weight:C bias:C s:N,C y:N,C mean:N rstd:N",
                      x, r, weight, bias, s, y, mean, rstd)
    cdef Py_ssize_t M = x.shape[0], C = x.shape[1], m, c
    cdef floating* sr
    if M == 0 or C == 0:
        return
    with nogil:
        for m in prange(M, schedule="dynamic", chunksize=32, use_threads_if=M >= PARALLEL_MIN_ROWS):
            sr = &s[m, 0]
            for c in range(C):
                sr[c] = x[m, c] + r[m, c]
            _norm_row(sr, &weight[0], &bias[0], eps, &y[m, 0], &mean[m], &rstd[m], C)


cdef inline void _backward_row(const floating* gy, const floating* x, const floating* w, floating mu,
                               floating rs, const floating* gres, floating* gx, floating* agw,
                               floating* agb, Py_ssize_t C, bint need_gx) noexcept nogil:
    """One row: agw += gy xhat, agb += gy and (need_gx) gx, with xhat = (x - mu) rs, g = gy w:
    gx = rs (g - mean_c g - xhat mean_c(g xhat)) [+ gres, when not NULL]."""
    cdef Py_ssize_t c
    cdef floating m1, m2
    for c in range(C):
        agw[c] += gy[c] * (x[c] - mu) * rs
        agb[c] += gy[c]
    if not need_gx:
        return
    m1 = <floating>(row_dot(gy, w, C) / C)
    m2 = <floating>(row_dot_centered(gy, w, x, C, mu) * rs / C)
    if gres == NULL:
        for c in range(C):
            gx[c] = rs * (gy[c] * w[c] - m1 - (x[c] - mu) * rs * m2)
    else:
        for c in range(C):
            gx[c] = rs * (gy[c] * w[c] - m1 - (x[c] - mu) * rs * m2) + gres[c]


# gy, x: (M, C), weight: (C,), mean, rstd: (M,), gres: (M, C) or (0, C) -> gx: (M, C),
# acc: (nblocks, 2, C) (gw, gb partials)
def layer_norm_backward(const floating[:, ::1] gy, const floating[:, ::1] x,
                        const floating[::1] weight, const floating[::1] mean,
                        const floating[::1] rstd, floating[:, ::1] gx,
                        floating[:, :, ::1] acc, bint need_gx, const floating[:, ::1] gres=None):
    """With xhat = (x - mean) rstd and g = gy w:
        gx = rstd (g - mean_c(g) - xhat mean_c(g xhat)) [+ gres];  gw = sum_m gy xhat;  gb = sum_m gy
    gres (given with M rows): a gradient that also reaches x, added in the same pass (the residual
    stream's grad when x = s of add_layer_norm_forward). acc[p] holds block p's (gw, gb) partial;
    block p is a fixed range of rows, so the sums do not depend on which thread ran it.
    """
    if gres is None:
        gres = x[:0]
    check_kernel_args("layer_norm_backward",
                      "gy:N,C x:N,C weight:C mean:N rstd:N gx:N,C acc:P,2,C gres:N?,C",
                      gy, x, weight, mean, rstd, gx, acc, gres)
    check_kernel_scalar("layer_norm_backward", "acc.shape[0]", acc.shape[0], 1)
    cdef Py_ssize_t M = x.shape[0], C = x.shape[1]
    cdef Py_ssize_t nblocks = acc.shape[0]
    cdef Py_ssize_t rows = (M + nblocks - 1) // nblocks
    cdef Py_ssize_t blk, m, c
    cdef floating* agw
    cdef floating* agb
    cdef bint with_res = gres.shape[0] > 0
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
                _backward_row(&gy[m, 0], &x[m, 0], &weight[0], mean[m], rstd[m],
                              &gres[m, 0] if with_res else <const floating*>NULL, &gx[m, 0],
                              agw, agb, C, need_gx)
