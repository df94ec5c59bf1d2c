"""Causal scaled-dot-product attention with grouped-query heads: a streaming ("flash") softmax
over key blocks whose block products run in BLAS (scipy's sgemm/dgemm, called inside nogil code).

Arrays are logical (B, H, T, hd) views with arbitrary element strides on the first three axes
(unit stride on hd, time stride >= hd), so (B, T, H, hd) projections and KV-cache slices enter
without copies. Query head h reads key/value head h // (Hq / Hkv). Query row i (of Tq) sits at
absolute position i + Tk - Tq and sees keys j <= i + Tk - Tq.

Forward, per (batch, head, block of BR query rows), streaming over blocks of BC keys (only up to
the block's last visible key), with the online softmax:
    S = scale Q_blk K_blk^T                                        (BLAS, BR x BC)
    m' = max(m, rowmax S),  P = exp(S - m'),  l = l e^(m - m') + rowsum P
    acc = acc e^(m - m') + P V_blk                                 (BLAS, BR x hd)
    o = acc / l,  lse = m + log l                  (only o and lse are stored for backward)
Backward, per (batch, kv head) -- the single writer of that head's gk, gv and of gq for its
query-head group -- recomputing P = exp(S - lse) block by block, with D_i = go_i . o_i:
    dP = dO_blk V_blk^T,  dS = P (dP - D)
    gv_blk += P^T dO_blk,  gq_blk += scale dS K_blk,  gk_blk += scale dS^T Q_blk   (all BLAS)
Both passes read the keys (and the backward the values) transposed, (hd, Tk) per kv head, so the
score products are NN GEMMs that OpenBLAS runs unpacked (TRANSPOSE_MIN_ROWS, block_keys_for).
Scratch per thread: BR x BC scores (two blocks in backward) + a BR x hd accumulator + O(BR)
statistics (backward: also the kv head's keys and values transposed, 2 x hd x Tk); the forward's
transposed keys are one more k-sized array. So memory beyond q, k, v, o is O(T hd) per head --
never T x T.
The Python caller must run these kernels under `minigrad.threads.serial_blas()`: each OpenMP
thread makes its own single-threaded BLAS calls.
"""
import numpy as np

from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.math cimport INFINITY, exp, log
from libc.string cimport memset
from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

from minigrad.kernels._blas cimport gemm
from minigrad.kernels._openmp cimport omp_get_max_threads, omp_get_thread_num
from minigrad.kernels._rowsum cimport row_dot
from minigrad.kernels._vmath cimport mg_exp_sum_f, mg_max_f, mg_softmax_grad_row_f, mg_transpose_f

# query rows per block (BR): 32 computes fewer masked scores on the diagonal blocks than 64 and
# keeps more tasks for the threads; fwd + bwd 8-10 % faster at the GPT benchmark shapes (docs/gpt.md)
BLOCK_ROWS = 32
BLOCK_KEYS = 256    # keys per block (BC) when the caller gives none; see block_keys_for
# From this many query rows on, the forward transposes the keys first (the backward always does),
# so the score products Q K^T and dO V^T are NN GEMMs: OpenBLAS sends small NN products to its
# unpacked small-matrix kernels but not TN ones (Q K^T on row-major k) with an output over
# 1200 elements, which pay for packing instead.
TRANSPOSE_MIN_ROWS = 16
SMALL_GEMM_MNK = 100 ** 3   # OpenBLAS's bound on M N K for its small-matrix kernels


