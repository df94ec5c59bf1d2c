"""torch.scatter_reduce: reduce src into input at index along dim ('sum', 'prod', 'mean', 'amax',
'amin'), with or without input's own values (`include_self`).

Shapes: input (*S), index and src of input's number of dims, index no larger than src, nor than
input outside `dim`; the result has input's shape. Each output position p is the reduction of its
*group*: the src entries scattered to p, plus input[p] when include_self (positions no src reaches
keep input[p]).

Backward (g the output grad, y the result, members of p's group m, count(p) their number):
    sum:  gx = g (0 at reached positions without include_self); gsrc = g gathered at index
    mean: gx = g / count at reached positions (0 without include_self), g elsewhere; gsrc = g / count
          gathered at index
    prod: gm = g * prod(other members): y / m for a non-zero m; the product of the other members if
          m is the group's only zero; 0 when the group has two zeros or more (exact, as torch)
    amax / amin: gm = g [m == y] / #{members equal to y}: ties split evenly (torch's rule).
          Deviation: torch also counts input[p] among the ties when include_self=False (so part of
          the gradient is lost); minigrad counts the group's members only.
"""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import as_tensor, shape_str
from minigrad.ops.gather_sort import _full_index, _src_grad, _src_part, scatter_operands

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce, dtype):
    """The value a group starts from when input is not part of it."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype == np.bool_:
        return reduce != "amax"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _group_sum(where, self_part, src_part):
    """Per output position: self_part (input's shape, 0 where not a member) plus the src values."""
    out = np.array(self_part, dtype=np.result_type(self_part, src_part), copy=True)
    np.add.at(out, where, src_part)
    return out


class ScatterReduce(Function):
    """y[p] = reduce(group(p)) (see the module docstring for the groups and the backward)."""

    @staticmethod
    def forward(ctx, x, src, index, dim, reduce, include_self):
        where = _full_index(index, dim)
        s = _src_part(src, index)
        reached = np.zeros(x.shape, bool)
        reached[where] = True
        y = x.copy()
        if not include_self:
            y[reached] = _identity(reduce, x.dtype)
        _UFUNC[reduce].at(y, where, s)
        if reduce == "mean":           # divided by the group's size (1 for positions no src reaches)
            members = _group_sum(where, np.full(x.shape, int(include_self)), np.ones(s.shape, np.int64))
            n = np.maximum(members, 1)
            y = y / n.astype(y.dtype) if y.dtype.kind == "f" else y // n
            ctx.count = n
        ctx.where, ctx.reduce, ctx.include_self, ctx.src_shape = where, reduce, include_self, src.shape
        ctx.reached = reached
        if reduce in ("prod", "amax", "amin"):
            ctx.save_for_backward(x, s, y)
        return y

    @staticmethod
    def backward(ctx, g):
        where, reduce, reached = ctx.where, ctx.reduce, ctx.reached
        self_member = ~reached | ctx.include_self          # input[p] belongs to p's group
        if reduce in ("sum", "mean"):
            gp = g / ctx.count.astype(g.dtype) if reduce == "mean" else g
            gx, gs = np.where(self_member, gp, 0), gp[where]
        elif reduce == "prod":
            gx, gs = _prod_grads(ctx, g, self_member)
        else:
            x, s, y = ctx.saved_tensors
            hit_x = self_member & (x == y)
            hit_s = s == y[where]
            ties = _group_sum(where, hit_x.astype(g.dtype), hit_s.astype(g.dtype))
            gp = g / np.maximum(ties, 1)
            gx, gs = np.where(hit_x, gp, 0), np.where(hit_s, gp[where], 0)
        gx = gx.astype(g.dtype, copy=False) if ctx.needs_input_grad[0] else None
        gs = _src_grad(gs.astype(g.dtype, copy=False), ctx.src_shape) if ctx.needs_input_grad[1] else None
        return gx, gs, None, None, None, None


def _prod_grads(ctx, g, self_member):
    """g times the product of the other members of each group, exact with zeros."""
    x, s, _ = ctx.saved_tensors
    where = ctx.where
    x_in = np.where(self_member, x, 1)                   # non-members contribute 1 to products
    nonzero_prod = np.where(x_in == 0, 1, x_in)
    np.multiply.at(nonzero_prod, where, np.where(s == 0, 1, s))
    zeros = _group_sum(where, (x_in == 0).astype(np.int64), (s == 0).astype(np.int64))

    def others(m, p_nonzero, n_zeros):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(m != 0, np.where(n_zeros == 0, p_nonzero / np.where(m == 0, 1, m), 0),
                            np.where(n_zeros == 1, p_nonzero, 0))

    gx = np.where(self_member, g * others(x, nonzero_prod, zeros), 0)
    gs = g[where] * others(s, nonzero_prod[where], zeros[where])
    return gx, gs


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """torch.scatter_reduce: a copy of input where each position p reached by index (along `dim`) is
    reduce('sum' | 'prod' | 'mean' | 'amax' | 'amin') of the src values scattered there, and of
    input[p] too when include_self. index as in `scatter` (int, values in [0, input.size(dim))); src a
    Tensor of input's dtype, at least as large as index. Integer 'mean' floors, as torch."""
    op = "scatter_reduce"
    x = as_tensor(input)
    if reduce not in REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduce!r}")
    t, d, index = scatter_operands(op, x, dim, index, src)
    if x.ndim == 0:
        return scatter_reduce(x.reshape(1), 0, index, t, reduce, include_self=include_self).reshape(())
    if t.ndim != x.ndim:
        raise ValueError(f"{op}: src {shape_str(t.shape)} and input {shape_str(x.shape)} must have the "
                         "same number of dims")
    return ScatterReduce.apply(x, t, index, d, reduce, bool(include_self))
