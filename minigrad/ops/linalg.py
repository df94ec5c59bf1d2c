"""matmul with numpy's semantics (1-D operands, batched, broadcast batch dims), GEMMs in BLAS.

Forward y = a @ b. With 1-D operands promoted (a (k,) -> (1, k), b (k,) -> (k, 1)):
    ga = g @ b^T    gb = a^T @ g
summed over broadcast batch dims, then the promoted dims dropped again. When one side is a plain
matrix, the batch dims of the other are folded into rows so each product is one GEMM.

torch's other products are composed of matmul, reshape / permute and elementwise ops, so their
gradients are those of the pieces: dot / vdot / mv / inner / tensordot (a permute and a reshape to
one GEMM), kron (a broadcast product), cross (products of the components), trace (a diagonal sum),
cdist and dist (the p-norm of the (broadcast) difference; gradient 0 at distance 0, as torch), cov /
corrcoef (centred products through matmul).
"""
import builtins
import collections
import math
import operator
import warnings

import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops import binary, shape
from minigrad.ops._common import as_tensor, normalize_dim, operand, rows, shape_str
from minigrad.tensor import Tensor


def _matmul_error(a_shape, b_shape):
    head = f"matmul: {shape_str(a_shape)} @ {shape_str(b_shape)}"
    if len(a_shape) == 0 or len(b_shape) == 0:
        return ValueError(f"{head}: both operands need at least 1 dimension")
    ka = a_shape[-1]
    kb = b_shape[0] if len(b_shape) == 1 else b_shape[-2]
    if ka != kb:
        return ValueError(f"{head}: inner dimensions {ka} and {kb} differ")
    return ValueError(f"{head}: batch dimensions {shape_str(a_shape[:-2])} and {shape_str(b_shape[:-2])} "
                      "cannot be broadcast")


def _mm(a, b):
    """a @ b; a (..., m, k) @ b (k, n) runs as one (M, k) @ (k, n) GEMM."""
    if b.ndim == 2 and a.ndim > 2:
        return (rows(a) @ b).reshape(a.shape[:-1] + (b.shape[1],))
    return np.matmul(a, b)


def _sum_to(g, shape):
    """Sum the leading batch dims g has beyond `shape` and the batch dims `shape` broadcast."""
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape[:-2]) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise _matmul_error(a.shape, b.shape)
        try:
            y = _mm(a, b)
        except ValueError:
            raise _matmul_error(a.shape, b.shape) from None
        need_a, need_b = ctx.needs_input_grad
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        ctx.shapes = a.shape, b.shape
        return y

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        a_shape, b_shape = ctx.shapes
        a2_shape = (1,) + a_shape if len(a_shape) == 1 else a_shape
        b2_shape = b_shape + (1,) if len(b_shape) == 1 else b_shape
        g2 = g
        if len(b_shape) == 1:
            g2 = g2.reshape(g2.shape + (1,))
        if len(a_shape) == 1:
            g2 = g2.reshape(g2.shape[:-1] + (1, g2.shape[-1]))
        ga = gb = None
        if ctx.needs_input_grad[0]:
            bT = np.swapaxes(b.reshape(b2_shape), -1, -2)
            ga = _sum_to(_mm(g2, bT), a2_shape).reshape(a_shape)
        if ctx.needs_input_grad[1]:
            a2 = a.reshape(a2_shape)
            if len(b2_shape) == 2:   # fold every batch dim of a and g into the GEMM's inner dim
                gb = rows(a2).T @ rows(g2)
            else:
                gb = _sum_to(np.matmul(np.swapaxes(a2, -1, -2), g2), b2_shape)
            gb = gb.reshape(b_shape)
        return ga, gb


def matmul(a, b):
    """a @ b with numpy's matmul semantics."""
    return MatMul.apply(as_tensor(operand(a)), as_tensor(operand(b)))


def _same_dtype(op, a, b):
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: expected both tensors to have the same dtype, but found {a.dtype} and "
                        f"{b.dtype}")


def dot(input, other):  # noqa: A002
    """torch.dot: the inner product of two 1-D tensors of one length and dtype (a 0-d tensor)."""
    a, b = as_tensor(operand(input)), as_tensor(operand(other))
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"dot: 1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    _same_dtype("dot", a, b)
    if a.shape != b.shape:
        raise ValueError(f"dot: inconsistent tensor size, {shape_str(a.shape)} and {shape_str(b.shape)}")
    return matmul(a, b)


def vdot(input, other):  # noqa: A002
    """torch.vdot: dot with the first operand conjugated (the same for real tensors)."""
    return dot(input, other)


