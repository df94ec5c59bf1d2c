"""Attach PyTorch-like operators and methods to `Tensor` (imported once by `minigrad.ops`).

Reductions take PyTorch's `dim`/`keepdim` or numpy's `axis`/`keepdims`. As in PyTorch, `x.max()`
is the max of everything, `x.max(dim)` a (values, indices) pair over one int dim, `x.max(other)`
the elementwise maximum; numpy's `x.max(axis=...)` and `amax` return the values only.
"""
import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.ops import (
    binary,
    compare,
    cumulative,
    elementwise,
    gather_sort,
    index_update,
    inplace,
    join,
    linalg,
    reduce,
    scatter_reduce,
    selection,
    shape,
    unique,
)
from minigrad.ops._common import (
    array_of,
    normalize_dim,
    operand,
    pick_dims,
    pick_keepdim,
    run_broadcasting,
    wrap,
)
from minigrad.ops.indexing import getitem
from minigrad.tensor import Tensor


def _operator(fn, reflected=False):
    """A binary dunder: returns NotImplemented for operands it cannot take (so Python tries the other)."""
    def method(self, other):
        try:
            other = operand(other)
        except TypeError:
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)

    method.__name__ = fn.__name__
    return method


def _arithmetic(function, reflected=False):
    """A binary dunder applying `function` directly (the hot path of `a + b`)."""
    def method(self, other):
        try:
            other = operand(other)
        except TypeError:
            return NotImplemented
        return function.apply(other, self) if reflected else function.apply(self, other)

    method.__name__ = function.__name__.lower()
    return method


def _inplace_operator(fn):
    def method(self, other):
        return inplace.binary_inplace(fn, self, other)

    return method


def _inplace_alpha(fn):
    """add_ / sub_: torch's `alpha=` scales `other` first (p.add_(g, alpha=-lr))."""
    def method(self, other, *, alpha=1):
        return inplace.binary_inplace(fn, self, binary._scaled(operand(other), alpha))

    method.__name__ = fn.__name__.lower() + "_"
    return method


def _reduction(fn):
    def method(self, dim=None, keepdim=False, *, axis=None, keepdims=False):
        return fn(self, pick_dims(dim, axis, fn.__name__), pick_keepdim(keepdim, keepdims))

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _extremum(reduce_fn, along_fn, pairwise_fn):
    """x.max() reduces everything, x.max(int dim) is PyTorch's (values, indices), x.max(other_tensor)
    the elementwise maximum; x.max(axis=...) (numpy's spelling) the values only."""
    reduction = _reduction(reduce_fn)

    def method(self, dim=None, keepdim=False, *, axis=None, keepdims=False):
        if isinstance(dim, Tensor):
            return pairwise_fn(self, dim)
        if dim is not None and axis is None:   # one int dim (amax / amin reduce several)
            return along_fn(self, check_int(reduce_fn.__name__, "dim", dim), pick_keepdim(keepdim, keepdims))
        return reduction(self, dim, keepdim, axis=axis, keepdims=keepdims)

    method.__name__ = reduce_fn.__name__
    method.__doc__ = reduce_fn.__doc__
    return method


def _typed_reduction(fn):
    """sum / mean: a reduction that also takes torch's `dtype=` (the input is cast to it first)."""
    def method(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=False):
        return fn(self, pick_dims(dim, axis, fn.__name__), pick_keepdim(keepdim, keepdims), dtype=dtype)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _variance(fn):
    def method(self, dim=None, correction=None, keepdim=False, *, unbiased=None, axis=None, keepdims=False):
        return fn(self, pick_dims(dim, axis, fn.__name__), correction, pick_keepdim(keepdim, keepdims),
                  unbiased)

    method.__name__ = fn.__name__
    return method


def _bitwise(op, symbol, ufunc, reflected=False):
    """`&`, `|`, `^` of bool (logical) or integer (bitwise) tensors, as in PyTorch: no grad."""
    def method(self, other):
        try:
            other = operand(other)
        except TypeError:
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        for x in (a, b):
            if isinstance(x, float) or isinstance(x, Tensor) and x.dtype.kind == "f":
                raise TypeError(f"{op}: `{symbol}` takes bool or integer tensors, got a float operand")
        return wrap(run_broadcasting(op, symbol, ufunc, array_of(a), array_of(b)))

    method.__name__ = op
    return method


def _invert(self):
    """`~mask`: logical not of a bool tensor, bitwise not of an integer one."""
    if self.dtype.kind == "f":
        raise TypeError("invert: `~` takes a bool or integer tensor, got a float one")
    return wrap(np.invert(self.data))


