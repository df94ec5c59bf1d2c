"""Row scatter-add, the backward of a row gather (embedding lookup, x[int_array]).

    out[ids[i], :] += rows[i, :]   for i = 0 .. M-1, in order

One serial pass, so repeated ids accumulate in a fixed order (deterministic, independent of the
thread count). It replaces a sort + np.add.reduceat, which took 1.8 ms for a (2048, 384) float32
gradient against ~0.1 ms here.
"""
from cython cimport floating

from minigrad.kernels.validate import check_kernel_args, check_kernel_index


# out: (V, D), ids: (M,) int64 in [0, V), rows: (M, D) -> out updated in place
def scatter_add_rows(floating[:, ::1] out, const long long[::1] ids, const floating[:, ::1] rows):
    """out[ids[i]] += rows[i] for every i, in order of i."""
    check_kernel_args("scatter_add_rows", "out:V,D ids:M rows:M,D", out, ids, rows)
    check_kernel_index("scatter_add_rows", "ids", ids, out.shape[0])
    cdef Py_ssize_t M = rows.shape[0], D = rows.shape[1], i, d
    cdef floating* dst
    cdef const floating* src
    if D == 0:
        return
    with nogil:
        for i in range(M):
            dst = &out[ids[i], 0]
            src = &rows[i, 0]
            for d in range(D):
                dst[d] += src[d]