def mv(input, vec):  # noqa: A002
    """torch.mv: matrix (n, m) @ vector (m,) -> (n,)."""
    a, v = as_tensor(operand(input)), as_tensor(operand(vec))
    if a.ndim != 2 or v.ndim != 1:
        raise ValueError(f"mv: expects a 2-D matrix and a 1-D vector, got shapes {shape_str(a.shape)} "
                         f"and {shape_str(v.shape)}")
    _same_dtype("mv", a, v)
    return matmul(a, v)


def tensordot(a, b, dims=2):
    """torch.tensordot: the sum over dims `dims` (an int: a's last and b's first that many; or two
    lists) of a and b; the result has a's free dims then b's."""
    a, b = as_tensor(operand(a)), as_tensor(operand(b))
    if isinstance(dims, (int,)) or (hasattr(dims, "ndim") and np.ndim(dims) == 0):
        n = int(dims)
        if n < 0:
            raise ValueError(f"tensordot: expects dims >= 0, but got dims={n}")
        if n > builtins.min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: dims {n} exceeds the dims of {shape_str(a.shape)} or "
                             f"{shape_str(b.shape)}")
        da, db = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise ValueError(f"tensordot: both dimension lists should have same length, got {da} and {db}")
        da = [normalize_dim("tensordot", d, a.ndim, a.shape) for d in da]
        db = [normalize_dim("tensordot", d, b.ndim, b.shape) for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: contracted dimensions need to match, but first has size "
                             f"{a.shape[i]} in dim {i} and second has size {b.shape[j]} in dim {j}")
    _same_dtype("tensordot", a, b)
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da]))
    m, n = (int(np.prod([t.shape[d] for d in free])) for t, free in ((a, fa), (b, fb)))
    a2 = shape.permute(a, fa + da).reshape(m, k)        # explicit sizes: -1 is ambiguous with 0
    b2 = shape.permute(b, db + fb).reshape(k, n)
    return matmul(a2, b2).reshape(tuple(a.shape[d] for d in fa) + tuple(b.shape[d] for d in fb))


def inner(input, other):  # noqa: A002
    """torch.inner: the sum over the last dims (a 0-d operand: a product); shape
    input.shape[:-1] + other.shape[:-1]."""
    a, b = as_tensor(operand(input)), as_tensor(operand(other))
    if a.ndim == 0 or b.ndim == 0:
        return binary.mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"inner: the last dims of {shape_str(a.shape)} and {shape_str(b.shape)} differ")
    return tensordot(a, b, ([-1], [-1]))


def kron(input, other):  # noqa: A002
    """torch.kron: the Kronecker product; the operands are padded with leading 1 dims to one rank,
    result size a_i b_i in each dim."""
    a, b = as_tensor(operand(input)), as_tensor(operand(other))
    n = builtins.max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
    inter = [v for pair in zip(sa, (1,) * n) for v in pair]
    a4 = a.reshape(inter)
    b4 = b.reshape([v for pair in zip((1,) * n, sb) for v in pair])
    return binary.mul(a4, b4).reshape(tuple(x * y for x, y in zip(sa, sb)))


def cross(input, other, dim=None):  # noqa: A002
    """torch.cross: the cross product of 3-vectors along `dim` (None: the first dim of size 3);
    inputs of one number of dims, broadcast."""
    a, b = as_tensor(operand(input)), as_tensor(operand(other))
    if a.ndim != b.ndim:
        raise ValueError(f"cross: inputs must have the same number of dimensions, got {shape_str(a.shape)} "
                         f"and {shape_str(b.shape)}")
    try:
        full = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"cross: shapes {shape_str(a.shape)} and {shape_str(b.shape)} do not "
                         "broadcast") from None
    if dim is None:
        dim = next((i for i, s in enumerate(full) if s == 3), None)
        if dim is None:
            raise ValueError(f"cross: no dimension of size 3 in input {shape_str(full)}")
    d = normalize_dim("cross", dim, len(full), full)
    if full[d] != 3:
        raise ValueError(f"cross: dimension {dim} does not have size 3 (shape {shape_str(full)})")
    a, b = shape.expand(a, full), shape.expand(b, full)
    pa = [a[(slice(None),) * d + (i,)] for i in range(3)]
    pb = [b[(slice(None),) * d + (i,)] for i in range(3)]
    from minigrad.ops.join import stack

    return stack([pa[1] * pb[2] - pa[2] * pb[1], pa[2] * pb[0] - pa[0] * pb[2],
                  pa[0] * pb[1] - pa[1] * pb[0]], d)


def trace(input):  # noqa: A002
    """torch.trace: the sum of the main diagonal of a 2-D tensor (integers sum in int64)."""
    x = as_tensor(input)
    if x.ndim != 2:
        raise ValueError(f"trace: expected a matrix, but got tensor with size {shape_str(x.shape)}")
    k = builtins.min(x.shape)
    i = np.arange(k)
    return x[i, i].sum()


