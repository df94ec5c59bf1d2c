"""Helpers shared by the op families: operand coercion, dim normalisation, shape-naming errors."""
import math
import operator

import numpy as np

from minigrad.tensor import Tensor

_SCALARS = (bool, int, float)


def shape_str(shape):
    """(4, 3) -> '(4, 3)', () -> '()'."""
    return str(tuple(int(s) for s in shape))


def rows(x):
    """x (..., C) as a 2-D (M, C) array, M the product of the leading dims. Unlike
    reshape(-1, C) this also works for C = 0 (an empty feature dim gives an empty result, as in torch)."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def operand(x):
    """Coerce an op argument: Tensors stay, scalars become Python scalars, arrays/lists become Tensors.

    Python scalars (and numpy scalars) take the other operand's dtype (numpy's NEP 50 rule), so
    `x32 * 2.0` stays float32. An array or list is wrapped as a Tensor of its own dtype, so mixing a
    float64 array into a float32 op raises like any other float32/float64 mix.
    """
    if isinstance(x, np.generic):       # first: np.float64 is a subclass of float, and kept as is it
        return x.item()                  # made `x32 == np.float64(0.1)` compare in float64
    if isinstance(x, Tensor) or isinstance(x, _SCALARS):
        return x
    if isinstance(x, (np.ndarray, list, tuple)):
        return Tensor(x)
    raise TypeError(f"expected a Tensor, array or number, got {type(x).__name__}")


def as_tensor(x):
    """`x` as a Tensor (scalars become 0-d tensors of their natural dtype)."""
    return x if isinstance(x, Tensor) else Tensor(x)


def array_of(x):
    """The numpy array behind a Tensor (or `x` itself)."""
    return x.data if isinstance(x, Tensor) else x


def private_index(arr, given):
    """`arr`, an index/target array made from the caller's `given`, as an op keeps it for backward:
    copied when it may share memory with `given`, so that changing the caller's index tensor in place
    after the forward cannot change where the backward scatters (index arrays are small)."""
    return arr.copy() if np.may_share_memory(arr, given) else arr


def wrap(arr):
    """A result that never requires grad (comparisons, argmax ...) as a Tensor."""
    arr = np.asarray(arr)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return Tensor._from_op(arr)


def broadcast_error(op, symbol, *shapes):
    sep = ", " if symbol == "," else f" {symbol} "
    body = sep.join(shape_str(s) for s in shapes)
    return ValueError(f"{op}: {body}: shapes cannot be broadcast together")


def run_broadcasting(op, symbol, fn, *args):
    """fn(*args) for a broadcasting numpy function; its ValueError is reported as a broadcast error
    naming the shapes only when the shapes really do not broadcast (else numpy's own message, e.g.
    "Integers to negative integer powers are not allowed")."""
    try:
        return fn(*args)
    except ValueError as err:
        shapes = [np.shape(a) for a in args]
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            raise broadcast_error(op, symbol, *shapes) from None
        raise ValueError(f"{op}: {err}") from None


def normalize_dim(op, dim, ndim, shape, extra=0):
    """One dim in [-ndim-extra, ndim+extra) -> non-negative int; 0-d tensors accept 0 and -1."""
    dim = operator.index(dim)
    n = max(ndim + extra, 1)
    if not -n <= dim < n:
        raise np.exceptions.AxisError(
            f"{op}: dim {dim} is out of range for shape {shape_str(shape)} (expected {-n} <= dim < {n})")
    return dim % n if ndim + extra else 0


def normalize_dims(op, dims, ndim, shape):
    """None | int | sequence of ints -> sorted tuple of distinct non-negative dims; None and an empty
    sequence mean every dim (as in PyTorch)."""
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    if dims is None or len(dims) == 0:
        return tuple(range(ndim))
    out = tuple(sorted(normalize_dim(op, d, ndim, shape) for d in dims))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: dim {tuple(dims)} repeats a dimension")
    return out if ndim else ()


def kept_shape(shape, dims):
    """The shape of a keepdims reduction of `shape` over `dims`."""
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def expand_to(g, kshape, shape):
    """A reduction's grad g (reduced shape) broadcast back to the input `shape` as a fresh array."""
    return np.broadcast_to(g.reshape(kshape), shape).copy()


def pick_dims(dim, axis, op):
    """PyTorch's `dim=` and numpy's `axis=` spell the same argument."""
    if axis is not None and dim is not None:
        raise TypeError(f"{op}: pass dim or axis, not both")
    return dim if axis is None else axis


def pick_keepdim(keepdim, keepdims):
    return bool(keepdim or keepdims)
