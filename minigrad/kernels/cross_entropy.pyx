"""Softmax cross-entropy fused with its log-softmax: loss_n = lse(z_n) - z_n[t_n].

With m_n = max_v z[n, v] and l_n = log sum_v exp(z[n, v] - m_n) (so lse = m + l), forward keeps
m and l (N,) and computes loss_n = (m_n - z_n[t_n]) + l_n; backward p = exp((z - m) - l). Never
m + l first: a large common offset of a row's logits (1e6 in float32) would round l away, as
torch's formulation does not. With per-row upstream weight w_n (1/count for 'mean', 1 for 'sum',
gy[n] for 'none'; 0 for ignored rows):
    gz[n, v] = w_n * (p[n, v] - [v == t_n])
Rows are independent: `prange` over rows. Targets are range-checked in Python beforehand.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, log

from minigrad.kernels._vmath cimport mg_exp_shift2_f, mg_max_f, mg_sum_exp_f
from minigrad.kernels.validate import check_kernel_args, check_kernel_index, check_kernel_scalar


cdef inline double _row_max_logsum(const floating* z, Py_ssize_t V, floating* m_out) noexcept nogil:
    """m_out[0] = max_v z_v; returns log sum_v exp(z_v - max)."""
    cdef Py_ssize_t v
    cdef double s = 0.0
    cdef floating m
    if floating is float:
        m = mg_max_f(z, V)
        s = mg_sum_exp_f(z, V, m)
    else:
        m = z[0]
        for v in range(1, V):
            if z[v] > m:
                m = z[v]
        for v in range(V):
            s = s + exp(z[v] - m)
    m_out[0] = m
    return log(s)


# logits: (N, V), targets: (N,) -> loss: (N,) (0 where ignored), row_max, row_logsum: (N,)
def cross_entropy_forward(const floating[:, ::1] logits, const long long[::1] targets,
                          long long ignore_index, floating[::1] loss, floating[::1] row_max,
                          floating[::1] row_logsum):
    """row_max[n] = max_v z[n, v], row_logsum[n] = log sum_v exp(z[n, v] - row_max[n]);
    loss[n] = (row_max[n] - z[n, t_n]) + row_logsum[n] (0 if t_n == ignore_index)."""
    check_kernel_args("cross_entropy_forward", "logits:N,V targets:N loss:N row_max:N row_logsum:N",
                      logits, targets, loss, row_max, row_logsum)
    check_kernel_scalar("cross_entropy_forward", "the class count", logits.shape[1], 1)
    check_kernel_index("cross_entropy_forward", "targets", targets, logits.shape[1], ignore_index)
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n
    cdef const floating* zr
    cdef long long t
    cdef double ls
    with nogil:
        for n in prange(N, schedule="dynamic", chunksize=64):
            zr = &logits[n, 0]
            ls = _row_max_logsum(zr, V, &row_max[n])
            row_logsum[n] = <floating>ls
            t = targets[n]
            if t == ignore_index:
                loss[n] = 0
            else:
                loss[n] = <floating>(<double>(row_max[n] - zr[t]) + ls)


# logits: (N, V), targets, row_max, row_logsum, weight: (N,) -> glogits: (N, V)
def cross_entropy_backward(const floating[:, ::1] logits, const long long[::1] targets,
                           long long ignore_index, const floating[::1] row_max,
                           const floating[::1] row_logsum, const floating[::1] weight,
                           floating[:, ::1] glogits):
    """glogits[n] = weight[n] * (softmax(z[n]) - onehot(t_n)); zero for ignored rows."""
    check_kernel_args("cross_entropy_backward",
                      "logits:N,V targets:N row_max:N row_logsum:N weight:N glogits:N,V",
                      logits, targets, row_max, row_logsum, weight, glogits)
    check_kernel_scalar("cross_entropy_backward", "the class count", logits.shape[1], 1)
    check_kernel_index("cross_entropy_backward", "targets", targets, logits.shape[1], ignore_index)
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n, v
    cdef const floating* zr
    cdef floating* gr
    cdef floating w, m, ls
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
            m = row_max[n]
            ls = row_logsum[n]
            if floating is float:
                mg_exp_shift2_f(zr, gr, V, m, ls, w)
            else:
                for v in range(V):
                    gr[v] = w * exp((zr[v] - m) - ls)
            gr[t] -= w