def cdist(x1, x2, p=2.0, compute_mode=None):
    """torch.cdist: the p-norm distances (..., P, R) between the rows of x1 (..., P, M) and x2
    (..., R, M), batch dims broadcast; p > 0 or inf."""
    a, b = as_tensor(x1), as_tensor(x2)
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        raise TypeError(f"cdist: only supports floating-point dtypes, X1 got {a.dtype}, X2 got {b.dtype}")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"cdist: only supports at least 2D tensors, X1 got {a.ndim}D, X2 got {b.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"cdist: X1 and X2 must have the same number of columns. X1: {a.shape[-1]} "
                         f"X2: {b.shape[-1]}")
    if not p >= 0:
        raise ValueError(f"cdist: only supports non-negative p values, got {p}")
    from minigrad.ops.gather_sort import norm

    diff = a.unsqueeze(-2) - b.unsqueeze(-3)
    if a.shape[-1] == 0:
        return diff.sum(-1)
    return norm(diff, p, -1)


def dist(input, other, p=2):  # noqa: A002
    """torch.dist: the p-norm of input - other (broadcast): p > 0 or inf through `norm` (gradient 0
    at a zero difference), p = -inf the smallest |difference|, p = 0 the count of nonzero
    differences (no gradient). Float tensors only."""
    a, b = as_tensor(operand(input)), as_tensor(operand(other))
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        raise TypeError(f"dist: input dtype should be floating point, got {a.dtype} and {b.dtype}")
    d = a - b
    if p == 0:                           # a count: gradient 0 (through where), as torch
        return binary.where(np.ones((), bool), Tensor(np.asarray(np.count_nonzero(d.data), d.dtype)), d.sum())
    if p == -math.inf:
        return d.abs().amin()
    from minigrad.ops.gather_sort import norm

    return norm(d, p)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """torch.cov: the covariance matrix of the variables in the rows of input (observations in the
    columns; a 1-D input is one variable), with integer frequency weights and / or float
    observation weights: sum_i w_i (x_i - avg)(x_i - avg)^T / (sum w - correction * sum(w a) / sum w)
    (correction alone when there are no aweights). Size-1 dims of the result are squeezed, as torch."""
    x = as_tensor(input)
    if x.ndim > 2:
        raise ValueError(f"cov: expected input to have two or fewer dimensions but got {x.ndim}")
    x = x if x.dtype.kind == "f" else x.float()
    x = x.reshape(1, -1) if x.ndim < 2 else x
    n = x.shape[1]
    w = None
    for name, weights, kinds in (("fweights", fweights, "iu"), ("aweights", aweights, "f")):
        if weights is None:
            continue
        t = as_tensor(weights)
        if t.ndim > 1 or t.numel() != n:
            raise ValueError(f"cov: expected {name} to have one dimension and {n} elements, got shape "
                             f"{shape_str(t.shape)}")
        if t.dtype.kind not in kinds:
            kind = "integral" if kinds == "iu" else "floating point"
            raise TypeError(f"cov: expected {name} to have {kind} dtype, got {t.dtype}")
        if np.any(t.data < 0):
            raise ValueError(f"cov: {name} cannot be negative")
        t = t.reshape(-1) if t.dtype == x.dtype else t.to(x.dtype).reshape(-1)
        w = t if w is None else w * t
    if w is None:
        avg, w_sum = x.mean(1, keepdim=True), n
        norm_factor = n - correction
        centred = x - avg
        c = matmul(centred, centred.mT)
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1, keepdim=True) / w_sum
        if aweights is None:
            norm_factor = w_sum - correction
        else:
            norm_factor = w_sum - correction * (w * as_tensor(aweights).to(x.dtype).reshape(-1)).sum() / w_sum
        centred = x - avg
        c = matmul(centred * w, centred.mT)
    factor = norm_factor.data if isinstance(norm_factor, Tensor) else norm_factor
    if factor <= 0:                      # torch warns and divides by 0 (inf / nan)
        warnings.warn("cov: degrees of freedom is <= 0; correction should be strictly less than the "
                      "number of observations", UserWarning, stacklevel=2)
        norm_factor = 0.0 if not isinstance(norm_factor, Tensor) else norm_factor * 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = c / norm_factor
    return out.squeeze()


