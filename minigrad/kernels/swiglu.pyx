"""SwiGLU gate: h = silu(g) * u with silu(g) = g * sigmoid(g).

With s = sigmoid(g):  dsilu/dg = s * (1 + g * (1 - s)), so
    gg = gh * u * s * (1 + g * (1 - s))
    gu = gh * (g * s)
silu(g) = g * s is formed first, as autograd of silu(g) * u does (PyTorch included): gh * g can
overflow to inf where s is exactly 0 (g = -3e38, gh = -2.5), and inf * 0 gave a NaN gu where the
answer is 0; g * s cannot overflow (0 <= s <= 1). The gg product keeps PyTorch's order,
((gh * u) * s) * (1 + g (1 - s)), so it is inf / NaN exactly where PyTorch's is.
Elementwise: `prange` over rows, one row of F features each, handed out dynamically in tasks of
32 rows (on a machine shared with other jobs a preempted thread then no longer holds up the pass,
as it does with two static halves). Rows may be strided (gate and up read as the two halves of one
packed (N, 2F) projection) but each row must be contiguous.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp

from minigrad.kernels._vmath cimport mg_silu_mul_backward_f, mg_silu_mul_f
from minigrad.kernels.validate import check_kernel_args


cdef inline double _sigmoid(double g) noexcept nogil:
    return 1.0 / (1.0 + exp(-g))


def _check_rows(op, names, *arrays):
    for name, a in zip(names.split(), arrays):
        if a.shape[1] > 1 and a.strides[1] != a.itemsize:
            raise ValueError(f"{op}: {name} rows must be contiguous, got strides {a.strides}")


# gate, up: (N, F) views with contiguous rows -> h: (N, F)
def swiglu_forward(const floating[:, :] gate, const floating[:, :] up, floating[:, ::1] h):
    """h = gate * sigmoid(gate) * up."""
    check_kernel_args("swiglu_forward", "gate:N,F up:N,F h:N,F", gate, up, h)
    _check_rows("swiglu_forward", "gate up", gate, up)
    cdef Py_ssize_t N = gate.shape[0], F = gate.shape[1], n, f
    cdef const floating* gr
    cdef const floating* ur
    cdef floating* hr
    cdef floating g
    with nogil:
        for n in prange(N, schedule="dynamic", chunksize=32):
            gr = &gate[n, 0]
            ur = &up[n, 0]
            hr = &h[n, 0]
            if floating is float:
                mg_silu_mul_f(gr, ur, hr, F)
            else:
                for f in range(F):
                    g = gr[f]
                    hr[f] = g * _sigmoid(g) * ur[f]


# gh: (N, F), gate, up: (N, F) views with contiguous rows -> ggate, gup: (N, F) views
def swiglu_backward(const floating[:, ::1] gh, const floating[:, :] gate,
                    const floating[:, :] up, floating[:, :] ggate, floating[:, :] gup):
    """ggate = gh * up * s * (1 + gate * (1 - s)), gup = gh * (gate * s), s = sigmoid(gate)."""
    check_kernel_args("swiglu_backward", "gh:N,F gate:N,F up:N,F ggate:N,F gup:N,F",
                      gh, gate, up, ggate, gup)
    _check_rows("swiglu_backward", "gate up ggate gup", gate, up, ggate, gup)
    cdef Py_ssize_t N = gate.shape[0], F = gate.shape[1], n, f
    cdef const floating* ghr
    cdef const floating* gr
    cdef const floating* ur
    cdef floating* ggr
    cdef floating* gur
    cdef floating g, s
    with nogil:
        for n in prange(N, schedule="dynamic", chunksize=32):
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
                    gur[f] = ghr[f] * (g * s)