def _split(self, split_size_or_sections, dim=0):
    return join.split(self, split_size_or_sections, dim)


def _chunk(self, chunks, dim=0):
    return join.chunk(self, chunks, dim)


def _masked_fill(self, mask, value):
    """value where mask (bool) is True, self elsewhere."""
    return binary.where(binary.bool_mask(mask, "masked_fill"), value, self)


def _where(self, condition, other):
    """self where condition is True, other elsewhere."""
    return binary.where(condition, self, other)


def _expand_as(self, other):
    return shape.expand(self, other.shape)


def _reshape_as(self, other):
    return shape.reshape(self, other.shape)


def _t(self):
    """The transpose of a matrix; a tensor of fewer dims as it is (a view), as torch's t()."""
    if self.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dims, got shape {tuple(self.shape)}; use "
                         "transpose(dim0, dim1) or .mT")
    return shape.transpose(self, 0, -1)


def _matrix_transpose(self):
    """The last two dims swapped (a batch of matrices transposed)."""
    if self.ndim < 2:
        raise ValueError(f"mT: expects a tensor with >= 2 dims (a matrix or a batch of them), got shape "
                         f"{tuple(self.shape)}")
    return shape.transpose(self, -2, -1)


def _contiguous(self):
    return self


def _setitem(self, index, value):
    inplace.setitem(self, index, value)


def _api(name):
    """A function of `minigrad.ops.api` (which imports this module's neighbours), bound lazily."""
    def method(self, *args, **kwargs):
        from minigrad.ops import api

        return getattr(api, name)(self, *args, **kwargs)

    method.__name__ = name
    return method


def _clamp_min(self, min):  # noqa: A002
    return elementwise.clamp(self, min=min)


def _clamp_max(self, max):  # noqa: A002
    return elementwise.clamp(self, max=max)


