# cython: language_level=3
"""Row-major GEMM for nogil kernels, through scipy's BLAS (scipy.linalg.cython_blas).

    gemm(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)

computes C = alpha * op(A) @ op(B) + beta * C with C (m, n) row-major (row stride ldc), op(A) (m, k),
op(B) (k, n); op(X) = X.T when trans_x is True; lda/ldb are the row strides of A and B as stored.
BLAS is column-major, so the call is C^T = op(B)^T op(A)^T with the operands swapped.
Callers run it inside prange on one BLAS thread each: the Python wrapper must limit BLAS to one
thread for the duration of the kernel (threadpoolctl), or OpenBLAS would start its own threads.
"""
from cython cimport floating
from scipy.linalg.cython_blas cimport dgemm, sgemm


cdef inline void gemm(bint trans_a, bint trans_b, int m, int n, int k, floating alpha,
                      const floating* A, int lda, const floating* B, int ldb, floating beta,
                      floating* C, int ldc) noexcept nogil:
    cdef char ta = b'T' if trans_b else b'N'
    cdef char tb = b'T' if trans_a else b'N'
    if floating is float:
        sgemm(&ta, &tb, &n, &m, &k, &alpha, <float*>B, &ldb, <float*>A, &lda, &beta, C, &ldc)
    else:
        dgemm(&ta, &tb, &n, &m, &k, &alpha, <double*>B, &ldb, <double*>A, &lda, &beta, C, &ldc)
