"""RWKV token shift with K lerps: xs[m] = x + (prev - x) * mu[m], prev = x shifted one step right.

prev[b, 0] = shift[b] (the carried last token of the previous piece), prev[b, t] = x[b, t-1].
Shared by the time-mix (K = 6: r, w, k, v, a, g) and the channel-mix (K = 1).
"""
from cython cimport floating
from cython.parallel cimport prange

from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

# Below this many rows a parallel region costs more than it saves (one token at a time: every
# region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_ROWS = 64


# x: (B, T, C), shift: (B, C), mu: (K, C) -> xs: (K, B, T, C)
def token_shift_forward(const floating[:, :, ::1] x, const floating[:, ::1] shift,
                        const floating[:, ::1] mu, floating[:, :, :, ::1] xs):
    """xs[m, b, t] = x[b, t] + (prev[b, t] - x[b, t]) * mu[m]."""
    check_kernel_args("token_shift_forward", "x:B,T,C shift:B,C mu:K,C xs:K,B,T,C", x, shift, mu, xs)
    check_kernel_scalar("token_shift_forward", "T", x.shape[1], 1)
    cdef Py_ssize_t K = mu.shape[0], B = x.shape[0], T = x.shape[1], C = x.shape[2]
    cdef Py_ssize_t bt, b, t, m, c
    cdef const floating* xr
    cdef const floating* pr
    cdef const floating* mr
    cdef floating* out
    with nogil:
        for bt in prange(B * T, schedule="static", use_threads_if=B * T >= PARALLEL_MIN_ROWS):
            b = bt // T
            t = bt - b * T
            xr = &x[b, t, 0]
            pr = &shift[b, 0] if t == 0 else &x[b, t - 1, 0]
            for m in range(K):
                mr = &mu[m, 0]
                out = &xs[m, b, t, 0]
                for c in range(C):
                    out[c] = xr[c] + (pr[c] - xr[c]) * mr[c]


# gxs: (K, B, T, C), x: (B, T, C), shift: (B, C), mu: (K, C), gnew: (B, C) grad of x[:, -1]
# -> gx: (B, T, C), gshift: (B, C), gmu_part: (B, K, C) (sum over b left to the caller)
def token_shift_backward(const floating[:, :, :, ::1] gxs, const floating[:, :, ::1] x,
                         const floating[:, ::1] shift, const floating[:, ::1] mu,
                         const floating[:, ::1] gnew, floating[:, :, ::1] gx,
                         floating[:, ::1] gshift, floating[:, :, ::1] gmu_part):
    """With G_m = gxs[m]:
        gx[b, t]   = sum_m G_m[b, t] (1 - mu_m) + sum_m G_m[b, t+1] mu_m  (t+1 < T) + gnew[b] (t = T-1)
        gshift[b]  = sum_m G_m[b, 0] mu_m
        gmu_m      = sum_{b,t} G_m[b, t] (prev[b, t] - x[b, t])
    One prange task per batch row b (it owns gx[b], gshift[b], gmu_part[b]), one lerp m at a time,
    rows in increasing t: descending walks over the row streams ran at a third of the bandwidth
    of ascending ones here (hardware prefetch).
    """
    check_kernel_args("token_shift_backward", "gxs:K,B,T,C x:B,T,C shift:B,C mu:K,C gnew:B,C "
                      "gx:B,T,C gshift:B,C gmu_part:B,K,C", gxs, x, shift, mu, gnew, gx, gshift, gmu_part)
    check_kernel_scalar("token_shift_backward", "T", x.shape[1], 1)
    cdef Py_ssize_t K = mu.shape[0], B = x.shape[0], T = x.shape[1], C = x.shape[2]
    cdef Py_ssize_t b, t, m, c
    cdef const floating* xr
    cdef const floating* pr
    cdef const floating* gr
    cdef const floating* gn
    cdef const floating* mr
    cdef floating* gxr
    cdef floating* acc
    with nogil:
        for b in prange(B, schedule="static", use_threads_if=B > 1 and B * T >= PARALLEL_MIN_ROWS):
            for m in range(K):
                for c in range(C):
                    gmu_part[b, m, c] = 0
            gxr = &gshift[b, 0]
            for c in range(C):
                gxr[c] = 0
            for m in range(K):
                gr = &gxs[m, b, 0, 0]
                mr = &mu[m, 0]
                for c in range(C):
                    gxr[c] = gxr[c] + gr[c] * mr[c]
            for t in range(T):
                gxr = &gx[b, t, 0]
                if t == T - 1:
                    for c in range(C):
                        gxr[c] = gnew[b, c]
                else:
                    for c in range(C):
                        gxr[c] = 0
            # one lerp at a time over the whole row range: an (m, t) step touches ~9 KB (its two
            # G_m rows, the x rows, the gx row, acc_m) where all K lerps of a t touched ~32 KB, the
            # whole L1d; gx[b] and x[b] (T C each: 384 KB at T 256, C 384) are reread per lerp. Each
            # gx element gets the same operations in the same order as lerp-inside-t (bit-identical).
            for m in range(K):
                mr = &mu[m, 0]
                acc = &gmu_part[b, m, 0]
                for t in range(T):
                    xr = &x[b, t, 0]
                    pr = &shift[b, 0] if t == 0 else &x[b, t - 1, 0]
                    gxr = &gx[b, t, 0]
                    gr = &gxs[m, b, t, 0]
                    if t + 1 < T:           # short loops over few arrays: vectorised by gcc
                        gn = &gxs[m, b, t + 1, 0]
                        for c in range(C):
                            gxr[c] = (gxr[c] + gr[c] - gr[c] * mr[c]) + gn[c] * mr[c]
                    else:
                        for c in range(C):
                            gxr[c] = gxr[c] + gr[c] - gr[c] * mr[c]
                    for c in range(C):
                        acc[c] = acc[c] + gr[c] * (pr[c] - xr[c])
