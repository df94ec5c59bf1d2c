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
from libc.string cimport memcpy

from minigrad.kernels.validate import check_kernel_args, check_kernel_index, check_kernel_scalar


cdef inline void _rotate(const floating* x, floating* y, const floating* c, const floating* s,
                         Py_ssize_t half, bint interleaved, floating sign) noexcept nogil:
    """y = R(sign * angle) x for one head vector of 2 * half features (c, s: its table row)."""
    cdef Py_ssize_t i
    cdef floating x0, x1, si
    if interleaved:
        for i in range(half):
            si = s[i] * sign
            x0 = x[2 * i]
            x1 = x[2 * i + 1]
            y[2 * i] = x0 * c[i] - x1 * si
            y[2 * i + 1] = x0 * si + x1 * c[i]
    else:
        for i in range(half):
            si = s[i] * sign
            x0 = x[i]
            x1 = x[i + half]
            y[i] = x0 * c[i] - x1 * si
            y[i + half] = x0 * si + x1 * c[i]


cdef void _rope_rows(const floating[:, :, :] x, floating[:, :, :] y,
                     const floating[:, ::1] cos, const floating[:, ::1] sin,
                     const long long[::1] positions, int pos_axis,
                     bint interleaved, floating sign) noexcept nogil:
    cdef Py_ssize_t A = x.shape[0], M = x.shape[1], half = x.shape[2] // 2
    cdef Py_ssize_t T = positions.shape[0], r, a, m, p
    for r in prange(A * M, schedule="dynamic", chunksize=64):
        a = r // M
        m = r % M
        p = positions[(a if pos_axis == 0 else m) % T]
        _rotate(&x[a, m, 0], &y[a, m, 0], &cos[p, 0], &sin[p, 0], half, interleaved, sign)


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


def _check_qkv(op, packed, q, k, v, cos, sin, positions):
    """Shapes and unit inner strides of a packed q/k/v rope call (before nogil)."""
    dims = check_kernel_args(op, "packed:B,T,W,D q:B,T,Q,D k:B,T,K,D v:B,T,K,D cos:P,E sin:P,E "
                             "positions:T", packed, q, k, v, cos, sin, positions)
    if dims["W"] != dims["Q"] + 2 * dims["K"]:
        raise ValueError(f"{op}: packed has {dims['W']} heads, expected q {dims['Q']} + 2 x kv {dims['K']}")
    if dims["D"] != 2 * dims["E"]:
        raise ValueError(f"{op}: rows of size {dims['D']} need tables of {dims['D'] // 2} columns, "
                         f"got {dims['E']}")
    for name, a in (("packed", packed), ("q", q), ("k", k), ("v", v)):
        if dims["D"] > 1 and a.strides[3] != a.itemsize:
            raise ValueError(f"{op}: {name} needs unit stride on its last axis, got strides {a.strides}")
    check_kernel_index(op, "positions", positions, dims["P"])


cdef inline floating* _at(char* base, const Py_ssize_t* strides, Py_ssize_t b, Py_ssize_t t,
                          Py_ssize_t h, floating* like) noexcept nogil:
    """Element (b, t, h, 0) of a 4-D view given its base pointer and byte strides."""
    return <floating*>(base + b * strides[0] + t * strides[1] + h * strides[2])


cdef void _qkv_rows(char* pk, const Py_ssize_t* spk, char* q, const Py_ssize_t* sq,
                    char* k, const Py_ssize_t* sk, char* v, const Py_ssize_t* sv,
                    Py_ssize_t B, Py_ssize_t T, Py_ssize_t Hq, Py_ssize_t Hkv, Py_ssize_t hd,
                    const floating[:, ::1] cos, const floating[:, ::1] sin,
                    const long long[::1] positions, bint interleaved, bint to_packed) noexcept nogil:
    """Per (b, t): q, k = R(pos) packed's q, k heads and v = its v heads (to_packed False), or
    packed = [R(-pos) q | R(-pos) k | v] (to_packed True)."""
    cdef Py_ssize_t half = hd // 2, r, b, t, h, p
    cdef floating sign = -1 if to_packed else 1
    cdef floating* like = NULL
    cdef floating* src
    cdef floating* dst
    cdef floating* head
    for r in prange(B * T, schedule="dynamic", chunksize=16):
        b = r // T
        t = r % T
        p = positions[t]
        for h in range(Hq + 2 * Hkv):
            if h < Hq:
                head = _at(q, sq, b, t, h, like)
            elif h < Hq + Hkv:
                head = _at(k, sk, b, t, h - Hq, like)
            else:
                head = _at(v, sv, b, t, h - Hq - Hkv, like)
            src = _at(pk, spk, b, t, h, like)
            dst = head
            if to_packed:
                src, dst = head, src
            if h < Hq + Hkv:
                _rotate(src, dst, &cos[p, 0], &sin[p, 0], half, interleaved, sign)
            else:
                memcpy(dst, src, hd * sizeof(floating))


# packed: (B, T, Hq + 2 Hkv, hd) = one q/k/v projection; q: (B, T, Hq, hd), k, v: (B, T, Hkv, hd)
# views with any strides (unit stride on hd: a (B, H, T, hd) array enters transposed);
# cos, sin: (P, hd/2); positions: (T,) rows of the tables.
def qkv_rope_forward(const floating[:, :, :, :] packed, floating[:, :, :, :] q, floating[:, :, :, :] k,
                     floating[:, :, :, :] v, const floating[:, ::1] cos, const floating[:, ::1] sin,
                     const long long[::1] positions, bint interleaved):
    """q = R(pos) packed[.., :Hq, :], k = R(pos) packed[.., Hq:Hq+Hkv, :], v = packed[.., Hq+Hkv:, :]."""
    _check_qkv("qkv_rope_forward", packed, q, k, v, cos, sin, positions)
    if packed.shape[0] * packed.shape[1] == 0:
        return
    with nogil:
        _qkv_rows(<char*>&packed[0, 0, 0, 0], packed.strides, <char*>&q[0, 0, 0, 0], q.strides,
                  <char*>&k[0, 0, 0, 0], k.strides, <char*>&v[0, 0, 0, 0], v.strides,
                  packed.shape[0], packed.shape[1], q.shape[2], k.shape[2], packed.shape[3],
                  cos, sin, positions, interleaved, False)


# gq, gk, gv: views as q, k, v of qkv_rope_forward -> gpacked: (B, T, Hq + 2 Hkv, hd)
def qkv_rope_backward(const floating[:, :, :, :] gq, const floating[:, :, :, :] gk,
                      const floating[:, :, :, :] gv, floating[:, :, :, :] gpacked,
                      const floating[:, ::1] cos, const floating[:, ::1] sin,
                      const long long[::1] positions, bint interleaved):
    """gpacked = [R(-pos) gq | R(-pos) gk | gv] per (b, t) (a rotation's transpose is its inverse)."""
    _check_qkv("qkv_rope_backward", gpacked, gq, gk, gv, cos, sin, positions)
    if gpacked.shape[0] * gpacked.shape[1] == 0:
        return
    with nogil:
        _qkv_rows(<char*>&gpacked[0, 0, 0, 0], gpacked.strides, <char*>&gq[0, 0, 0, 0], gq.strides,
                  <char*>&gk[0, 0, 0, 0], gk.strides, <char*>&gv[0, 0, 0, 0], gv.strides,
                  gpacked.shape[0], gpacked.shape[1], gq.shape[2], gk.shape[2], gpacked.shape[3],
                  cos, sin, positions, interleaved, True)
