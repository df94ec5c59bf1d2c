# OpenMP is optional: without it these stubs make every kernel run serially.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define MINIGRAD_HAVE_OPENMP 1
    #else
    #define MINIGRAD_HAVE_OPENMP 0
    static int omp_get_max_threads(void) { return 1; }
    static int omp_get_thread_num(void) { return 0; }
    static void omp_set_num_threads(int n) { (void)n; }
    #endif
    """
    bint MINIGRAD_HAVE_OPENMP
    int omp_get_max_threads() nogil
    int omp_get_thread_num() nogil
    void omp_set_num_threads(int n) nogil
