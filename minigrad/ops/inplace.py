"""In-place updates (`+=`, `x[i] = v`, add_, zero_ ...): write into the tensor's array and bump its
version counter, so a backward that saved the old array raises instead of using stale values.
`method(op, fn)` makes the in-place form of any out-of-place op (exp_, atan2_, addcmul_, eq_ ...) on
this path; `shape_method` the in-place shape ops (squeeze_, t_ ...), which rebind the tensor instead.

* Outside the graph (no_grad, or nothing involved requires grad): a numpy ufunc with `out=`.
* In the graph: a leaf that requires grad may not be modified (as in PyTorch). Any other tensor is
  recomputed out of place from a copy of its old value (so ops saving that value stay correct),
  the result is written into its array, and the tensor takes over the new node.

Views: a tensor made by reshape/view, basic slicing, split/chunk, squeeze/unsqueeze/flatten shares
its base's memory and version counter (as does detach()), so a write through any alias is seen by
the saved-tensor check of every other. In grad mode an in-place op on such a view raises when the
view, its base or the value written requires grad: PyTorch would rebase the view's autograd history
onto its base; minigrad does not. Under no_grad(), on a detach()ed tensor or a view of one, and
when nothing requires grad, views may be written in place. In-place on the base in the graph is
allowed; views made before it then have a stale history and raise when used in the graph again.

Copies standing for PyTorch views: a transpose/permute, a strided slice (`t[:, 0]`) or a split
along a later dim is copied to C order, and keeps a `WriteBack` to its source. Writing it in place
writes the source too, as writing the view would in PyTorch: first the source's newer values are
pulled in, if it changed since; outside the graph the new values are then copied through a numpy
view of the source; in the graph the source gets a new node, `SetItem(source, copy, index)` (or
the inverse permute), so gradients flow as PyTorch's view rebase makes them (raises if the source
itself was written in the graph since the copy was made: the copy's node would be stale). Reading such a copy
after its source changed still gives the old values (a copy; only writes go through). An expand
that repeats elements cannot be written in place (PyTorch raises too).
"""
import numpy as np

from minigrad import random as _random
from minigrad.autograd.grad_mode import is_grad_enabled, no_grad
from minigrad.ops import binary, elementwise
from minigrad.ops._common import array_of, operand, shape_str
from minigrad.ops.indexing import SetItem, assign, normalize_index
from minigrad.tensor import Tensor


def _check_dtypes(op, t, other):
    floats = isinstance(other, Tensor) and t.dtype.kind == other.dtype.kind == "f"
    if floats and other.dtype != t.dtype:
        raise TypeError(f"{op}: cannot write {other.dtype} values into a {t.dtype} tensor in place; "
                        "convert with .to(dtype) first")


def _recording(op, t, other):
    """Whether `t op= other` must be recorded in the graph; raises for a view in the graph (above)."""
    if not is_grad_enabled():
        return False
    needs_grad = t.requires_grad or (isinstance(other, Tensor) and other.requires_grad)
    if t._view is not None and (needs_grad or t._view[0].requires_grad):
        raise RuntimeError(
            f"{op}: in-place modification of a view (made by reshape/view, slicing, split/chunk, "
            f"squeeze/unsqueeze/flatten) of shape {shape_str(t.shape)} whose base or value requires "
            "grad is not supported: minigrad does not rebase a view's autograd history. Use an "
            "out-of-place op (e.g. mg.where, mg.cat) or modify a .clone(); under minigrad.no_grad() "
            "or on a .detach()ed tensor it is allowed.")
    return needs_grad


def _snapshot(t):
    """A tensor standing for t's current value and graph position, with its own copy of the array."""
    old = Tensor._from_op(t.data.copy())
    old._requires_grad, old._node, old._out_index = t.requires_grad, t._node, t._out_index
    return old


def _check_leaf(op, t):
    if t.requires_grad and t.is_leaf:
        raise RuntimeError(f"{op}: a leaf tensor that requires grad cannot be modified in place; "
                           "do it under minigrad.no_grad() or on a .detach()ed / .clone()d tensor")


def _checked_shape(op, t, out):
    if out.shape != t.shape:
        raise ValueError(f"{op}: the result has shape {shape_str(out.shape)} but the tensor being "
                         f"updated has shape {shape_str(t.shape)}")
    return out