def block_keys_for(block_rows, hd):
    """Keys per block: the largest multiple of 64 in [64, 256] with block_rows x keys x hd <=
    SMALL_GEMM_MNK, so every block product stays on the small-matrix path (32 rows: 256 keys up to
    hd 122, 192 at hd 128; 64 rows: 192 at hd 64)."""
    return int(min(256, max(64, SMALL_GEMM_MNK // (max(block_rows, 1) * max(hd, 1)) // 64 * 64)))


cdef inline floating _row_max(const floating* x, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t j
    cdef floating m = -INFINITY
    if floating is float:
        m = mg_max_f(x, n)
    else:
        for j in range(n):
            if x[j] > m:
                m = x[j]
    return m


cdef inline floating _exp_sum(floating* x, Py_ssize_t n, floating m) noexcept nogil:
    """x_j <- exp(x_j - m); returns sum_j x_j."""
    cdef Py_ssize_t j
    cdef floating s = 0
    if floating is float:
        s = mg_exp_sum_f(x, n, m)
    else:
        for j in range(n):
            x[j] = exp(x[j] - m)
            s = s + x[j]
    return s


cdef inline void _softmax_grad_row(floating* s, floating* dp, Py_ssize_t n, floating scale,
                                   floating lse, floating d) noexcept nogil:
    """p = exp(scale s - lse), dp <- scale p (dp - d), s <- p."""
    cdef Py_ssize_t j
    cdef floating p
    if floating is float:
        mg_softmax_grad_row_f(s, dp, n, scale, lse, d)
    else:
        for j in range(n):
            p = exp(scale * s[j] - lse)
            s[j] = p
            dp[j] = scale * p * (dp[j] - d)


cdef inline Py_ssize_t _visible(Py_ssize_t row, Py_ssize_t past, Py_ssize_t j0, Py_ssize_t nc) noexcept nogil:
    """How many of keys j0 .. j0+nc the query row (of the block's head) sees, clamped at 0."""
    return max(0, min(nc, row + past + 1 - j0))


cdef inline void _scores(const floating* q, Py_ssize_t qld, const floating* k, Py_ssize_t kld,
                         const floating* kt, Py_ssize_t ktld, Py_ssize_t j0, Py_ssize_t nr,
                         Py_ssize_t nc, Py_ssize_t hd, floating alpha, floating* s,
                         Py_ssize_t sld) noexcept nogil:
    """s (nr x nc) = alpha q k[j0:j0+nc]^T; from the transposed keys kt (hd, Tk) when given."""
    if kt != NULL:
        gemm(False, False, nr, nc, hd, alpha, q, qld, kt + j0, ktld, 0, s, sld)
    else:
        gemm(False, True, nr, nc, hd, alpha, q, qld, k + j0 * kld, kld, 0, s, sld)


cdef inline void _transpose_rows(const floating* x, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t hd,
                                 floating* xt) noexcept nogil:
    """xt (hd, n) = x (n rows of hd, row stride ld) transposed (float32: mg_transpose_f, 16 x 16
    tiles in registers); float64 16 rows at a time (those rows stay in L1 while each xt row gets
    a contiguous run of 16)."""
    cdef Py_ssize_t t0, t, d, t1
    if floating is float:
        mg_transpose_f(x, ld, n, hd, xt)
    else:
        for t0 in range(0, n, 16):
            t1 = min(t0 + 16, n)
            for d in range(hd):
                for t in range(t0, t1):
                    xt[d * n + t] = x[t * ld + d]


cdef void _forward_rows(const floating* q, Py_ssize_t qld, const floating* k, Py_ssize_t kld,
                        const floating* kt, Py_ssize_t ktld,
                        const floating* v, Py_ssize_t vld, floating* o, Py_ssize_t old, floating* lse,
                        Py_ssize_t i0, Py_ssize_t nr, Py_ssize_t past, Py_ssize_t hd, floating scale,
                        Py_ssize_t bc, floating* s, floating* acc, floating* m, floating* l) noexcept nogil:
    """Query rows i0 .. i0+nr of one head; q, o, lse point at row 0, k and v at key 0; kt (when not
    NULL) is the head's keys transposed, (hd, Tk) with row stride ktld."""
    cdef Py_ssize_t kend = i0 + nr + past, j0 = 0, i, d, lim, nc
    cdef floating mx, corr, inv
    cdef floating* sr
    for i in range(nr):
        m[i] = -INFINITY
        l[i] = 0
    while j0 < kend:
        nc = min(bc, kend - j0)
        _scores(q + i0 * qld, qld, k, kld, kt, ktld, j0, nr, nc, hd, scale, s, bc)
        for i in range(nr):
            sr = s + i * bc
            lim = _visible(i0 + i, past, j0, nc)
            if lim > 0:
                mx = max(m[i], _row_max(sr, lim))
                corr = exp(m[i] - mx)
                l[i] = l[i] * corr + _exp_sum(sr, lim, mx)
                m[i] = mx
                if j0 > 0 and corr != 1:
                    for d in range(hd):
                        acc[i * hd + d] *= corr
            memset(sr + lim, 0, (nc - lim) * sizeof(floating))
        gemm(False, False, nr, hd, nc, 1, s, bc, v + j0 * vld, vld, 0 if j0 == 0 else 1, acc, hd)
        j0 += bc
    for i in range(nr):
        inv = 1 / l[i]
        for d in range(hd):
            o[(i0 + i) * old + d] = acc[i * hd + d] * inv
        lse[i0 + i] = m[i] + log(l[i])


cdef void _backward_rows(const floating* q, Py_ssize_t qld, const floating* k, Py_ssize_t kld,
                         const floating* v, Py_ssize_t vld, const floating* kt, const floating* vt,
                         Py_ssize_t ktld, const floating* o, Py_ssize_t old,
                         const floating* go, Py_ssize_t gold, floating* gq, Py_ssize_t gqld,
                         floating* gk, Py_ssize_t gkld, floating* gv, Py_ssize_t gvld,
                         const floating* lse, Py_ssize_t i0, Py_ssize_t nr, Py_ssize_t past,
                         Py_ssize_t hd, floating scale, Py_ssize_t bc,
                         floating* s, floating* dp, floating* dd) noexcept nogil:
    """Gradient contributions of query rows i0 .. i0+nr of one head (pointers at row / key 0):
    writes gq of those rows, adds into gk and gv of the keys they see. kt, vt (when not NULL):
    the head's keys and values transposed, (hd, Tk) with row stride ktld."""
    cdef Py_ssize_t kend = i0 + nr + past, j0 = 0, i, lim, nc
    cdef const floating* q_blk = q + i0 * qld
    cdef const floating* go_blk = go + i0 * gold
    for i in range(nr):
        dd[i] = <floating>row_dot(go + (i0 + i) * gold, o + (i0 + i) * old, hd)
    while j0 < kend:
        nc = min(bc, kend - j0)
        # the forward's scaled product (alpha = scale), so P is recomputed with the same rounding
        _scores(q_blk, qld, k, kld, kt, ktld, j0, nr, nc, hd, scale, s, bc)
        _scores(go_blk, gold, v, vld, vt, ktld, j0, nr, nc, hd, 1, dp, bc)
        for i in range(nr):
            lim = _visible(i0 + i, past, j0, nc)
            _softmax_grad_row(s + i * bc, dp + i * bc, lim, 1, lse[i0 + i], dd[i])
            memset(s + i * bc + lim, 0, (nc - lim) * sizeof(floating))
            memset(dp + i * bc + lim, 0, (nc - lim) * sizeof(floating))
        gemm(True, False, nc, hd, nr, 1, s, bc, go_blk, gold, 1, gv + j0 * gvld, gvld)
        gemm(False, False, nr, hd, nc, scale, dp, bc, k + j0 * kld, kld, 0 if j0 == 0 else 1,
             gq + i0 * gqld, gqld)
        gemm(True, False, nc, hd, nr, scale, dp, bc, q_blk, qld, 1, gk + j0 * gkld, gkld)
        j0 += bc


def _elements(a, axis, itemsize):
    return a.strides[axis] // itemsize


def _time_stride(op, name, a, itemsize):
    """The row stride BLAS sees for a (B, H, T, hd) view: its time stride, >= hd."""
    hd, T = a.shape[3], a.shape[2]
    if a.shape[3] > 1 and a.strides[3] != itemsize:
        raise ValueError(f"{op}: {name} needs unit stride on its last axis, got strides {a.strides}")
    if any(st % itemsize for st in a.strides[:4]):
        raise ValueError(f"{op}: {name} has strides {a.strides} that are not whole elements")
    ld = a.strides[2] // itemsize if T > 1 else hd
    if ld < hd:
        raise ValueError(f"{op}: {name}'s time stride {a.strides[2]} is smaller than a row of {hd} "
                         "elements (rows overlap)")
    if ld * T >= 2 ** 31 or hd >= 2 ** 31:
        raise ValueError(f"{op}: {name} {a.shape} is too large for BLAS int indexing")
    return max(ld, 1)


def _check_attention(op, arrays, lse, block_rows, block_keys):
    """q, k, v, o[, go, gq, gk, gv] as (B, H, T, hd) views; lse (B, Hq, Tq). Returns the row strides."""
    q_like = ("q", "o", "go", "gq")
    names = ("q", "k", "v", "o", "go", "gq", "gk", "gv")[:len(arrays)]
    spec = " ".join(f"{n}:B,H,T,D" if n in q_like else f"{n}:B,G,S,D" for n in names)
    dims = check_kernel_args(op, spec + " lse:B,H,T", *arrays, lse)
    if dims["G"] < 1 or dims["H"] % dims["G"] or dims["S"] < dims["T"]:
        raise ValueError(f"{op}: q {arrays[0].shape} and k {arrays[1].shape} do not fit: need query heads "
                         "a multiple of kv heads and T_k >= T_q")
    check_kernel_scalar(op, "block_rows", block_rows, 1, 4096)
    check_kernel_scalar(op, "block_keys", block_keys, 1, 65536)
    if dims["D"] < 1 or dims["T"] < 1:
        raise ValueError(f"{op}: q {arrays[0].shape} needs at least one query row and a head size >= 1")
    itemsize = arrays[0].itemsize
    return [_time_stride(op, n, a, itemsize) for n, a in zip(names, arrays)]


def _scratch(per_thread, dtype):
    """One row of per_thread elements for each OpenMP thread."""
    return np.empty((omp_get_max_threads(), per_thread), dtype)


# q, o: (B, Hq, Tq, hd) strided views; k, v: (B, Hkv, Tk, hd) strided views; lse: (B, Hq, Tq)
def attention_forward(const floating[:, :, :, :] q, const floating[:, :, :, :] k,
                      const floating[:, :, :, :] v, floating[:, :, :, :] o,
                      floating[:, :, ::1] lse, double scale,
                      Py_ssize_t block_rows=BLOCK_ROWS, Py_ssize_t block_keys=BLOCK_KEYS):
    """o = softmax(scale q k^T + causal mask) v per head, lse = row log-sum-exp."""
    qld, kld, vld, old = _check_attention("attention_forward", (q, k, v, o), lse, block_rows, block_keys)
    cdef Py_ssize_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], hd = q.shape[3]
    cdef Py_ssize_t Hkv = k.shape[1], group = Hq // Hkv, past = k.shape[2] - Tq
    cdef Py_ssize_t br = min(block_rows, Tq), bc = block_keys
    cdef Py_ssize_t nqb = (Tq + br - 1) // br, u, b, h, i0, isz = sizeof(floating)
    cdef Py_ssize_t qs0 = _elements(q, 0, isz), qs1 = _elements(q, 1, isz)
    cdef Py_ssize_t ks0 = _elements(k, 0, isz), ks1 = _elements(k, 1, isz)
    cdef Py_ssize_t vs0 = _elements(v, 0, isz), vs1 = _elements(v, 1, isz)
    cdef Py_ssize_t os0 = _elements(o, 0, isz), os1 = _elements(o, 1, isz)
    cdef Py_ssize_t qld_ = qld, kld_ = kld, vld_ = vld, old_ = old
    dtype = np.float32 if floating is float else np.float64
    cdef floating[:, ::1] scratch = _scratch(br * bc + br * hd + 2 * br, dtype)
    # keys transposed once per kv head, (B * Hkv, hd, Tk), so Q K^T is a plain NN product (see
    # TRANSPOSE_MIN_ROWS); decoding (few query rows) reads k as it is
    cdef bint transpose = Tq >= TRANSPOSE_MIN_ROWS
    cdef Py_ssize_t Tk = k.shape[2]
    cdef floating[:, :, ::1] kt_all = np.empty((B * Hkv if transpose else 0, hd, Tk), dtype)
    cdef const floating* qp = &q[0, 0, 0, 0]
    cdef const floating* kp = &k[0, 0, 0, 0]
    cdef const floating* vp = &v[0, 0, 0, 0]
    cdef floating* op = &o[0, 0, 0, 0]
    cdef floating* lp = &lse[0, 0, 0]
    cdef floating* ktp = &kt_all[0, 0, 0] if transpose else NULL
    cdef floating* buf = NULL
    with nogil, parallel():
        buf = &scratch[omp_get_thread_num(), 0]
        if transpose:
            for u in prange(B * Hkv, schedule="static"):
                _transpose_rows(kp + (u // Hkv) * ks0 + (u % Hkv) * ks1, kld_, Tk, hd, ktp + u * hd * Tk)
        for u in prange(B * Hq * nqb, schedule="dynamic"):
            i0 = (nqb - 1 - u % nqb) * br          # the longest (last) row blocks first
            h = (u // nqb) % Hq
            b = u // (nqb * Hq)
            _forward_rows(qp + b * qs0 + h * qs1, qld_, kp + b * ks0 + (h // group) * ks1, kld_,
                          ktp + (b * Hkv + h // group) * hd * Tk if transpose else NULL, Tk,
                          vp + b * vs0 + (h // group) * vs1, vld_, op + b * os0 + h * os1, old_,
                          lp + (b * Hq + h) * Tq, i0, min(br, Tq - i0), past, hd, <floating>scale, bc,
                          buf, buf + br * bc, buf + br * bc + br * hd, buf + br * bc + br * hd + br)


# q, o, go, gq: (B, Hq, Tq, hd); k, v, gk, gv: (B, Hkv, Tk, hd) strided views; lse: (B, Hq, Tq).
def attention_backward(const floating[:, :, :, :] q, const floating[:, :, :, :] k,
                       const floating[:, :, :, :] v, const floating[:, :, :, :] o,
                       const floating[:, :, ::1] lse, const floating[:, :, :, :] go,
                       floating[:, :, :, :] gq, floating[:, :, :, :] gk, floating[:, :, :, :] gv,
                       double scale, Py_ssize_t block_rows=BLOCK_ROWS, Py_ssize_t block_keys=BLOCK_KEYS):
    """gq, gk, gv of attention_forward from the saved o and lse (gq, gk, gv are overwritten)."""
    lds = _check_attention("attention_backward", (q, k, v, o, go, gq, gk, gv), lse, block_rows, block_keys)
    cdef Py_ssize_t qld = lds[0], kld = lds[1], vld = lds[2], old = lds[3]
    cdef Py_ssize_t gold = lds[4], gqld = lds[5], gkld = lds[6], gvld = lds[7]
    cdef Py_ssize_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], hd = q.shape[3]
    cdef Py_ssize_t Hkv = k.shape[1], Tk = k.shape[2], group = Hq // Hkv, past = Tk - Tq
    cdef Py_ssize_t br = min(block_rows, Tq), bc = block_keys
    cdef Py_ssize_t nqb = (Tq + br - 1) // br, u, b, hk, h, r, t, qb, i0, isz = sizeof(floating)
    cdef Py_ssize_t s_q[2]
    cdef Py_ssize_t s_k[2]
    cdef Py_ssize_t s_v[2]
    cdef Py_ssize_t s_o[2]
    cdef Py_ssize_t s_go[2]
    cdef Py_ssize_t s_gq[2]
    cdef Py_ssize_t s_gk[2]
    cdef Py_ssize_t s_gv[2]
    s_q[:] = [_elements(q, 0, isz), _elements(q, 1, isz)]
    s_k[:] = [_elements(k, 0, isz), _elements(k, 1, isz)]
    s_v[:] = [_elements(v, 0, isz), _elements(v, 1, isz)]
    s_o[:] = [_elements(o, 0, isz), _elements(o, 1, isz)]
    s_go[:] = [_elements(go, 0, isz), _elements(go, 1, isz)]
    s_gq[:] = [_elements(gq, 0, isz), _elements(gq, 1, isz)]
    s_gk[:] = [_elements(gk, 0, isz), _elements(gk, 1, isz)]
    s_gv[:] = [_elements(gv, 0, isz), _elements(gv, 1, isz)]
    dtype = np.float32 if floating is float else np.float64
    # per thread: two score blocks, D, and the kv head's keys and values transposed (hd, Tk)
    cdef floating[:, ::1] scratch = _scratch(2 * br * bc + br + 2 * hd * Tk, dtype)
    cdef const floating* qp = &q[0, 0, 0, 0]
    cdef const floating* kp = &k[0, 0, 0, 0]
    cdef const floating* vp = &v[0, 0, 0, 0]
    cdef const floating* op = &o[0, 0, 0, 0]
    cdef const floating* gop = &go[0, 0, 0, 0]
    cdef floating* gqp = &gq[0, 0, 0, 0]
    cdef floating* gkp = &gk[0, 0, 0, 0]
    cdef floating* gvp = &gv[0, 0, 0, 0]
    cdef floating* gk_head
    cdef floating* gv_head
    cdef floating* buf = NULL
    cdef floating* kt = NULL
    cdef floating* vt = NULL
    with nogil, parallel():
        buf = &scratch[omp_get_thread_num(), 0]
        kt = buf + 2 * br * bc + br
        vt = kt + hd * Tk
        for u in prange(B * Hkv, schedule="dynamic"):
            b = u // Hkv
            hk = u % Hkv
            _transpose_rows(kp + b * s_k[0] + hk * s_k[1], kld, Tk, hd, kt)
            _transpose_rows(vp + b * s_v[0] + hk * s_v[1], vld, Tk, hd, vt)
            gk_head = gkp + b * s_gk[0] + hk * s_gk[1]
            gv_head = gvp + b * s_gv[0] + hk * s_gv[1]
            for t in range(Tk):
                memset(gk_head + t * gkld, 0, hd * isz)
                memset(gv_head + t * gvld, 0, hd * isz)
            for r in range(group):
                h = hk * group + r
                for qb in range(nqb):
                    i0 = qb * br
                    _backward_rows(qp + b * s_q[0] + h * s_q[1], qld,
                                   kp + b * s_k[0] + hk * s_k[1], kld,
                                   vp + b * s_v[0] + hk * s_v[1], vld, kt, vt, Tk,
                                   op + b * s_o[0] + h * s_o[1], old,
                                   gop + b * s_go[0] + h * s_go[1], gold,
                                   gqp + b * s_gq[0] + h * s_gq[1], gqld, gk_head, gkld, gv_head, gvld,
                                   &lse[b, h, 0], i0, min(br, Tq - i0), past, hd, <floating>scale, bc,
                                   buf, buf + br * bc, buf + 2 * br * bc)
