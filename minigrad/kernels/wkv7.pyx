"""WKV7 recurrence (RWKV-7 "x070"), one (batch, head) pair per prange task.

Per head, with the state S (N x N, S[i, j]: i = value index, j = key index):
    S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T,      y_t = S_t r_t.
Inputs are (B, T, H, N) C-contiguous, so the step-t vectors of head h are contiguous rows.

Memory: the forward stores the state at the start of every chunk of CHUNK steps (`ckpt`,
(B, H, ceil(T/CHUNK), N, N), transposed as the forward holds it) and the vectors S_{t-1} a_t;
the backward recomputes the CHUNK+1 states of one chunk into per-thread scratch, in the
natural layout S[i, j], and walks it in reverse. Saved memory grows as T/CHUNK, not T.
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
    /* Row sums of VL rows x VL lanes of partials (VL = 64 bytes / sizeof(T)): out[i] =
       sum_l p[i*VL + l] for i < VL, by a tree of shuffle-and-add folds that sums all VL rows
       at once (log2 VL levels, 2 shuffles + 1 add per pair) instead of VL horizontal sums.
       The tree leaves row bitrev(l) in lane l. Plain loops where the builtin is missing. */
    #if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
    typedef float mg_v16f __attribute__((vector_size(64)));
    typedef double mg_v8d __attribute__((vector_size(64)));
    #define MG_FOLD(x, y, ...) (__builtin_shufflevector(x, y, __VA_ARGS__))
    static inline void mg_lane_sums_f(const float *p, float *out) {
        static const int rev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
        mg_v16f v[16];
        for (int i = 0; i < 16; i++) __builtin_memcpy(&v[i], p + 16 * i, 64);
        for (int k = 0; k < 8; k++)
            v[k] = MG_FOLD(v[2*k], v[2*k+1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)
                 + MG_FOLD(v[2*k], v[2*k+1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
        for (int k = 0; k < 4; k++)
            v[k] = MG_FOLD(v[2*k], v[2*k+1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27)
                 + MG_FOLD(v[2*k], v[2*k+1], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
        for (int k = 0; k < 2; k++)
            v[k] = MG_FOLD(v[2*k], v[2*k+1], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)
                 + MG_FOLD(v[2*k], v[2*k+1], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
        v[0] = MG_FOLD(v[0], v[1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30)
             + MG_FOLD(v[0], v[1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
        for (int l = 0; l < 16; l++) out[rev[l]] = v[0][l];
    }
    static inline void mg_lane_sums_d(const double *p, double *out) {
        static const int rev[8] = {0, 4, 2, 6, 1, 5, 3, 7};
        mg_v8d v[8];
        for (int i = 0; i < 8; i++) __builtin_memcpy(&v[i], p + 8 * i, 64);
        for (int k = 0; k < 4; k++)
            v[k] = MG_FOLD(v[2*k], v[2*k+1], 0, 1, 2, 3, 8, 9, 10, 11)
                 + MG_FOLD(v[2*k], v[2*k+1], 4, 5, 6, 7, 12, 13, 14, 15);
        for (int k = 0; k < 2; k++)
            v[k] = MG_FOLD(v[2*k], v[2*k+1], 0, 1, 8, 9, 4, 5, 12, 13)
                 + MG_FOLD(v[2*k], v[2*k+1], 2, 3, 10, 11, 6, 7, 14, 15);
        v[0] = MG_FOLD(v[0], v[1], 0, 8, 2, 10, 4, 12, 6, 14)
             + MG_FOLD(v[0], v[1], 1, 9, 3, 11, 5, 13, 7, 15);
        for (int l = 0; l < 8; l++) out[rev[l]] = v[0][l];
    }
    #else
    #define MG_LANE_SUMS_PLAIN(T, SUF, VL)                                                  \
    static inline void mg_lane_sums_##SUF(const T *p, T *out) {                            \
        for (int i = 0; i < VL; i++) {                                                     \
            T s = 0;                                                                       \
            for (int l = 0; l < VL; l++) s += p[VL * i + l];                               \
            out[i] = s;                                                                    \
        }                                                                                  \
    }
    MG_LANE_SUMS_PLAIN(float, f, 16)
    MG_LANE_SUMS_PLAIN(double, d, 8)
    #endif
    #define MG_R __restrict__   /* every pointer below names its own array */
    #define MG_WKV_STEPS(T, SUF, BASE)                                                          \
    static inline __attribute__((always_inline)) void mg_wkv_fwd_##SUF(const T *Sin,      \
            T *ST, const T *MG_R r, const T *MG_R w, const T *MG_R k, const T *MG_R v_,    \
            const T *MG_R a, const T *MG_R b, T *MG_R y, T *MG_R sa_io,                    \
            const T *MG_R a_next, T *MG_R sa_next, const Py_ssize_t N,                     \
            const int want_y, const int have_sa, const int want_next) {                    \
        /* ST = step(Sin); Sin == ST (in place) is allowed: each element is read, then   \
           written, by the same iteration. sa = Sin a: read from sa_io when have_sa (the  \
           previous step made it), else computed in a first pass and written to sa_io.    \
           want_next: also sa_next = ST a_next, in the same pass as the update, so a      \
           sequence reads each state once per step instead of twice. */                  \
        T sa[N], yv[N], v[N], sn[N];                                                       \
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            sa[i] = have_sa ? sa_io[i] : 0; yv[i] = 0; v[i] = v_[i]; sn[i] = 0;            \
        }                                                                                  \
        if (!have_sa) {                                                                    \
            for (Py_ssize_t j = 0; j < N; j++) {                                           \
                const T *row = Sin + j * N, aj = a[j];                                     \
                _Pragma("omp simd")                                                         \
                for (Py_ssize_t i = 0; i < N; i++) sa[i] += row[i] * aj;                   \
            }                                                                              \
        }                                                                                  \
        for (Py_ssize_t j = 0; j < N; j++) {                                               \
            const T *row = Sin + j * N, wj = w[j], kj = k[j], bj = b[j], rj = r[j];        \
            const T nj = want_next ? a_next[j] : 0;                                        \
            T *out = ST + j * N;                                                           \
            _Pragma("omp simd")                                                             \
            for (Py_ssize_t i = 0; i < N; i++) {                                           \
                T s = row[i] * wj + v[i] * kj + sa[i] * bj;                                \
                out[i] = s;                                                                \
                if (want_y) yv[i] += s * rj;                                               \
                if (want_next) sn[i] += s * nj;                                            \
            }                                                                              \
        }                                                                                  \
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            if (want_y) y[i] = yv[i];                                                      \
            if (!have_sa && sa_io) sa_io[i] = sa[i];                                       \
            if (want_next) sa_next[i] = sn[i];                                             \
        }                                                                                  \
    }                                                                                      \
    /* The backward works on states in the natural layout S[i*N + j] (row = value index i): \
       the recompute is then one pass per row with the saved sa (no reductions), and the   \
       reverse sweep has two row reductions per row instead of five. */                    \
    static inline __attribute__((always_inline)) void mg_wkv_rec_##SUF(const T *MG_R Sin,  \
            T *MG_R S, const T *MG_R w, const T *MG_R k, const T *MG_R v,                  \
            const T *MG_R b, const T *MG_R sa,                                             \
            const Py_ssize_t N) {                                                          \
        /* S = Sin diag(w) + v k^T + sa b^T (Sin != S), the forward's update, same rounding */\
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            const T *row = Sin + i * N, vi = v[i], si = sa[i];                             \
            T *out = S + i * N;                                                            \
            _Pragma("omp simd")                                                             \
            for (Py_ssize_t j = 0; j < N; j++) out[j] = row[j] * w[j] + vi * k[j] + si * b[j];\
        }                                                                                  \
    }                                                                                      \
    /* Columns j0 .. j0+NL-1 of one backward sweep over all rows i of S = S_{t-1} and of   \
       the adjoint D (updated in place), fusing two half-steps that read the same state:   \
       DO2, the end of step t:    dw_t[j] = sum_i D[i,j] S[i,j],  da_t[j] = sum_i S[i,j] q2[i],\
                                  D[i,j] = D[i,j] w_t[j] + q2[i] a_t[j]  (now dL/dS_{t-1}) \
       DO1, the start of step t-1 (u = its inputs):                                       \
                                  D[i,j] += gy_u[i] r_u[j];  dk_u[j] = sum_i D[i,j] v_u[i];\
                                  db_u[j] = sum_i D[i,j] sa_u[i];  dr_u[j] = sum_i S[i,j] gy_u[i];\
                                  dv_u[i], q1[i] = sum_j D[i,j] (k_u[j], b_u[j])  (lane   \
                                  partials pv, pq of VL columns, summed by the caller)    \
       The column sums stay in registers over the whole i loop; only pv/pq go to memory. */\
    static inline __attribute__((always_inline)) void mg_wkv_bwd_cols_##SUF(               \
            const T *MG_R S, T *MG_R D, const T *MG_R q2, const T *MG_R w,                 \
            const T *MG_R a,                                                               \
            T *MG_R dw, T *MG_R da, const T *MG_R r, const T *MG_R gy, const T *MG_R k,    \
            const T *MG_R b, const T *MG_R v, const T *MG_R sa, T *MG_R dr, T *MG_R dk,    \
            T *MG_R db, T *MG_R pv, T *MG_R pq,                                            \
            const Py_ssize_t N, const Py_ssize_t j0,                                       \
            const Py_ssize_t NL, const Py_ssize_t VL, const int DO1, const int DO2,        \
            const int FIRST) {  /* FIRST: pv, pq are written, not accumulated into */     \
        T aw[64 / sizeof(T)], aa[64 / sizeof(T)], ar[64 / sizeof(T)];  /* NL <= VL */      \
        T ak[64 / sizeof(T)], ab[64 / sizeof(T)];                                          \
        for (Py_ssize_t l = 0; l < NL; l++) { aw[l] = 0; aa[l] = 0; ar[l] = 0; ak[l] = 0; ab[l] = 0; }\
        for (Py_ssize_t i = 0; i < N; i++) {                                               \
            T *Di = D + i * N + j0, *pvi = pv + i * VL, *pqi = pq + i * VL;                \
            const T *Si = S + i * N + j0;                                                  \
            const T q2i = DO2 ? q2[i] : 0, gyi = DO1 ? gy[i] : 0;                          \
            const T vi = DO1 ? v[i] : 0, sai = DO1 ? sa[i] : 0;                            \
            _Pragma("omp simd")                                                             \
            for (Py_ssize_t l = 0; l < NL; l++) {                                          \
                T d = Di[l], s = Si[l];                                                    \
                if (DO2) {                                                                 \
                    aw[l] += d * s;                                                        \
                    aa[l] += s * q2i;                                                      \
                    d = d * w[j0 + l] + a[j0 + l] * q2i;                                   \
                }                                                                          \
                if (DO1) {                                                                 \
                    d += r[j0 + l] * gyi;                                                  \
                    pvi[l] = (FIRST ? 0 : pvi[l]) + d * k[j0 + l];                         \
                    pqi[l] = (FIRST ? 0 : pqi[l]) + d * b[j0 + l];                         \
                    ak[l] += d * vi;                                                       \
                    ab[l] += d * sai;                                                      \
                    ar[l] += s * gyi;                                                      \
                }                                                                          \
                Di[l] = d;                                                                 \
            }                                                                              \
        }                                                                                  \
        for (Py_ssize_t l = 0; l < NL; l++) {                                              \
            if (DO2) { dw[j0 + l] = aw[l]; da[j0 + l] = aa[l]; }                           \
            if (DO1) { dk[j0 + l] = ak[l]; db[j0 + l] = ab[l]; dr[j0 + l] = ar[l]; }       \
        }                                                                                  \
    }                                                                                      \
    static inline __attribute__((always_inline)) void mg_wkv_bwd_##SUF(const T *S, T *D,   \
            const T *q2, const T *w, const T *a, T *dw, T *da,                             \
            const T *r, const T *gy, const T *k, const T *b, const T *v, const T *sa,      \
            T *dr, T *dk, T *db, T *dv, T *q1, const Py_ssize_t N,                         \
            const int DO1, const int DO2) {                                                \
        enum { VL = 64 / sizeof(T) };       /* columns per block: two 256-bit vectors */   \
        T pv[N * VL], pq[N * VL];                                                          \
        /* a first full block of columns writes pv, pq; a lone partial one needs zeros */  \
        if (DO1 && N < VL) for (Py_ssize_t m = 0; m < N * VL; m++) { pv[m] = 0; pq[m] = 0; }\
        Py_ssize_t j0 = 0;                                                                 \
        for (; j0 + VL <= N; j0 += VL)                                                     \
            mg_wkv_bwd_cols_##SUF(S, D, q2, w, a, dw, da, r, gy, k, b, v, sa, dr, dk, db,  \
                                  pv, pq, N, j0, VL, VL, DO1, DO2, j0 == 0);               \
        if (j0 < N)                                                                        \
            mg_wkv_bwd_cols_##SUF(S, D, q2, w, a, dw, da, r, gy, k, b, v, sa, dr, dk, db,  \
                                  pv, pq, N, j0, N - j0, VL, DO1, DO2, j0 == 0);           \
        if (DO1) {                                                                         \
            Py_ssize_t i = 0;                                                              \
            for (; i + VL <= N; i += VL) {                                                 \
                mg_lane_sums_##BASE(pv + i * VL, dv + i);                                  \
                mg_lane_sums_##BASE(pq + i * VL, q1 + i);                                  \
            }                                                                              \
            for (; i < N; i++) {                                                           \
                T s1 = 0, s2 = 0;                                                          \
                for (Py_ssize_t l = 0; l < VL; l++) { s1 += pv[i * VL + l]; s2 += pq[i * VL + l]; }\
                dv[i] = s1;                                                                \
                q1[i] = s2;                                                                \
            }                                                                              \
        }                                                                                  \
    }
    #define MG_WKV_DISPATCH(T, SUF)                                                         \
    MG_WKV_STEPS(T, SUF##_n, SUF)                                                               \
    static void mg_wkv_fwd_##SUF(const T *Sin, T *S, const T *r, const T *w, const T *k,   \
            const T *v, const T *a, const T *b, T *y, T *sa_io, const T *a_next,           \
            T *sa_next, Py_ssize_t N, int have_sa) {                                       \
        /* the training / prefill case (y wanted, a next step) gets a constant-N copy */  \
        if (N == 64 && y && a_next && have_sa)                                             \
            mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_io, a_next, sa_next, 64, 1, 1, 1);\
        else if (N == 64 && y && a_next)                                                   \
            mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_io, a_next, sa_next, 64, 1, 0, 1);\
        else if (N == 64 && y)                                                             \
            mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_io, a_next, sa_next, 64, 1, have_sa, 0);\
        else                                                                               \
            mg_wkv_fwd_##SUF##_n(Sin, S, r, w, k, v, a, b, y, sa_io, a_next, sa_next, N, y != NULL,\
                                 have_sa, a_next != NULL);                                 \
    }                                                                                      \
    static void mg_wkv_rec_##SUF(const T *Sin, T *S, const T *w, const T *k, const T *v,   \
            const T *b, const T *sa, Py_ssize_t N) {                                       \
        if (N == 64) mg_wkv_rec_##SUF##_n(Sin, S, w, k, v, b, sa, 64);                     \
        else mg_wkv_rec_##SUF##_n(Sin, S, w, k, v, b, sa, N);                              \
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
    /* Prefetch `bytes` from p into all cache levels, for reading. */
    static inline void mg_prefetch_r(const void *p, Py_ssize_t bytes) {
        for (Py_ssize_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o, 0, 3);
    }
    """
    void mg_wkv_fwd_f(const float *Sin, float *S, const float *r, const float *w,
                      const float *k, const float *v, const float *a, const float *b, float *y,
                      float *sa_io, const float *a_next, float *sa_next, Py_ssize_t N,
                      int have_sa) noexcept nogil
    void mg_wkv_fwd_d(const double *Sin, double *S, const double *r, const double *w,
                      const double *k, const double *v, const double *a, const double *b,
                      double *y, double *sa_io, const double *a_next, double *sa_next,
                      Py_ssize_t N, int have_sa) noexcept nogil
    void mg_wkv_rec_f(const float *Sin, float *S, const float *w, const float *k,
                      const float *v, const float *b, const float *sa, Py_ssize_t N) noexcept nogil
    void mg_wkv_rec_d(const double *Sin, double *S, const double *w, const double *k,
                      const double *v, const double *b, const double *sa,
                      Py_ssize_t N) noexcept nogil
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
    void mg_prefetch_r(const void *p, Py_ssize_t bytes) noexcept nogil

