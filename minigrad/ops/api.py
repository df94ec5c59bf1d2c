"""The module-level op functions re-exported as `minigrad.<name>` (minigrad.where, minigrad.cat ...)."""
import numpy as np

from minigrad import random as _random
from minigrad.kernels.validate import check_int
from minigrad.ops import reduce
from minigrad.ops._common import as_tensor
from minigrad.ops.binary import (  # noqa: A004
    add,
    div,
    floor_divide,
    maximum,
    minimum,
    mul,
    pow,
    remainder,
    sub,
    where,
)
from minigrad.ops.compare import (
    eq,
    ge,
    gt,
    isfinite,
    isnan,
    le,
    logical_and,
    logical_not,
    logical_or,
    lt,
    ne,
    nonzero,
)
from minigrad.ops.einsum import einsum
from minigrad.ops.elementwise import (  # noqa: A004
    abs,
    clamp,
    cos,
    erf,
    exp,
    expm1,
    gelu,
    log,
    log1p,
    neg,
    relu,
    rsqrt,
    sigmoid,
    silu,
    sin,
    softplus,
    sqrt,
    tanh,
)
from minigrad.ops.embedding import embedding
from minigrad.ops.gather_sort import argsort, cumprod, cumsum, gather, norm, repeat, sort, unbind
from minigrad.ops.indexing import getitem
from minigrad.ops.join import cat, chunk, pad, split, stack
from minigrad.ops.linalg import matmul
from minigrad.ops.reduce import (  # noqa: A004
    all,
    any,
    argmax,
    argmin,
    log_softmax,
    logsumexp,
    mean,
    softmax,
    std,
    sum,
    var,
)
from minigrad.ops.shape import expand, flatten, permute, reshape, squeeze, transpose, unsqueeze, view
from minigrad.tensor import Tensor, int64, scalar_value

clip = clamp
amax, amin = reduce.max, reduce.min


def max(x, dim=None, keepdim=False):  # noqa: A001
    """torch.max: the max of everything, (values, indices) over an int dim, or the elementwise
    maximum with a Tensor `dim` (see Tensor.max)."""
    return as_tensor(x).max(dim, keepdim)


def min(x, dim=None, keepdim=False):  # noqa: A001
    """torch.min, as `max`."""
    return as_tensor(x).min(dim, keepdim)

concat = concatenate = cat


def mm(input, mat2):  # noqa: A002
    """torch.mm: the product of two matrices (2-D only; `matmul` broadcasts)."""
    a, b = as_tensor(input), as_tensor(mat2)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"mm: expects two 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b)


def bmm(input, mat2):  # noqa: A002
    """torch.bmm: batched matrix product of (b, n, m) and (b, m, p) (3-D, equal batch, no broadcast)."""
    a, b = as_tensor(input), as_tensor(mat2)
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm: expects two 3-D tensors with the same batch size, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b)


def square(input):  # noqa: A002
    """torch.square: input * input."""
    x = as_tensor(input)
    return x * x


def _triangle(op, x, diagonal, lower):
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expects a tensor with >= 2 dims, got shape {tuple(x.shape)}")
    diagonal = check_int(op, "diagonal", diagonal)
    n, m = x.shape[-2:]
    keep = np.tri(n, m, diagonal, dtype=bool) if lower else ~np.tri(n, m, diagonal - 1, dtype=bool)
    return where(keep, x, x.new_zeros(()))


def tril(input, diagonal=0):  # noqa: A002
    """torch.tril: the lower triangle (j - i <= diagonal) of the last two dims, zeros elsewhere."""
    return _triangle("tril", input, diagonal, True)


def triu(input, diagonal=0):  # noqa: A002
    """torch.triu: the upper triangle (j - i >= diagonal) of the last two dims, zeros elsewhere."""
    return _triangle("triu", input, diagonal, False)


def numel(input):  # noqa: A002
    """torch.numel: the number of elements."""
    return as_tensor(input).numel()


