"""Softmax cross-entropy fused with its log-softmax: loss_n = lse(z_n) - z_n[t_n].

Forward keeps only lse (N,). With p = exp(z - lse) and per-row upstream weight w_n
(1/count for 'mean', 1 for 'sum', gy[n] for 'none'; 0 for ignored rows):
    gz[n, v] = w_n * (p[n, v] - [v == t_n])
Rows are independent: `prange` over rows. Targets are range-checked in Python beforehand.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, expf, log


cdef inline floating _exp(floating x) noexcept nogil:
    if floating is float:
        return expf(x)
    else:
        return exp(x)


# logits: (N, V), targets: (N,) -> loss: (N,) (0 where ignored), lse: (N,)
def cross_entropy_forward(const floating[:, ::1] logits, const long long[::1] targets,
                          long long ignore_index, floating[::1] loss, floating[::1] lse):
    """lse[n] = log sum_v exp(z[n, v]); loss[n] = lse[n] - z[n, t_n] (0 if t_n == ignore_index)."""
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n, v
    cdef const floating* zr
    cdef floating m
    cdef double s
    cdef long long t
    with nogil:
        for n in prange(N, schedule="static"):
            zr = &logits[n, 0]
            m = zr[0]
            for v in range(1, V):
                if zr[v] > m:
                    m = zr[v]
            s = 0.0
            for v in range(V):
                s = s + _exp(zr[v] - m)
            lse[n] = <floating>(m + log(s))
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
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n, v
    cdef const floating* zr
    cdef floating* gr
    cdef floating w, l
    cdef long long t
    with nogil:
        for n in prange(N, schedule="static"):
            zr = &logits[n, 0]
            gr = &glogits[n, 0]
            t = targets[n]
            if t == ignore_index:
                for v in range(V):
                    gr[v] = 0
                continue
            w = weight[n]
            l = lse[n]
            for v in range(V):
                gr[v] = w * _exp(zr[v] - l)
            gr[t] -= w