def _topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002  (torch's argument name)
    """torch.topk: the k largest (smallest with largest=False) entries along `dim` as (values,
    indices), always in sorted order (a valid `sorted=False` result too); NaN counts as larger than
    everything, as in torch; ties keep the lower index first. The gradient goes to the picked indices."""
    if self.ndim == 0:
        values, indices = _topk(self.reshape(1), k, 0, largest, sorted)
        return reduce.ValuesIndices(values.reshape(()), indices.reshape(()))
    d = normalize_dim("topk", dim, self.ndim, self.shape)
    k = check_int("topk", "k", k, low=0)
    if k > self.shape[d]:
        raise ValueError(f"topk: k ({k}) is larger than the size {self.shape[d]} of dim {d}")
    a = self.data
    if a.dtype.kind in "bu":
        a = a.astype(np.int64)
    if largest:   # descending, NaN first (lexsort: the last key is the primary one; both stable)
        order = np.lexsort((-a, ~np.isnan(a)) if a.dtype.kind == "f" else (-a,), axis=d)
    else:         # ascending; argsort puts NaN last
        order = np.argsort(a, axis=d, kind="stable")
    index = np.take(order, np.arange(k), axis=d)
    return reduce.ValuesIndices(reduce.TakeAlong.apply(self, index, d, True), wrap(index))


_METHODS = {
    # arithmetic operators
    "__add__": _arithmetic(binary.Add), "__radd__": _arithmetic(binary.Add, True),
    "__sub__": _arithmetic(binary.Sub), "__rsub__": _arithmetic(binary.Sub, True),
    "__mul__": _arithmetic(binary.Mul), "__rmul__": _arithmetic(binary.Mul, True),
    "__truediv__": _arithmetic(binary.Div), "__rtruediv__": _arithmetic(binary.Div, True),
    "__pow__": _arithmetic(binary.Pow), "__rpow__": _arithmetic(binary.Pow, True),
    "__floordiv__": _operator(binary.floor_divide), "__rfloordiv__": _operator(binary.floor_divide, True),
    "__mod__": _arithmetic(binary.Remainder), "__rmod__": _arithmetic(binary.Remainder, True),
    "__matmul__": _operator(linalg.matmul), "__rmatmul__": _operator(linalg.matmul, True),
    "__neg__": elementwise.neg, "__pos__": lambda self: self, "__abs__": elementwise.abs,
    "__iadd__": _inplace_operator(binary.Add), "__isub__": _inplace_operator(binary.Sub),
    "__imul__": _inplace_operator(binary.Mul), "__itruediv__": _inplace_operator(binary.Div),
    "__ipow__": _inplace_operator(binary.Pow),
    "__getitem__": getitem, "__setitem__": _setitem,
    # comparisons (bool tensors, no grad)
    "__lt__": _operator(compare.lt), "__le__": _operator(compare.le), "__gt__": _operator(compare.gt),
    "__ge__": _operator(compare.ge), "__eq__": _operator(compare.eq), "__ne__": _operator(compare.ne),
    "lt": compare.lt, "le": compare.le, "gt": compare.gt, "ge": compare.ge, "eq": compare.eq,
    "ne": compare.ne, "isfinite": compare.isfinite, "isnan": compare.isnan, "nonzero": compare.nonzero,
    "logical_not": compare.logical_not, "logical_and": compare.logical_and,
    "logical_or": compare.logical_or,
    "__and__": _bitwise("and", "&", np.bitwise_and), "__rand__": _bitwise("and", "&", np.bitwise_and, True),
    "__or__": _bitwise("or", "|", np.bitwise_or), "__ror__": _bitwise("or", "|", np.bitwise_or, True),
    "__xor__": _bitwise("xor", "^", np.bitwise_xor), "__rxor__": _bitwise("xor", "^", np.bitwise_xor, True),
    "__invert__": _invert,
    # elementwise
    "add": binary.add, "sub": binary.sub, "mul": binary.mul, "div": binary.div, "pow": binary.pow,
    "neg": elementwise.neg, "maximum": binary.maximum, "minimum": binary.minimum,
    "floor_divide": binary.floor_divide, "remainder": binary.remainder,
    "exp": elementwise.exp, "log": elementwise.log, "sqrt": elementwise.sqrt, "rsqrt": elementwise.rsqrt,
    "abs": elementwise.abs, "tanh": elementwise.tanh, "sigmoid": elementwise.sigmoid,
    "sin": elementwise.sin, "cos": elementwise.cos, "log1p": elementwise.log1p, "expm1": elementwise.expm1,
    "relu": elementwise.relu, "silu": elementwise.silu, "gelu": elementwise.gelu,
    "softplus": elementwise.softplus, "erf": elementwise.erf, "clamp": elementwise.clamp,
    "clip": elementwise.clamp, "masked_fill": _masked_fill, "where": _where,
    # reductions
    "sum": _typed_reduction(reduce.sum), "mean": _typed_reduction(reduce.mean),
    "all": _reduction(reduce.all), "any": _reduction(reduce.any),
    "max": _extremum(reduce.max, reduce.max_along, binary.maximum),
    "min": _extremum(reduce.min, reduce.min_along, binary.minimum),
    "amax": _reduction(reduce.max), "amin": _reduction(reduce.min),
    "var": _variance(reduce.var), "std": _variance(reduce.std),
    "logsumexp": _reduction(reduce.logsumexp),
    "argmax": _reduction(reduce.argmax), "argmin": _reduction(reduce.argmin),
    "softmax": reduce.softmax, "log_softmax": reduce.log_softmax, "topk": _topk,
    "norm": gather_sort.norm, "cumsum": gather_sort.cumsum, "cumprod": gather_sort.cumprod,
    "sort": gather_sort.sort, "argsort": gather_sort.argsort, "gather": gather_sort.gather,
    "multinomial": _api("multinomial"), "allclose": _api("allclose"),
    "mm": _api("mm"), "bmm": _api("bmm"), "square": _api("square"), "tril": _api("tril"),
    "triu": _api("triu"), "clamp_min": _clamp_min, "clamp_max": _clamp_max,
    "prod": gather_sort.prod, "scatter": gather_sort.scatter, "scatter_add": gather_sort.scatter_add,
    "index_select": gather_sort.index_select, "index_add": gather_sort.index_add,
    "flip": gather_sort.flip, "roll": gather_sort.roll, "lerp": binary.lerp, "logaddexp": binary.logaddexp,
    "isinf": compare.isinf, "isposinf": compare.isposinf, "isneginf": compare.isneginf,
    "floor": elementwise.floor, "ceil": elementwise.ceil, "round": elementwise.round,
    "trunc": elementwise.trunc, "sign": elementwise.sign, "reciprocal": elementwise.reciprocal,
    "log2": elementwise.log2, "log10": elementwise.log10, "exp2": elementwise.exp2,
    "nan_to_num": elementwise.nan_to_num, "narrow": _api("narrow"), "select": _api("select"),
    "tile": _api("tile"), "repeat_interleave": _api("repeat_interleave"),
    "take_along_dim": _api("take_along_dim"), "diagonal": _api("diagonal"), "outer": _api("outer"),
    "var_mean": _api("var_mean"), "std_mean": _api("std_mean"),
    "scatter_reduce": scatter_reduce.scatter_reduce, "index_fill": index_update.index_fill,
    "index_copy": index_update.index_copy, "masked_select": selection.masked_select,
    "cummax": cumulative.cummax, "cummin": cumulative.cummin, "logcumsumexp": cumulative.logcumsumexp,
    "median": selection.median, "kthvalue": selection.kthvalue, "unique": unique.unique,
    "bincount": unique.bincount, "mode": selection.mode, "unique_consecutive": unique.unique_consecutive,
    "histc": unique.histc,
    # shape
    "reshape": shape.reshape, "view": shape.view, "flatten": shape.flatten, "squeeze": shape.squeeze,
    "unsqueeze": shape.unsqueeze, "permute": shape.permute, "transpose": shape.transpose,
    "expand": shape.expand, "expand_as": _expand_as, "reshape_as": _reshape_as, "view_as": _reshape_as,
    "t": _t, "contiguous": _contiguous, "split": _split, "chunk": _chunk, "matmul": linalg.matmul,
    "repeat": gather_sort.repeat, "unbind": gather_sort.unbind, "movedim": shape.movedim,
    "moveaxis": shape.movedim, "swapaxes": shape.swapaxes, "swapdims": shape.swapaxes,
    "unflatten": shape.unflatten, "broadcast_to": shape.broadcast_to,
    # in place
    "add_": _inplace_alpha(binary.Add), "sub_": _inplace_alpha(binary.Sub),
    "mul_": _inplace_operator(binary.Mul), "div_": _inplace_operator(binary.Div),
    "fill_": inplace.fill_, "zero_": inplace.zero_, "copy_": inplace.copy_,
    "masked_fill_": inplace.masked_fill_, "clamp_": inplace.clamp_, "clip_": inplace.clamp_,
    "normal_": inplace.normal_, "uniform_": inplace.uniform_,
    "scatter_": index_update.scatter_, "scatter_add_": index_update.scatter_add_,
    "scatter_reduce_": index_update.scatter_reduce_, "index_add_": index_update.index_add_,
    "index_fill_": index_update.index_fill_, "index_copy_": index_update.index_copy_,
}



def _type(self, dtype=None, non_blocking=False, **kwargs):
    """Without a dtype: torch's type string ('torch.FloatTensor' ...); with one (a dtype or such a
    string): the tensor cast to it (`to(dtype)`)."""
    if dtype is None:
        return "torch." + _TYPE_NAMES[self.dtype]
    if isinstance(dtype, str) and dtype.startswith("torch.") and dtype.endswith("Tensor"):
        names = {v: k for k, v in _TYPE_NAMES.items()}
        if dtype[6:] not in names:
            raise ValueError(f"type: invalid type {dtype!r}")
        dtype = names[dtype[6:]]
    return self.to(dtype)


_TYPE_NAMES = {np.dtype(np.float32): "FloatTensor", np.dtype(np.float64): "DoubleTensor",
               np.dtype(np.int64): "LongTensor", np.dtype(np.int32): "IntTensor",
               np.dtype(np.int16): "ShortTensor", np.dtype(np.int8): "CharTensor",
               np.dtype(np.uint8): "ByteTensor", np.dtype(np.bool_): "BoolTensor"}


def _same(self):
    """Real tensors: conj / resolve_conj / resolve_neg / conj_physical are the tensor itself."""
    return self


def _false(self):
    return False


def _is_nonzero(self):
    """torch's is_nonzero: the truth of a one-element tensor (more elements raise)."""
    if self.data.size != 1:
        raise RuntimeError(f"is_nonzero: boolean value of a tensor with {self.data.size} values is ambiguous"
                           if self.data.size else "is_nonzero: boolean value of an empty tensor is ambiguous")
    return bool(self.data.reshape(()))


def _sum_to_size(self, *size):
    """torch's sum_to_size: summed over the dims that `size` (broadcastable to this shape) has as 1
    or lacks."""
    size = shape._sizes(size)
    lead = self.ndim - len(size)
    if lead < 0 or any(s not in (1, n) for s, n in zip(size, self.shape[lead:])):
        raise ValueError(f"sum_to_size: size {size} is not expandable to size {tuple(self.shape)}")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and self.shape[lead + i] != 1)
    out = reduce.sum(self, dims, True) if dims else self
    return shape.reshape(out, size)