def _take_retain(t):
    """Unhook t's retain_grad from its current node (True if it had one): an in-place write moves it
    to the node of t's new value, while hooks registered on the old value stay with it."""
    node = t._node
    entry = node.hooks.get(t._out_index) if node is not None and node.hooks else None
    if entry is None or entry.retain is None or entry.retain() is not t:
        return False
    entry.retain = None
    return True


def _in_graph(op, t, compute, chain=()):
    """Run compute(old_t) -> Tensor out of place, then make t that result, in place; then give each
    source in `chain` (from `_write_chain`) its new value in the graph."""
    _check_leaf(op, t)
    out = _checked_shape(op, t, compute(_snapshot(t)))
    np.copyto(t.data, out.data)
    t._bump_version()
    t._vc.rewrites += 1          # views of t made before now still point at its old node
    retained = _take_retain(t)
    t._requires_grad, t._node, t._out_index = out.requires_grad, out._node, out._out_index
    if retained and t._node is not None:
        t.retain_grad()          # as in PyTorch, .grad is then the grad of the new value
    for copy, wb in chain:
        _in_graph(op, wb.source, lambda old, copy=copy, wb=wb: wb.rebuild(old, copy))
        wb.version, wb.rewrites = wb.source._version, wb.source._vc.rewrites   # copy and source agree
    return t


def _write_chain(op, t, recording):
    """[(copy, WriteBack), ...]: the copies a write into t must pass on to their sources (t's own
    root first), each checked before anything is written."""
    chain = []
    while True:
        root = t if t._view is None else t._view[0]
        wb = root._writeback
        if wb is None:
            return chain
        if wb.view is None:
            raise RuntimeError(
                f"{op}: the tensor of shape {shape_str(root.shape)} was made by expand and several "
                "of its elements are one element of its source, so it cannot be written in place "
                "(as in PyTorch); .clone() it first")
        if recording:
            if wb.source._vc is not None and wb.source._vc.rewrites != wb.rewrites:
                raise RuntimeError(
                    f"{op}: this tensor of shape {shape_str(root.shape)} (a transpose, strided slice "
                    "or split: a copy that writes back to its source) cannot be written in place in "
                    "the graph after its source was modified in place in the graph; take it anew")
            _check_leaf(op, wb.source)
            _recording(op, wb.source, root)          # raises for a source that is a view in the graph
        chain.append((root, wb))
        t = wb.source


def _pull(chain):
    """Bring copies up to date with sources changed in place since (farthest source first)."""
    for copy, wb in reversed(chain):
        if wb.source._version != wb.version:
            np.copyto(copy.data, wb.view)
            copy._bump_version()
            wb.version = wb.source._version


def _push(chain):
    """Copy the written values through to every source (nearest first)."""
    for copy, wb in chain:
        np.copyto(wb.view, copy.data)
        wb.source._bump_version()
        wb.version = wb.source._version


def _update(op, t, other, compute, write=None):
    """The path of every in-place op here: t made compute(old t) (an out-of-place Tensor op) and
    `other` (a Tensor operand or None) checked as above, the copies t stands for pulled in first.
    In the graph through `_in_graph`; outside it `write(t.data)` writes the array (default: compute's
    result under no_grad, copied in), then the version is bumped and the copies' sources written.
    Returns t."""
    recording = _recording(op, t, other)
    chain = _write_chain(op, t, recording)
    _pull(chain)
    if recording:
        return _in_graph(op, t, compute, chain)
    if write is None:
        with no_grad():
            out = _checked_shape(op, t, compute(t))
        np.copyto(t.data, out.data, casting="unsafe")
    else:
        write(t.data)
    t._bump_version()
    _push(chain)
    return t


_UFUNCS = {binary.Add: np.add, binary.Sub: np.subtract, binary.Mul: np.multiply,
           binary.Div: np.true_divide, binary.Pow: np.power}
_SYMBOLS = {binary.Add: "+=", binary.Sub: "-=", binary.Mul: "*=", binary.Div: "/=", binary.Pow: "**="}


