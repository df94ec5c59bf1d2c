"""The module-level op functions re-exported as `minigrad.<name>` (minigrad.where, minigrad.cat ...)."""
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
from minigrad.ops.elementwise import (  # noqa: A004
    abs,
    clamp,
    erf,
    exp,
    gelu,
    log,
    neg,
    relu,
    rsqrt,
    sigmoid,
    silu,
    softplus,
    sqrt,
    tanh,
)
from minigrad.ops.embedding import embedding
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

__all__ = [
    "add", "sub", "mul", "div", "pow", "floor_divide", "remainder", "maximum", "minimum", "where", "neg",
    "eq", "ne", "lt", "le", "gt", "ge", "isfinite", "isnan", "logical_and", "logical_or", "logical_not",
    "nonzero", "all", "any",
    "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu", "softplus", "erf",
    "clamp", "clip",
    "sum", "mean", "max", "min", "amax", "amin", "var", "std", "logsumexp", "softmax", "log_softmax",
    "argmax", "argmin",
    "reshape", "view", "flatten", "squeeze", "unsqueeze", "permute", "transpose", "expand",
    "cat", "concat", "concatenate", "stack", "split", "chunk", "pad", "getitem",
    "matmul", "embedding",
]