_METHODS.update({
    # torch's aliases and the functions added in the third pass (see docs/tensor_api.md)
    "absolute": elementwise.abs, "negative": elementwise.neg, "positive": elementwise.positive,
    "multiply": binary.mul, "divide": binary.div, "true_divide": binary.div, "subtract": binary.sub,
    "greater": compare.gt, "greater_equal": compare.ge, "less": compare.lt, "less_equal": compare.le,
    "not_equal": compare.ne, "logical_xor": compare.logical_xor, "isclose": compare.isclose,
    "equal": compare.equal, "isreal": compare.isreal,
    "asin": elementwise.asin, "acos": elementwise.acos, "atan": elementwise.atan, "sinh": elementwise.sinh,
    "cosh": elementwise.cosh, "tan": elementwise.tan, "asinh": elementwise.asinh, "acosh": elementwise.acosh,
    "atanh": elementwise.atanh, "arcsin": elementwise.asin, "arccos": elementwise.acos,
    "arctan": elementwise.atan, "arcsinh": elementwise.asinh, "arccosh": elementwise.acosh,
    "arctanh": elementwise.atanh, "erfc": elementwise.erfc, "erfinv": elementwise.erfinv,
    "lgamma": elementwise.lgamma, "digamma": elementwise.digamma, "sinc": elementwise.sinc,
    "frac": elementwise.frac, "fix": elementwise.fix, "logit": elementwise.logit,
    "deg2rad": elementwise.deg2rad, "rad2deg": elementwise.rad2deg, "sgn": elementwise.sgn,
    "signbit": elementwise.signbit,
    "atan2": binary.atan2, "arctan2": binary.atan2, "hypot": binary.hypot, "xlogy": binary.xlogy,
    "copysign": binary.copysign, "fmax": binary.fmax, "fmin": binary.fmin, "fmod": binary.fmod,
    "float_power": binary.float_power, "logaddexp2": binary.logaddexp2, "heaviside": binary.heaviside,
    "ldexp": binary.ldexp,
    "nansum": _typed_reduction(reduce.nansum), "nanmean": _typed_reduction(reduce.nanmean),
    "count_nonzero": reduce.count_nonzero, "aminmax": reduce.aminmax,
    "quantile": selection.quantile, "nanquantile": selection.nanquantile,
    "msort": selection.msort,
    "dot": linalg.dot, "vdot": linalg.vdot, "mv": linalg.mv, "inner": linalg.inner, "kron": linalg.kron,
    "cross": linalg.cross, "trace": linalg.trace, "addmm": _api("addmm"), "addmv": _api("addmv"),
    "addr": _api("addr"), "addcmul": _api("addcmul"), "addcdiv": _api("addcdiv"),
    "baddbmm": _api("baddbmm"), "addbmm": _api("addbmm"), "ger": _api("outer"),
    "diag": shape.diag, "diag_embed": shape.diag_embed, "diagflat": shape.diagflat, "ravel": shape.ravel,
    "diff": join.diff, "tensor_split": join.tensor_split, "split_with_sizes": join.split_with_sizes,
    "hsplit": join.hsplit, "vsplit": join.vsplit, "dsplit": join.dsplit,
    "rot90": gather_sort.rot90, "fliplr": gather_sort.fliplr, "flipud": gather_sort.flipud,
    "take": gather_sort.take, "unfold": gather_sort.unfold,
    "select_scatter": index_update.select_scatter, "slice_scatter": index_update.slice_scatter,
    "diagonal_scatter": index_update.diagonal_scatter, "index_put": index_update.index_put,
    "masked_scatter": index_update.masked_scatter, "argwhere": compare.nonzero,
    "conj": _same, "resolve_conj": _same, "resolve_neg": _same, "conj_physical": _same,
    "is_conj": _false, "is_neg": _false, "is_complex": _false, "is_inference": _false,
    "is_nonzero": _is_nonzero, "sum_to_size": _sum_to_size,
    "is_same_size": lambda self, other: tuple(self.shape) == tuple(other.shape),
    "get_device": lambda self: -1, "type": _type,
    "bitwise_and": _bitwise("bitwise_and", "&", np.bitwise_and),
    "bitwise_or": _bitwise("bitwise_or", "|", np.bitwise_or),
    "bitwise_xor": _bitwise("bitwise_xor", "^", np.bitwise_xor), "bitwise_not": _invert,
    "polygamma": lambda self, n: elementwise.polygamma(n, self), "mvlgamma": elementwise.mvlgamma,
    "angle": elementwise.angle, "frexp": elementwise.frexp, "gcd": binary.gcd, "lcm": binary.lcm,
    "bitwise_left_shift": binary.bitwise_left_shift, "bitwise_right_shift": binary.bitwise_right_shift,
    "__lshift__": _operator(binary.bitwise_left_shift), "__rshift__": _operator(binary.bitwise_right_shift),
    "__rlshift__": _operator(binary.bitwise_left_shift, True),
    "__rrshift__": _operator(binary.bitwise_right_shift, True),
    "nextafter": binary.nextafter, "dist": linalg.dist, "cov": linalg.cov, "corrcoef": linalg.corrcoef,
    "nanmedian": selection.nanmedian, "renorm": gather_sort.renorm, "put": index_update.put,
    "index_reduce": index_update.index_reduce, "bernoulli": inplace.bernoulli, "prelu": _api("prelu"),
    "narrow_copy": _api("narrow_copy"), "nonzero_static": _api("nonzero_static"),
    "unsafe_chunk": _chunk, "unsafe_split": _split, "unsafe_split_with_sizes": join.split_with_sizes,
    "inverse": linalg.inverse, "det": linalg.det, "slogdet": linalg.slogdet, "logdet": linalg.logdet,
    "matrix_power": linalg.matrix_power, "cholesky": linalg.cholesky,
})

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

