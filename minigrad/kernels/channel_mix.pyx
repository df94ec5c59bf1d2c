"""Elementwise part of the RWKV-7 channel-mix: a = relu(h)^2 (h = xk Wk^T from BLAS); only a is kept
for the backward (the value-weight gradient needs it, and relu(h) = sqrt(a)).

The token shift is minigrad.kernels.token_shift; the GEMMs run in numpy/BLAS.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt, sqrtf
from minigrad.kernels.validate import check_kernel_args

# Below this many rows a parallel region costs more than it saves (one token at a time: every
# region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_ROWS = 64


# h: (M, F) -> a: (M, F) = relu(h)^2 (a may be h: in place)
def relu_square_forward(const floating[:, ::1] h, floating[:, ::1] a):
    """a = max(h, 0)^2."""
    check_kernel_args("relu_square_forward", "h:M,F a:M,F", h, a)
    cdef Py_ssize_t M = h.shape[0], F = h.shape[1], m, f
    cdef floating x
    cdef floating zero = 0
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            for f in range(F):
                x = h[m, f] if h[m, f] > zero else zero
                a[m, f] = x * x


# ga: (M, F) grad of a (in place -> grad of h); a: (M, F) the forward's relu(h)^2
def relu_square_backward(floating[:, ::1] ga, const floating[:, ::1] a):
    """gh = ga * 2 relu(h) = ga * 2 sqrt(a): IEEE sqrt(fl(p * p)) is exactly p for p >= 0 unless p * p
    under- or overflows (p < ~1e-19 in float32: a gradient of 2 p ga ~ 1e-19 ga becomes 0)."""
    check_kernel_args("relu_square_backward", "ga:M,F a:M,F", ga, a)
    cdef Py_ssize_t M = a.shape[0], F = a.shape[1], m, f
    cdef floating two = 2        # typed: a bare 2 would be the double 2.0
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            for f in range(F):
                if floating is float:
                    ga[m, f] = two * ga[m, f] * sqrtf(a[m, f])
                else:
                    ga[m, f] = two * ga[m, f] * sqrt(a[m, f])
