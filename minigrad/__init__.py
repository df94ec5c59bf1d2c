"""minigrad: a small tape-based autodiff framework with fused Cython kernels for small LMs on CPU.

    import minigrad as mg
    x = mg.randn(4, 3, requires_grad=True)
    (x * x).sum().backward()            # x.grad == 2x
"""
__version__ = "0.1.0"

import os as _os
import sys as _sys

# Idle OpenMP workers sleep instead of spinning: between kernels, BLAS needs the cores. A spinning
# OpenMP pool made a small GPT training step 2.4x slower on an idle 2-core machine (611 -> 258 ms).
# Must be set before the first kernel loads libgomp; an explicit user setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Likewise OpenBLAS workers busy-wait 2^28 cycles (~0.1 s) after each GEMM by default, taking a core
# from the OpenMP kernels that follow (about 1/3 of the WKV7 kernels' CPU on 2 cores). 2^4: they
# sleep at once. Read when OpenBLAS loads, so it only takes effect when minigrad is imported before
# numpy; an explicit user setting wins. Measurements: docs/benchmarks.md.
_TIMEOUT_TOO_LATE = "OPENBLAS_THREAD_TIMEOUT" not in _os.environ and "numpy" in _sys.modules
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from minigrad import ops  # noqa: E402,F401  (attaches Tensor methods)
from minigrad.autograd import (  # noqa: E402
    detect_anomaly,
    enable_grad,
    gradcheck,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from minigrad.ops.api import *  # noqa: E402,F401,F403  (minigrad.where, cat, matmul, exp ...)
from minigrad.random import Generator, get_rng_state, manual_seed, set_rng_state  # noqa: E402
from minigrad.tensor import (  # noqa: E402
    Tensor,
    arange,
    as_tensor,
    bool_,
    empty,
    eye,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    int8,
    int16,
    int32,
    int64,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    tensor,
    uint8,
    zeros,
    zeros_like,
)
from minigrad.threads import get_num_threads, set_num_threads  # noqa: E402

if _TIMEOUT_TOO_LATE:
    from minigrad.threads import warn_if_blas_spins as _warn_if_blas_spins

    _warn_if_blas_spins()

_LAZY = {"nn", "optim", "models", "data", "functional", "io", "utils", "profiler"}
# minigrad.save / minigrad.load (PyTorch .pt/.pth files, without torch): imported on first use (zipfile,
# pickle and minigrad.io add ~30 ms to `import minigrad`)
_LAZY_FUNCTIONS = {"save": "minigrad.torch_format", "load": "minigrad.torch_format"}
# PyTorch's dtype aliases (torch.long, torch.float ...), served here rather than bound as globals so
# that this module's own `int` / `float` / `bool` stay the builtins.
_DTYPE_ALIASES = {"long": int64, "int": int32, "short": int16, "float": float32, "double": float64,
                  "bool": bool_}


def __getattr__(name):
    if name in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[name]
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"minigrad.{name}")
    if name in _LAZY_FUNCTIONS:
        import importlib

        return getattr(importlib.import_module(_LAZY_FUNCTIONS[name]), name)
    if name == "F":
        import importlib

        return importlib.import_module("minigrad.functional")
    raise AttributeError(f"module 'minigrad' has no attribute {name!r}")


def build_info():
    """Version, OpenMP on/off, thread count, the BLAS numpy uses and the one minigrad's large GEMMs
    use (minigrad.blas: 'mkl' or 'numpy'), as a dict."""
    from minigrad import blas
    from minigrad.kernels import _threads
    from minigrad.threads import blas_info

    try:
        from minigrad import _build_config as cfg
        flags = " ".join(cfg.COMPILE_ARGS)
    except ImportError:
        flags = "unknown"
    return {
        "version": __version__,
        "openmp": _threads.openmp_enabled(),
        "threads": get_num_threads(),
        "blas": blas_info(),
        "gemm": blas.backend(),
        "compile_flags": flags,
    }


__all__ = [
    "Tensor", "tensor", "from_numpy", "as_tensor", "zeros", "ones", "full", "empty", "eye", "randn", "rand",
    "randint", "arange", "linspace", "zeros_like",
    "ones_like", "full_like", "randn_like", "rand_like", "float32", "float64", "int8", "int16",
    "int32", "int64", "uint8", "bool_",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "detect_anomaly", "gradcheck",
    "manual_seed", "Generator", "get_rng_state", "set_rng_state", "set_num_threads", "get_num_threads",
    "build_info",
]
