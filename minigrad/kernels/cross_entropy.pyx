"""Softmax cross-entropy fused with its log-softmax: loss_n = lse(z_n) - z_n[t_n].

Forward keeps only lse (N,). With p = exp(z - lse) and per-row upstream weight w_n
(1/count for 'mean', 1 for 'sum', gy[n] for 'none'; 0 for ignored rows):
    gz[n, v] = w_n * (p[n, v] - [v == t_n])
Rows are independent: `prange` over rows. Targets are range-checked in Python beforehand.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, log

from minigrad.kernels._vmath cimport mg_exp_affine_f, mg_max_f, mg_sum_exp_f
from minigrad.kernels.validate import check_kernel_args, check_kernel_index, check_kernel_scalar


cdef inline double _row_lse(const floating* z, Py_ssize_t V) noexcept nogil:
    """log sum_v exp(z_v), shifted by the row max."""
    cdef Py_ssize_t v
    cdef double m, s = 0.0
    if floating is float:
        m = mg_max_f(z, V)
        s = mg_sum_exp_f(z, V, <float>m)
    else:
        m = z[0]
        for v in range(1, V):
            if z[v] > m:
                m = z[v]
        for v in range(V):
            s = s + exp(z[v] - m)
    return m + log(s)


# logits: (N, V), targets: (N,) -> loss: (N,) (0 where ignored), lse: (N,)
def cross_entropy_forward(const floating[:, ::1] logits, const long long[::1] targets,
                          long long ignore_index, floating[::1] loss, floating[::1] lse):
    """lse[n] = log sum_v exp(z[n, v]); loss[n] = lse[n] - z[n, t_n] (0 if t_n == ignore_index)."""
    check_kernel_args("cross_entropy_forward", "logits:N,V targets:N loss:N lse:N",
                      logits, targets, loss, lse)
    check_kernel_scalar("cross_entropy_forward", "the class count", logits.shape[1], 1)
    check_kernel_index("cross_entropy_forward", "targets", targets, logits.shape[1], ignore_index)
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n
    cdef const floating* zr
    cdef long long t
    with nogil:
        for n in prange(N, schedule="dynamic", chunksize=64):
            zr = &logits[n, 0]
            lse[n] = <floating>_row_lse(zr, V)
            t = targets[n]
            if t == ignore_index:
                loss[n] = 0
            else:
                loss[n] = lse[n] - zr[t]


# logits: (N, V), targets, lse, weight: (N,) -> glogits: (N, V)
def cross_entropy_backward(const floating[:, ::1] logits, const long long[::1] targets,
                           long long ignore_index, const floating[::1] lse,
                           const floating[::1] weight, floating[:, ::1] glogits):
    """glogits[n] = weight[n] * (softmax(z[n]) - onehot(t_n)); zero for ignored rows."""
    check_kernel_args("cross_entropy_backward", "logits:N,V targets:N lse:N weight:N glogits:N,V",
                      logits, targets, lse, weight, glogits)
    check_kernel_scalar("cross_entropy_backward", "the class count", logits.shape[1], 1)
    check_kernel_index("cross_entropy_backward", "targets", targets, logits.shape[1], ignore_index)
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n, v
    cdef const floating* zr
    cdef floating* gr
    cdef floating w, row_lse
    cdef long long t
    with nogil:
        for n in prange(N, schedule="dynamic", chunksize=64):
            zr = &logits[n, 0]
            gr = &glogits[n, 0]
            t = targets[n]
            if t == ignore_index:
                for v in range(V):
                    gr[v] = 0
                continue
            w = weight[n]
            row_lse = lse[n]
            if floating is float:
                mg_exp_affine_f(zr, gr, V, 1, row_lse, w)
            else:
                for v in range(V):
                    gr[v] = w * exp(zr[v] - row_lse)
            gr[t] -= w
