# Vectorisable float32 exp and tanh for the RWKV-7 elementwise kernels (no -ffast-math needed).
# Branch-free Cody-Waite reduction + the Cephes expf polynomial: within ~2 ulp of expf on the
# clamped range [-87, 88] (outside it the argument is clamped: exp(-87) ~ 1.6e-38, exp(88) ~
# 1.7e38, which only matters inside sigmoids, where both ends are already exact). Being plain
# arithmetic, gcc vectorises loops that call it; float64 kernels keep libm's exp.
cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    static inline float mg_expf(float x) {
        x = x > 88.0f ? 88.0f : x;
        x = x < -87.0f ? -87.0f : x;
        /* round to nearest by the 1.5 * 2^23 trick: exact, vectorisable, no floor() call */
        float fx = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
        float r = x - fx * 0.693359375f + fx * 2.12194440e-4f;
        float p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        p = p * r * r + r + 1.0f;
        int bits = ((int)fx + 127) << 23;
        float scale;
        memcpy(&scale, &bits, sizeof scale);
        return p * scale;
    }
    /* tanh, branch-free (both halves computed, one selected), so loops calling it vectorise:
       |x| < 0.55: the odd Taylor series to x^17 (next term < 1e-8 relative there);
       otherwise 1 - 2 / (e^(2|x|) + 1), |x| clamped at 10 (tanh rounds to 1 in float32). */
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
    """
    float mg_expf(float x) noexcept nogil
    float mg_tanhf(float x) noexcept nogil
