"""The module-level op functions re-exported as `minigrad.<name>` (minigrad.where, minigrad.cat ...)."""
import builtins

import numpy as np

from minigrad import random as _random
from minigrad.kernels.validate import check_int
from minigrad.ops import reduce
from minigrad.ops._common import as_tensor, normalize_dim
from minigrad.ops.activations import prelu
from minigrad.ops.binary import (  # noqa: A004
    add,
    arctan2,
    atan2,
    bitwise_left_shift,
    bitwise_right_shift,
    bool_mask,
    copysign,
    div,
    float_power,
    floor_divide,
    fmax,
    fmin,
    fmod,
    gcd,
    heaviside,
    hypot,
    lcm,
    ldexp,
    lerp,
    logaddexp,
    logaddexp2,
    maximum,
    minimum,
    mul,
    nextafter,
    pow,
    remainder,
    sub,
    where,
    xlogy,
)
from minigrad.ops.compare import (
    eq,
    ge,
    gt,
    isclose,
    isfinite,
    isin,
    isinf,
    isnan,
    isneginf,
    isposinf,
    isreal,
    le,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    ne,
    nonzero,
)
from minigrad.ops.compare import equal as _equal
from minigrad.ops.cumulative import cummax, cummin, logcumsumexp
from minigrad.ops.einsum import einsum
from minigrad.ops.elementwise import (  # noqa: A004
    abs,
    acos,
    acosh,
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    asin,
    asinh,
    atan,
    atanh,
    ceil,
    clamp,
    cos,
    cosh,
    deg2rad,
    digamma,
    erf,
    erfc,
    erfinv,
    exp,
    exp2,
    expm1,
    fix,
    floor,
    frac,
    frexp,
    gelu,
    lgamma,
    log,
    log1p,
    log2,
    log10,
    logit,
    mvlgamma,
    nan_to_num,
    neg,
    polygamma,
    positive,
    rad2deg,
    reciprocal,
    relu,
    round,
    rsqrt,
    sgn,
    sigmoid,
    sign,
    signbit,
    silu,
    sin,
    sinc,
    sinh,
    softplus,
    sqrt,
    tan,
    tanh,
    trunc,
)
from minigrad.ops.embedding import embedding
from minigrad.ops.gather_sort import (
    argsort,
    cumprod,
    cumsum,
    flip,
    fliplr,
    flipud,
    gather,
    index_add,
    index_select,
    norm,
    prod,
    renorm,
    repeat,
    roll,
    rot90,
    scatter,
    scatter_add,
    sort,
    take,
    unbind,
)
from minigrad.ops.index_update import (
    diagonal_scatter,
    index_copy,
    index_fill,
    index_put,
    index_reduce,
    masked_scatter,
    put,
    select_scatter,
    slice_scatter,
)
from minigrad.ops.indexing import getitem
from minigrad.ops.inplace import bernoulli
from minigrad.ops.join import (
    cat,
    chunk,
    diff,
    dsplit,
    hsplit,
    pad,
    split,
    split_with_sizes,
    stack,
    tensor_split,
    vsplit,
)
from minigrad.ops.linalg import (
    cdist,
    cholesky,
    corrcoef,
    cov,
    cross,
    det,
    dist,
    dot,
    inner,
    inverse,
    kron,
    logdet,
    matmul,
    matrix_power,
    mv,
    slogdet,
    tensordot,
    trace,
    vdot,
)
from minigrad.ops.reduce import (  # noqa: A004
    all,
    aminmax,
    any,
    argmax,
    argmin,
    count_nonzero,
    log_softmax,
    logsumexp,
    mean,
    nanmean,
    nansum,
    softmax,
    std,
    sum,
    var,
)
from minigrad.ops.scatter_reduce import scatter_reduce
from minigrad.ops.selection import (
    kthvalue,
    masked_select,
    median,
    mode,
    msort,
    nanmedian,
    nanquantile,
    quantile,
)
from minigrad.ops.shape import (
    broadcast_to,
    diag,
    diag_embed,
    diagflat,
    expand,
    flatten,
    meshgrid,
    movedim,
    permute,
    ravel,
    reshape,
    squeeze,
    swapaxes,
    transpose,
    unflatten,
    unsqueeze,
    view,
)
from minigrad.ops.unique import bincount, bucketize, histc, searchsorted, unique, unique_consecutive
from minigrad.tensor import Tensor, int64, scalar_value

clip = clamp
amax, amin = reduce.max, reduce.min
swapdims = swapaxes
moveaxis = movedim
absolute = abs
negative = neg
multiply, divide, true_divide, subtract = mul, div, div, sub
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
equal = _equal


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
    """torch.square: input * input (a bool input squares as int64, as torch)."""
    x = as_tensor(input)
    if x.dtype == np.bool_:
        x = x.to(np.int64)
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