def binary_inplace(fn, t, other):
    """t op= other for fn in Add, Sub, Mul, Div, Pow; returns t."""
    op = fn.__name__.lower() + "_"
    other = operand(other)
    _check_dtypes(op, t, other)

    def write(a):
        try:
            _UFUNCS[fn](a, array_of(other), out=a)
        except ValueError:
            raise ValueError(f"{op}: {shape_str(t.shape)} {_SYMBOLS[fn]} "
                             f"{shape_str(np.shape(array_of(other)))}: the right side must broadcast to "
                             "the left side's shape") from None
        except TypeError:       # numpy's ufunc casting error: torch's RuntimeError, as _cast_result
            b = array_of(other)
            result = _UFUNCS[fn](a.reshape(-1)[:0], b if np.ndim(b) == 0 else np.reshape(b, -1)[:0]).dtype
            if np.can_cast(result, a.dtype, "same_kind"):
                raise
            raise RuntimeError(f"{op}: result type {result} can't be cast to the desired output type "
                               f"{a.dtype}") from None

    return _update(op, t, other, lambda old: fn.apply(old, old if other is t else other), write)  # x *= x


def setitem(t, index, value):
    """t[index] = value, in place."""
    index = normalize_index(index)
    value = operand(value)
    _check_dtypes("setitem", t, value)
    _update("setitem", t, value, lambda old: SetItem.apply(old, value, index),
            lambda a: assign(a, index, array_of(value)))


def fill_(t, value):
    """Every element set to `value` (in place)."""
    setitem(t, Ellipsis, value)
    return t


def zero_(t):
    return fill_(t, 0)


def copy_(t, src):
    """t's values replaced by src's (broadcast to t's shape, cast to t's dtype), in place."""
    src = operand(src)
    if isinstance(src, Tensor) and src.dtype != t.dtype:
        src = src.to(t.dtype)
    setitem(t, Ellipsis, src)
    return t


def masked_fill_(t, mask, value):
    """value where mask (bool, broadcast to t's shape) is True, in place; value is a number or a 0-dim
    Tensor, cast to t's dtype (the gradient to it is the sum of the gradient over the filled places)."""
    mask = binary.bool_mask(mask, "masked_fill_")
    value = operand(value)
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ValueError(f"masked_fill_: only a 0-dim value tensor is supported, got shape "
                         f"{shape_str(value.shape)}")
    if isinstance(value, Tensor) and value.dtype != t.dtype:
        value = value.to(t.dtype)          # a 0-dim value is a scalar to PyTorch: cast (differentiably)
    return _update("masked_fill_", t, value, lambda old: binary.where(mask, value, old))


def clamp_(t, min=None, max=None):  # noqa: A002 - PyTorch's names
    """t clamped into [min, max] in place (see `elementwise.clamp`)."""
    if t.dtype.kind in "iub" and any(isinstance(b, float) for b in (min, max)):
        raise TypeError(f"clamp_: a float bound cannot be applied in place to a {t.dtype} tensor")
    return _update("clamp_", t, None, lambda old: elementwise.clamp(old, min, max))


def _random_fill(op, t, draw, generator, any_dtype=False):
    """t filled in place with draw(generator, shape) (float64 values, cast to t's dtype; integer and
    bool tensors too with any_dtype). In the graph (t a non-leaf that requires grad) t keeps requiring
    grad and passes a zero gradient back, as in PyTorch; a leaf that requires grad raises before
    anything is drawn."""
    if t.dtype.kind != "f" and not any_dtype:
        raise TypeError(f"{op}: expects a floating point tensor, got {t.dtype}")
    gen = generator if generator is not None else _random.default_generator()

    def values():
        return draw(gen, t.shape).astype(t.dtype, copy=False)

    def compute(old):
        return binary.where(np.ones(t.shape, dtype=bool), Tensor(values()), old)

    def write(a):
        a[...] = values()

    return _update(op, t, None, compute, write)


def normal_(t, mean=0.0, std=1.0, generator=None):
    """t filled with N(mean, std**2) samples in place, from `generator` (a numpy Generator, e.g.
    minigrad.Generator) or minigrad's global generator."""
    mean, std = float(mean), float(std)
    if not std >= 0.0:
        raise ValueError(f"normal_: expects std >= 0.0, got {std}")
    return _random_fill("normal_", t, lambda gen, shape: gen.normal(mean, std, shape), generator)


