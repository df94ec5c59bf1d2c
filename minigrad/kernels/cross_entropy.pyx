"""Softmax cross-entropy fused with its log-softmax, with PyTorch's optional class weights w (V,)
and label smoothing eps in [0, 1]:

    loss_n = (1 - eps) w_t (-log p_t) + (eps / V) sum_c w_c (-log p_c),   t = t_n, p = softmax(z_n)

(w = 1 without weights; eps = 0 is the plain loss_n = w_t (lse(z_n) - z_n[t])). This is torch's
cross_entropy_loss_label_smoothing (aten/src/ATen/native/LossNLL.cpp): nll_loss(log_softmax, w)
mixed with the smoothing term -sum_c w_c log p_c, both 0 on ignored rows.

With m_n = max_v z[n, v] and l_n = log sum_v exp(z[n, v] - m_n), -log p_c = (m_n - z_c) + l_n: forward
keeps m and l (N,) and computes the loss from (m - z) + l, never from m + l first: a large common
offset of a row's logits (1e6 in float32) would round l away, as torch's formulation does not. The
smoothing sum is sum_c w_c (m - z_c) + W l with W = sum_c w_c (each term >= 0: no cancellation).

Backward, from d(-log p_c)/dz_v = p_v - [v == c]:
    dloss_n/dz_v = (1 - eps) w_t (p_v - [v == t]) + (eps / V) sum_c w_c (p_v - [v == c])
                 = A_n p_v - (eps / V) w_v - (1 - eps) w_t [v == t],   A_n = (1 - eps) w_t + (eps / V) W
so with the per-row upstream scale s_n (gy/denominator for 'mean', gy for 'sum', gy[n] for 'none';
rows whose target is ignore_index get 0):
    gz[n, v] = s_n (A_n p_v - (eps / V) w_v - (1 - eps) w_t [v == t])
Without weights and smoothing A_n = 1 and this is s_n (p - onehot(t)), the same arithmetic as the
plain kernel (s * 1.0 and (1 - 0) are exact), with one extra pass over the row only when eps != 0.
Without weights it is s_n (p - (1 - eps) onehot(t) - eps / V). Note that with weights the smoothing
term is weighted per class (w_v, and W in A_n), as torch does; it is not w_t times the unweighted form.

Rows are independent: `prange` over rows. Targets and shapes are range-checked in Python beforehand.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, log

import numpy as np

from minigrad.kernels._rowsum cimport row_dot_centered
from minigrad.kernels._vmath cimport mg_exp_shift2_f, mg_max_f, mg_sum_dev_f, mg_sum_exp_f
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


cdef inline double _row_smooth(const floating* z, const floating* w, const floating* ones,
                               Py_ssize_t V, floating m) noexcept nogil:
    """sum_c w_c (m - z_c) (w = 1 when w is NULL; `ones` is V ones, for the vectorised float sum)."""
    cdef Py_ssize_t c
    cdef double s = 0.0
    if w == NULL:
        if floating is float:
            s = -<double>mg_sum_dev_f(z, V, m)
        else:
            for c in range(V):
                s = s + (m - z[c])
    else:
        s = -row_dot_centered(w, ones, z, V, m)
    return s


cdef const floating* _class_weight_ptr(object class_weight, const floating[:, ::1] logits,
                                       str op) except? NULL:
    """Pointer to class_weight's data (NULL for None) after checking it is (V,) of logits' dtype."""
    cdef const floating[::1] cw
    if class_weight is None:
        return NULL
    cw = class_weight                     # dtype / rank / contiguity, or ValueError
    check_kernel_args(op, "logits:N,V class_weight:V", logits, class_weight)
    return &cw[0]                         # V >= 1; the caller keeps class_weight alive


cdef double _check_smoothing(str op, double label_smoothing) except -1.0:
    if not (0.0 <= label_smoothing <= 1.0):
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    return label_smoothing


# logits: (N, V), targets: (N,), class_weight: (V,) or None -> loss: (N,) (0 where ignored),
# row_max, row_logsum: (N,)
def cross_entropy_forward(const floating[:, ::1] logits, const long long[::1] targets,
                          long long ignore_index, floating[::1] loss, floating[::1] row_max,
                          floating[::1] row_logsum, class_weight=None, double label_smoothing=0.0):
    """row_max[n] = max_v z[n, v], row_logsum[n] = log sum_v exp(z[n, v] - row_max[n]);
    loss[n] = (1 - eps) w_t ((row_max[n] - z[n, t]) + row_logsum[n])
              + (eps / V) (sum_c w_c (row_max[n] - z[n, c]) + W row_logsum[n])
    (0 if t == ignore_index; w = 1 when class_weight is None)."""
    op = "cross_entropy_forward"
    check_kernel_args(op, "logits:N,V targets:N loss:N row_max:N row_logsum:N",
                      logits, targets, loss, row_max, row_logsum)
    check_kernel_scalar(op, "the class count", logits.shape[1], 1)
    check_kernel_index(op, "targets", targets, logits.shape[1], ignore_index)
    cdef double eps = _check_smoothing(op, label_smoothing)
    cdef const floating* w = _class_weight_ptr(class_weight, logits, op)
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n, c
    cdef const floating* zr
    cdef long long t
    cdef double ls, nll, W = V, keep = 1.0 - eps, share = eps / V
    cdef const floating[::1] ones_mv
    cdef const floating* ones = NULL
    if w != NULL and eps != 0.0:
        ones_mv = np.ones(V, np.float32 if floating is float else np.float64)
        ones = &ones_mv[0]
    with nogil:
        if w != NULL:
            W = 0.0
            for c in range(V):
                W = W + w[c]
        for n in prange(N, schedule="dynamic", chunksize=64):
            zr = &logits[n, 0]
            ls = _row_max_logsum(zr, V, &row_max[n])
            row_logsum[n] = <floating>ls
            t = targets[n]
            if t == ignore_index:
                loss[n] = 0
                continue
            nll = <double>(row_max[n] - zr[t]) + ls
            if w != NULL:
                nll = w[t] * nll
            if eps == 0.0:
                loss[n] = <floating>nll
            else:
                loss[n] = <floating>(keep * nll + share * (_row_smooth(zr, w, ones, V, row_max[n]) + W * ls))


# logits: (N, V), targets, row_max, row_logsum, weight: (N,), class_weight: (V,) or None
# -> glogits: (N, V)
def cross_entropy_backward(const floating[:, ::1] logits, const long long[::1] targets,
                           long long ignore_index, const floating[::1] row_max,
                           const floating[::1] row_logsum, const floating[::1] weight,
                           floating[:, ::1] glogits, class_weight=None, double label_smoothing=0.0):
    """glogits[n] = s (A p - (eps / V) w - (1 - eps) w_t onehot(t)), A = (1 - eps) w_t + (eps / V) W,
    p = softmax(z[n]), s = weight[n] (the per-row upstream scale); zero for ignored rows. Without
    class weights and smoothing: s (p - onehot(t))."""
    op = "cross_entropy_backward"
    check_kernel_args(op, "logits:N,V targets:N row_max:N row_logsum:N weight:N glogits:N,V",
                      logits, targets, row_max, row_logsum, weight, glogits)
    check_kernel_scalar(op, "the class count", logits.shape[1], 1)
    check_kernel_index(op, "targets", targets, logits.shape[1], ignore_index)
    cdef double eps = _check_smoothing(op, label_smoothing)
    cdef const floating* w = _class_weight_ptr(class_weight, logits, op)
    cdef Py_ssize_t N = logits.shape[0], V = logits.shape[1], n, v, c
    cdef const floating* zr
    cdef floating* gr
    cdef floating s, a, m, ls, sh
    cdef double wt, W = V, keep = 1.0 - eps, share = eps / V
    cdef long long t
    with nogil:
        if w != NULL:
            W = 0.0
            for c in range(V):
                W = W + w[c]
        for n in prange(N, schedule="dynamic", chunksize=64):
            zr = &logits[n, 0]
            gr = &glogits[n, 0]
            t = targets[n]
            if t == ignore_index:
                for v in range(V):
                    gr[v] = 0
                continue
            s = weight[n]
            wt = 1.0 if w == NULL else <double>w[t]
            a = <floating>(s * (keep * wt + share * W))      # = s exactly without weights and eps
            m = row_max[n]
            ls = row_logsum[n]
            if floating is float:
                mg_exp_shift2_f(zr, gr, V, m, ls, a)
            else:
                for v in range(V):
                    gr[v] = a * exp((zr[v] - m) - ls)
            if eps != 0.0:
                sh = <floating>(s * share)
                if w == NULL:
                    for v in range(V):
                        gr[v] = gr[v] - sh
                else:
                    for v in range(V):
                        gr[v] = gr[v] - sh * w[v]
            gr[t] -= <floating>(s * (keep * wt))
