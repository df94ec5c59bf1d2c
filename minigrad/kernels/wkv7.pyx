# distutils: extra_compile_args = -march=native
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
    static inline __attribute__((always_inline)) void mg_wkv_bwd_##SUF(const T *SpT,       \
            const T *StT, const T *sa_, T *DT, const T *gy_, const T *r, const T *w,       \
            const T *k, const T *v_, const T *a, const T *b, T *dr, T *dw, T *dk,          \
            T *dv_, T *da, T *db, const Py_ssize_t N) {                                    \
        T gy[N], v[N], sa[N], dv[N], q[N];                                                 \
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            gy[i] = gy_[i]; v[i] = v_[i]; sa[i] = sa_[i]; dv[i] = 0; q[i] = 0;             \
        }                                                                                  \
        for (Py_ssize_t j = 0; j < N; j++) {                                               \
            T *D = DT + j * N, rj = r[j], kj = k[j], bj = b[j], s1 = 0, s2 = 0, s3 = 0;    \
            const T *Stj = StT + j * N;                                                    \
            _Pragma("omp simd reduction(+:s1, s2, s3)")                                     \
            for (Py_ssize_t i = 0; i < N; i++) {                                           \
                T d = D[i] + rj * gy[i];                                                   \
                D[i] = d;                                                                  \
                dv[i] += d * kj;                                                           \
                q[i] += d * bj;                                                            \
                s1 += d * v[i];                                                            \
                s2 += d * sa[i];                                                           \
                s3 += Stj[i] * gy[i];                                                      \
            }                                                                              \
            dk[j] = s1; db[j] = s2; dr[j] = s3;                                            \
        }                                                                                  \
        for (Py_ssize_t j = 0; j < N; j++) {                                               \
            T *D = DT + j * N, wj = w[j], aj = a[j], s1 = 0, s2 = 0;                       \
            const T *Spj = SpT + j * N;                                                    \
            _Pragma("omp simd reduction(+:s1, s2)")                                         \
            for (Py_ssize_t i = 0; i < N; i++) {                                           \
                T d = D[i];                                                                \
                s1 += d * Spj[i];                                                          \
                s2 += Spj[i] * q[i];                                                       \
                D[i] = d * wj + aj * q[i];                                                 \
            }                                                                              \
            dw[j] = s1; da[j] = s2;                                                        \
        }                                                                                  \
        for (Py_ssize_t i = 0; i < N; i++) dv_[i] = dv[i];                                 \
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
    static void mg_wkv_bwd_##SUF(const T *Sp, const T *St, const T *sa, T *dS, const T *gy,\
            const T *r, const T *w, const T *k, const T *v, const T *a, const T *b, T *dr, \
            T *dw, T *dk, T *dv, T *da, T *db, Py_ssize_t N) {                             \
        if (N == 64) mg_wkv_bwd_##SUF##_n(Sp, St, sa, dS, gy, r, w, k, v, a, b,            \
                                          dr, dw, dk, dv, da, db, 64);                     \
        else mg_wkv_bwd_##SUF##_n(Sp, St, sa, dS, gy, r, w, k, v, a, b,                    \
                                  dr, dw, dk, dv, da, db, N);                              \
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
    void mg_wkv_bwd_f(const float *Sp, const float *St, const float *sa, float *dS,
                      const float *gy, const float *r, const float *w, const float *k,
                      const float *v, const float *a, const float *b, float *dr, float *dw,
                      float *dk, float *dv, float *da, float *db, Py_ssize_t N) noexcept nogil
    void mg_wkv_bwd_d(const double *Sp, const double *St, const double *sa, double *dS,
                      const double *gy, const double *r, const double *w, const double *k,
                      const double *v, const double *a, const double *b, double *dr,
                      double *dw, double *dk, double *dv, double *da, double *db,
                      Py_ssize_t N) noexcept nogil


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


cdef inline void _step_backward(const floating* Sp, const floating* St, const floating* sa,
                                floating* dS, const floating* gy, const floating* r,
                                const floating* w, const floating* k, const floating* v,
                                const floating* a, const floating* b, floating* dr,
                                floating* dw, floating* dk, floating* dv, floating* da,
                                floating* db, Py_ssize_t N) noexcept nogil:
    """Reverse one step (Sp = S_{t-1}^T, St = S_t^T, dS = transposed adjoint). On entry dS is
    dL/dS_t from later steps; on exit dL/dS_{t-1}.

    With D = dS + gy r^T (the full adjoint of S_t) and q = D b:
        dr = S_t^T gy     dv = D k      dk = D^T v      db = D^T (S_{t-1} a)
        dw = sum_i D[i, :] * S_{t-1}[i, :]             da = S_{t-1}^T q
        dL/dS_{t-1} = D diag(w) + q a^T
    """
    if floating is float:
        mg_wkv_bwd_f(Sp, St, sa, dS, gy, r, w, k, v, a, b, dr, dw, dk, dv, da, db, N)
    else:
        mg_wkv_bwd_d(Sp, St, sa, dS, gy, r, w, k, v, a, b, dr, dw, dk, dv, da, db, N)