# In-place forms: the out-of-place method's result written into the tensor (ops/inplace.py `method`).
_INPLACE = (
    "abs absolute acos arccos acosh arccosh asin arcsin asinh arcsinh atan arctan atanh arctanh ceil floor "
    "round trunc fix frac cos cosh sin sinh tan tanh sigmoid relu neg negative exp exp2 expm1 log log2 "
    "log10 log1p sqrt rsqrt square reciprocal sign sgn erf erfc erfinv lgamma digamma sinc deg2rad rad2deg "
    "logit nan_to_num clamp_min clamp_max cumsum cumprod tril triu pow lerp atan2 arctan2 hypot copysign "
    "fmod remainder floor_divide xlogy heaviside ldexp multiply divide true_divide subtract addcmul addcdiv "
    "addmm addmv addr baddbmm addbmm masked_scatter index_put bitwise_and bitwise_or bitwise_xor "
    "bitwise_not polygamma mvlgamma gcd lcm bitwise_left_shift bitwise_right_shift nextafter renorm put "
    "index_reduce").split()
# comparisons and logical ops: any dtype on the right (their result is cast to self's dtype)
_INPLACE_ANY_DTYPE = ("eq ne lt le gt ge greater greater_equal less less_equal not_equal logical_not "
                      "logical_and logical_or logical_xor").split()

