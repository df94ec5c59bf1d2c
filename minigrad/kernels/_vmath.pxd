# float32 row helpers (vectorised exp, reductions) from _vmath.h; see that file for the maths.
cdef extern from "_vmath.h" nogil:
    float mg_expf(float x)
    float mg_tanhf(float x)
    void mg_silu_mul_f(const float* g, const float* u, float* h, long n)
    void mg_silu_mul_backward_f(const float* gh, const float* g, const float* u,
                                float* gg, float* gu, long n)
    float mg_max_f(const float* x, long n)
    float mg_dot_f(const float* a, const float* b, long n)
    float mg_dot3_f(const float* a, const float* b, const float* c, long n)
    float mg_sum_f(const float* x, long n)
    float mg_sum_dev_f(const float* x, long n, float mu)
    float mg_sum_sqdev_f(const float* x, long n, float mu)
    float mg_dot_centered_f(const float* a, const float* b, const float* x, long n, float mu)
    float mg_dot4_centered_f(const float* a, const float* b, const float* c, const float* x, long n,
                             float mu)
    float mg_sum_exp_f(const float* x, long n, float m)
    float mg_exp_sum_f(float* x, long n, float m)
    void mg_exp_shift2_f(const float* x, float* y, long n, float m, float l, float w)
    void mg_softmax_grad_row_f(float* s, float* dp, long n, float a, float l, float d)
    void mg_transpose_f(const float* x, long ld, long n, long hd, float* xt)
