"""Causal scaled-dot-product attention with grouped-query heads and a streaming softmax.

Arrays are logical (B, H, T, hd) views with arbitrary element strides on the first three axes
(unit stride on hd), so (B, T, H, hd) projections and KV-cache slices enter without copies.
Query head h reads key/value head h // (Hq / Hkv). Query row i (of Tq) sits at absolute position
i + Tk - Tq and sees keys j <= i + Tk - Tq.

Forward (per query block of BR rows, streaming over key blocks of BC keys, online softmax):
    s_ij = scale * q_i . k_j,  m_i = max_j s_ij,  l_i = sum_j exp(s_ij - m_i)
    o_i = sum_j exp(s_ij - m_i) v_j / l_i,  lse_i = m_i + log l_i    (only o and lse are stored)
Backward, recomputing p_ij = exp(s_ij - lse_i) block by block from the saved lse:
    D_i = go_i . o_i,  ds_ij = p_ij (go_i . v_j - D_i)
    gv_j = sum_i p_ij go_i,  gq_i = scale sum_j ds_ij k_j,  gk_j = scale sum_i ds_ij q_i
Scratch per thread: one BR x BC score block plus a transposed hd x BC key (and value) block,
so memory beyond q, k, v, o is O(T) per head (lse) -- never T x T.

Two drivers share these maths: `attention_forward/backward` run everything in C (nogil, prange
over (batch, head, block)), and the `*_block_*` helpers do the softmax parts of the
BLAS-per-block path in ops/attention.py (see docs/gpt.md for the measured choice).
"""
from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.math cimport INFINITY, exp, log
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

from minigrad.kernels._vmath cimport mg_expf, mg_max_f, mg_scale_f, mg_softmax_grad_row_f, mg_sum_exp_f
from minigrad.kernels._vmath cimport mg_exp_affine_f

cdef enum:
    BR = 32   # query rows per block
    BC = 64   # keys per block


cdef inline floating _exp(floating x) noexcept nogil:
    if floating is float:
        return mg_expf(x)
    else:
        return exp(x)


cdef inline void _transpose_block(const floating* src, Py_ssize_t st, Py_ssize_t n, Py_ssize_t hd,
                                  floating* dst) noexcept nogil:
    """dst[d * BC + j] = src[j * st + d] for j < n: a key/value block laid out hd x BC."""
    cdef Py_ssize_t j, d
    for j in range(n):
        for d in range(hd):
            dst[d * BC + j] = src[j * st + d]


cdef inline void _scores(const floating* q, Py_ssize_t qst, Py_ssize_t nr, const floating* kt,
                         Py_ssize_t nc, Py_ssize_t hd, floating scale, floating* s) noexcept nogil:
    """s[i * BC + j] = scale * q_i . k_j for i < nr, j < nc (kt is the transposed key block)."""
    cdef Py_ssize_t i, j, d
    cdef floating qd
    cdef floating* sr
    cdef const floating* kr
    for i in range(nr):
        sr = s + i * BC
        for j in range(nc):
            sr[j] = 0
        for d in range(hd):
            qd = q[i * qst + d] * scale
            kr = kt + d * BC
            for j in range(nc):
                sr[j] += qd * kr[j]