def is_tensor(obj):
    """torch.is_tensor: whether `obj` is a minigrad Tensor."""
    return isinstance(obj, Tensor)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """torch.allclose: a Python bool, |input - other| <= atol + rtol |other| everywhere (broadcast);
    NaNs are equal only with equal_nan=True. Mixing float32 and float64 raises, as in torch."""
    a, b = as_tensor(input), as_tensor(other)
    if a.dtype != b.dtype and a.dtype.kind == "f" and b.dtype.kind == "f":
        raise TypeError(f"allclose: dtypes differ ({a.dtype} and {b.dtype})")
    try:
        return bool(np.allclose(a.data, b.data, rtol=rtol, atol=atol, equal_nan=equal_nan))
    except ValueError as e:
        raise ValueError(f"allclose: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from e


def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """torch.topk: (values, indices) of the k largest (or smallest) entries along `dim` (see Tensor.topk)."""
    return as_tensor(x).topk(k, dim, largest, sorted)


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """torch.multinomial: int64 indices drawn from each row of `input` (1-D or 2-D non-negative float
    weights, not necessarily normalised) -> shape (num_samples,) or (rows, num_samples); without
    replacement a row needs at least num_samples non-zero weights. Draws from `generator` (default:
    minigrad's global one). No grad."""
    w = as_tensor(input).data
    if w.dtype.kind != "f":
        raise TypeError(f"multinomial: expects floating-point weights, got {w.dtype}")
    if w.ndim not in (1, 2):
        raise ValueError(f"multinomial: expects a 1-D or 2-D tensor, got shape {w.shape}")
    num_samples = check_int("multinomial", "num_samples", num_samples, low=1)
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    rows = np.asarray(w, np.float64).reshape(-1, w.shape[-1])
    if not replacement and num_samples > rows.shape[1]:
        raise ValueError(f"multinomial: cannot sample n_sample ({num_samples}) > prob_dist.size(-1) "
                         f"({rows.shape[1]}) samples without replacement")
    gen = generator or _random.default_generator()
    out = np.empty((rows.shape[0], num_samples), np.int64)
    for i, row in enumerate(rows):
        total = row.sum()
        if not total > 0:
            raise ValueError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
        if not replacement and np.count_nonzero(row) < num_samples:
            raise ValueError("multinomial: invalid multinomial distribution (with replacement=False, "
                             "not enough non-negative category to sample)")
        out[i] = gen.choice(row.shape[0], size=num_samples, replace=bool(replacement), p=row / total)
    return Tensor(out.reshape(num_samples) if w.ndim == 1 else out)


def randperm(n, *, generator=None, dtype=int64, requires_grad=False):
    """torch.randperm: a random permutation of 0 .. n-1 (int64 default) from `generator` (default:
    minigrad's global one)."""
    n = check_int("randperm", "n", scalar_value(n), low=0)
    gen = generator or _random.default_generator()
    return Tensor(gen.permutation(n).astype(dtype, copy=False), requires_grad=requires_grad)

__all__ = [
    "add", "sub", "mul", "div", "pow", "floor_divide", "remainder", "maximum", "minimum", "where", "neg",
    "eq", "ne", "lt", "le", "gt", "ge", "isfinite", "isnan", "logical_and", "logical_or", "logical_not",
    "nonzero", "all", "any",
    "sin", "cos", "log1p", "expm1",
    "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu", "softplus", "erf",
    "clamp", "clip",
    "sum", "mean", "max", "min", "amax", "amin", "var", "std", "logsumexp", "softmax", "log_softmax",
    "argmax", "argmin",
    "reshape", "view", "flatten", "squeeze", "unsqueeze", "permute", "transpose", "expand",
    "cat", "concat", "concatenate", "stack", "split", "chunk", "pad", "getitem",
    "matmul", "einsum", "embedding", "topk", "multinomial", "randperm", "allclose",
    "mm", "bmm", "square", "tril", "triu", "numel", "is_tensor",
    "gather", "cumsum", "cumprod", "sort", "argsort", "repeat", "unbind", "norm",
]