def uniform_(t, a=0.0, b=1.0, generator=None):
    """t filled with U[a, b) samples in place, from `generator` or minigrad's global generator."""
    a, b = float(a), float(b)
    if not a <= b:
        raise ValueError(f"uniform_: expects a [from, to) range, but found from={a} > to={b}")
    return _random_fill("uniform_", t, lambda gen, shape: gen.uniform(a, b, shape), generator)


def _cast_result(op, t, out, old):
    """The out-of-place result `out` as a tensor of t's dtype, or a RuntimeError as PyTorch's when it
    cannot be cast (a float result into an integer tensor, an integer one into a bool tensor). A
    bool / integer result written into a float tensor (`eq_`) passes no gradient back to it."""
    if out.dtype == t.dtype:
        return out
    if not np.can_cast(out.dtype, t.dtype, "same_kind"):
        raise RuntimeError(f"{op}: result type {out.dtype} can't be cast to the desired output type "
                           f"{t.dtype}")
    if t.dtype.kind == "f" and out.dtype.kind != "f":
        return binary.where(np.ones(out.shape, dtype=bool), Tensor(out.data.astype(t.dtype)), old)
    return out.to(t.dtype)


def method(op, fn, check_dtypes=True):
    """The in-place Tensor method `op` of the out-of-place `fn(self, *args, **kwargs)`: the result
    (checked to be castable to self's dtype, and of self's shape) written into self by `_update`,
    with its rules for leaves, views and the graph. `check_dtypes`: a float Tensor argument must have
    self's float dtype (as for `+=`)."""
    def inplace_op(self, *args, **kwargs):
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        if check_dtypes:
            for a in tensors:
                _check_dtypes(op, self, a)
        other = next((a for a in tensors if a.requires_grad), tensors[0] if tensors else None)
        return _update(op, self, other, lambda old: _cast_result(op, self, fn(old, *args, **kwargs), old))

    inplace_op.__name__ = op
    inplace_op.__doc__ = f"In-place {op[:-1]} (self made its result); returns self."
    return inplace_op


def float_power_(t, exponent):
    """torch's float_power_: only a float64 tensor can hold the float64 result."""
    if t.dtype != np.float64:
        raise RuntimeError(f"float_power_: the base given to float_power_ has dtype {t.dtype} but the "
                           "operation's result requires dtype float64")
    return method("float_power_", binary.float_power)(t, exponent)


def fill_diagonal_(t, fill_value, wrap=False):
    """torch's fill_diagonal_: the main diagonal (entries with all indices equal; a tall matrix's
    diagonal restarts every n + 1 rows with wrap=True) set to fill_value, in place."""
    if t.ndim < 2:
        raise ValueError(f"fill_diagonal_: dimensions must be larger than 1, got shape {shape_str(t.shape)}")
    if t.ndim > 2 and len(set(t.shape)) != 1:
        raise ValueError(f"fill_diagonal_: all dimensions of input must be of equal length, got "
                         f"{shape_str(t.shape)}")
    mask = np.zeros(t.shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=bool(wrap))
    return masked_fill_(t, mask, fill_value)


def shape_method(op, fn):
    """An in-place shape op (squeeze_, unsqueeze_, t_, transpose_ ...): self becomes fn(self, ...).
    A reshape keeps self's memory (and its aliases); a transpose makes self a copy that writes back to
    the old memory, as any transpose (see the module docstring). In the graph self takes the new node;
    a leaf that requires grad raises, as in PyTorch."""
    def shape_op(self, *args, **kwargs):
        recording = is_grad_enabled() and self.requires_grad
        if recording:
            _check_leaf(op, self)
        old = Tensor._from_op(self.data)
        old._vc, old._view, old._writeback = self._counter(), self._view, self._writeback
        old._requires_grad, old._node, old._out_index = self._requires_grad, self._node, self._out_index
        out = fn(old, *args, **kwargs)
        if out is old:
            return self
        if self._writeback is None and np.may_share_memory(out.data, self.data):
            self.data = out.data                       # same memory: every alias stays one
        else:
            self.data, self._vc, self._view, self._writeback = out.data, out._vc, out._view, out._writeback
        if recording:
            self._node, self._out_index, self._requires_grad = out._node, out._out_index, out._requires_grad
        return self

    shape_op.__name__ = op
    shape_op.__doc__ = f"In-place {op[:-1]}: this tensor takes the new shape; returns self."
    return shape_op


