"""einsum with torch.einsum's semantics; the contractions run in numpy (`np.einsum` with a greedy
contraction order, cached per equation and shapes, which routes pairwise products through BLAS
tensordot).

The equation is first made canonical: each ellipsis dim gets a letter of its own (right-aligned,
so an operand with fewer ellipsis dims simply lacks the leading ones), and an operand's size-1 dim
under a label whose size is > 1 elsewhere (broadcasting) is squeezed away with its label. What is
left is a plain sum of products

    y[o] = sum over the labels not in o of  prod_k A_k[s_k]

and its gradient for operand i (subscripts s_i, distinct labels u_i) is

    dA_i[u_i] = einsum(o, s_k for k != i -> u_i)(g, A_k ...)

with two rules: a label of u_i found in no other operand and not in o (summed out of A_i alone)
cannot be produced by that einsum, so the result is broadcast along it; and a label repeated in s_i
('ii') means A_i only enters through its diagonal, so dA_i is zero but on that diagonal, where the
einsum result is written. A squeezed broadcast dim gets its size 1 back by a reshape.
"""
import functools
import string

import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._common import shape_str
from minigrad.tensor import Tensor

_LETTERS = string.ascii_uppercase + string.ascii_lowercase   # ASCII order, as implicit mode sorts
_ELLIPSIS = "..."


def _labels(equation, start, stop, where):
    """The labels of equation[start:stop]: letters and at most one `_ELLIPSIS`; spaces skipped."""
    labels, i = [], start
    while i < stop:
        c = equation[i]
        if c == ".":
            if not equation.startswith(_ELLIPSIS, i) or i + 3 > stop:
                raise ValueError(f"einsum(): found '.' in {where} at index {i} of {equation!r} that is not "
                                 "part of an ellipsis '...'")
            if _ELLIPSIS in labels:
                raise ValueError(f"einsum(): {where} has more than one ellipsis in {equation!r}")
            labels.append(_ELLIPSIS)
            i += 3
            continue
        if c in _LETTERS:
            labels.append(c)
        elif c != " ":
            raise ValueError(f"einsum(): invalid subscript {c!r} at index {i} of {equation!r}; "
                             "subscripts must be in [a-zA-Z]")
        i += 1
    return labels


def _split(equation, n_operands):
    """(input label lists, output label list or None in implicit mode)."""
    if equation.count("->") > 1:
        raise ValueError(f"einsum(): '->' appears more than once in {equation!r}")
    arrow = equation.find("->")
    lhs_end = len(equation) if arrow < 0 else arrow
    terms, start = [], 0
    for stop in [i for i in range(lhs_end) if equation[i] == ","] + [lhs_end]:
        terms.append(_labels(equation, start, stop, f"operand {len(terms)}"))
        start = stop + 1
    if len(terms) != n_operands:
        raise ValueError(f"einsum(): the equation {equation!r} has subscripts for {len(terms)} operand(s) "
                         f"but {n_operands} were given")
    out = None if arrow < 0 else _labels(equation, arrow + 2, len(equation), "the output")
    return terms, out


@functools.lru_cache(maxsize=512)
def _canonical(equation, shapes):
    """Subscript strings (one a squeezed operand), output string, squeezed shapes (cached per equation
    and operand shapes, a tuple of tuples)."""
    terms, out = _split(equation, len(shapes))
    named = [[c for c in t if c != _ELLIPSIS] for t in terms]
    n_ell = 0
    for k, (t, shape) in enumerate(zip(terms, shapes)):
        if _ELLIPSIS not in t and len(t) != len(shape):
            raise ValueError(f"einsum(): operand {k} has {len(shape)} dims (shape {shape_str(shape)}) but "
                             f"{len(t)} subscripts and no ellipsis in {equation!r}")
        if _ELLIPSIS in t:
            if len(named[k]) > len(shape):
                raise ValueError(f"einsum(): operand {k} has {len(shape)} dims (shape {shape_str(shape)}), "
                                 f"fewer than its {len(named[k])} subscripts besides the ellipsis")
            n_ell = max(n_ell, len(shape) - len(named[k]))
    used = {c for t in named for c in t}
    free = [c for c in _LETTERS if c not in used]
    if n_ell > len(free):
        raise ValueError(f"einsum(): {len(used)} subscripts and {n_ell} ellipsis dims exceed the 52 labels "
                         "numpy's einsum supports")
    ell = "".join(free[:n_ell])
    subs = []
    for t, shape in zip(terms, shapes):
        e = len(shape) - (len(t) - 1)
        subs.append("".join(ell[n_ell - e:] if c == _ELLIPSIS else c for c in t))
    if out is None:
        flat = [c for t in named for c in t]
        out_s = ell + "".join(sorted((c for c in used if flat.count(c) == 1), key=_LETTERS.index))
    else:
        for c in out:
            if c != _ELLIPSIS and c not in used:
                raise ValueError(f"einsum(): output subscript {c} does not appear in any input of "
                                 f"{equation!r}")
            if c != _ELLIPSIS and out.count(c) > 1:
                raise ValueError(f"einsum(): output subscript {c} appears more than once in {equation!r}")
        out_s = "".join(ell if c == _ELLIPSIS else c for c in out)
    return _squeeze(subs, out_s, shapes, ell)


