/* Vectorisable exp and tanh for the fused kernels (no -ffast-math needed).
 *
 * glibc's expf is a scalar call, so loops around it never vectorise; mg_expf is branch-free
 * arithmetic that gcc/clang vectorise at -O3: x = n ln2 + r with n = round(x / ln2) (the
 * 1.5 * 2^23 trick rounds to nearest), e^r from a degree-6 Taylor/minimax polynomial on
 * |r| <= ln2/2, and 2^n built in the exponent bits. Max relative error ~2 ulp over
 * [-87.3, 88.7228] (88.7228: the largest float with a finite exp; above it inf); below -87.3
 * it returns 0 (as expf's underflow, denormals flushed: so exp(-inf) is exactly 0 for masked
 * entries), NaN propagates.
 * float64 kernels keep libm's exp (they exist for gradient checks, not speed).
 */
#ifndef MINIGRAD_VMATH_H
#define MINIGRAD_VMATH_H
#include <stdint.h>
#include <string.h>
#include <math.h>

static inline float mg_expf(float x0) {
    /* hi: the largest float whose exp is finite (0x42B17217); above it exp is inf */
    const float hi = 88.72283172607421875f, lo = -87.3f;
    float x = x0 > hi ? hi : x0;
    x = x < lo ? lo : x;
    float t = x * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* p * 2^n by adding n to p's exponent: also right for n = 128 (x in [88.38, hi], where p < 1),
       which 2^n built alone in the exponent bits cannot hold */
    union { float f; int32_t i; } y;
    y.f = p;
    y.i += (int32_t)n * (1 << 23);
    return x0 < lo ? 0.0f : (x0 > hi ? INFINITY : y.f);
}

/* tanh, branch-free (both halves computed, one selected), so loops calling it vectorise:
 * |x| < 0.55: the odd Taylor series to x^17 (next term < 1e-8 relative there); otherwise
 * 1 - 2 / (e^(2|x|) + 1), |x| clamped at 10 (tanh rounds to 1 in float32). <= 1.5 ulp. */
static inline float mg_tanhf(float x) {
    float a = fabsf(x);
    float e = mg_expf(2.0f * (a > 10.0f ? 10.0f : a));
    float big = 1.0f - 2.0f / (e + 1.0f);
    float z = a * a;
    float p = 6404582.0f / 10854718875.0f;
    p = p * z - 929569.0f / 638512875.0f;
    p = p * z + 21844.0f / 6081075.0f;
    p = p * z - 1382.0f / 155925.0f;
    p = p * z + 62.0f / 2835.0f;
    p = p * z - 17.0f / 315.0f;
    p = p * z + 2.0f / 15.0f;
    p = p * z - 1.0f / 3.0f;
    float small = a + a * z * p;
    return copysignf(a < 0.55f ? small : big, x);
}

/* Row helpers for float32 kernels. A build for the local CPU (-march=native, which defines __AVX2__
 * on any recent x86) compiles them for it directly. A portable x86-64 Linux build with gcc compiles
 * each for AVX-512, AVX2+FMA and baseline SSE2 and picks one at load time (target_clones).
 * (Clones under -march=native are worse than none: gcc then refuses to inline mg_expf into them,
 * target option mismatch, and every exp becomes a scalar call.) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__AVX2__)
#define MG_CLONES __attribute__((unused, target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MG_CLONES __attribute__((unused))
#endif
#if defined(_OPENMP)
#define MG_SIMD_SUM _Pragma("omp simd reduction(+:s)")
#define MG_SIMD_MAX _Pragma("omp simd reduction(max:m)")
#else
#define MG_SIMD_SUM
#define MG_SIMD_MAX
#endif

/* h = g * sigmoid(g) * u */
MG_CLONES static void mg_silu_mul_f(const float* g, const float* u, float* h, long n) {
    for (long j = 0; j < n; j++) h[j] = g[j] / (1.0f + mg_expf(-g[j])) * u[j];
}

/* gg = gh * u * s * (1 + g (1 - s)),  gu = gh * (g * s),  s = sigmoid(g)
   (silu first, as autograd of silu(g) * u does: gh * g can overflow to inf where s is 0, which gave
   NaN, e.g. g = -3e38, gh = -2.5; g * s never overflows, 0 <= s <= 1) */
MG_CLONES static void mg_silu_mul_backward_f(const float* gh, const float* g, const float* u,
                                             float* gg, float* gu, long n) {
    for (long j = 0; j < n; j++) {
        float s = 1.0f / (1.0f + mg_expf(-g[j]));
        gg[j] = gh[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
        gu[j] = gh[j] * (g[j] * s);
    }
}

MG_CLONES static float mg_max_f(const float* x, long n) {
    float m = -INFINITY;
    MG_SIMD_MAX
    for (long j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

MG_CLONES static float mg_dot_f(const float* a, const float* b, long n) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}

MG_CLONES static float mg_dot3_f(const float* a, const float* b, const float* c, long n) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += a[j] * b[j] * c[j];
    return s;
}

MG_CLONES static float mg_sum_f(const float* x, long n) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += x[j];
    return s;
}