for _name in _INPLACE:
    setattr(Tensor, _name + "_", inplace.method(_name + "_", getattr(Tensor, _name)))
for _name in _INPLACE_ANY_DTYPE:
    setattr(Tensor, _name + "_", inplace.method(_name + "_", getattr(Tensor, _name), check_dtypes=False))
Tensor.float_power_ = inplace.float_power_
Tensor.fill_diagonal_ = inplace.fill_diagonal_
Tensor.conj_physical_ = _same
for _name in ("bernoulli_", "exponential_", "geometric_", "log_normal_", "cauchy_", "random_"):
    setattr(Tensor, _name, getattr(inplace, _name))
for _name, _fn in (("t_", _t), ("transpose_", shape.transpose), ("swapaxes_", shape.swapaxes),
                   ("swapdims_", shape.swapaxes), ("squeeze_", shape.squeeze),
                   ("unsqueeze_", shape.unsqueeze)):
    setattr(Tensor, _name, inplace.shape_method(_name, _fn))

Tensor.T = property(shape.T, doc="All dims reversed (the transpose of a matrix).")
Tensor.mT = property(_matrix_transpose, doc=_matrix_transpose.__doc__)
Tensor.mH = property(_matrix_transpose, doc="mT (the conjugate is the tensor itself for real tensors).")
Tensor.H = property(lambda self: _t(self) if self.ndim == 2 else _h_error(self),
                    doc="The (conjugate) transpose of a matrix.")
Tensor.adjoint = _matrix_transpose


def _h_error(self):
    raise ValueError(f"H: expects a matrix (2-D tensor), got shape {tuple(self.shape)}; use .mH for batches")
Tensor.__hash__ = object.__hash__   # __eq__ is elementwise; tensors stay hashable by identity
