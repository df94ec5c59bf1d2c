"""WKV7 recurrence (RWKV-7 "x070"), one (batch, head) pair per prange task.

Per head, with the state S (N x N, S[i, j]: i = value index, j = key index):
    S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T,      y_t = S_t r_t.
Inputs are (B, T, H, N) C-contiguous, so the step-t vectors of head h are contiguous rows.

Memory: the forward stores the state at the start of every chunk of CHUNK steps (`ckpt`,
(B, H, ceil(T/CHUNK), N, N)); the backward recomputes the CHUNK+1 states of one chunk into
per-thread scratch and walks it in reverse. Saved memory grows as T/CHUNK, not T.
Derivation of the backward: docs/rwkv7_kernels.md.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.string cimport memcpy

import numpy as np

from minigrad.kernels._openmp cimport omp_get_max_threads, omp_get_thread_num
from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

cdef extern from *:
    """
    /* The per-step inner loops, in C so that `omp simd` vectorises them (reductions included)
       without -ffast-math; without OpenMP the pragmas are ignored: same maths, serial.
       The state is held TRANSPOSED, ST[j*N + i] = S[i][j] (row = key index j), so the forward
       is pure vector updates over i with no horizontal sums. Each step is instantiated for
       head size 64 (constant trip counts: unrolled, vectors kept in registers) and any N. */
    #define MG_WKV_STEPS(T, SUF)                                                            \
    static inline __attribute__((always_inline)) void mg_wkv_fwd_##SUF(const T *Sin,      \
            T *ST, const T *r, const T *w, const T *k, const T *v_, const T *a,            \
            const T *b, T *y, T *sa_out, const Py_ssize_t N, const int want_y) {           \
        /* ST = step(Sin); Sin == ST (in place) is allowed: each element is read, then   \
           written, by the same iteration */                                              \
        T sa[N], yv[N], v[N];                                                              \
        for (Py_ssize_t i = 0; i < N; i++) { sa[i] = 0; yv[i] = 0; v[i] = v_[i]; }         \
        for (Py_ssize_t j = 0; j < N; j++) {                                               \
            const T *row = Sin + j * N, aj = a[j];                                         \
            _Pragma("omp simd")                                                             \
            for (Py_ssize_t i = 0; i < N; i++) sa[i] += row[i] * aj;                       \
        }                                                                                  \
        for (Py_ssize_t j = 0; j < N; j++) {                                               \
            const T *row = Sin + j * N, wj = w[j], kj = k[j], bj = b[j], rj = r[j];        \
            T *out = ST + j * N;                                                           \
            _Pragma("omp simd")                                                             \
            for (Py_ssize_t i = 0; i < N; i++) {                                           \
                T s = row[i] * wj + v[i] * kj + sa[i] * bj;                                \
                out[i] = s;                                                                \
                if (want_y) yv[i] += s * rj;                                               \
            }                                                                              \
        }                                                                                  \
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            if (want_y) y[i] = yv[i];                                                      \
            if (sa_out) sa_out[i] = sa[i];                                                 \
        }                                                                                  \
    }                                                                                      \
    /* Backward over the rows j of one state, fusing two half-steps that read the same      \
       state S = S_{t-1}^T (D = transposed adjoint, updated in place):                     \
       DO2, the end of step t:    dw_t[j] = D[j].S[j],  da_t[j] = S[j].q2,                \
                                  D[j] = D[j] w_t[j] + a_t[j] q2      (now dL/dS_{t-1})     \
       DO1, the start of step t-1 (u = its inputs):                                       \
                                  D[j] += r_u[j] gy_u;  dv_u += D[j] k_u[j];               \
                                  q1 += D[j] b_u[j];    dk_u[j] = D[j].v_u;               \
                                  db_u[j] = D[j].sa_u;  dr_u[j] = S[j].gy_u               \
       (on its own, DO1 starts the last step with S = S_{T-1}^T).  */                     \
    static inline __attribute__((always_inline)) void mg_wkv_bwd_##SUF(const T *S, T *D,   \
            const T *q2_, const T *w, const T *a, T *dw, T *da,                            \
            const T *r, const T *gy_, const T *k, const T *b, const T *v_, const T *sa_,   \
            T *dr, T *dk, T *db, T *dv_, T *q1_, const Py_ssize_t N,                       \
            const int DO1, const int DO2) {                                                \
        T q2[N], gy[N], v[N], sa[N], dv[N], q1[N];                                         \
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            if (DO2) q2[i] = q2_[i];                                                       \
            if (DO1) { gy[i] = gy_[i]; v[i] = v_[i]; sa[i] = sa_[i]; dv[i] = 0; q1[i] = 0; }\
        }                                                                                  \
        for (Py_ssize_t j = 0; j < N; j++) {                                               \
            T *Dj = D + j * N, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0;                     \
            const T *Sj = S + j * N;                                                       \
            const T wj = DO2 ? w[j] : 0, aj = DO2 ? a[j] : 0;                              \
            const T rj = DO1 ? r[j] : 0, kj = DO1 ? k[j] : 0, bj = DO1 ? b[j] : 0;         \
            _Pragma("omp simd reduction(+:s1, s2, s3, s4, s5)")                             \
            for (Py_ssize_t i = 0; i < N; i++) {                                           \
                T d = Dj[i], sij = Sj[i];                                                  \
                if (DO2) {                                                                 \
                    s1 += d * sij;                                                         \
                    s2 += sij * q2[i];                                                     \
                    d = d * wj + aj * q2[i];                                               \
                }                                                                          \
                if (DO1) {                                                                 \
                    d += rj * gy[i];                                                       \
                    dv[i] += d * kj;                                                       \
                    q1[i] += d * bj;                                                       \
                    s3 += d * v[i];                                                        \
                    s4 += d * sa[i];                                                       \
                    s5 += sij * gy[i];                                                     \
                }                                                                          \
                Dj[i] = d;                                                                 \
            }                                                                              \
            if (DO2) { dw[j] = s1; da[j] = s2; }                                           \
            if (DO1) { dk[j] = s3; db[j] = s4; dr[j] = s5; }                               \
        }                                                                                  \
        if (DO1) for (Py_ssize_t i = 0; i < N; i++) { dv_[i] = dv[i]; q1_[i] = q1[i]; }    \
    }
    #define MG_WKV_DISPATCH(T, SUF)                                                         \
    MG_WKV_STEPS(T, SUF##_n)                                                               \
    static void mg_wkv_fwd_##SUF(const T *Sin, T *S, const T *r, const T *w, const T *k,   \
            const T *v, const T *a, const T *b, T *y, T *sa_out, Py_ssize_t N) {           \
        if (N == 64 && y) mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_out, 64, 1);\
        else if (N == 64) mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_out, 64, 0);\
        else if (y) mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_out, N, 1);       \
        else mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_out, N, 0);              \
    }                                                                                      \
    static void mg_wkv_bwd_##SUF(const T *S, T *D, const T *q2, const T *w, const T *a,    \
            T *dw, T *da, const T *r, const T *gy, const T *k, const T *b, const T *v,     \
            const T *sa, T *dr, T *dk, T *db, T *dv, T *q1, Py_ssize_t N, int do1, int do2) {\
        if (N == 64 && do1 && do2) mg_wkv_bwd_##SUF##_n(S, D, q2, w, a, dw, da, r, gy, k,  \
            b, v, sa, dr, dk, db, dv, q1, 64, 1, 1);                                       \
        else if (do1 && do2) mg_wkv_bwd_##SUF##_n(S, D, q2, w, a, dw, da, r, gy, k,        \
            b, v, sa, dr, dk, db, dv, q1, N, 1, 1);                                        \
        else if (do1) mg_wkv_bwd_##SUF##_n(S, D, q2, w, a, dw, da, r, gy, k,               \
            b, v, sa, dr, dk, db, dv, q1, N, 1, 0);                                        \
        else mg_wkv_bwd_##SUF##_n(S, D, q2, w, a, dw, da, r, gy, k,                        \
            b, v, sa, dr, dk, db, dv, q1, N, 0, 1);                                        \
    }
    MG_WKV_DISPATCH(float, f)
    MG_WKV_DISPATCH(double, d)
    """
    void mg_wkv_fwd_f(const float *Sin, float *S, const float *r, const float *w,
                      const float *k, const float *v, const float *a, const float *b, float *y,
                      float *sa_out, Py_ssize_t N) noexcept nogil
    void mg_wkv_fwd_d(const double *Sin, double *S, const double *r, const double *w,
                      const double *k, const double *v, const double *a, const double *b,
                      double *y, double *sa_out, Py_ssize_t N) noexcept nogil
    void mg_wkv_bwd_f(const float *S, float *D, const float *q2, const float *w,
                      const float *a, float *dw, float *da, const float *r, const float *gy,
                      const float *k, const float *b, const float *v, const float *sa,
                      float *dr, float *dk, float *db, float *dv, float *q1, Py_ssize_t N,
                      int do1, int do2) noexcept nogil
    void mg_wkv_bwd_d(const double *S, double *D, const double *q2, const double *w,
                      const double *a, double *dw, double *da, const double *r,
                      const double *gy, const double *k, const double *b, const double *v,
                      const double *sa, double *dr, double *dk, double *db, double *dv,
                      double *q1, Py_ssize_t N, int do1, int do2) noexcept nogil


cdef inline void _transpose_into(floating* dst, const floating* src, Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t i, j
    for i in range(N):
        for j in range(N):
            dst[j * N + i] = src[i * N + j]


cdef inline void _transpose_inplace(floating* A, Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef floating tmp
    for i in range(N):
        for j in range(i + 1, N):
            tmp = A[i * N + j]
            A[i * N + j] = A[j * N + i]
            A[j * N + i] = tmp


cdef inline void _step_forward(const floating* Sin, floating* S, const floating* r, const floating* w,
                               const floating* k, const floating* v, const floating* a,
                               const floating* b, floating* y, floating* sa_out,
                               Py_ssize_t N) noexcept nogil:
    """One step on one head on transposed states: S^T = step(Sin^T) (Sin == S: in place); writes
    y_t and S_{t-1} a_t (each only if its pointer is not NULL):
        sa = S a;  S = S diag(w) + v k^T + sa b^T;  y = S r.
    """
    if floating is float:
        mg_wkv_fwd_f(Sin, S, r, w, k, v, a, b, y, sa_out, N)
    else:
        mg_wkv_fwd_d(Sin, S, r, w, k, v, a, b, y, sa_out, N)


cdef inline void _backward_rows(const floating* S, floating* D, const floating* q2,
                                const floating* w, const floating* a, floating* dw,
                                floating* da, const floating* r, const floating* gy,
                                const floating* k, const floating* b, const floating* v,
                                const floating* sa, floating* dr, floating* dk, floating* db,
                                floating* dv, floating* q1, Py_ssize_t N, int do1,
                                int do2) noexcept nogil:
    """One sweep over the rows of S = S_{t-1}^T and the transposed adjoint D (see the C macro):
    do2 finishes step t (dw_t, da_t; D <- D diag(w_t) + q_t a_t^T = dL/dS_{t-1}), do1 starts
    step t-1 (D += gy r^T; dr, dk, db and, summed over rows, dv and q = D b)."""
    if floating is float:
        mg_wkv_bwd_f(S, D, q2, w, a, dw, da, r, gy, k, b, v, sa, dr, dk, db, dv, q1, N, do1, do2)
    else:
        mg_wkv_bwd_d(S, D, q2, w, a, dw, da, r, gy, k, b, v, sa, dr, dk, db, dv, q1, N, do1, do2)


def _check_wkv7(op, seqs, states, ckpt, sa, chunk, need_saved):
    """Entry-point shape contract: seqs all (B, T, H, N), states all (B, H, N, N), 1 <= chunk <= T,
    and ckpt / sa either the saved sizes (B*H*ceil(T/chunk)*N*N, (B, T, H, N)) or empty."""
    spec = " ".join(f"s{i}:B,T,H,N" for i in range(len(seqs)))
    spec += " " + " ".join(f"S{i}:B,H,N,N" for i in range(len(states)))
    dims = check_kernel_args(op, spec + " ckpt:* sa:*,*,*,*", *seqs, *states, ckpt, sa)
    B, T, H, N = dims["B"], dims["T"], dims["H"], dims["N"]
    # chunk <= T also keeps the (chunk + 1) * N * N scratch size from overflowing
    check_kernel_scalar(op, "chunk", chunk, 1, max(T, 1))
    saved = ckpt.shape[0] > 0
    if need_saved or saved:
        check_kernel_args(op, "ckpt:P sa:B,T,H,N", ckpt, sa,
                          P=B * H * ((T + chunk - 1) // chunk) * N * N, B=B, T=T, H=H, N=N)


# r, w, k, v, a, b: (B, T, H, N); s0: (B, H, N, N) -> y: (B, T, H, N), sT: (B, H, N, N),
# ckpt: (B, H, nchunk, N, N) transposed states S^T at chunk starts, sa: (B, T, H, N) the
# vectors S_{t-1} a_t (both only when ckpt is not (0,)-sized; otherwise inference)
def wkv7_forward(const floating[:, :, :, ::1] r, const floating[:, :, :, ::1] w,
                 const floating[:, :, :, ::1] k, const floating[:, :, :, ::1] v,
                 const floating[:, :, :, ::1] a, const floating[:, :, :, ::1] b,
                 const floating[:, :, :, ::1] s0, floating[:, :, :, ::1] y,
                 floating[:, :, :, ::1] sT, floating[::1] ckpt, floating[:, :, :, ::1] sa,
                 Py_ssize_t chunk):
    """y_t = S_t r_t with S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T; S_0 = s0."""
    _check_wkv7("wkv7_forward", (r, w, k, v, a, b, y), (s0, sT), ckpt, sa, chunk, False)
    cdef Py_ssize_t B = r.shape[0], T = r.shape[1], H = r.shape[2], N = r.shape[3]
    cdef Py_ssize_t NN = N * N, nchunk = (T + chunk - 1) // chunk
    cdef bint save = ckpt.shape[0] > 0
    cdef Py_ssize_t bh, bi, h, t
    cdef floating* S
    with nogil:
        for bh in prange(B * H, schedule="dynamic"):
            bi = bh // H
            h = bh - bi * H
            S = &sT[bi, h, 0, 0]
            _transpose_into(S, &s0[bi, h, 0, 0], N)
            for t in range(T):
                if save and t % chunk == 0:
                    memcpy(&ckpt[(bh * nchunk + t // chunk) * NN], S, NN * sizeof(floating))
                _step_forward(S, S, &r[bi, t, h, 0], &w[bi, t, h, 0], &k[bi, t, h, 0],
                              &v[bi, t, h, 0], &a[bi, t, h, 0], &b[bi, t, h, 0],
                              &y[bi, t, h, 0], &sa[bi, t, h, 0] if save else <floating*>NULL, N)
            _transpose_inplace(S, N)


# inputs as wkv7_forward (with its ckpt and sa); gy: (B, T, H, N); gsT: (B, H, N, N) upstream
# grad of the final state -> dr, dw, dk, dv, da, db: (B, T, H, N), ds0: (B, H, N, N)
def wkv7_backward(const floating[:, :, :, ::1] r, const floating[:, :, :, ::1] w,
                  const floating[:, :, :, ::1] k, const floating[:, :, :, ::1] v,
                  const floating[:, :, :, ::1] a, const floating[:, :, :, ::1] b,
                  const floating[::1] ckpt, const floating[:, :, :, ::1] sa,
                  const floating[:, :, :, ::1] gy, const floating[:, :, :, ::1] gsT,
                  floating[:, :, :, ::1] dr, floating[:, :, :, ::1] dw,
                  floating[:, :, :, ::1] dk, floating[:, :, :, ::1] dv,
                  floating[:, :, :, ::1] da, floating[:, :, :, ::1] db,
                  floating[:, :, :, ::1] ds0, Py_ssize_t chunk):
    """Reverse-mode through the whole sequence, chunk by chunk (last chunk first).

    Each chunk restarts from its checkpoint and recomputes its states S_{t0-1} .. S_{t0+L-1}
    into thread-private scratch. The reverse sweep then visits each state once: the sweep over
    S_{t-1} finishes step t and starts step t-1 (`_backward_rows`), so every state row is
    loaded once per step. The running adjoint lives in ds0 and ends as dL/dS_0.
    """
    _check_wkv7("wkv7_backward", (r, w, k, v, a, b, gy, dr, dw, dk, dv, da, db), (gsT, ds0),
                ckpt, sa, chunk, True)
    cdef Py_ssize_t B = r.shape[0], T = r.shape[1], H = r.shape[2], N = r.shape[3]
    cdef Py_ssize_t NN = N * N, nchunk = (T + chunk - 1) // chunk
    cdef Py_ssize_t bh, bi, h, c, t, t0, L, s, u
    cdef int nthreads = omp_get_max_threads()
    dtype = np.float32 if floating is float else np.float64
    cdef floating[:, ::1] states_all = np.empty((nthreads, (chunk + 1) * NN), dtype)
    cdef floating[:, ::1] q_all = np.empty((nthreads, 2 * N), dtype)
    cdef floating* states
    cdef floating* q
    cdef floating* D
    with nogil:
        for bh in prange(B * H, schedule="dynamic", num_threads=nthreads):
            states = &states_all[omp_get_thread_num(), 0]
            q = &q_all[omp_get_thread_num(), 0]
            bi = bh // H
            h = bh - bi * H
            D = &ds0[bi, h, 0, 0]
            _transpose_into(D, &gsT[bi, h, 0, 0], N)
            for c in range(nchunk - 1, -1, -1):
                t0 = c * chunk
                L = min(chunk, T - t0)
                memcpy(states, &ckpt[(bh * nchunk + c) * NN], NN * sizeof(floating))
                for s in range(L):
                    t = t0 + s
                    _step_forward(states + s * NN, states + (s + 1) * NN, &r[bi, t, h, 0],
                                  &w[bi, t, h, 0], &k[bi, t, h, 0], &v[bi, t, h, 0],
                                  &a[bi, t, h, 0], &b[bi, t, h, 0], <floating*>NULL,
                                  <floating*>NULL, N)
                if c == nchunk - 1:     # start the last step on S_{T-1}
                    t = T - 1
                    _backward_rows(states + L * NN, D, q, &w[bi, t, h, 0], &a[bi, t, h, 0],
                                   &dw[bi, t, h, 0], &da[bi, t, h, 0], &r[bi, t, h, 0],
                                   &gy[bi, t, h, 0], &k[bi, t, h, 0], &b[bi, t, h, 0],
                                   &v[bi, t, h, 0], &sa[bi, t, h, 0], &dr[bi, t, h, 0],
                                   &dk[bi, t, h, 0], &db[bi, t, h, 0], &dv[bi, t, h, 0],
                                   q + (t % 2) * N, N, 1, 0)
                for s in range(L - 1, -1, -1):
                    t = t0 + s              # finish step t on S_{t-1} = states[s] ...
                    u = t - 1 if t > 0 else 0   # ... and start step t-1 there
                    _backward_rows(states + s * NN, D, q + (t % 2) * N, &w[bi, t, h, 0],
                                   &a[bi, t, h, 0], &dw[bi, t, h, 0], &da[bi, t, h, 0],
                                   &r[bi, u, h, 0], &gy[bi, u, h, 0], &k[bi, u, h, 0],
                                   &b[bi, u, h, 0], &v[bi, u, h, 0], &sa[bi, u, h, 0],
                                   &dr[bi, u, h, 0], &dk[bi, u, h, 0], &db[bi, u, h, 0],
                                   &dv[bi, u, h, 0], q + (u % 2) * N, N, t > 0, 1)
            _transpose_inplace(D, N)