def _squeeze(subs, out, shapes, ell):
    """Check the sizes (equal, or 1 for broadcasting) and drop each operand's broadcast size-1 dims."""
    def what(c):
        return f"dim {ell.index(c)} of the ellipsis" if c in ell else f"subscript {c}"

    sizes = {}
    for k, (s, shape) in enumerate(zip(subs, shapes)):
        own = {}
        for c, n in zip(s, shape):
            if own.setdefault(c, n) != n:
                raise ValueError(f"einsum(): subscript {c} is repeated for operand {k} (shape "
                                 f"{shape_str(shape)}) but the sizes don't match, {own[c]} != {n}")
        for c, n in own.items():
            seen = sizes.get(c)
            if seen is None or seen == 1:
                sizes[c] = n
            elif n not in (1, seen):
                raise ValueError(f"einsum(): {what(c)} has size {n} for operand {k} (shape "
                                 f"{shape_str(shape)}) which does not broadcast with size {seen} of an "
                                 "earlier operand")
    squeezed, sq_shapes = [], []
    for s, shape in zip(subs, shapes):
        keep = [d for d, (c, n) in enumerate(zip(s, shape)) if n != 1 or sizes[c] == 1]
        squeezed.append("".join(s[d] for d in keep))
        sq_shapes.append(tuple(shape[d] for d in keep))
    return tuple(squeezed), out, tuple(sq_shapes)


@functools.lru_cache(maxsize=512)
def _path(eq, shapes):
    """numpy's contraction order for `eq` on operands of these shapes (found once, then reused)."""
    return np.einsum_path(eq, *(np.broadcast_to(np.float64(0), s) for s in shapes), optimize="greedy")[0]


def _contract(eq, *arrays):
    """np.einsum(eq, *arrays) in the cached pairwise order (BLAS tensordot where it applies)."""
    return np.einsum(eq, *arrays, optimize=_path(eq, tuple(a.shape for a in arrays)))


def _diagonal(a, s):
    """The writable view of `a` (subscripts s) indexed by s's distinct labels: a[i, i] for 'ii'."""
    return np.einsum(f"{s}->{''.join(dict.fromkeys(s))}", a)


def _operand_grad(g, ops, subs, out, i, shape):
    """dA_i (shape: A_i's squeezed shape) = einsum(out, other subs -> distinct labels of subs[i]),
    broadcast over labels of A_i alone, on the diagonal where subs[i] repeats a label."""
    s = subs[i]
    uniq = "".join(dict.fromkeys(s))
    others = [k for k in range(len(ops)) if k != i]
    reach = set(out).union(*(subs[k] for k in others))
    kept = "".join(c for c in uniq if c in reach)
    eq = ",".join([out] + [subs[k] for k in others]) + "->" + kept
    gk = _contract(eq, g, *(ops[k] for k in others))
    size = dict(zip(s, shape))
    gk = np.reshape(gk, [size[c] if c in reach else 1 for c in uniq])
    if len(uniq) < len(s):
        full = np.zeros(shape, gk.dtype)
        _diagonal(full, s)[...] = gk
        return full
    if len(kept) < len(uniq):
        return np.broadcast_to(gk, shape).copy()
    return gk


class Einsum(Function):
    """y = einsum(equation, *operands); see the module docstring for the canonical form and backward."""

    @staticmethod
    def forward(ctx, *arrays, equation):
        subs, out, sq_shapes = _canonical(equation, tuple(a.shape for a in arrays))
        ops = [a.reshape(shape) for a, shape in zip(arrays, sq_shapes)]
        y = _contract(",".join(subs) + "->" + out, *ops)
        if any(np.may_share_memory(y, a) for a in arrays):   # 'ij->ji' is a view: the output is new
            y = np.array(y)
        needs = ctx.needs_input_grad
        ctx.save_for_backward(*(a if any(needs[:k] + needs[k + 1:]) else None for k, a in enumerate(arrays)))
        ctx.subs, ctx.out, ctx.sq_shapes = subs, out, sq_shapes
        ctx.shapes = tuple(a.shape for a in arrays)
        ctx.dtypes = tuple(a.dtype for a in arrays)
        return y

    @staticmethod
    def backward(ctx, g):
        arrays = ctx.saved_tensors
        ops = [None if a is None else a.reshape(shape) for a, shape in zip(arrays, ctx.sq_shapes)]
        grads = []
        for i, need in enumerate(ctx.needs_input_grad):
            if need:
                gi = _operand_grad(g, ops, ctx.subs, ctx.out, i, ctx.sq_shapes[i])
                grads.append(gi.reshape(ctx.shapes[i]).astype(ctx.dtypes[i], copy=False))
            else:
                grads.append(None)
        return tuple(grads)


def einsum(equation, *operands):
    """torch.einsum: sum of products of the operands' elements along the dims the equation labels.

    `einsum('ij,jk->ik', a, b)` is a @ b. Explicit mode ('ij,jk->ik') or implicit ('ij,jk': the
    labels that appear once, in sorted order, after the ellipsis dims); spaces allowed; '...' stands
    for broadcast dims (right-aligned; size 1 broadcasts, also under a letter); a label repeated in
    one operand takes its diagonal ('ii->i', 'ii' the trace); labels not in the output are summed.
    Operands: Tensors (or numpy arrays), also passed as one list or tuple. Integer operands give an
    integer result without grad.
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the equation must be a str, got {type(equation).__name__} (the "
                        "sublist format einsum(op, [0, 1], ...) is not supported)")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum(): needs the equation and at least one operand")
    tensors = []
    for k, x in enumerate(operands):
        if not isinstance(x, (Tensor, np.ndarray)):
            raise TypeError(f"einsum(): operand {k} is a {type(x).__name__}; expected a Tensor")
        x = x if isinstance(x, Tensor) else Tensor(x)
        tensors.append(x.long() if x.dtype == np.bool_ else x)     # counts, as torch (numpy: OR)
    return Einsum.apply(*tensors, equation=equation)
