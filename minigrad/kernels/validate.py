"""Checks run at the Python boundary before any array enters a nogil kernel.

Kernels are compiled with bounds checks off, so every shape, dtype, contiguity and index range
they rely on must be checked here first. Errors name the op and the offending argument.
"""
import functools
import numbers

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
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        bad = arr[arr > np.iinfo(np.int64).max].ravel()[0]     # would wrap negative as int64
        raise IndexError(f"{op}: {name} contains {int(bad)}, outside [0, {high})")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size:
        valid = (arr >= 0) & (arr < high)
        if ignore is not None:
            valid |= arr == ignore
        if not valid.all():
            bad = arr[~valid].ravel()[0]
            raise IndexError(f"{op}: {name} contains {int(bad)}, outside [0, {high})")
    return arr


def check_int(op, name, value, low=None, high=None):
    """An integer argument (Python or numpy int, not bool) as an int: TypeError for 1.5, "3", True;
    ValueError below `low` or above `high`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{op}: {name} must be an int >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{op}: {name} must be an int <= {high}, got {value}")
    return int(value)


def check_number(op, name, value):
    """A real number (Python or numpy int / float, or a 0-d numeric array) as a float: TypeError
    naming `name` for a bool, str, None or anything else float() would take or choke on."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a number, got {value!r}")
    return float(value)


def check_bool(op, name, value):
    """A bool (Python or numpy) as a bool: TypeError naming `name` for "no", 0, None ..."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be True or False, got {value!r}")
    return bool(value)


def check_seed(op, seed):
    """A sampling seed: None (fresh entropy) or an int >= 0 (numpy's own error names no argument)."""
    return None if seed is None else check_int(op, "seed", seed, 0)


def check_finite_scalar(op, name, value, positive=False):
    """A finite number (> 0 with `positive`) as a float, for eps, scale, base, lr ... (check_number
    first: "1e-5" or None is a TypeError naming the argument)."""
    value = check_number(op, name, value)
    if not np.isfinite(value) or (positive and value <= 0):
        need = "a finite positive number" if positive else "finite"
        raise ValueError(f"{op}: {name} must be {need}, got {value}")
    return value


@functools.lru_cache(maxsize=None)
def _spec(spec):
    """"x:N,C w:C" -> (("x", ("N", "C")), ("w", ("C",)))."""
    out = []
    for part in spec.split():
        name, _, dims = part.partition(":")
        out.append((name, tuple(dims.split(",")) if dims else ()))
    return tuple(out)


_PASSED = {}           # (spec, dims, shapes) -> sizes of a call that passed; shapes alone decide
_PASSED_MAX = 4096


def check_kernel_args(op, spec, *arrays, **dims):
    """Shape contract of a raw kernel entry point, checked before its nogil code runs.

    The Cython signature already enforces dtype, rank and C-contiguity; this checks what it
    cannot: None, and shapes agreeing across arguments. `spec` has one `name:d0,d1,..` pattern per
    array: a letter is a size shared by every array that names it, an integer is exact, `*` is
    free, and a trailing `?` (`M?`) also accepts 0 (an optional operand given as an empty array).
    `dims` pre-binds sizes. Returns the dict of sizes.

    The verdict depends only on (spec, dims, the shapes), so shape sets that passed are
    remembered: a training step repeats the same few, and the full check costs 10-30 us a call.
    """
    try:
        key = (spec, tuple(dims.items()), tuple([a.shape for a in arrays]))
    except AttributeError:          # None (or a non-array) among them: the full check says which
        return _match_shapes(op, spec, arrays, dims)
    sizes = _PASSED.get(key)
    if sizes is None:
        sizes = _match_shapes(op, spec, arrays, dims)
        if len(_PASSED) < _PASSED_MAX:
            _PASSED[key] = sizes
    return dict(sizes)


def _match_shapes(op, spec, arrays, dims):
    sizes = dict(dims)
    pats = _spec(spec)
    for (name, pat), arr in zip(pats, arrays):
        if arr is None:
            raise TypeError(f"{op}: {name} must be an array, got None")
        shape = tuple(arr.shape)
        if len(shape) != len(pat):
            raise ValueError(f"{op}: {name} has shape {shape}, expected {len(pat)} dims ({','.join(pat)})")
        for d, s in zip(pat, shape):
            optional = d.endswith("?")
            sym = d[:-1] if optional else d
            if sym == "*" or (optional and s == 0):
                continue
            if sym.isdigit():
                ok = s == int(sym)
            else:
                ok = sizes.setdefault(sym, s) == s
            if not ok:
                want = {k: v for k, v in sizes.items() if k in pat or k == sym}
                raise ValueError(f"{op}: {name} has shape {shape}, expected ({','.join(pat)}) with {want}")
    return sizes


def check_kernel_index(op, name, arr, high, ignore=None):
    """Every value of the int64 memoryview/array `arr` in [0, high) (or equal to `ignore`)."""
    a = np.asarray(arr)
    if a.size:
        valid = (a >= 0) & (a < high)
        if ignore is not None:
            valid |= a == ignore
        if not valid.all():
            raise IndexError(f"{op}: {name} contains {int(a[~valid].ravel()[0])}, outside [0, {high})")


def check_kernel_scalar(op, name, value, low, high=None):
    """An integer kernel parameter in [low, high] (high=None: no upper bound)."""
    if value < low or (high is not None and value > high):
        rng = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{op}: {name} must be {rng}, got {value}")