def masked_fill(input, mask, value):  # noqa: A002
    """torch.masked_fill: `value` where the bool `mask` (broadcast) is True, input elsewhere."""
    return where(bool_mask(mask, "masked_fill"), value, input)


def narrow(input, dim, start, length):  # noqa: A002
    """torch.narrow: entries start .. start + length - 1 along `dim` (start may be negative)."""
    x = as_tensor(input)
    d = normalize_dim("narrow", dim, x.ndim, x.shape)
    n = x.shape[d]
    start = check_int("narrow", "start", scalar_value(start))
    length = check_int("narrow", "length", scalar_value(length), low=0)
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dim {d} of size {n}")
    start %= n if n else 1
    if start + length > n:
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dim {d} of size {n}")
    return x[(slice(None),) * d + (slice(start, start + length),)]


def select(input, dim, index):  # noqa: A002
    """torch.select: the slice at `index` along `dim` (that dim removed); x.select(d, i) is x[.., i]."""
    x = as_tensor(input)
    d = normalize_dim("select", dim, x.ndim, x.shape)
    return x[(slice(None),) * d + (check_int("select", "index", scalar_value(index)),)]


def tile(input, dims):  # noqa: A002
    """torch.tile: repeat with `dims` padded by leading 1s to the input's number of dims."""
    x = as_tensor(input)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def repeat_interleave(input, repeats, dim=None, *, output_size=None):  # noqa: A002
    """torch.repeat_interleave: each entry repeated `repeats` times (an int, or a 1-D int tensor of
    one count per entry) along `dim` (None: of the flattened input). The gradient sums the copies."""
    x = as_tensor(input)
    if dim is None:
        x, dim = x.reshape(-1), 0
    d = normalize_dim("repeat_interleave", dim, x.ndim, x.shape)
    n = x.shape[d] if x.ndim else 1
    r = np.asarray(repeats.data if isinstance(repeats, Tensor) else repeats)
    if r.dtype.kind not in "iu" or r.ndim > 1 or (r.ndim == 1 and r.shape[0] not in (1, n)):
        raise ValueError(f"repeat_interleave: repeats must be an int or a 1-D int tensor of {n} counts, "
                         f"got {r.dtype} of shape {r.shape}")
    if np.any(r < 0):
        raise ValueError("repeat_interleave: repeats must be non-negative")
    index = np.repeat(np.arange(n), np.broadcast_to(r.reshape(-1), (n,)))
    return index_select(x.reshape(1) if x.ndim == 0 else x, d, index)


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """torch.take_along_dim: gather along `dim` with input and indices broadcast over the other dims
    (dim=None: of both flattened)."""
    x = as_tensor(input)
    idx = as_tensor(indices)
    if dim is None:
        return gather(x.reshape(-1), 0, idx.reshape(-1))
    d = normalize_dim("take_along_dim", dim, x.ndim, x.shape)
    if idx.ndim != x.ndim:
        raise ValueError(f"take_along_dim: input {tuple(x.shape)} and indices {tuple(idx.shape)} must have "
                         "the same number of dims")
    try:
        shape = np.broadcast_shapes(tuple(1 if i == d else s for i, s in enumerate(x.shape)),
                                    tuple(1 if i == d else s for i, s in enumerate(idx.shape)))
    except ValueError:
        raise ValueError(f"take_along_dim: input {tuple(x.shape)} and indices {tuple(idx.shape)} do not "
                         f"broadcast outside dim {d}") from None
    xs = tuple(x.shape[d] if i == d else s for i, s in enumerate(shape))
    ids = tuple(idx.shape[d] if i == d else s for i, s in enumerate(shape))
    return gather(expand(x, xs), d, Tensor(np.ascontiguousarray(np.broadcast_to(idx.data, ids))))