cdef void _forward_block(const floating* q, Py_ssize_t qst, const floating* k, const floating* v,
                         Py_ssize_t kst, floating* o, Py_ssize_t ost, floating* lse,
                         Py_ssize_t i0, Py_ssize_t nr, Py_ssize_t past, Py_ssize_t hd,
                         floating scale, floating* s, floating* kt, floating* acc,
                         floating* m, floating* l) noexcept nogil:
    """Rows i0 .. i0+nr of one head; q, o point at row 0 of the head, k, v at key 0."""
    cdef Py_ssize_t i, j, d, j0, nc, lim, kend = i0 + nr + past
    cdef floating mx, corr, p, rs
    cdef floating* sr
    cdef floating* ar
    cdef const floating* vr
    for i in range(nr):
        m[i] = -INFINITY
        l[i] = 0
    memset(acc, 0, nr * hd * sizeof(floating))
    j0 = 0
    while j0 < kend:
        nc = min(BC, kend - j0)
        _transpose_block(k + j0 * kst, kst, nc, hd, kt)
        _scores(q + i0 * qst, qst, nr, kt, nc, hd, scale, s)
        for i in range(nr):
            lim = min(nc, i0 + i + past + 1 - j0)   # keys j0 + j < lim are visible
            if lim <= 0:
                continue
            sr = s + i * BC
            ar = acc + i * hd
            mx = m[i]
            for j in range(lim):
                if sr[j] > mx:
                    mx = sr[j]
            corr = _exp(m[i] - mx)
            m[i] = mx
            rs = 0
            for j in range(lim):
                sr[j] = _exp(sr[j] - mx)
                rs = rs + sr[j]
            l[i] = l[i] * corr + rs
            for d in range(hd):
                ar[d] *= corr
            for j in range(lim):
                p = sr[j]
                vr = v + (j0 + j) * kst
                for d in range(hd):
                    ar[d] += p * vr[d]
        j0 = j0 + BC
    for i in range(nr):
        ar = acc + i * hd
        rs = 1 / l[i]
        for d in range(hd):
            o[(i0 + i) * ost + d] = ar[d] * rs
        lse[i0 + i] = m[i] + log(l[i])


def _check_attention(op, arrays, lse):
    """q, k, v, o[, go, gq, gk, gv] as (B, H, T, hd) views with a unit last stride; lse (B, Hq, Tq)."""
    q_like = ("q", "o", "go", "gq")
    names = ("q", "k", "v", "o", "go", "gq", "gk", "gv")[:len(arrays)]
    spec = " ".join(f"{n}:B,H,T,D" if n in q_like else f"{n}:B,G,S,D" for n in names)
    dims = check_kernel_args(op, spec + " lse:B,H,T", *arrays, lse)
    for n, a in zip(names, arrays):
        if a.shape[3] > 1 and a.strides[3] != a.itemsize:
            raise ValueError(f"{op}: {n} needs unit stride on its last axis, got strides {a.strides}")
        if any(s % a.itemsize for s in a.strides[:4]):
            raise ValueError(f"{op}: {n} has strides {a.strides} that are not whole elements")
    if dims["G"] < 1 or dims["H"] % dims["G"] or dims["S"] < dims["T"]:
        raise ValueError(f"{op}: q {arrays[0].shape} and k {arrays[1].shape} do not fit: need query heads "
                         "a multiple of kv heads and T_k >= T_q")


def _check_block(op, s, dp, lse, dd, i0, past):
    """s, dp (NH, nr, nk) for query rows i0 .. i0+nr of lse, dd (NH, Tq)."""
    dims = check_kernel_args(op, "s:Q,R,K dp:Q,R,K lse:Q,T dd:Q,T", s, dp, lse, dd)
    check_kernel_scalar(op, "i0", i0, 0, dims["T"] - dims["R"])
    check_kernel_scalar(op, "past", past, 0)


