"""OpenMP thread control shared by every kernel (see minigrad.threads for the public API)."""
from minigrad.kernels._openmp cimport (
    MINIGRAD_HAVE_OPENMP, omp_get_max_threads, omp_set_num_threads,
)


def openmp_enabled():
    """True when the kernels were compiled with OpenMP."""
    return bool(MINIGRAD_HAVE_OPENMP)


def set_threads(int n):
    """Set the OpenMP thread count used by every later `prange` region."""
    omp_set_num_threads(n)


def get_threads():
    """The OpenMP thread count a `prange` region would use now."""
    return omp_get_max_threads()
