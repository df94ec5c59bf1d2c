# Vectorisable float32 exp for the RWKV-7 elementwise kernels (no -ffast-math needed).
# Branch-free Cody-Waite reduction + the Cephes expf polynomial: within ~2 ulp of expf on the
# clamped range [-87, 88] (outside it the argument is clamped: exp(-87) ~ 1.6e-38, exp(88) ~
# 1.7e38, which only matters inside sigmoids, where both ends are already exact). Being plain
# arithmetic, gcc vectorises loops that call it; float64 kernels keep libm's exp.
cdef extern from *:
    """
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
    """
    float mg_expf(float x) noexcept nogil