def corrcoef(input):  # noqa: A002
    """torch.corrcoef: Pearson's correlation coefficients, cov / (std_i std_j), clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.reshape(-1, 1) / std.reshape(1, -1)).clamp(-1.0, 1.0)


# ---- square-matrix functions (numpy.linalg, batched over leading dims) ------------------------------
#   inverse: gA = -Y^T g Y^T (Y = A^-1)    det: gA = g cof(A), the cofactor matrix (from an SVD, so
#   singular matrices too)    slogdet: g_logabsdet A^-T    cholesky: torch's formula (below)
def _square(op, a):
    """a as float square matrices (..., n, n), else the error torch raises."""
    a = as_tensor(a)
    if a.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating point tensor as input, got {a.dtype}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: A must be batches of square matrices, got shape {shape_str(a.shape)}")
    return a


def _singular(op):
    return RuntimeError(f"{op}: the input matrix is singular (or not positive-definite); the operation "
                        "could not be completed")


def _or_singular(op, fn, a):
    """fn(a) (a numpy.linalg factorisation), its LinAlgError raised as `_singular(op)`."""
    try:
        return fn(a)
    except np.linalg.LinAlgError:
        raise _singular(op) from None


def _mT(a):
    return np.swapaxes(a, -1, -2)


class Inverse(Function):
    """Y = A^-1 (batched); gA = -Y^T g Y^T."""

    @staticmethod
    def forward(ctx, a):
        y = _or_singular("inverse", np.linalg.inv, a)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return -(_mT(y) @ g @ _mT(y))


def _cofactor(a):
    """d det(A) / dA = cof(A) = det(U) det(V^T) U adj(S) V^T from A = U S V^T (exact for singular A)."""
    if a.shape[-1] == 0:
        return np.zeros_like(a)
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.where(np.eye(n, dtype=bool), 1.0, s[..., None, :])       # row i: s with s_i -> 1
    adj_s = np.prod(others, axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return sign[..., None, None] * (u * adj_s[..., None, :]) @ vh


class Det(Function):
    """y = det(A) (batched); gA = g cof(A)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.linalg.det(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return np.asarray(g)[..., None, None] * _cofactor(a)


class SlogDet(Function):
    """(sign, log|det A|); g_A = g_logabsdet A^-T (nan for a singular A); the sign has no gradient."""

    @staticmethod
    def forward(ctx, a):
        sign, logabs = np.linalg.slogdet(a)
        ctx.save_for_backward(a)
        return sign, logabs

    @staticmethod
    def backward(ctx, gsign, glog):
        (a,) = ctx.saved_tensors
        try:
            inv_t = _mT(np.linalg.inv(a))
        except np.linalg.LinAlgError:
            inv_t = np.full(a.shape, np.nan, a.dtype)
        return np.asarray(glog)[..., None, None] * inv_t


class Cholesky(Function):
    """L (lower) with A = L L^T, from A's lower triangle. Backward as torch's: G = tril(L^T gL),
    G = (G + tril(G, -1)^T) / 2, gA = L^-T G L^-1."""

    @staticmethod
    def forward(ctx, a):
        lower = _or_singular("cholesky", np.linalg.cholesky, a)
        ctx.save_for_backward(lower)
        return lower

    @staticmethod
    def backward(ctx, g):
        (lower,) = ctx.saved_tensors
        ga = np.tril(_mT(lower) @ g)
        ga = 0.5 * (ga + _mT(np.tril(ga, -1)))
        ga = np.linalg.solve(_mT(lower), ga)                # L^-T G
        return _mT(np.linalg.solve(_mT(lower), _mT(ga)))     # (L^-T G) L^-1


def inverse(input):  # noqa: A002
    """torch.inverse / linalg.inv: the inverse of square matrices (batched); a singular matrix raises
    RuntimeError, as torch."""
    return Inverse.apply(_square("inverse", input))


def det(input):  # noqa: A002
    """torch.det: the determinant of square matrices (batched); differentiable also where singular."""
    return Det.apply(_square("det", input))


SignLogAbsDet = collections.namedtuple("slogdet", "sign logabsdet")


def slogdet(input):  # noqa: A002
    """torch.slogdet: (sign, log|det|) of square matrices, a named tuple (sign 0 and logabsdet -inf
    for a singular matrix)."""
    return SignLogAbsDet(*SlogDet.apply(_square("slogdet", input)))


def logdet(input):  # noqa: A002
    """torch.logdet: log det A: nan where det < 0, -inf where det = 0."""
    sign, logabs = slogdet(input)
    return binary.where(sign.data < 0, np.nan, logabs)


def matrix_power(input, n):  # noqa: A002
    """torch.matrix_power: A^n by repeated squaring (n < 0: of the inverse; n = 0: the identity, with
    gradient 0 to A)."""
    a = as_tensor(input)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"matrix_power: expected a tensor of square matrices, got shape "
                         f"{shape_str(a.shape)}")
    n = operator.index(n)
    if n == 0:
        eye = Tensor(np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy())
        return binary.where(np.ones(a.shape, bool), eye, a)
    if n < 0:
        a, n = inverse(a), -n
    result, base = None, a
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def cholesky(input, upper=False):  # noqa: A002
    """torch.cholesky / linalg.cholesky: L with A = L L^T from the lower triangle of symmetric
    positive-definite matrices (upper=True: U = L^T); not positive-definite raises RuntimeError."""
    lower = Cholesky.apply(_square("cholesky", input))
    return lower.mT if upper else lower