def diagonal(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """torch.diagonal: the entries x[.., i, .., i + offset, ..] of dims dim1, dim2, as a last dim."""
    x = as_tensor(input)
    d1 = normalize_dim("diagonal", dim1, x.ndim, x.shape)
    d2 = normalize_dim("diagonal", dim2, x.ndim, x.shape)
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
    offset = check_int("diagonal", "offset", offset)
    y = movedim(x, (d1, d2), (-2, -1))
    n, m = y.shape[-2:]
    k = builtins.max(0, builtins.min(n + builtins.min(offset, 0), m - builtins.max(offset, 0)))
    rows = np.arange(k) + builtins.max(-offset, 0)
    return y[..., rows, rows + offset]


def outer(input, vec2):  # noqa: A002
    """torch.outer: the (n, m) outer product of two 1-D tensors."""
    a, b = as_tensor(input), as_tensor(vec2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: expects two 1-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return a.reshape(-1, 1) * b.reshape(1, -1)


def _scaled_sum(op, input, product, beta, alpha):  # noqa: A002
    """beta input + alpha product; input must broadcast to product's shape (torch ignores input's
    values when beta == 0: its nan and inf do not propagate)."""
    try:
        np.broadcast_shapes(input.shape, product.shape)
    except ValueError:
        raise ValueError(f"{op}: input {tuple(input.shape)} does not broadcast to the product's shape "
                         f"{tuple(product.shape)}") from None
    out = product if alpha == 1 else product * alpha
    if tuple(np.broadcast_shapes(input.shape, product.shape)) != tuple(product.shape):
        raise ValueError(f"{op}: input {tuple(input.shape)} does not broadcast to the product's shape "
                         f"{tuple(product.shape)}")
    if beta == 0:
        return out
    return out + (input if beta == 1 else input * beta)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """torch.addmm: beta input + alpha (mat1 @ mat2), input broadcast to (n, p); beta=0 ignores input."""
    return _scaled_sum("addmm", as_tensor(input), mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """torch.baddbmm: beta input + alpha bmm(batch1, batch2); beta=0 ignores input."""
    return _scaled_sum("baddbmm", as_tensor(input), bmm(batch1, batch2), beta, alpha)


def var_mean(input, dim=None, *, correction=None, keepdim=False, unbiased=None):  # noqa: A002
    """torch.var_mean: (var, mean) over `dim`."""
    return (var(input, dim, correction, keepdim, unbiased), mean(input, dim, keepdim))


def std_mean(input, dim=None, *, correction=None, keepdim=False, unbiased=None):  # noqa: A002
    """torch.std_mean: (std, mean) over `dim`."""
    return (std(input, dim, correction, keepdim, unbiased), mean(input, dim, keepdim))


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
    "scatter", "scatter_add", "index_select", "index_add", "flip", "roll", "prod", "masked_fill", "narrow",
    "select", "tile", "repeat_interleave", "take_along_dim", "diagonal", "outer", "addmm", "baddbmm",
    "var_mean", "std_mean", "lerp", "logaddexp", "isinf", "isposinf", "isneginf", "floor", "ceil", "round",
    "trunc", "sign", "reciprocal", "log2", "log10", "exp2", "nan_to_num", "movedim", "moveaxis", "swapaxes",
    "swapdims", "unflatten", "broadcast_to",
    "scatter_reduce", "index_fill", "index_copy", "masked_select", "cummax", "cummin", "logcumsumexp",
    "median", "kthvalue", "unique", "bincount", "mode", "unique_consecutive", "histc",
]


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """torch.addmv: beta input + alpha (mat @ vec), input broadcast to (n,); beta=0 ignores input."""
    return _scaled_sum("addmv", as_tensor(input), mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """torch.addr: beta input + alpha outer(vec1, vec2); beta=0 ignores input."""
    return _scaled_sum("addr", as_tensor(input), outer(vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """torch.addbmm: beta input + alpha sum_b batch1[b] @ batch2[b]; beta=0 ignores input."""
    return _scaled_sum("addbmm", as_tensor(input), sum(bmm(batch1, batch2), 0), beta, alpha)


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """torch.addcmul: input + value tensor1 tensor2 (broadcast)."""
    return add(input, mul(tensor1, tensor2), alpha=value)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """torch.addcdiv: input + value tensor1 / tensor2 (broadcast); integer tensor1 / tensor2 raise, as
    in torch."""
    if builtins.all(isinstance(t, Tensor) and t.dtype.kind in "iub" for t in (tensor1, tensor2)):
        raise TypeError("addcdiv: integer division with addcdiv is not supported; use true_divide "
                        "(tensor1 / tensor2)")
    return add(input, div(tensor1, tensor2), alpha=value)


def clone(input):  # noqa: A002
    """torch.clone: a differentiable copy."""
    return as_tensor(input).clone()


def clamp_min(input, min):  # noqa: A002
    """torch.clamp_min: clamp(input, min=min)."""
    return clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    """torch.clamp_max: clamp(input, max=max)."""
    return clamp(input, max=max)


def rsub(input, other, *, alpha=1):  # noqa: A002
    """torch.rsub: other - alpha input."""
    return sub(other, input, alpha=alpha)


def argwhere(input):  # noqa: A002
    """torch.argwhere: nonzero(input) (an int64 (n, ndim) tensor)."""
    return nonzero(input)


def broadcast_tensors(*tensors):
    """torch.broadcast_tensors: the tensors expanded to their common broadcast shape."""
    xs = [as_tensor(t) for t in tensors]
    try:
        shape = np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        raise ValueError(f"broadcast_tensors: shapes {[tuple(x.shape) for x in xs]} cannot be broadcast "
                         "together") from None
    return tuple(expand(x, shape) for x in xs)


def broadcast_shapes(*shapes):
    """torch.broadcast_shapes: the broadcast shape of the given shapes (a tuple)."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) if isinstance(s, (tuple, list)) else (s,)
                                           for s in shapes)))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {shapes} cannot be broadcast together") from None


def atleast_1d(*tensors):
    """torch.atleast_1d: 0-d tensors reshaped to (1,); one tensor in, one out."""
    return _atleast(tensors, 1)


def atleast_2d(*tensors):
    """torch.atleast_2d: tensors with fewer than 2 dims given leading size-1 dims."""
    return _atleast(tensors, 2)


def atleast_3d(*tensors):
    """torch.atleast_3d: as numpy's (a 1-D (n,) -> (1, n, 1), a 2-D (m, n) -> (m, n, 1))."""
    return _atleast(tensors, 3)


def _atleast(tensors, n):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(tuple(tensors[0]), n))
    out = []
    for t in tensors:
        x = as_tensor(t)
        if x.ndim == 0:
            x = x.reshape((1,) * n)
        elif x.ndim < n:            # (k,) -> (1, k) or (1, k, 1); (m, k) -> (m, k, 1), as torch
            x = x.reshape((1,) + x.shape + (1,) * (n - 2) if x.ndim == 1 else x.shape + (1,))
        out.append(x)
    return out[0] if len(out) == 1 else tuple(out)


def hstack(tensors):
    """torch.hstack: cat along dim 1 (dim 0 for 1-D tensors)."""
    xs = [atleast_1d(t) for t in tensors]
    return cat(xs, 0 if xs[0].ndim == 1 else 1)


def vstack(tensors):
    """torch.vstack (row_stack): cat along dim 0 of the tensors made at least 2-D."""
    xs = [atleast_2d(t) for t in tensors]
    return cat(xs, 0)


row_stack = vstack


def dstack(tensors):
    """torch.dstack: cat along dim 2 of the tensors made at least 3-D."""
    xs = [atleast_3d(t) for t in tensors]
    return cat(xs, 2)


def column_stack(tensors):
    """torch.column_stack: 0-d and 1-D tensors as columns (n, 1), then hstack."""
    xs = [as_tensor(t) for t in tensors]
    return hstack([x.reshape(-1, 1) if x.ndim <= 1 else x for x in xs])


ger = outer

__all__ += [
    "asin", "acos", "atan", "sinh", "cosh", "tan", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan",
    "arcsinh", "arccosh", "arctanh", "erfc", "erfinv", "lgamma", "digamma", "sinc", "frac", "fix", "logit",
    "deg2rad", "rad2deg", "sgn", "signbit", "positive", "absolute", "negative", "multiply", "divide",
    "true_divide", "subtract", "greater", "greater_equal", "less", "less_equal", "not_equal",
    "atan2", "arctan2", "hypot", "xlogy", "copysign", "fmax", "fmin", "fmod", "float_power", "logaddexp2",
    "heaviside", "ldexp", "logical_xor", "isclose", "equal", "isreal", "isin",
    "nansum", "nanmean", "count_nonzero", "aminmax", "quantile", "nanquantile", "msort",
    "dot", "vdot", "mv", "inner", "tensordot", "kron", "cross", "trace", "cdist", "ger",
    "addmv", "addr", "addbmm", "addcmul", "addcdiv", "clone", "clamp_min", "clamp_max", "rsub", "argwhere",
    "diag", "diag_embed", "diagflat", "ravel", "meshgrid",
    "diff", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit",
    "rot90", "fliplr", "flipud", "take",
    "select_scatter", "slice_scatter", "diagonal_scatter", "index_put", "masked_scatter",
    "searchsorted", "bucketize", "broadcast_tensors", "broadcast_shapes",
    "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack", "column_stack",
]



def narrow_copy(input, dim, start, length):  # noqa: A002
    """torch.narrow_copy: narrow, copied."""
    return narrow(input, dim, start, length).clone()


def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002
    """torch.nonzero_static: nonzero's (n, ndim) int64 indices cut or padded with fill_value to `size`
    rows."""
    idx = nonzero(input).data
    size = check_int("nonzero_static", "size", size, low=0)
    out = np.full((size, idx.shape[1]), fill_value, dtype=np.int64)
    out[:builtins.min(size, idx.shape[0])] = idx[:size]
    return Tensor(out)


__all__ += [
    "prelu", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "nextafter", "angle", "frexp",
    "mvlgamma", "polygamma", "renorm", "index_reduce", "put", "bernoulli", "corrcoef", "cov", "dist",
    "nanmedian", "narrow_copy", "nonzero_static", "inverse", "det", "slogdet", "logdet", "matrix_power",
    "cholesky",
]