/* sum_j (x_j - mu) */
MG_CLONES static float mg_sum_dev_f(const float* x, long n, float mu) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += x[j] - mu;
    return s;
}

/* sum_j (x_j - mu)^2 */
MG_CLONES static float mg_sum_sqdev_f(const float* x, long n, float mu) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += (x[j] - mu) * (x[j] - mu);
    return s;
}

/* sum_j a_j b_j (x_j - mu) */
MG_CLONES static float mg_dot_centered_f(const float* a, const float* b, const float* x, long n, float mu) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += a[j] * b[j] * (x[j] - mu);
    return s;
}

/* sum_j a_j b_j c_j (x_j - mu) */
MG_CLONES static float mg_dot4_centered_f(const float* a, const float* b, const float* c, const float* x,
                                          long n, float mu) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += a[j] * b[j] * c[j] * (x[j] - mu);
    return s;
}

/* sum_j exp(x_j - m) */
MG_CLONES static float mg_sum_exp_f(const float* x, long n, float m) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) s += mg_expf(x[j] - m);
    return s;
}

/* x_j <- exp(x_j - m); returns sum_j x_j */
MG_CLONES static float mg_exp_sum_f(float* x, long n, float m) {
    float s = 0.0f;
    MG_SIMD_SUM
    for (long j = 0; j < n; j++) {
        float e = mg_expf(x[j] - m);
        x[j] = e;
        s += e;
    }
    return s;
}

/* y_j = w * exp((x_j - m) - l)  (y may alias x): x - m first, so a large common offset of the x_j
   (exact in x - m) is not rounded into l */
MG_CLONES static void mg_exp_shift2_f(const float* x, float* y, long n, float m, float l, float w) {
    for (long j = 0; j < n; j++) y[j] = w * mg_expf((x[j] - m) - l);
}

/* p_j = exp(a s_j - l);  dp_j = a p_j (dp_j - d);  s_j = p_j */
MG_CLONES static void mg_softmax_grad_row_f(float* s, float* dp, long n, float a, float l, float d) {
    for (long j = 0; j < n; j++) {
        float p = mg_expf(a * s[j] - l);
        s[j] = p;
        dp[j] = a * p * (dp[j] - d);
    }
}

/* xt (hd, n), row stride n, = x (n rows of hd, row stride ld) transposed. Whole 16 x 16 tiles go
   through registers: 16 row loads, four rounds that each swap one bit of the row index with the
   same bit of the column index (rows i and i | 2^k exchange the halves of their 2^k-element
   blocks; 64 two-source shuffles), 16 row stores; the rows of the next tile are prefetched. The
   ragged edges (and compilers without __builtin_shufflevector) copy element by element. */
static inline void mg_transpose_f(const float* x, long ld, long n, long hd, float* xt) {
    long t0 = 0, d0, t, d;
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
    typedef float mg_t16f __attribute__((vector_size(64)));
    for (; t0 + 16 <= n; t0 += 16) {
        if (t0 + 32 <= n)
            for (t = t0 + 16; t < t0 + 32; t++)
                for (d = 0; d < hd; d += 16) __builtin_prefetch(x + t * ld + d, 0, 3);
        for (d0 = 0; d0 + 16 <= hd; d0 += 16) {
            mg_t16f v[16];
            for (int i = 0; i < 16; i++) memcpy(&v[i], x + (t0 + i) * ld + d0, 64);
            for (int i = 0; i < 16; i += 2) {
                mg_t16f a = v[i], b = v[i + 1];
                v[i] = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
                v[i + 1] = __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            }
            for (int i = 0; i < 16; i++) if (!(i & 2)) {
                mg_t16f a = v[i], b = v[i + 2];
                v[i] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
                v[i + 2] = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            }
            for (int i = 0; i < 16; i++) if (!(i & 4)) {
                mg_t16f a = v[i], b = v[i + 4];
                v[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
                v[i + 4] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            }
            for (int i = 0; i < 8; i++) {
                mg_t16f a = v[i], b = v[i + 8];
                v[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
                v[i + 8] = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            }
            for (int i = 0; i < 16; i++) memcpy(xt + (d0 + i) * n + t0, &v[i], 64);
        }
        for (d = d0; d < hd; d++)
            for (t = t0; t < t0 + 16; t++) xt[d * n + t] = x[t * ld + d];
    }
#endif
    for (; t0 < n; t0 += 16) {
        long t1 = t0 + 16 < n ? t0 + 16 : n;
        for (d = 0; d < hd; d++)
            for (t = t0; t < t1; t++) xt[d * n + t] = x[t * ld + d];
    }
}

#endif
