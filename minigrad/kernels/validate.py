"""Checks run at the Python boundary before any array enters a nogil kernel.

Kernels are compiled with bounds checks off, so every shape, dtype, contiguity and index range
they rely on must be checked here first. Errors name the op and the offending argument.
"""
import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_float(op, name, arr, shape=None, ndim=None, dtype=None):
    """Validate a float32/float64 C-contiguous array for kernel `op`; return it unchanged.

    shape: expected shape, `None` entries are wildcards. ndim: expected rank.
    dtype: the dtype every float argument of this call must share.
    """
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{op}: {name} must be a numpy array, got {type(arr).__name__}")
    if arr.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: {name} must be float32 or float64, got {arr.dtype}")
    if dtype is not None and arr.dtype != np.dtype(dtype):
        raise TypeError(f"{op}: {name} has dtype {arr.dtype} but the other inputs are {np.dtype(dtype)}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{op}: {name} must have {ndim} dims, got shape {tuple(arr.shape)}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = tuple("*" if s is None else s for s in shape)
            raise ValueError(f"{op}: {name} has shape {tuple(arr.shape)}, expected {want}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{op}: {name} must be C-contiguous (use np.ascontiguousarray)")
    return arr


def check_index(op, name, arr, high, shape=None, ignore=None):
    """Validate an integer index array with every value in [0, high) (or equal to `ignore`).

    Returns it as a C-contiguous int64 array.
    """
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{op}: {name} must be a numpy array, got {type(arr).__name__}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must be an integer array, got {arr.dtype}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{op}: {name} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size:
        valid = (arr >= 0) & (arr < high)
        if ignore is not None:
            valid |= arr == ignore
        if not valid.all():
            bad = arr[~valid].ravel()[0]
            raise IndexError(f"{op}: {name} contains {int(bad)}, outside [0, {high})")
    return arr


def check_finite_scalar(op, name, value, positive=False):
    """Validate a Python float parameter (eps, scale, base ...)."""
    value = float(value)
    if not np.isfinite(value) or (positive and value <= 0):
        need = "a finite positive number" if positive else "finite"
        raise ValueError(f"{op}: {name} must be {need}, got {value}")
    return value
