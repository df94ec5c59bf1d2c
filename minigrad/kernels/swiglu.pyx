"""SwiGLU gate: h = silu(g) * u with silu(g) = g * sigmoid(g).

With s = sigmoid(g):  dsilu/dg = s * (1 + g * (1 - s)), so
    gg = gh * u * s * (1 + g * (1 - s))
    gu = gh * g * s
Elementwise: `prange` over rows, one row of F features each.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp

from minigrad.kernels._vmath cimport mg_silu_mul_backward_f, mg_silu_mul_f
from minigrad.kernels.validate import check_kernel_args


cdef inline double _sigmoid(double g) noexcept nogil:
    return 1.0 / (1.0 + exp(-g))


# gate, up: (N, F) -> h: (N, F)
def swiglu_forward(const floating[:, ::1] gate, const floating[:, ::1] up, floating[:, ::1] h):
    """h = gate * sigmoid(gate) * up."""
    check_kernel_args("swiglu_forward", "gate:N,F up:N,F h:N,F", gate, up, h)
    cdef Py_ssize_t N = gate.shape[0], F = gate.shape[1], n, f
    cdef const floating* gr
    cdef const floating* ur
    cdef floating* hr
    cdef floating g
    with nogil:
        for n in prange(N, schedule="static"):
            gr = &gate[n, 0]
            ur = &up[n, 0]
            hr = &h[n, 0]
            if floating is float:
                mg_silu_mul_f(gr, ur, hr, F)
            else:
                for f in range(F):
                    g = gr[f]
                    hr[f] = g * _sigmoid(g) * ur[f]


# gh, gate, up: (N, F) -> ggate, gup: (N, F)
def swiglu_backward(const floating[:, ::1] gh, const floating[:, ::1] gate,
                    const floating[:, ::1] up, floating[:, ::1] ggate, floating[:, ::1] gup):
    """ggate = gh * up * s * (1 + gate * (1 - s)), gup = gh * gate * s, s = sigmoid(gate)."""
    check_kernel_args("swiglu_backward", "gh:N,F gate:N,F up:N,F ggate:N,F gup:N,F",
                      gh, gate, up, ggate, gup)
    cdef Py_ssize_t N = gate.shape[0], F = gate.shape[1], n, f
    cdef const floating* ghr
    cdef const floating* gr
    cdef const floating* ur
    cdef floating* ggr
    cdef floating* gur
    cdef floating g, s
    with nogil:
        for n in prange(N, schedule="static"):
            ghr = &gh[n, 0]
            gr = &gate[n, 0]
            ur = &up[n, 0]
            ggr = &ggate[n, 0]
            gur = &gup[n, 0]
            if floating is float:
                mg_silu_mul_backward_f(ghr, gr, ur, ggr, gur, F)
            else:
                for f in range(F):
                    g = gr[f]
                    s = _sigmoid(g)
                    ggr[f] = ghr[f] * ur[f] * s * (1 + g * (1 - s))
                    gur[f] = ghr[f] * g * s
