"""The BLAS behind the large GEMMs (Linear layers, RWKV-7's projections): numpy's, or Intel MKL's.

On Intel CPUs MKL's sgemm runs the model GEMMs faster than the OpenBLAS numpy ships with (GPT
medium shapes, 2 threads, each library alone in its process: 76 vs 82-125 ms for one layer's 15
products, depending on the machine's state; docs/benchmarks.md). So when the `mkl` package is
installed (`pip install minigrad[mkl]`), `gemm` calls its `cblas_?gemm` directly (ctypes), with
MKL on its GNU threading layer: the same libgomp pool as minigrad's kernels, no second pool.

MINIGRAD_BLAS selects: "auto" (default: MKL when installed and the CPU is Intel's; elsewhere, e.g.
on AMD, MKL was measured slower than OpenBLAS), "mkl" (whenever installed), "numpy".
`gemm` checks everything about its arrays before the foreign call and falls back to numpy for
anything MKL is not given (other dtypes, empty or non-contiguous operands).
"""
import ctypes
import functools
import os

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# Products with one output row (decoding one sequence), or of fewer multiply-adds than SMALL_WORK,
# go to numpy: MKL through ctypes costs ~20 us a call, numpy's matmul ~2 us. From 2 rows on,
# OpenBLAS packs the whole weight for a few rows: a 6-layer d-384 GPT's 24 decode products (42 MB of
# weights, one BLAS thread) take 9.7 / 13.4 / 14.1 ms with numpy at 2 / 4 / 8 rows, 3.0 / 5.5 / 9.3
# with MKL; at 1 row numpy's gemv is as fast (2.1 ms).
SMALL_WORK = 1 << 18
_state = {"lib": None, "loaded": False}


def _mkl_path():
    """Path of the `mkl` package's libmkl_rt, or None."""
    try:
        from importlib import metadata
        dist = metadata.distribution("mkl")
    except Exception:       # not installed (PackageNotFoundError), or broken metadata
        return None
    for f in dist.files or ():
        if os.path.basename(str(f)).startswith("libmkl_rt.so"):
            path = os.path.realpath(str(dist.locate_file(f)))
            if os.path.isfile(path):
                return path
    return None


def _intel_cpu():
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in f)
    except OSError:
        return False


def _wanted():
    choice = os.environ.get("MINIGRAD_BLAS", "auto").strip().lower()
    if choice not in ("auto", "mkl", "numpy"):
        raise ValueError(f"MINIGRAD_BLAS must be 'auto', 'mkl' or 'numpy', got {choice!r}")
    return choice == "mkl" or (choice == "auto" and _intel_cpu())


def _load():
    """MKL's library handle (loaded once), or None when not wanted or not installed."""
    if _state["loaded"]:
        return _state["lib"]
    _state["loaded"] = True
    if not _wanted():
        return None
    path = _mkl_path()
    if path is None:
        return None
    os.environ.setdefault("MKL_THREADING_LAYER", "GNU")     # libgomp: minigrad's OpenMP pool
    try:
        lib = ctypes.CDLL(path)
        ptr, i, t = ctypes.c_void_p, ctypes.c_int, ctypes.c_int
        for name, real in (("cblas_sgemm", ctypes.c_float), ("cblas_dgemm", ctypes.c_double)):
            fn = getattr(lib, name)
            fn.argtypes = [i, t, t, i, i, i, real, ptr, i, ptr, i, real, ptr, i]
            fn.restype = None
            pi, pr, pp = ctypes.POINTER(i), ctypes.POINTER(real), ctypes.POINTER(ptr)
            batch = getattr(lib, name + "_batch")
            batch.argtypes = [i, pi, pi, pi, pi, pi, pr, pp, pi, pp, pi, pr, pp, pi, i, pi]
            batch.restype = None
        lib.MKL_Set_Num_Threads.argtypes = [ctypes.c_int]
        lib.MKL_Set_Num_Threads_Local.argtypes = [ctypes.c_int]
        lib.MKL_Set_Num_Threads_Local.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    from minigrad.threads import get_num_threads

    lib.MKL_Set_Num_Threads(get_num_threads())
    _state["lib"] = lib
    return lib


def backend():
    """'mkl' or 'numpy': what `gemm` uses for float32/float64 operands."""
    return "mkl" if _load() is not None else "numpy"


def set_threads(n):
    """MKL's thread count (no-op without MKL); minigrad.set_num_threads calls it."""
    lib = _state["lib"]
    if lib is not None:
        lib.MKL_Set_Num_Threads(int(n))


def set_local_threads(n):
    """This thread's MKL thread count (0: back to the global one); returns the previous local
    setting (0 when none; also without MKL)."""
    lib = _state["lib"]
    return 0 if lib is None else lib.MKL_Set_Num_Threads_Local(int(n))


def _usable(*arrays):
    a = arrays[0]
    return a.dtype in (np.float32, np.float64) and all(
        x.dtype == a.dtype and x.ndim == 2 and x.flags.c_contiguous and 0 < x.size
        and max(x.shape) < 2**31 for x in arrays)        # MKL's LP64 ints