# q, o: (B, Hq, Tq, hd) strided views; k, v: (B, Hkv, Tk, hd) strided views; lse: (B, Hq, Tq)
def attention_forward(const floating[:, :, :, :] q, const floating[:, :, :, :] k,
                      const floating[:, :, :, :] v, floating[:, :, :, :] o,
                      floating[:, :, ::1] lse, double scale):
    """o = softmax(scale q k^T + causal mask) v per head, lse = row log-sum-exp (all in C)."""
    _check_attention("attention_forward", (q, k, v, o), lse)
    cdef Py_ssize_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], hd = q.shape[3]
    cdef Py_ssize_t Hkv = k.shape[1], Tk = k.shape[2], group = Hq // Hkv, past = Tk - Tq
    cdef Py_ssize_t nqb = (Tq + BR - 1) // BR, u, b, h, qb, i0
    cdef Py_ssize_t isz = sizeof(floating)
    cdef Py_ssize_t qs0 = q.strides[0] // isz, qs1 = q.strides[1] // isz, qst = q.strides[2] // isz
    cdef Py_ssize_t ks0 = k.strides[0] // isz, ks1 = k.strides[1] // isz, kst = k.strides[2] // isz
    cdef Py_ssize_t vs0 = v.strides[0] // isz, vs1 = v.strides[1] // isz
    cdef Py_ssize_t os0 = o.strides[0] // isz, os1 = o.strides[1] // isz, ost = o.strides[2] // isz
    cdef const floating* qp = &q[0, 0, 0, 0]
    cdef const floating* kp = &k[0, 0, 0, 0]
    cdef const floating* vp = &v[0, 0, 0, 0]
    cdef floating* op = &o[0, 0, 0, 0]
    cdef floating* lp = &lse[0, 0, 0]
    cdef floating* buf = NULL
    if v.strides[2] != k.strides[2]:
        raise ValueError("attention_forward: k and v must share the time stride")
    with nogil, parallel():
        buf = <floating*>malloc((BR * BC + hd * BC + BR * hd + 2 * BR) * isz)
        for u in prange(B * Hq * nqb, schedule="dynamic"):
            qb = u % nqb
            h = (u // nqb) % Hq
            b = u // (nqb * Hq)
            i0 = qb * BR
            _forward_block(qp + b * qs0 + h * qs1, qst,
                           kp + b * ks0 + (h // group) * ks1, vp + b * vs0 + (h // group) * vs1,
                           kst, op + b * os0 + h * os1, ost, lp + (b * Hq + h) * Tq,
                           i0, min(BR, Tq - i0), past, hd, <floating>scale,
                           buf, buf + BR * BC, buf + BR * BC + hd * BC,
                           buf + BR * BC + hd * BC + BR * hd,
                           buf + BR * BC + hd * BC + BR * hd + BR)
        free(buf)


cdef void _backward_block(const floating* q, const floating* k, const floating* v,
                          const floating* go, const floating* lse, const floating* dd,
                          Py_ssize_t qst, Py_ssize_t kst, Py_ssize_t gst,
                          floating* gq, floating* gk, floating* gv, Py_ssize_t gqst,
                          Py_ssize_t gkst, Py_ssize_t i0, Py_ssize_t nr, Py_ssize_t past,
                          Py_ssize_t hd, floating scale, floating* s, floating* dp,
                          floating* kt, floating* vt) noexcept nogil:
    """Accumulate the gradients of query rows i0 .. i0+nr of one head into gq, gk, gv."""
    cdef Py_ssize_t i, j, d, j0, nc, lim, kend = i0 + nr + past
    cdef floating p, ds, lse_i, d_i
    cdef floating* sr
    cdef floating* dpr
    cdef const floating* qr
    cdef const floating* gor
    cdef floating* gqr
    cdef floating* gkr
    cdef floating* gvr
    cdef const floating* kr
    j0 = 0
    while j0 < kend:
        nc = min(BC, kend - j0)
        _transpose_block(k + j0 * kst, kst, nc, hd, kt)
        _transpose_block(v + j0 * kst, kst, nc, hd, vt)
        _scores(q + i0 * qst, qst, nr, kt, nc, hd, scale, s)
        _scores(go + i0 * gst, gst, nr, vt, nc, hd, 1, dp)
        for i in range(nr):
            lim = min(nc, i0 + i + past + 1 - j0)
            if lim <= 0:
                continue
            sr = s + i * BC
            dpr = dp + i * BC
            lse_i = lse[i0 + i]
            d_i = dd[i0 + i]
            qr = q + (i0 + i) * qst
            gor = go + (i0 + i) * gst
            gqr = gq + (i0 + i) * gqst
            for j in range(lim):
                p = _exp(sr[j] - lse_i)
                ds = p * (dpr[j] - d_i) * scale
                gvr = gv + (j0 + j) * gkst
                gkr = gk + (j0 + j) * gkst
                kr = k + (j0 + j) * kst
                for d in range(hd):
                    gvr[d] += p * gor[d]
                    gkr[d] += ds * qr[d]
                    gqr[d] += ds * kr[d]
        j0 = j0 + BC


# q, o, go: (B, Hq, Tq, hd) views; k, v: (B, Hkv, Tk, hd); lse: (B, Hq, Tq);
# gq: (B, Hq, Tq, hd), gk, gv: (B, Hkv, Tk, hd) zero-filled views (accumulated into).
def attention_backward(const floating[:, :, :, :] q, const floating[:, :, :, :] k,
                       const floating[:, :, :, :] v, const floating[:, :, :, :] o,
                       const floating[:, :, ::1] lse, const floating[:, :, :, :] go,
                       floating[:, :, :, :] gq, floating[:, :, :, :] gk,
                       floating[:, :, :, :] gv, double scale):
    """Gradients of attention_forward from its saved o and lse (all in C).

    One task per (batch, kv head) owns gk/gv of that head and gq of its query-head group, so no
    two threads write the same row.
    """
    _check_attention("attention_backward", (q, k, v, o, go, gq, gk, gv), lse)
    cdef Py_ssize_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], hd = q.shape[3]
    cdef Py_ssize_t Hkv = k.shape[1], Tk = k.shape[2], group = Hq // Hkv, past = Tk - Tq
    cdef Py_ssize_t u, b, hk, h, i, d, i0
    cdef Py_ssize_t isz = sizeof(floating)
    cdef Py_ssize_t qs0 = q.strides[0] // isz, qs1 = q.strides[1] // isz, qst = q.strides[2] // isz
    cdef Py_ssize_t ks0 = k.strides[0] // isz, ks1 = k.strides[1] // isz, kst = k.strides[2] // isz
    cdef Py_ssize_t vs0 = v.strides[0] // isz, vs1 = v.strides[1] // isz
    cdef Py_ssize_t os0 = o.strides[0] // isz, os1 = o.strides[1] // isz, ost = o.strides[2] // isz
    cdef Py_ssize_t gs0 = go.strides[0] // isz, gs1 = go.strides[1] // isz
    cdef Py_ssize_t gst = go.strides[2] // isz
    cdef Py_ssize_t gqs0 = gq.strides[0] // isz, gqs1 = gq.strides[1] // isz
    cdef Py_ssize_t gqst = gq.strides[2] // isz
    cdef Py_ssize_t gks0 = gk.strides[0] // isz, gks1 = gk.strides[1] // isz
    cdef Py_ssize_t gkst = gk.strides[2] // isz
    cdef Py_ssize_t gvs0 = gv.strides[0] // isz, gvs1 = gv.strides[1] // isz
    cdef const floating* qp = &q[0, 0, 0, 0]
    cdef const floating* kp = &k[0, 0, 0, 0]
    cdef const floating* vp = &v[0, 0, 0, 0]
    cdef const floating* opp = &o[0, 0, 0, 0]
    cdef const floating* gop = &go[0, 0, 0, 0]
    cdef const floating* lp = &lse[0, 0, 0]
    cdef floating* gqp = &gq[0, 0, 0, 0]
    cdef floating* gkp = &gk[0, 0, 0, 0]
    cdef floating* gvp = &gv[0, 0, 0, 0]
    cdef floating* buf = NULL
    cdef floating* dd = NULL
    cdef floating acc
    if (v.strides[2] != k.strides[2] or gv.strides[2] != gk.strides[2]):
        raise ValueError("attention_backward: k/v and gk/gv must share the time stride")
    with nogil, parallel():
        buf = <floating*>malloc((2 * BR * BC + 2 * hd * BC + Tq) * isz)
        dd = buf + 2 * BR * BC + 2 * hd * BC
        for u in prange(B * Hkv, schedule="dynamic"):
            hk = u % Hkv
            b = u // Hkv
            for h in range(hk * group, (hk + 1) * group):
                for i in range(Tq):
                    acc = 0
                    for d in range(hd):
                        acc = acc + (gop[b * gs0 + h * gs1 + i * gst + d]
                                     * opp[b * os0 + h * os1 + i * ost + d])
                    dd[i] = acc
                i0 = 0
                while i0 < Tq:
                    _backward_block(qp + b * qs0 + h * qs1, kp + b * ks0 + hk * ks1,
                                    vp + b * vs0 + hk * vs1, gop + b * gs0 + h * gs1,
                                    lp + (b * Hq + h) * Tq, dd, qst, kst, gst,
                                    gqp + b * gqs0 + h * gqs1, gkp + b * gks0 + hk * gks1,
                                    gvp + b * gvs0 + hk * gvs1, gqst, gkst,
                                    i0, min(BR, Tq - i0), past, hd, <floating>scale,
                                    buf, buf + BR * BC, buf + 2 * BR * BC,
                                    buf + 2 * BR * BC + hd * BC)
                    i0 = i0 + BR
        free(buf)


# s: (NH, nr, nk) raw scores q.k of query rows i0 .. i0+nr (in place -> probabilities p);
# lse: (NH, Tq) row statistics, written at rows i0 .. i0+nr.
def softmax_block_forward(floating[:, :, ::1] s, floating[:, ::1] lse, Py_ssize_t i0,
                          Py_ssize_t past, double scale):
    """p_ij = exp(scale s_ij - lse_i) for visible j <= i0 + i + past, 0 beyond; lse_i saved."""
    _check_block("softmax_block_forward", s, s, lse, lse, i0, past)
    cdef Py_ssize_t NH = s.shape[0], nr = s.shape[1], nk = s.shape[2], r, n, i, j, lim
    cdef floating* sr
    cdef floating mx, lsum, sc = <floating>scale
    with nogil:
        for r in prange(NH * nr, schedule="static"):
            n = r // nr
            i = r % nr
            sr = &s[n, i, 0]
            lim = min(nk, i0 + i + past + 1)
            if floating is float:
                mg_scale_f(sr, lim, sc)
                mx = mg_max_f(sr, lim)
                lsum = mg_sum_exp_f(sr, lim, mx)
                mg_exp_affine_f(sr, sr, lim, 1, mx + log(lsum), 1)
            else:
                mx = -INFINITY
                for j in range(lim):
                    sr[j] = sr[j] * sc
                    if sr[j] > mx:
                        mx = sr[j]
                lsum = 0
                for j in range(lim):
                    sr[j] = _exp(sr[j] - mx)
                    lsum = lsum + sr[j]
                for j in range(lim):
                    sr[j] = sr[j] / lsum
            for j in range(lim, nk):
                sr[j] = 0
            lse[n, i0 + i] = mx + log(lsum)


# s, dp: (NH, nr, nk) raw scores and go.v of query rows i0 .. i0+nr; lse, dd: (NH, Tq).
def softmax_block_backward(floating[:, :, ::1] s, floating[:, :, ::1] dp,
                           const floating[:, ::1] lse, const floating[:, ::1] dd,
                           Py_ssize_t i0, Py_ssize_t past, double scale):
    """In place: s <- p = exp(scale s - lse) (masked), dp <- scale * p * (dp - D)."""
    _check_block("softmax_block_backward", s, dp, lse, dd, i0, past)
    cdef Py_ssize_t NH = s.shape[0], nr = s.shape[1], nk = s.shape[2], r, n, i, j, lim
    cdef floating* sr
    cdef floating* dr
    cdef floating sc = <floating>scale, lsum, d_i, p
    with nogil:
        for r in prange(NH * nr, schedule="static"):
            n = r // nr
            i = r % nr
            sr = &s[n, i, 0]
            dr = &dp[n, i, 0]
            lim = min(nk, i0 + i + past + 1)
            lsum = lse[n, i0 + i]
            d_i = dd[n, i0 + i]
            if floating is float:
                mg_softmax_grad_row_f(sr, dr, lim, sc, lsum, d_i)
            else:
                for j in range(lim):
                    p = _exp(sr[j] * sc - lsum)
                    sr[j] = p
                    dr[j] = sc * p * (dr[j] - d_i)
            for j in range(lim, nk):
                sr[j] = 0
                dr[j] = 0