# Below this many (batch, head, step) tasks a parallel region costs more than it saves (one
# token at a time: every region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_STEPS = 64


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
                               const floating* b, floating* y, floating* sa, const floating* a_next,
                               floating* sa_next, Py_ssize_t N, bint have_sa) noexcept nogil:
    """One step on one head on transposed states: S^T = step(Sin^T) (Sin == S: in place):
        sa = S a;  S = S diag(w) + v k^T + sa b^T;  y = S r  (y only if not NULL)
    sa = S_{t-1} a_t is read from `sa` when have_sa, else computed and written there; with a_next
    (not NULL) the same pass also writes sa_next = S_t a_{t+1}, the next step's sa."""
    if floating is float:
        mg_wkv_fwd_f(Sin, S, r, w, k, v, a, b, y, sa, a_next, sa_next, N, have_sa)
    else:
        mg_wkv_fwd_d(Sin, S, r, w, k, v, a, b, y, sa, a_next, sa_next, N, have_sa)


cdef inline void _step_recompute(const floating* Sin, floating* S, const floating* w,
                                 const floating* k, const floating* v, const floating* b,
                                 const floating* sa, Py_ssize_t N) noexcept nogil:
    """One step on natural-layout states with the saved sa = Sin a:
    S = Sin diag(w) + v k^T + sa b^T (Sin != S)."""
    if floating is float:
        mg_wkv_rec_f(Sin, S, w, k, v, b, sa, N)
    else:
        mg_wkv_rec_d(Sin, S, w, k, v, b, sa, N)