def _product(a, b, trans_a, trans_b, out):
    """Checks one product op(a) @ op(b) (into out); returns (M, N, K)."""
    A = a.T if trans_a else a
    B = b.T if trans_b else b
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"gemm: shapes {A.shape} and {B.shape} do not multiply")
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    if out is not None and (out.shape != (M, N) or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"gemm: out must be a writable C-contiguous ({M}, {N}) array, got {out.shape}")
    return M, N, K


def _numpy_product(a, b, trans_a, trans_b, out, accumulate):
    prod = np.matmul(a.T if trans_a else a, b.T if trans_b else b,
                     out=None if accumulate else out)   # numpy buffers an out overlapping an operand
    if accumulate:
        out += prod
        return out
    return prod


def gemm(a, b, trans_a=False, trans_b=False, out=None, accumulate=False):
    """op(a) @ op(b) for 2-D arrays, op = transpose when asked: a (M, K) or (K, M), b (K, N) or
    (N, K) -> (M, N), into `out` (C-contiguous (M, N), same dtype) when given, added to it with
    accumulate=True. Float32/float64 C-contiguous operands go to MKL when it is in use, unless the
    product is small (one row, or under SMALL_WORK multiply-adds); everything else to numpy (also an
    `out` sharing memory with an operand: MKL would read what it has already overwritten)."""
    return gemm_batch([(a, b, trans_a, trans_b, out, accumulate)])[0]


def gemm_batch(products):
    """Independent products in one BLAS call: products = [(a, b[, trans_a[, trans_b[, out[,
    accumulate]]]]), ...], each as `gemm(a, b, trans_a, trans_b, out)`; accumulate=True adds the
    product into `out` (required then) instead of overwriting it. Returns the list of results.

    With MKL, one `cblas_?gemm_batch` runs them all and its threads share out whole products.
    That halves the time of RWKV-7's LoRA weight grads (K = B*T, thin outputs, which MKL runs
    slowly one at a time) and slows products MKL splits well on its own (the projections, or
    M x 64 x 384 ones): benchmarks/bench_gemm_batch.py. Without MKL, or when any operand is not
    MKL's (dtype, layout, empty) or any `out` overlaps another array of the batch: one numpy
    product after the other, in order."""
    calls = []
    for prod in products:
        a, b, trans_a, trans_b, out, accumulate = tuple(prod) + (False, False, None, False)[len(prod) - 2:]
        M, N, K = _product(a, b, trans_a, trans_b, out)
        if accumulate and out is None:
            raise ValueError("gemm: accumulate=True needs out")
        calls.append((a, b, bool(trans_a), bool(trans_b), out, bool(accumulate), M, N, K))
    lib = _load()
    if lib is None or not calls or all(_small(*c[6:]) for c in calls) or not _mkl_batch_ok(calls):
        return [_numpy_product(a, b, ta, tb, out, acc) for a, b, ta, tb, out, acc, *_ in calls]
    outs = [np.empty((M, N), a.dtype) if out is None else out for a, b, ta, tb, out, acc, M, N, K in calls]
    n = len(calls)
    single = calls[0][0].dtype == np.float32
    if n == 1:
        a, b, ta, tb, _, acc, M, N, K = calls[0]
        (lib.cblas_sgemm if single else lib.cblas_dgemm)(
            _ROW_MAJOR, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS, M, N, K, 1.0,
            a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], 1.0 if acc else 0.0,
            outs[0].ctypes.data, N)
        return outs
    reals = _array_type(ctypes.c_float if single else ctypes.c_double, n)
    ints = lambda values: _array_type(ctypes.c_int, n)(*values)                       # noqa: E731
    ptrs = lambda arrays: _array_type(ctypes.c_void_p, n)(*(x.ctypes.data for x in arrays))  # noqa: E731
    fn = lib.cblas_sgemm_batch if single else lib.cblas_dgemm_batch
    fn(_ROW_MAJOR, ints(_TRANS if c[2] else _NO_TRANS for c in calls),
       ints(_TRANS if c[3] else _NO_TRANS for c in calls),
       ints(c[6] for c in calls), ints(c[7] for c in calls), ints(c[8] for c in calls),
       reals(*[1.0] * n), ptrs(c[0] for c in calls), ints(c[0].shape[1] for c in calls),
       ptrs(c[1] for c in calls), ints(c[1].shape[1] for c in calls),
       reals(*(1.0 if c[5] else 0.0 for c in calls)), ptrs(outs),
       ints(c[7] for c in calls), n, ints([1] * n))     # n groups of one product each
    return outs


def _small(M, N, K):
    """A product numpy runs faster than a ctypes call to MKL (see SMALL_WORK)."""
    return M <= 1 or M * N * K < SMALL_WORK


@functools.lru_cache(maxsize=None)
def _array_type(ctype, n):
    """ctype * n, made once: each new ctypes array type is a cycle the garbage collector must free."""
    return ctype * n


def _mkl_batch_ok(calls):
    """Every operand MKL's (one dtype, C-contiguous, non-empty) and no out overlapping any other
    array of the batch (the products may run concurrently)."""
    dtype = calls[0][0].dtype
    operands = [x for c in calls for x in c[:2]]
    outs = [c[4] for c in calls if c[4] is not None]
    if not _usable(*operands, *outs) or operands[0].dtype != dtype:
        return False
    for i, out in enumerate(outs):
        others = operands + outs[:i] + outs[i + 1:]
        if any(np.may_share_memory(out, x) for x in others):
            return False
    return True
