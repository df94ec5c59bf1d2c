/* The AdamW element loop over [start, stop) (maths and update order: adamw.pyx's docstring).
 *
 * Written in C only so that it can be compiled per instruction set: for the building CPU in the
 * default -march=native build, or (MG_CLONES from _vmath.h, a MINIGRAD_PORTABLE=1 build) for
 * AVX-512, AVX2 and baseline SSE2 picked at load time — about 2x faster than SSE2 alone.
 * adamw.pyx compiles with -ffp-contract=off, so no build fuses a multiply-add: every clone, and
 * every thread count, produces bit-identical results. vmax is NULL unless amsgrad.
 */
#ifndef MINIGRAD_ADAMW_H
#define MINIGRAD_ADAMW_H
#include <math.h>
#include "_vmath.h"

#define MG_ADAMW_RANGE(NAME, T, SQRT)                                                             \
MG_CLONES static void NAME(T* p, const T* g, T* m, T* v, T* vmax, long start, long stop,          \
                           T decay, T w1, int w1_small, T beta2, T w2, T bc2_sqrt, T eps,          \
                           T neg_step) {                                                           \
    const T w1c = (T)1 - w1;                                                                       \
    for (long i = start; i < stop; i++) {                                                          \
        T gi = g[i], mi = m[i];                                                                    \
        /* PyTorch's lerp(m, g, w1): exact at both ends, formula chosen by the weight */           \
        mi = w1_small ? mi + w1 * (gi - mi) : gi - (gi - mi) * w1c;                                \
        T vi = v[i] * beta2 + (w2 * gi) * gi;                                                      \
        m[i] = mi;                                                                                 \
        v[i] = vi;                                                                                 \
        if (vmax) {                                                                                \
            vi = vmax[i] > vi ? vmax[i] : vi;                                                      \
            vmax[i] = vi;                                                                          \
        }                                                                                          \
        p[i] = p[i] * decay + (neg_step * mi) / (SQRT(vi) / bc2_sqrt + eps);                       \
    }                                                                                              \
}

MG_ADAMW_RANGE(mg_adamw_range_f, float, sqrtf)
MG_ADAMW_RANGE(mg_adamw_range_d, double, sqrt)

#endif
