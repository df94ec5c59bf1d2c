# Row reductions for the fused-type kernels, one place for the float32 / float64 split: float32
# sums in vector lanes (_vmath.h, `omp simd reduction`), float64 in scalar double loops (the
# path for gradient checks). All return double.
from cython cimport floating

from minigrad.kernels._vmath cimport (mg_dot3_f, mg_dot4_centered_f, mg_dot_centered_f, mg_dot_f,
                                      mg_sum_dev_f, mg_sum_f, mg_sum_sqdev_f)


cdef inline double row_sum(const floating* x, Py_ssize_t n) noexcept nogil:
    """sum_j x_j"""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if floating is float:
        s = mg_sum_f(x, n)
    else:
        for j in range(n):
            s = s + x[j]
    return s


cdef inline double row_mean(const floating* x, Py_ssize_t n) noexcept nogil:
    """mean_j x_j as a floating value, with one correction pass: mu0 = sum/n, then mu0 + mean_j
    (x_j - mu0). The first sum's rounding (vector lanes) is corrected, so a constant row's mean is
    exact, as a normalisation of it needs (x - mean = 0, not the rounding error)."""
    cdef Py_ssize_t j
    cdef double d = 0.0
    cdef floating mu0 = <floating>(row_sum(x, n) / n)
    if floating is float:
        d = mg_sum_dev_f(x, n, mu0)
    else:
        for j in range(n):
            d = d + (x[j] - mu0)
    return mu0 + d / n


cdef inline double row_sqdev(const floating* x, Py_ssize_t n, double mu) noexcept nogil:
    """sum_j (x_j - mu)^2"""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if floating is float:
        s = mg_sum_sqdev_f(x, n, <float>mu)
    else:
        for j in range(n):
            s = s + (x[j] - mu) * (x[j] - mu)
    return s


cdef inline double row_dot(const floating* a, const floating* b, Py_ssize_t n) noexcept nogil:
    """sum_j a_j b_j"""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if floating is float:
        s = mg_dot_f(a, b, n)
    else:
        for j in range(n):
            s = s + a[j] * b[j]
    return s


cdef inline double row_dot3(const floating* a, const floating* b, const floating* c,
                            Py_ssize_t n) noexcept nogil:
    """sum_j a_j b_j c_j"""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if floating is float:
        s = mg_dot3_f(a, b, c, n)
    else:
        for j in range(n):
            s = s + a[j] * b[j] * c[j]
    return s


cdef inline double row_dot_centered(const floating* a, const floating* b, const floating* x,
                                    Py_ssize_t n, double mu) noexcept nogil:
    """sum_j a_j b_j (x_j - mu)"""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if floating is float:
        s = mg_dot_centered_f(a, b, x, n, <float>mu)
    else:
        for j in range(n):
            s = s + a[j] * b[j] * (x[j] - mu)
    return s


cdef inline double row_dot3_centered(const floating* a, const floating* b, const floating* c,
                                     const floating* x, Py_ssize_t n, double mu) noexcept nogil:
    """sum_j a_j b_j c_j (x_j - mu); with c = a, x = b, mu = 0: sum_j (a_j b_j)^2"""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if floating is float:
        s = mg_dot4_centered_f(a, b, c, x, n, <float>mu)
    else:
        for j in range(n):
            s = s + a[j] * b[j] * c[j] * (x[j] - mu)
    return s