def _probability(op, p):
    if not 0 <= p <= 1:
        raise ValueError(f"{op}: expects p to be in [0, 1], but got p={p}")
    return p


def bernoulli_(t, p=0.5, *, generator=None):
    """t filled in place with 1 (probability p: a number, or a Tensor broadcast to t's shape) or 0; any
    dtype, as torch."""
    if isinstance(p, Tensor):
        probs = p.data.astype(np.float64)
        if np.any((probs < 0) | (probs > 1)) or np.any(np.isnan(probs)):
            raise ValueError("bernoulli_: all probabilities must be in [0, 1]")
    else:
        probs = _probability("bernoulli_", float(p))
    return _random_fill("bernoulli_", t, lambda gen, shape: (gen.random(shape) < probs).astype(np.float64),
                        generator, any_dtype=True)


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """torch.bernoulli: 1 with probability input (or p, if given), else 0; input's shape and dtype
    (float). No gradient."""
    if input.dtype.kind != "f":
        raise TypeError(f"bernoulli: expects a floating point tensor of probabilities, got {input.dtype}")
    out = Tensor(np.zeros(input.shape, input.dtype))
    return bernoulli_(out, input if p is None else p, generator=generator)


def exponential_(t, lambd=1.0, *, generator=None):
    """t filled in place with Exponential(lambd) samples (float tensors)."""
    lambd = float(lambd)
    if not lambd > 0:
        raise ValueError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    return _random_fill("exponential_", t, lambda gen, shape: gen.exponential(1.0 / lambd, shape), generator)


def geometric_(t, p, *, generator=None):
    """t filled in place with the number of Bernoulli(p) trials up to the first success (>= 1)."""
    p = float(p)
    if not 0 < p < 1:
        raise ValueError(f"geometric_: expects p to be in (0, 1), but got p={p}")
    return _random_fill("geometric_", t, lambda gen, shape: gen.geometric(p, shape).astype(np.float64),
                        generator, any_dtype=True)


def log_normal_(t, mean=1.0, std=2.0, *, generator=None):
    """t filled in place with exp(N(mean, std^2)) samples (float tensors)."""
    mean, std = float(mean), float(std)
    if not std > 0:
        raise ValueError(f"log_normal_: expects std > 0.0, but found std={std}")
    return _random_fill("log_normal_", t, lambda gen, shape: gen.lognormal(mean, std, shape), generator)


def cauchy_(t, median=0.0, sigma=1.0, *, generator=None):
    """t filled in place with Cauchy(median, sigma) samples (float tensors)."""
    median, sigma = float(median), float(sigma)
    if not sigma > 0:
        raise ValueError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma}")
    return _random_fill("cauchy_", t, lambda gen, shape: median + sigma * gen.standard_cauchy(shape),
                        generator)


def random_(t, from_=None, to=None, *, generator=None):
    """torch's random_: integers uniform in [from, to - 1]; random_(to) is [0, to - 1]; random_()
    spans [0, 2^mantissa] for floats, [0, max] for integers, {0, 1} for bool."""
    if to is None and from_ is not None:
        from_, to = 0, from_
    low = 0 if from_ is None else int(from_)
    if to is None:
        if t.dtype.kind == "f":
            high = 2 ** (np.finfo(t.dtype).nmant + 1) + 1
        elif t.dtype.kind == "b":
            high = 2
        else:
            high = int(np.iinfo(t.dtype).max) + 1
    else:
        high = int(to)
    if low >= high:
        raise ValueError(f"random_: expects 'from' to be less than 'to', but got from={low} >= to={high}")

    def draw(gen, shape):
        return gen.integers(low, high - 1, size=shape, endpoint=True, dtype=np.int64)

    def values_fill(gen, shape):
        v = draw(gen, shape)
        return v.astype(np.float64) if t.dtype.kind == "f" else v

    return _random_fill("random_", t, values_fill, generator, any_dtype=True)
