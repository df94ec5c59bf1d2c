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
import os

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
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
        x.dtype == a.dtype and x.ndim == 2 and x.flags.c_contiguous and x.size > 0 for x in arrays)


def gemm(a, b, trans_a=False, trans_b=False, out=None):
    """op(a) @ op(b) for 2-D arrays, op = transpose when asked: a (M, K) or (K, M), b (K, N) or
    (N, K) -> (M, N), into `out` (C-contiguous (M, N), same dtype) when given. Float32/float64
    C-contiguous operands go to MKL when it is in use; everything else to numpy (also an `out`
    sharing memory with an operand: MKL would read what it has already overwritten)."""
    A = a.T if trans_a else a
    B = b.T if trans_b else b
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"gemm: shapes {A.shape} and {B.shape} do not multiply")
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    lib = _load()
    if out is not None and (out.shape != (M, N) or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"gemm: out must be a writable C-contiguous ({M}, {N}) array, got {out.shape}")
    if lib is None or not _usable(a, b) or (out is not None and (
            out.dtype != a.dtype or np.may_share_memory(out, a) or np.may_share_memory(out, b))):
        return np.matmul(A, B, out=out)     # numpy buffers an out that overlaps an operand
    if out is None:
        out = np.empty((M, N), a.dtype)
    fn = lib.cblas_sgemm if a.dtype == np.float32 else lib.cblas_dgemm
    fn(_ROW_MAJOR, _TRANS if trans_a else _NO_TRANS, _TRANS if trans_b else _NO_TRANS, M, N, K, 1.0,
       a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], 0.0, out.ctypes.data, N)
    return out