cdef inline void _backward_rows(const floating* S, floating* D, const floating* q2,
                                const floating* w, const floating* a, floating* dw,
                                floating* da, const floating* r, const floating* gy,
                                const floating* k, const floating* b, const floating* v,
                                const floating* sa, floating* dr, floating* dk, floating* db,
                                floating* dv, floating* q1, Py_ssize_t N, int do1,
                                int do2) noexcept nogil:
    """One sweep over the rows of S = S_{t-1} and the adjoint D (natural layout; see the C macro):
    do2 finishes step t (dw_t, da_t; D <- D diag(w_t) + q_t a_t^T = dL/dS_{t-1}), do1 starts
    step t-1 (D += gy r^T; dr, dk, db and, summed over rows, dv and q = D b)."""
    if floating is float:
        mg_wkv_bwd_f(S, D, q2, w, a, dw, da, r, gy, k, b, v, sa, dr, dk, db, dv, q1, N, do1, do2)
    else:
        mg_wkv_bwd_d(S, D, q2, w, a, dw, da, r, gy, k, b, v, sa, dr, dk, db, dv, q1, N, do1, do2)


def _same_or_disjoint(op, name_in, x, name_out, out):
    """True when out is the array x itself (an in-place update), False when they share no memory;
    ValueError for a partial overlap, which the kernel's out-of-place writes would corrupt."""
    if not np.may_share_memory(x, out):
        return False
    if x.__array_interface__["data"][0] == out.__array_interface__["data"][0] and x.strides == out.strides:
        return True
    raise ValueError(f"{op}: {name_out} overlaps {name_in} without being the same array")


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
    """y_t = S_t r_t with S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T; S_0 = s0.
    sT may be s0 itself (the state updated in place), but not otherwise overlap it."""
    _check_wkv7("wkv7_forward", (r, w, k, v, a, b, y), (s0, sT), ckpt, sa, chunk, False)
    cdef bint in_place = _same_or_disjoint("wkv7_forward", "s0", np.asarray(s0), "sT", np.asarray(sT))
    cdef Py_ssize_t B = r.shape[0], T = r.shape[1], H = r.shape[2], N = r.shape[3]
    cdef Py_ssize_t NN = N * N, nchunk = (T + chunk - 1) // chunk
    cdef bint save = ckpt.shape[0] > 0
    cdef Py_ssize_t bh, bi, h, t
    cdef floating* S
    cdef floating* sa_t
    cdef floating* sa_n
    # without saving, each thread keeps the running S_{t-1} a_t in two rows of its own
    dtype = np.float32 if floating is float else np.float64
    cdef floating[:, ::1] sa_rows = np.empty((0 if save else omp_get_max_threads(), 2 * N), dtype)
    with nogil:
        for bh in prange(B * H, schedule="dynamic", use_threads_if=B * H * T >= PARALLEL_MIN_STEPS):
            bi = bh // H
            h = bh - bi * H
            S = &sT[bi, h, 0, 0]
            if in_place:
                _transpose_inplace(S, N)
            else:
                _transpose_into(S, &s0[bi, h, 0, 0], N)
            for t in range(T):
                if save and t % chunk == 0:
                    memcpy(&ckpt[(bh * nchunk + t // chunk) * NN], S, NN * sizeof(floating))
                if save:
                    sa_t = &sa[bi, t, h, 0]
                    sa_n = &sa[bi, t + 1, h, 0] if t + 1 < T else <floating*>NULL
                else:
                    sa_t = &sa_rows[omp_get_thread_num(), (t % 2) * N]
                    sa_n = &sa_rows[omp_get_thread_num(), ((t + 1) % 2) * N]
                _step_forward(S, S, &r[bi, t, h, 0], &w[bi, t, h, 0], &k[bi, t, h, 0],
                              &v[bi, t, h, 0], &a[bi, t, h, 0], &b[bi, t, h, 0], &y[bi, t, h, 0],
                              sa_t, &a[bi, t + 1, h, 0] if t + 1 < T else <floating*>NULL,
                              sa_n if t + 1 < T else <floating*>NULL, N, t > 0)
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

    Each chunk restarts from its checkpoint (transposed back to the natural layout) and
    recomputes its states S_{t0-1} .. S_{t0+L-1} into thread-private scratch with the saved sa.
    The reverse sweep then visits each state once: the sweep over
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
        for bh in prange(B * H, schedule="dynamic", num_threads=nthreads,
                         use_threads_if=B * H * T >= PARALLEL_MIN_STEPS):
            states = &states_all[omp_get_thread_num(), 0]
            q = &q_all[omp_get_thread_num(), 0]
            bi = bh // H
            h = bh - bi * H
            D = &ds0[bi, h, 0, 0]
            memcpy(D, &gsT[bi, h, 0, 0], NN * sizeof(floating))
            for c in range(nchunk - 1, -1, -1):
                t0 = c * chunk
                L = min(chunk, T - t0)
                _transpose_into(states, &ckpt[(bh * nchunk + c) * NN], N)
                if c > 0:   # the next chunk's checkpoint, written long ago by the forward
                    mg_prefetch_r(&ckpt[(bh * nchunk + c - 1) * NN], NN * sizeof(floating))
                for s in range(L):
                    t = t0 + s
                    # the reverse sweep below walks these rows downwards in t, which the
                    # hardware prefetcher serves badly: fetch the ones the recompute does not read
                    mg_prefetch_r(&r[bi, t, h, 0], N * sizeof(floating))
                    mg_prefetch_r(&a[bi, t, h, 0], N * sizeof(floating))
                    mg_prefetch_r(&gy[bi, t, h, 0], N * sizeof(floating))
                    _step_recompute(states + s * NN, states + (s + 1) * NN, &w[bi, t, h, 0],
                                    &k[bi, t, h, 0], &v[bi, t, h, 0], &b[bi, t, h, 0],
                                    &sa[bi, t, h, 0], N)
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
