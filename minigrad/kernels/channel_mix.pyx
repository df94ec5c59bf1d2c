"""Elementwise part of the RWKV-7 channel-mix: p = relu(h), a = p^2 (h = xk Wk^T from BLAS).

The token shift is minigrad.kernels.token_shift; the GEMMs run in numpy/BLAS.
"""
from cython cimport floating
from cython.parallel cimport prange
from minigrad.kernels.validate import check_kernel_args

# Below this many rows a parallel region costs more than it saves (one token at a time: every
# region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_ROWS = 64


# h: (M, F) -> p: (M, F) = relu(h), a: (M, F) = relu(h)^2
def relu_square_forward(const floating[:, ::1] h, floating[:, ::1] p, floating[:, ::1] a):
    """p = max(h, 0);  a = p * p."""
    check_kernel_args("relu_square_forward", "h:M,F p:M,F a:M,F", h, p, a)
    cdef Py_ssize_t M = h.shape[0], F = h.shape[1], m, f
    cdef floating x
    cdef floating zero = 0
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            for f in range(F):
                x = h[m, f] if h[m, f] > zero else zero
                p[m, f] = x
                a[m, f] = x * x


# ga: (M, F) grad of a (in place -> grad of h), p: (M, F) relu(h) -> a: (M, F) = p^2 (recomputed)
def relu_square_backward(floating[:, ::1] ga, const floating[:, ::1] p, floating[:, ::1] a):
    """gh = ga * 2 p  (d relu(h)^2 / dh = 2 relu(h));  a = p^2 for the value-weight GEMM."""
    check_kernel_args("relu_square_backward", "ga:M,F p:M,F a:M,F", ga, p, a)
    cdef Py_ssize_t M = p.shape[0], F = p.shape[1], m, f
    cdef floating two = 2        # typed: a bare 2 would be the double 2.0
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            for f in range(F):
                ga[m, f] = two * ga[m, f] * p[m, f]
                a[m, f] = p[m, f] * p[m, f]
