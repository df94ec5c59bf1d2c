# distutils: extra_compile_args = -fno-math-errno -ffp-contract=off
# -fno-math-errno only stops sqrt from setting errno so the loop vectorises (values unchanged);
# -ffp-contract=off forbids fused multiply-adds so every platform rounds like the formula reads.
"""Fused AdamW step: one pass over memory, in place, torch.optim.AdamW's exact update order.

Per element, with the scalars prepared in double precision and cast to the array dtype
(as PyTorch does for its CPU kernels):

    p  = p * (1 - lr * weight_decay)                      # decoupled weight decay
    m  = lerp(m, g, 1 - beta1)                            # m + (1-beta1) * (g - m)
    v  = v * beta2 + ((1 - beta2) * g) * g
    vm = max(vm, v)           (amsgrad only; vm replaces v below)
    p  = p + (-lr / (1 - beta1**step)) * m / (sqrt(v) / sqrt(1 - beta2**step) + eps)

Elements are independent, so the chunked prange (dynamic: chunks go to whichever thread is free)
is bit-reproducible for any thread count and schedule.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport isfinite

from minigrad.kernels._openmp cimport omp_get_max_threads

import numpy as np

from minigrad.kernels.validate import check_finite_scalar, check_float

cdef Py_ssize_t CHUNK = 1 << 15
# A parameter below 2 CHUNK but of at least this many elements is split in as many chunks as there
# are threads (RWKV-7's 384 x 64 LoRA matrices would otherwise run on one thread).
cdef Py_ssize_t SPLIT_MIN = 1 << 13
FLOAT32, FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


cdef extern from "_adamw.h" nogil:
    void mg_adamw_range_f(float* p, const float* g, float* m, float* v, float* vmax, long start, long stop,
                          float decay, float w1, int w1_small, float beta2, float w2, float bc2_sqrt,
                          float eps, float neg_step)
    void mg_adamw_range_d(double* p, const double* g, double* m, double* v, double* vmax, long start,
                          long stop, double decay, double w1, int w1_small, double beta2, double w2,
                          double bc2_sqrt, double eps, double neg_step)


# shapes: p, g, m, v, vmax all (n,) contiguous; vmax is NULL unless amsgrad.
# The element loop is in _adamw.h (compiled per instruction set); this picks the dtype.
cdef inline void adamw_step_range(floating* p, const floating* g, floating* m, floating* v, floating* vmax,
                                  Py_ssize_t start, Py_ssize_t stop,
                                  floating decay, floating w1, bint w1_small, floating beta2, floating w2,
                                  floating bc2_sqrt, floating eps, floating neg_step) noexcept nogil:
    if floating is float:
        mg_adamw_range_f(p, g, m, v, vmax, start, stop, decay, w1, w1_small, beta2, w2, bc2_sqrt, eps,
                         neg_step)
    else:
        mg_adamw_range_d(p, g, m, v, vmax, start, stop, decay, w1, w1_small, beta2, w2, bc2_sqrt, eps,
                         neg_step)


cdef void adamw_step_all(floating* p, const floating* g, floating* m, floating* v, floating* vmax,
                         Py_ssize_t n, double lr, double beta1, double beta2, double eps,
                         double weight_decay, long step) noexcept nogil:
    cdef Py_ssize_t chunk = CHUNK
    cdef Py_ssize_t nthreads = omp_get_max_threads()
    if n < 2 * CHUNK and n >= SPLIT_MIN and nthreads > 1:
        chunk = ((n + nthreads - 1) // nthreads + 15) // 16 * 16      # whole 16-element blocks
    cdef Py_ssize_t nchunks = (n + chunk - 1) // chunk
    cdef Py_ssize_t c
    cdef double bc1 = 1.0 - beta1 ** step
    cdef double bc2 = 1.0 - beta2 ** step
    cdef floating decay = <floating>(1.0 - lr * weight_decay)
    cdef floating w1 = <floating>(1.0 - beta1)
    cdef bint w1_small = (1.0 - beta1) < 0.5
    cdef floating b2 = <floating>beta2
    cdef floating w2 = <floating>(1.0 - beta2)
    cdef floating bc2_sqrt = <floating>(bc2 ** 0.5)
    cdef floating eps_ = <floating>eps
    cdef floating neg_step = <floating>(-(lr / bc1))
    if nchunks <= 1:
        adamw_step_range(p, g, m, v, vmax, 0, n, decay, w1, w1_small, b2, w2, bc2_sqrt, eps_, neg_step)
        return
    for c in prange(nchunks, schedule="dynamic"):  # balances threads on a busy machine
        adamw_step_range(p, g, m, v, vmax, c * chunk, min((c + 1) * chunk, n),
                         decay, w1, w1_small, b2, w2, bc2_sqrt, eps_, neg_step)


cdef void _dispatch(floating[::1] p, const floating[::1] g, floating[::1] m, floating[::1] v,
                    floating[::1] vmax, bint amsgrad, double lr, double beta1, double beta2,
                    double eps, double weight_decay, long step):
    cdef Py_ssize_t n = p.shape[0]
    cdef floating* vmax_ptr = NULL
    if n == 0:
        return
    if amsgrad:
        vmax_ptr = &vmax[0]
    with nogil:
        adamw_step_all(&p[0], &g[0], &m[0], &v[0], vmax_ptr, n, lr, beta1, beta2, eps, weight_decay, step)


def _validate(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    op = "adamw_step"
    check_float(op, "param", param)
    arrays = {"grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    if max_exp_avg_sq is not None:
        arrays["max_exp_avg_sq"] = max_exp_avg_sq
    for name, arr in arrays.items():
        check_float(op, name, arr, shape=param.shape, dtype=param.dtype)
    written = {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    if max_exp_avg_sq is not None:
        written["max_exp_avg_sq"] = max_exp_avg_sq
    for name, arr in written.items():
        if not arr.flags.writeable:
            raise ValueError(f"{op}: {name} is read-only; the step updates it in place")
    names = list(written) + ["grad"]
    everything = list(written.values()) + [grad]
    for i in range(len(everything)):
        for j in range(i + 1, len(everything)):
            if everything[i].size and np.may_share_memory(everything[i], everything[j]):
                raise ValueError(f"{op}: {names[i]} and {names[j]} share memory")
    check_finite_scalar(op, "lr", lr)
    check_finite_scalar(op, "eps", eps, positive=True)
    check_finite_scalar(op, "weight_decay", weight_decay)
    for name, beta in (("beta1", beta1), ("beta2", beta2)):
        check_finite_scalar(op, name, beta)
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{op}: {name} must be in [0, 1), got {beta}")
    if lr < 0 or weight_decay < 0:
        raise ValueError(f"{op}: lr and weight_decay must be >= 0, got lr={lr}, weight_decay={weight_decay}")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"{op}: step must be an integer >= 1 (1 on the first update), got {step!r}")


cdef bint _looks_valid(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps,
                       weight_decay, step):
    """A fast, conservative version of `_validate` for the per-parameter hot path.

    True only when every check `_validate` makes certainly passes; False sends the call through
    `_validate`, which raises the clear error (or accepts an unusual but valid input).
    """
    cdef double lr_, b1, b2, eps_, wd
    if type(param) is not np.ndarray or type(step) is not int or step < 1:
        return False
    try:
        lr_, b1, b2, eps_, wd = lr, beta1, beta2, eps, weight_decay
    except TypeError:
        return False
    if not (isfinite(lr_) and lr_ >= 0 and 0 <= b1 < 1 and 0 <= b2 < 1 and isfinite(eps_) and eps_ > 0
            and isfinite(wd) and wd >= 0):
        return False
    dtype, shape = param.dtype, param.shape
    if dtype is not FLOAT32 and dtype is not FLOAT64:
        return False
    arrays = (param, exp_avg, exp_avg_sq, grad) if max_exp_avg_sq is None else (
        param, exp_avg, exp_avg_sq, max_exp_avg_sq, grad)
    cdef Py_ssize_t i, j, n = len(arrays)
    for i in range(n):
        a = arrays[i]
        if type(a) is not np.ndarray or a.dtype is not dtype or a.shape != shape:
            return False
        flags = a.flags
        if not flags.c_contiguous or (i < n - 1 and not flags.writeable):
            return False
    if param.size:
        for i in range(n):
            for j in range(i + 1, n):
                if np.may_share_memory(arrays[i], arrays[j]):
                    return False
    return True


def adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step,
               max_exp_avg_sq=None):
    """One AdamW update of `param`, `exp_avg`, `exp_avg_sq` (and `max_exp_avg_sq` for amsgrad), in place.

    All arrays: same shape, same float dtype (float32 or float64), C-contiguous, no overlap.
    `step` counts updates including this one (1 on the first call). Validated here; then nogil.
    """
    if not _looks_valid(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps,
                        weight_decay, step):
        _validate(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, weight_decay,
                  step)
    amsgrad = max_exp_avg_sq is not None
    flat = [a.reshape(-1) for a in (param, grad, exp_avg, exp_avg_sq)]
    vmax = max_exp_avg_sq.reshape(-1) if amsgrad else flat[3]
    if param.dtype == np.float32:
        _dispatch[float](flat[0], flat[1], flat[2], flat[3], vmax, amsgrad,
                         lr, beta1, beta2, eps, weight_decay, step)
    else:
        _dispatch[double](flat[0], flat[1], flat[2], flat[3], vmax, amsgrad,
                          lr, beta1, beta2, eps, weight_decay, step)
