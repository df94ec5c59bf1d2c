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


cdef void _rope_rows(const floating[:, :, :] x, floating[:, :, :] y,
                     const floating[:, ::1] cos, const floating[:, ::1] sin,
                     const long long[::1] positions, int pos_axis,
                     bint interleaved, floating sign) noexcept nogil:
    cdef Py_ssize_t A = x.shape[0], M = x.shape[1], hd = x.shape[2], half = hd // 2
    cdef Py_ssize_t T = positions.shape[0], r, a, m, i, p
    cdef const floating* xr
    cdef floating* yr
    cdef const floating* cr
    cdef const floating* sr
    cdef floating x0, x1, c, s
    for r in prange(A * M, schedule="static"):
        a = r // M
        m = r % M
        p = positions[(a if pos_axis == 0 else m) % T]
        xr = &x[a, m, 0]
        yr = &y[a, m, 0]
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


def _check_rope(op, x, y, cos, sin, positions, pos_axis):
    """Shapes, unit inner strides, table rows and pos_axis of a rope kernel call (before nogil)."""
    dims = check_kernel_args(op, "x:A,M,D y:A,M,D cos:P,E sin:P,E positions:T", x, y, cos, sin, positions)
    if dims["D"] != 2 * dims["E"]:
        raise ValueError(f"{op}: rows of size {dims['D']} need tables of {dims['D'] // 2} columns, "
                         f"got {dims['E']}")
    for name, a in (("x", x), ("y", y)):
        if dims["D"] > 1 and a.strides[2] != a.itemsize:
            raise ValueError(f"{op}: {name} needs unit stride on its last axis, got strides {a.strides}")
    check_kernel_scalar(op, "pos_axis", pos_axis, 0, 1)
    if dims["A"] * dims["M"]:
        check_kernel_scalar(op, "the number of positions", dims["T"], 1)
    check_kernel_index(op, "positions", positions, dims["P"])


# x, y: (A, M, hd) views (unit stride on hd) of head vectors; vector (a, m) sits at position
# positions[a % T] (pos_axis 0: x is (B*T, H, hd)) or positions[m % T] (pos_axis 1: (B*H, T, hd));
# cos, sin: (P, hd/2) tables; positions: (T,) int64 row indices into the tables.
def rope_forward(const floating[:, :, :] x, floating[:, :, :] y,
                 const floating[:, ::1] cos, const floating[:, ::1] sin,
                 const long long[::1] positions, int pos_axis, bint interleaved):
    """y = R(pos) x for every head vector."""
    _check_rope("rope_forward", x, y, cos, sin, positions, pos_axis)
    with nogil:
        _rope_rows(x, y, cos, sin, positions, pos_axis, interleaved, 1)


# gy, gx: (A, M, hd) views; the rest as in rope_forward.
def rope_backward(const floating[:, :, :] gy, floating[:, :, :] gx,
                  const floating[:, ::1] cos, const floating[:, ::1] sin,
                  const long long[::1] positions, int pos_axis, bint interleaved):
    """gx = R(pos)^T gy = R(-pos) gy for every head vector."""
    _check_rope("rope_backward", gy, gx, cos, sin, positions, pos_axis)
    with nogil:
        _rope_rows(gy, gx, cos, sin, positions, pos_axis, interleaved, -1)