def _check_wkv7(op, seqs, states, ckpt, chunk, need_ckpt):
    """Sequence arrays (B, T, H, N), states (B, H, N, N), chunk >= 1 and the checkpoint buffer:
    B*H*ceil(T/chunk)*N*N values (or 0 in a forward that saves nothing)."""
    names = ("r", "w", "k", "v", "a", "b", "y") if len(seqs) == 7 else (
        "r", "w", "k", "v", "a", "b", "gy", "dr", "dw", "dk", "dv", "da", "db")
    snames = ("s0", "sT") if len(seqs) == 7 else ("gsT", "ds0")
    spec = " ".join(f"{n}:B,T,H,N" for n in names) + " " + " ".join(f"{n}:B,H,N,N" for n in snames)
    dims = check_kernel_args(op, spec, *seqs, *states)
    check_kernel_scalar(op, "chunk", chunk, 1)
    B, T, H, N = dims["B"], dims["T"], dims["H"], dims["N"]
    full = B * H * (-(-T // chunk)) * N * N
    if ckpt is None or ckpt.shape[0] not in ((full,) if need_ckpt else (full, 0)):
        got = None if ckpt is None else ckpt.shape[0]
        raise ValueError(f"{op}: ckpt must hold B*H*ceil(T/chunk)*N*N = {full} values"
                         f"{'' if need_ckpt else ' (or 0)'}, got {got}")


# r, w, k, v, a, b: (B, T, H, N); s0: (B, H, N, N) -> y: (B, T, H, N), sT: (B, H, N, N),
# ckpt: (B, H, nchunk, N, N) transposed states S^T at chunk starts (or a (0,)-sized array:
# no checkpoints, inference)
def wkv7_forward(const floating[:, :, :, ::1] r, const floating[:, :, :, ::1] w,
                 const floating[:, :, :, ::1] k, const floating[:, :, :, ::1] v,
                 const floating[:, :, :, ::1] a, const floating[:, :, :, ::1] b,
                 const floating[:, :, :, ::1] s0, floating[:, :, :, ::1] y,
                 floating[:, :, :, ::1] sT, floating[::1] ckpt, Py_ssize_t chunk):
    """y_t = S_t r_t with S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T; S_0 = s0."""
    _check_wkv7("wkv7_forward", (r, w, k, v, a, b, y), (s0, sT), ckpt, chunk, False)
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
                              &y[bi, t, h, 0], <floating*>NULL, N)
            _transpose_inplace(S, N)


# inputs as wkv7_forward; gy: (B, T, H, N); gsT: (B, H, N, N) upstream grad of the final state
# -> dr, dw, dk, dv, da, db: (B, T, H, N), ds0: (B, H, N, N)
def wkv7_backward(const floating[:, :, :, ::1] r, const floating[:, :, :, ::1] w,
                  const floating[:, :, :, ::1] k, const floating[:, :, :, ::1] v,
                  const floating[:, :, :, ::1] a, const floating[:, :, :, ::1] b,
                  const floating[::1] ckpt, const floating[:, :, :, ::1] gy,
                  const floating[:, :, :, ::1] gsT, floating[:, :, :, ::1] dr,
                  floating[:, :, :, ::1] dw, floating[:, :, :, ::1] dk,
                  floating[:, :, :, ::1] dv, floating[:, :, :, ::1] da,
                  floating[:, :, :, ::1] db, floating[:, :, :, ::1] ds0, Py_ssize_t chunk):
    """Reverse-mode through the whole sequence, chunk by chunk (last chunk first).

    Each chunk restarts from its checkpoint, recomputes its states S_{c0} .. S_{c0+L} and the
    vectors S_{t-1} a_t into thread-private scratch, then applies `_step_backward` in reverse.
    The running adjoint dS lives in ds0 and ends as dL/dS_0.
    """
    _check_wkv7("wkv7_backward", (r, w, k, v, a, b, gy, dr, dw, dk, dv, da, db), (gsT, ds0), ckpt, chunk, True)
    cdef Py_ssize_t B = r.shape[0], T = r.shape[1], H = r.shape[2], N = r.shape[3]
    cdef Py_ssize_t NN = N * N, nchunk = (T + chunk - 1) // chunk
    cdef Py_ssize_t bh, bi, h, c, t, t0, L, s
    cdef int nthreads = omp_get_max_threads()
    dtype = np.float32 if floating is float else np.float64
    cdef floating[:, ::1] states_all = np.empty((nthreads, (chunk + 1) * NN), dtype)
    cdef floating[:, ::1] sas_all = np.empty((nthreads, chunk * N), dtype)
    cdef floating* states
    cdef floating* sas
    cdef floating* dS
    with nogil:
        for bh in prange(B * H, schedule="dynamic", num_threads=nthreads):
            states = &states_all[omp_get_thread_num(), 0]
            sas = &sas_all[omp_get_thread_num(), 0]
            bi = bh // H
            h = bh - bi * H
            dS = &ds0[bi, h, 0, 0]
            _transpose_into(dS, &gsT[bi, h, 0, 0], N)
            for c in range(nchunk - 1, -1, -1):
                t0 = c * chunk
                L = min(chunk, T - t0)
                memcpy(states, &ckpt[(bh * nchunk + c) * NN], NN * sizeof(floating))
                for s in range(L):
                    t = t0 + s
                    _step_forward(states + s * NN, states + (s + 1) * NN, &r[bi, t, h, 0], &w[bi, t, h, 0],
                                  &k[bi, t, h, 0], &v[bi, t, h, 0], &a[bi, t, h, 0],
                                  &b[bi, t, h, 0], <floating*>NULL, sas + s * N, N)
                for s in range(L - 1, -1, -1):
                    t = t0 + s
                    _step_backward(states + s * NN, states + (s + 1) * NN, sas + s * N, dS,
                                   &gy[bi, t, h, 0], &r[bi, t, h, 0], &w[bi, t, h, 0],
                                   &k[bi, t, h, 0], &v[bi, t, h, 0], &a[bi, t, h, 0],
                                   &b[bi, t, h, 0], &dr[bi, t, h, 0], &dw[bi, t, h, 0],
                                   &dk[bi, t, h, 0], &dv[bi, t, h, 0], &da[bi, t, h, 0],
                                   &db[bi, t, h, 0], N)
            _transpose_inplace(dS, N)
