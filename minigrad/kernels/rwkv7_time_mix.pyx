"""Elementwise / per-head parts of the RWKV-7 ("x070") time-mix block.

All arrays are 2-D (M, C) row views, M = B*T, channels head-major (c = h*N + n), C = H*N.
The GEMMs (projections, LoRAs) run in numpy/BLAS between these kernels; the recurrence is
minigrad.kernels.wkv7. Backward derivations: docs/rwkv7_kernels.md.

Per-row-independent work uses prange over rows. Parameter gradients (sums over rows) go to
per-block accumulators `acc` of shape (nblocks, P, C) (one fixed range of rows per block; the
caller uses one block per thread) that the caller sums over axis 0.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, tanh

from minigrad.kernels._openmp cimport omp_get_max_threads
from minigrad.kernels._rowsum cimport row_dot, row_dot3, row_dot3_centered, row_mean, row_sqdev
from minigrad.kernels._vmath cimport mg_expf, mg_tanhf
from minigrad.kernels.validate import check_kernel_args, check_kernel_scalar

cdef double DECAY_SCALE = exp(-0.5)   # w = exp(-exp(-0.5) * sigmoid(z)), the exact x070 constant
cdef double KK_EPS = 1e-12            # kk = kk / max(||kk||, 1e-12)

# Below this many rows a parallel region costs more than it saves (one token at a time: every
# region waits for the other thread to be scheduled); run serially then.
cdef Py_ssize_t PARALLEL_MIN_ROWS = 64


cdef inline floating _exp(floating z) noexcept nogil:
    """float32: the vectorisable mg_expf (< 1 ulp); float64: libm exp."""
    if floating is float:
        return mg_expf(z)
    else:
        return exp(z)


cdef inline floating _sigmoid(floating z) noexcept nogil:
    cdef floating one = 1      # a typed 1: keeps float32 maths in float (vectorisable)
    return one / (one + _exp(-z))


cdef inline floating _tanh(floating z) noexcept nogil:
    """float32: the vectorisable mg_tanhf; float64: libm tanh."""
    if floating is float:
        return mg_tanhf(z)
    else:
        return tanh(z)


def _check_heads(op, C, H, *optional):
    """H >= 1 heads dividing C channels; the optional (M or 0, C) operands all present or all absent."""
    check_kernel_scalar(op, "H", H, 1)
    if C % H:
        raise ValueError(f"{op}: H = {H} heads do not divide C = {C} channels")
    if len({a.shape[0] for a in optional}) > 1:
        raise ValueError(f"{op}: the value-residual operands must all have M rows or all 0, got "
                         f"{[tuple(a.shape) for a in optional]}")


def num_threads():
    """Rows of the per-thread accumulators the backward kernels need."""
    return omp_get_max_threads()


# h: (M, D) in place
def tanh_forward(floating[:, ::1] h):
    """h = tanh(h)."""
    check_kernel_args("tanh_forward", "h:*,*", h)
    cdef Py_ssize_t M = h.shape[0], D = h.shape[1], m, d
    with nogil:
        for m in prange(M, schedule="dynamic", chunksize=32, use_threads_if=M >= PARALLEL_MIN_ROWS):
            for d in range(D):
                h[m, d] = _tanh(h[m, d])


# h: (M, D) in place
def sigmoid_forward(floating[:, ::1] h):
    """h = sigmoid(h)."""
    check_kernel_args("sigmoid_forward", "h:*,*", h)
    cdef Py_ssize_t M = h.shape[0], D = h.shape[1], m, d
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            for d in range(D):
                h[m, d] = _sigmoid(h[m, d])


# g: (M, D) grad of the activation output (in place -> grad of its input), h: (M, D) output
def activation_backward(floating[:, ::1] g, const floating[:, ::1] h, bint is_tanh):
    """tanh: g *= 1 - h^2;  sigmoid: g *= h (1 - h)."""
    check_kernel_args("activation_backward", "g:M,D h:M,D", g, h)
    cdef Py_ssize_t M = h.shape[0], D = h.shape[1], m, d
    cdef floating one = 1        # typed: a bare 1 becomes the double 1.0 (float32 -> double maths)
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            for d in range(D):
                if is_tanh:
                    g[m, d] = g[m, d] * (one - h[m, d] * h[m, d])
                else:
                    g[m, d] = g[m, d] * h[m, d] * (one - h[m, d])


# k, v: (M, C) raw key/value; zw, za: (M, C) LoRA outputs (updated in place, see below);
# zv, vfirst: (M, C), or (0, C) for layer 0; params (C,) -> w, kk, kmod, vres, aw, bw: (M, C)
def time_mix_prepare_forward(const floating[:, ::1] k, const floating[:, ::1] v,
                             floating[:, ::1] zw, floating[:, ::1] za, floating[:, ::1] zv,
                             const floating[:, ::1] vfirst, const floating[::1] w0,
                             const floating[::1] a0, const floating[::1] v0,
                             const floating[::1] k_k, const floating[::1] k_a, Py_ssize_t H,
                             floating[:, ::1] w, floating[:, ::1] kk, floating[:, ::1] kmod,
                             floating[:, ::1] vres, floating[:, ::1] aw, floating[:, ::1] bw):
    """Per row and head (n over the head's N channels):
        zw <- w0 + zw;   w = exp(-exp(-0.5) sigmoid(zw))
        za <- a = sigmoid(a0 + za)
        kk = k k_k / max(||k k_k||, 1e-12);   kmod = k (1 + (a - 1) k_a)
        layer > 0: zv <- s = sigmoid(v0 + zv);  vres = v + (vfirst - v) s   (layer 0: untouched)
        aw = -kk;  bw = kk a          (the WKV7 a and b)
    """
    check_kernel_args("time_mix_prepare_forward", "k:M,C v:M,C zw:M,C za:M,C zv:M?,C vfirst:M?,C w0:C a0:C "
                      "v0:C k_k:C k_a:C w:M,C kk:M,C kmod:M,C vres:M,C aw:M,C bw:M,C", k, v, zw, za, zv,
                      vfirst, w0, a0, v0, k_k, k_a, w, kk, kmod, vres, aw, bw)
    _check_heads("time_mix_prepare_forward", k.shape[1], H, zv, vfirst)
    cdef Py_ssize_t M = k.shape[0], C = k.shape[1], N = C // H, m, h, n, c
    cdef bint vres_on = zv.shape[0] > 0
    cdef floating decay = <floating>DECAY_SCALE
    cdef floating one = 1        # typed: a bare 1 becomes the double 1.0 (float32 -> double maths)
    cdef double ss
    cdef floating inv, z
    cdef const floating* kr
    cdef const floating* vr
    cdef const floating* vfr
    cdef floating* zwr
    cdef floating* zar
    cdef floating* zvr
    cdef floating* wr
    cdef floating* kkr
    cdef floating* kmr
    cdef floating* vsr
    cdef floating* awr
    cdef floating* bwr
    with nogil:
        for m in prange(M, schedule="static", use_threads_if=M >= PARALLEL_MIN_ROWS):
            # one row at a time, in short loops over few arrays so that gcc vectorises them
            kr, vr, zwr, zar, wr = &k[m, 0], &v[m, 0], &zw[m, 0], &za[m, 0], &w[m, 0]
            kkr, kmr, awr, bwr = &kk[m, 0], &kmod[m, 0], &aw[m, 0], &bw[m, 0]
            for c in range(C):
                z = zwr[c] + w0[c]
                zwr[c] = z
                wr[c] = _exp(-decay * _sigmoid(z))
            for c in range(C):
                zar[c] = _sigmoid(a0[c] + zar[c])
            for c in range(C):
                kmr[c] = kr[c] * (one + (zar[c] - one) * k_a[c])
            if vres_on:
                zvr, vfr, vsr = &zv[m, 0], &vfirst[m, 0], &vres[m, 0]
                for c in range(C):
                    zvr[c] = _sigmoid(v0[c] + zvr[c])
                for c in range(C):
                    vsr[c] = vr[c] + (vfr[c] - vr[c]) * zvr[c]
            for h in range(H):
                ss = row_dot3_centered(kr + h * N, &k_k[h * N], kr + h * N, &k_k[h * N], N, 0.0)
                inv = <floating>(1.0 / max(sqrt(ss), KK_EPS))
                for n in range(h * N, h * N + N):
                    kkr[n] = kr[n] * k_k[n] * inv
            for c in range(C):
                awr[c] = -kkr[c]
                bwr[c] = kkr[c] * zar[c]


# dw, daw, dbw: (M, C) WKV grads; dr, dkmod, gv_in: (M, C) the WKV grads of r, kmod and v_used,
# to which the bonus-path grads gr_b, gkmod_b, gv_b (M, C) are added in place first; the
# forward's tensors (see prepare_forward)
# -> gk, gv, g_zw, g_za, g_zv, g_vfirst: (M, C); acc: (nblocks, 5, C) for w0, a0, v0, k_k, k_a
def time_mix_prepare_backward(const floating[:, ::1] dw, const floating[:, ::1] daw,
                              const floating[:, ::1] dbw, floating[:, ::1] dr,
                              floating[:, ::1] dkmod, floating[:, ::1] gv_in,
                              const floating[:, ::1] gr_b, const floating[:, ::1] gkmod_b,
                              const floating[:, ::1] gv_b, const floating[:, ::1] k,
                              const floating[:, ::1] v, const floating[:, ::1] zw,
                              const floating[:, ::1] w, const floating[:, ::1] a,
                              const floating[:, ::1] kk, const floating[:, ::1] sv,
                              const floating[:, ::1] vfirst, const floating[::1] k_k,
                              const floating[::1] k_a, Py_ssize_t H,
                              floating[:, ::1] gk, floating[:, ::1] gv, floating[:, ::1] g_zw,
                              floating[:, ::1] g_za, floating[:, ::1] g_zv,
                              floating[:, ::1] g_vfirst, floating[:, :, ::1] acc):
    """First dr += gr_b, dkmod += gkmod_b, gv_in += gv_b (the WKV and bonus paths meet; done here,
    row by row, instead of three passes over (M, C) arrays). Then the chain rule back through
    prepare_forward (per row m, head h; sums over m into acc):
        gkk  = -daw + dbw a                 ga = dbw kk + dkmod k k_a
        gk   = dkmod (1 + (a - 1) k_a) + k_k gkk0,   gkk0 = (gkk - kk (kk . gkk)) / ||k k_k||
               (gkk0 = gkk / 1e-12 when the norm is below 1e-12: the max() branch)
        g_za = ga a (1 - a)                 g_zw = dw * w * (-exp(-0.5)) sig (1 - sig), sig = sigmoid(zw)
        layer > 0 (sv = sigmoid(v0 + zv)):  gv = gv_in (1 - sv),  g_vfirst = gv_in sv,
                                            g_zv = gv_in (vfirst - v) sv (1 - sv)
        layer 0: gv = gv_in (the caller has already added the v_first output's grad)
        g_w0 = sum g_zw, g_a0 = sum g_za, g_v0 = sum g_zv, g_k_k = sum gkk0 k, g_k_a = sum dkmod k (a-1)
    """
    check_kernel_args("time_mix_prepare_backward", "dw:M,C daw:M,C dbw:M,C dr:M,C dkmod:M,C gv_in:M,C "
                      "gr_b:M,C gkmod_b:M,C gv_b:M,C k:M,C v:M,C zw:M,C w:M,C a:M,C kk:M,C sv:M?,C "
                      "vfirst:M?,C k_k:C k_a:C gk:M,C gv:M,C g_zw:M,C g_za:M,C g_zv:M?,C g_vfirst:M?,C "
                      "acc:P,5,C", dw, daw, dbw, dr, dkmod, gv_in, gr_b, gkmod_b, gv_b, k, v, zw, w,
                      a, kk, sv, vfirst, k_k, k_a, gk, gv, g_zw, g_za, g_zv, g_vfirst, acc)
    _check_heads("time_mix_prepare_backward", k.shape[1], H, sv, vfirst, g_zv, g_vfirst)
    check_kernel_scalar("time_mix_prepare_backward", "acc.shape[0]", acc.shape[0], 1)
    cdef Py_ssize_t M = k.shape[0], C = k.shape[1], N = C // H
    cdef Py_ssize_t nblocks = acc.shape[0]
    cdef Py_ssize_t rows = (M + nblocks - 1) // nblocks
    cdef Py_ssize_t blk, m, h, n, c, c0, lo, hi
    cdef bint vres_on = sv.shape[0] > 0
    cdef floating decay = <floating>DECAY_SCALE
    cdef double ss, dot
    cdef floating nrm_inv, gkk0, sig
    cdef floating one = 1        # typed: keeps float32 maths in float (Cython writes 1 as 1.0)
    cdef const floating* zwr
    cdef const floating* dwr
    cdef const floating* wr
    cdef const floating* svr
    cdef const floating* vfr
    cdef const floating* vr
    cdef floating* gvo
    cdef floating* gvf
    cdef floating* aw0
    cdef floating* aa0
    cdef floating* av0
    cdef floating* akk
    cdef floating* aka
    cdef const floating* kr
    cdef const floating* ar
    cdef const floating* kkr
    cdef floating* dkr
    cdef const floating* dar
    cdef const floating* dbr
    cdef floating* gvr
    cdef floating* drr
    cdef const floating* xbr
    cdef floating* gkr
    cdef floating* gzr
    with nogil:
        for blk in prange(nblocks, schedule="static",
                          use_threads_if=M >= PARALLEL_MIN_ROWS):
            aw0 = &acc[blk, 0, 0]
            aa0 = &acc[blk, 1, 0]
            av0 = &acc[blk, 2, 0]
            akk = &acc[blk, 3, 0]
            aka = &acc[blk, 4, 0]
            for c in range(5 * C):
                aw0[c] = 0
            lo = blk * rows
            hi = min(lo + rows, M)
            for m in range(lo, hi):
                kr, ar, kkr, dkr = &k[m, 0], &a[m, 0], &kk[m, 0], &dkmod[m, 0]
                dar, dbr, gkr = &daw[m, 0], &dbw[m, 0], &gk[m, 0]
                drr, xbr = &dr[m, 0], &gr_b[m, 0]
                for c in range(C):
                    drr[c] = drr[c] + xbr[c]
                xbr = &gkmod_b[m, 0]
                for c in range(C):
                    dkr[c] = dkr[c] + xbr[c]
                gvr, xbr = &gv_in[m, 0], &gv_b[m, 0]
                for c in range(C):
                    gvr[c] = gvr[c] + xbr[c]
                for h in range(H):
                    c0 = h * N
                    ss = sqrt(row_dot3_centered(kr + c0, &k_k[c0], kr + c0, &k_k[c0], N, 0.0))
                    dot = row_dot3(kkr + c0, dbr + c0, ar + c0, N) - row_dot(kkr + c0, dar + c0, N)
                    nrm_inv = <floating>(1.0 / ss if ss > KK_EPS else 1.0 / KK_EPS)
                    if ss <= KK_EPS:
                        dot = 0.0
                    gzr = &g_za[m, 0]      # scratch for gkk0 until g_za is written below
                    gkk0 = <floating>dot
                    for n in range(h * N, h * N + N):
                        gzr[n] = (dbr[n] * ar[n] - dar[n] - kkr[n] * gkk0) * nrm_inv
                # short loops over few arrays (alias checks stay few): gcc vectorises them
                gzr = &g_za[m, 0]
                for c in range(C):
                    gkr[c] = dkr[c] * (one + (ar[c] - one) * k_a[c]) + k_k[c] * gzr[c]
                for c in range(C):
                    akk[c] = akk[c] + gzr[c] * kr[c]
                for c in range(C):
                    aka[c] = aka[c] + dkr[c] * kr[c] * (ar[c] - one)
                for c in range(C):
                    gzr[c] = (dbr[c] * kkr[c] + dkr[c] * kr[c] * k_a[c]) * ar[c] * (one - ar[c])
                for c in range(C):
                    aa0[c] = aa0[c] + gzr[c]
                gzr, zwr, dwr, wr = &g_zw[m, 0], &zw[m, 0], &dw[m, 0], &w[m, 0]
                for c in range(C):
                    sig = _sigmoid(zwr[c])
                    gzr[c] = -decay * dwr[c] * wr[c] * sig * (one - sig)
                for c in range(C):
                    aw0[c] = aw0[c] + gzr[c]
                gvo = &gv[m, 0]
                if vres_on:
                    svr, gzr, gvf = &sv[m, 0], &g_zv[m, 0], &g_vfirst[m, 0]
                    vfr, vr = &vfirst[m, 0], &v[m, 0]
                    for c in range(C):
                        gvo[c] = gvr[c] * (one - svr[c])
                    for c in range(C):
                        gvf[c] = gvr[c] * svr[c]
                    for c in range(C):
                        gzr[c] = gvr[c] * (vfr[c] - vr[c]) * svr[c] * (one - svr[c])
                    for c in range(C):
                        av0[c] = av0[c] + gzr[c]
                else:
                    for c in range(C):
                        gvo[c] = gvr[c]


cdef inline void _head_stats(const floating* y, const floating* r, const floating* kmod,
                             const floating* r_k, Py_ssize_t N, double eps, floating* mean,
                             floating* rstd, floating* bonus) noexcept nogil:
    """One head of one row: mean (corrected, row_mean), rstd (two-pass biased variance) of y;
    bonus = sum r kmod r_k."""
    cdef double mu = row_mean(y, N)
    cdef double var = row_sqdev(y, N, mu) / N
    cdef double bo = row_dot3(r, kmod, r_k, N)
    mean[0] = <floating>mu
    rstd[0] = <floating>(1.0 / sqrt(var + eps))
    bonus[0] = <floating>bo


# y: (M, C) WKV output; r, kmod, vres, g: (M, C); r_k, ln_w, ln_b: (C,)
# -> u: (M, C) (the input of the output projection); mean, rstd, bonus: (M, H)
def time_mix_output_forward(const floating[:, ::1] y, const floating[:, ::1] r,
                            const floating[:, ::1] kmod, const floating[:, ::1] vres,
                            const floating[:, ::1] g, const floating[::1] r_k,
                            const floating[::1] ln_w, const floating[::1] ln_b, Py_ssize_t H,
                            double eps, floating[:, ::1] u, floating[:, ::1] mean,
                            floating[:, ::1] rstd, floating[:, ::1] bonus):
    """Per row and head: yhat = (y - mean) rstd (GroupNorm, biased variance, eps);
        bonus = sum_n r k r_k;   z = yhat ln_w + ln_b + bonus v;   u = z g."""
    check_kernel_args("time_mix_output_forward", "y:M,C r:M,C kmod:M,C vres:M,C g:M,C r_k:C ln_w:C ln_b:C "
                      "u:M,C", y, r, kmod, vres, g, r_k, ln_w, ln_b, u)
    _check_heads("time_mix_output_forward", y.shape[1], H)
    check_kernel_args("time_mix_output_forward", "mean:M,H rstd:M,H bonus:M,H", mean, rstd, bonus,
                      M=y.shape[0], H=H)
    cdef Py_ssize_t M = y.shape[0], C = y.shape[1], N = C // H, m, h, c, c0
    cdef floating mu, rs, bo
    with nogil:
        for m in prange(M, schedule="dynamic", chunksize=16, use_threads_if=M >= PARALLEL_MIN_ROWS):
            for h in range(H):
                c0 = h * N
                _head_stats(&y[m, c0], &r[m, c0], &kmod[m, c0], &r_k[c0], N, eps,
                            &mean[m, h], &rstd[m, h], &bonus[m, h])
                mu, rs, bo = mean[m, h], rstd[m, h], bonus[m, h]
                for c in range(c0, c0 + N):
                    u[m, c] = ((y[m, c] - mu) * rs * ln_w[c] + ln_b[c] + bo * vres[m, c]) * g[m, c]


# gu: (M, C) grad of u; forward tensors as in time_mix_output_forward
# -> g_g, gy, gv, gr, gkmod: (M, C); acc: (nblocks, 3, C) for ln_w, ln_b, r_k
def time_mix_output_backward(const floating[:, ::1] gu, const floating[:, ::1] y,
                             const floating[:, ::1] r, const floating[:, ::1] kmod,
                             const floating[:, ::1] vres, const floating[:, ::1] g,
                             const floating[::1] r_k, const floating[::1] ln_w,
                             const floating[::1] ln_b, const floating[:, ::1] mean,
                             const floating[:, ::1] rstd, const floating[:, ::1] bonus,
                             Py_ssize_t H, floating[:, ::1] g_g, floating[:, ::1] gy,
                             floating[:, ::1] gv, floating[:, ::1] gr, floating[:, ::1] gkmod,
                             floating[:, :, ::1] acc):
    """With gz = gu g and yhat = (y - mean) rstd, per row and head:
        g_g = gu z;   gln_w = sum gz yhat;   gln_b = sum gz
        gy  = rstd (gyh - mean_n(gyh) - yhat mean_n(gyh yhat)),   gyh = gz ln_w
        gb  = sum_n gz v (grad of the bonus);  gv = gz bonus;
        gr  = gb kmod r_k;  gkmod = gb r r_k;  g_r_k = sum gb r kmod
    """
    check_kernel_args("time_mix_output_backward", "gu:M,C y:M,C r:M,C kmod:M,C vres:M,C g:M,C r_k:C ln_w:C "
                      "ln_b:C g_g:M,C gy:M,C gv:M,C gr:M,C gkmod:M,C acc:P,3,C", gu, y, r, kmod, vres, g,
                      r_k, ln_w, ln_b, g_g, gy, gv, gr, gkmod, acc)
    _check_heads("time_mix_output_backward", y.shape[1], H)
    check_kernel_args("time_mix_output_backward", "mean:M,H rstd:M,H bonus:M,H", mean, rstd, bonus,
                      M=y.shape[0], H=H)
    check_kernel_scalar("time_mix_output_backward", "acc.shape[0]", acc.shape[0], 1)
    cdef Py_ssize_t M = y.shape[0], C = y.shape[1], N = C // H
    cdef Py_ssize_t nblocks = acc.shape[0]
    cdef Py_ssize_t rows = (M + nblocks - 1) // nblocks
    cdef Py_ssize_t blk, m, h, c, c0, lo, hi
    cdef floating mu, rs, bo, m1, m2, gb, yh, gz
    cdef floating* alw
    cdef floating* alb
    cdef floating* ark
    with nogil:
        for blk in prange(nblocks, schedule="static",
                          use_threads_if=M >= PARALLEL_MIN_ROWS):
            alw = &acc[blk, 0, 0]
            alb = &acc[blk, 1, 0]
            ark = &acc[blk, 2, 0]
            for c in range(3 * C):
                alw[c] = 0
            lo = blk * rows
            hi = min(lo + rows, M)
            for m in range(lo, hi):
                for h in range(H):
                    c0 = h * N
                    mu, rs, bo = mean[m, h], rstd[m, h], bonus[m, h]
                    # gz = gu g: m1 = mean gz ln_w, m2 = mean gz ln_w yhat, gb = sum gz vres
                    m1 = <floating>(row_dot3(&gu[m, c0], &g[m, c0], &ln_w[c0], N) / N)
                    m2 = <floating>(row_dot3_centered(&gu[m, c0], &g[m, c0], &ln_w[c0], &y[m, c0], N, mu)
                                    * rs / N)
                    gb = <floating>row_dot3(&gu[m, c0], &g[m, c0], &vres[m, c0], N)
                    for c in range(c0, c0 + N):
                        yh = (y[m, c] - mu) * rs
                        gz = gu[m, c] * g[m, c]
                        g_g[m, c] = gu[m, c] * (yh * ln_w[c] + ln_b[c] + bo * vres[m, c])
                        alw[c] += gz * yh
                        alb[c] += gz
                        gv[m, c] = gz * bo
                        gy[m, c] = rs * (gz * ln_w[c] - m1 - yh * m2)
                        gr[m, c] = gb * kmod[m, c] * r_k[c]
                        gkmod[m, c] = gb * r[m, c] * r_k[c]
                        ark[c] += gb * r[m, c] * kmod[m, c]
