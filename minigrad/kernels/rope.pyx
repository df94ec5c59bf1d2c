"""Rotary position embedding: rotate pairs of features by position-dependent angles.

Pair i (i < hd/2) of a head vector is (x[2i], x[2i+1]) in the interleaved layout and
(x[i], x[i + hd/2]) in the half-split layout HF Llama uses. With angle a = pos * base^(-2i/hd),
    y0 = x0 cos a - x1 sin a
    y1 = x0 sin a + x1 cos a
The map is a rotation, so its vector-Jacobian product is the inverse rotation (angle -a):
the backward is the forward run with `sign = -1`.
"""
from cython cimport floating
from cython.parallel cimport prange

from minigrad.kernels.validate import check_kernel_args, check_kernel_index, check_kernel_scalar


cdef void _rope_rows(const floating[:, ::1] x, floating[:, ::1] y,
                    const floating[:, ::1] cos, const floating[:, ::1] sin,
                    const long long[::1] positions, Py_ssize_t row_div,
                    bint interleaved, floating sign) noexcept nogil:
    cdef Py_ssize_t R = x.shape[0], hd = x.shape[1], half = hd // 2
    cdef Py_ssize_t T = positions.shape[0], r, i, p
    cdef const floating* xr
    cdef floating* yr
    cdef const floating* cr
    cdef const floating* sr
    cdef floating x0, x1, c, s
    for r in prange(R, schedule="static"):
        p = positions[(r // row_div) % T]
        xr = &x[r, 0]
        yr = &y[r, 0]
        cr = &cos[p, 0]
        sr = &sin[p, 0]
        if interleaved:
            for i in range(half):
                c = cr[i]
                s = sr[i] * sign
                x0 = xr[2 * i]
                x1 = xr[2 * i + 1]
                yr[2 * i] = x0 * c - x1 * s
                yr[2 * i + 1] = x0 * s + x1 * c
        else:
            for i in range(half):
                c = cr[i]
                s = sr[i] * sign
                x0 = xr[i]
                x1 = xr[i + half]
                yr[i] = x0 * c - x1 * s
                yr[i + half] = x0 * s + x1 * c


def _check_rope(op, x, y, cos, sin, positions, row_div):
    """Shapes, table rows and row_div of a rope kernel call (before nogil)."""
    dims = check_kernel_args(op, "x:R,D y:R,D cos:P,E sin:P,E positions:T", x, y, cos, sin, positions)
    if dims["D"] != 2 * dims["E"]:
        raise ValueError(f"{op}: rows of size {dims['D']} need tables of {dims['D'] // 2} columns, "
                         f"got {dims['E']}")
    check_kernel_scalar(op, "row_div", row_div, 1)
    if dims["R"]:
        check_kernel_scalar(op, "the number of positions", dims["T"], 1)
    check_kernel_index(op, "positions", positions, dims["P"])


# x, y: (R, hd) rows of head vectors; row r sits at position positions[(r // row_div) % T]
# (row_div = 1 for (B, H, T, hd), H for (B, T, H, hd)); cos, sin: (P, hd/2) tables;
# positions: (T,) int64 row indices into the tables.
def rope_forward(const floating[:, ::1] x, floating[:, ::1] y,
                 const floating[:, ::1] cos, const floating[:, ::1] sin,
                 const long long[::1] positions, Py_ssize_t row_div, bint interleaved):
    """y = R(pos) x for every row."""
    _check_rope("rope_forward", x, y, cos, sin, positions, row_div)
    with nogil:
        _rope_rows(x, y, cos, sin, positions, row_div, interleaved, 1)


# gy, gx: (R, hd); the rest as in rope_forward.
def rope_backward(const floating[:, ::1] gy, floating[:, ::1] gx,
                  const floating[:, ::1] cos, const floating[:, ::1] sin,
                  const long long[::1] positions, Py_ssize_t row_div, bint interleaved):
    """gx = R(pos)^T gy = R(-pos) gy for every row."""
    _check_rope("rope_backward", gy, gx, cos, sin, positions, row_div)
    with nogil:
        _rope_rows(gy, gx, cos, sin, positions, row_div, interleaved, -1)
