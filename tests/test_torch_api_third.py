"""Third pass over the gaps with torch's Tensor API: aliases and in-place variants, the inverse
trigonometric / hyperbolic and gamma-family maths, binary maths (atan2, hypot, xlogy, fmod, fmax ...),
NaN-aware reductions and quantiles, products (dot, tensordot, kron, cross, cdist, addmv ...), shape
ops (diag_embed, tensor_split, unfold, rot90, *_scatter, index_put, masked_scatter, meshgrid ...) and
metadata (stride, storage_offset, type ...). Every op is compared with torch on values and dtypes
(several shapes, broadcasting, empty and 0-d tensors, integer / bool inputs, NaN / inf), its gradient
with torch's autograd in float64 and with minigrad's gradcheck; bad input raises."""
# ruff: noqa: B023  (the lambdas below are called within the loop iteration that makes them)
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
SPECIALS = np.array([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 1e-30, 37.0, -100.0])
SHAPES = [(), (0,), (5,), (3, 4), (2, 1, 3)]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _t(a, dtype=None):
    """The same values as a torch tensor (float64 unless the array says otherwise)."""
    return torch.tensor(np.asarray(a)) if dtype is None else torch.tensor(np.asarray(a), dtype=dtype)


def _np_dtype(tdtype):
    return torch.empty(0, dtype=tdtype).numpy().dtype


def same(m, t, rtol=1e-10, atol=1e-12):
    """A minigrad result equals torch's: shape, dtype and values (NaN where torch has NaN)."""
    if isinstance(t, (tuple, list)):
        assert isinstance(m, (tuple, list)) and len(m) == len(t), (m, t)
        for a, b in zip(m, t):
            same(a, b, rtol, atol)
        return
    if not isinstance(t, torch.Tensor):
        assert m == t, (m, t)
        return
    tn = t.detach().numpy()
    assert isinstance(m, mg.Tensor), type(m)
    assert m.shape == tuple(tn.shape), (m.shape, tuple(tn.shape))
    assert m.dtype == tn.dtype, (m.dtype, tn.dtype)
    if tn.dtype.kind == "f":
        if tn.dtype == np.float32:
            rtol, atol = max(rtol, 2e-6), max(atol, 1e-6)
        np.testing.assert_allclose(m.numpy(), tn, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(m.numpy(), tn)


def grads_match(mfn, tfn, arrays, rtol=1e-8, atol=1e-10, check=True, seed=1):
    """f(*arrays) in float64 in both; the gradients of <c, f> for a random c must agree. Also runs
    minigrad's gradcheck when `check`."""
    ms = [mg.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    ts = [torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    mo, to = mfn(*ms), tfn(*ts)
    same(mo, to, rtol=rtol, atol=atol)
    c = _rng(seed).standard_normal(tuple(to.shape))
    (mo * mg.tensor(c)).sum().backward()
    (to * torch.tensor(c)).sum().backward()
    for m, t in zip(ms, ts):
        tg = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
        mgr = np.zeros(m.shape) if m.grad is None else m.grad.numpy()
        np.testing.assert_allclose(mgr, tg, rtol=rtol, atol=atol, equal_nan=True)
    if check:
        fresh = [mg.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
        assert gradcheck(mfn, fresh, atol=1e-6, rtol=1e-5)


def torch_raises(fn):
    try:
        fn()
    except Exception:              # noqa: BLE001 - any error of torch's
        return True
    return False


# ------------------------------------------------------------------------------------------------
# unary maths
# ------------------------------------------------------------------------------------------------

# name -> (low, high) of the inputs of the gradient checks (inside the domain, away from poles)
UNARY = {
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atan": (-3, 3), "sinh": (-3, 3), "cosh": (-3, 3),
    "tan": (-1.2, 1.2), "asinh": (-3, 3), "acosh": (1.2, 4), "atanh": (-0.9, 0.9), "erfc": (-3, 3),
    "erfinv": (-0.95, 0.95), "lgamma": (-3.9, 6), "digamma": (-3.9, 6), "sinc": (-3, 3),
    "frac": (-3, 3), "logit": (0.05, 0.95), "deg2rad": (-5, 5), "rad2deg": (-5, 5), "sgn": (-3, 3),
}
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh",
           "arctanh": "atanh", "absolute": "abs", "negative": "neg", "fix": "trunc"}


def _domain(name, shape, seed=0):
    lo, hi = UNARY[name]
    x = lo + (hi - lo) * _rng(seed).random(shape)
    if name in ("lgamma", "digamma", "frac"):          # away from the poles / jumps at the integers
        x = np.where(np.abs(x - np.round(x)) < 0.15, np.round(x) + 0.3, x)
    return x


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_match_torch(name):
    mfn, tfn = getattr(mg, name), getattr(torch, name)
    for dtype in (torch.float32, torch.float64):
        same(mfn(mg.tensor(SPECIALS.astype(_np_dtype(dtype)))), tfn(_t(SPECIALS, dtype)), rtol=1e-9)
        for shape in SHAPES:
            x = _domain(name, shape)
            m = getattr(mg.tensor(x.astype(_np_dtype(dtype))), name)()      # the method too
            same(m, tfn(_t(x, dtype)), rtol=1e-9)
    ints = np.array([-3, -1, 0, 1, 2, 5])
    for values, dtype in ((ints, torch.int64), (ints.astype(np.int32), torch.int32),
                          (np.array([True, False]), torch.bool)):
        if torch_raises(lambda: tfn(_t(values, dtype))):       # frac of integers
            with pytest.raises(TypeError):
                mfn(mg.tensor(values))
        else:
            same(mfn(mg.tensor(values)), tfn(_t(values, dtype)), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"sgn"}))
def test_unary_gradients_match_torch(name):
    for shape in [(), (7,), (2, 3)]:
        grads_match(getattr(mg, name), getattr(torch, name), [_domain(name, shape, seed=3)],
                    check=name not in ("erfinv",) or shape != ())
    grads_match(getattr(mg, name), getattr(torch, name), [np.zeros((0, 2))], check=False)


def test_unary_gradients_at_special_points_match_torch():
    x = np.array([0.0, 1.0, -1.0, 0.5, 2.0, -2.5])
    grads_match(mg.sinc, torch.sinc, [x], check=False)          # 0 at 0
    grads_match(mg.digamma, torch.digamma, [np.array([0.5, 1.5, -0.5, 30.0])], rtol=1e-8)
    with np.errstate(all="ignore"):
        grads_match(lambda a: mg.logit(a), lambda a: torch.logit(a), [np.array([-0.5, 0.3, 1.5])],
                    check=False)
        grads_match(lambda a: mg.logit(a, 0.1), lambda a: torch.logit(a, 0.1),
                    [np.array([0.05, 0.3, 0.95, 0.1, 0.9])], check=False)


def test_aliases_are_the_same_functions():
    x = mg.tensor(np.linspace(-0.9, 0.9, 5))
    for alias, name in ALIASES.items():
        y = x + 2 if alias == "arccosh" else x
        a, b = getattr(mg, alias)(y), getattr(mg, name)(y)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(getattr(y, alias)().numpy(), a.numpy())
    assert mg.positive(x) is x and x.positive() is x
    for alias, name in (("multiply", "mul"), ("divide", "div"), ("true_divide", "div"), ("subtract", "sub"),
                        ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                        ("not_equal", "ne")):
        assert np.array_equal(getattr(x, alias)(2.0).numpy(), getattr(x, name)(2.0).numpy())
        assert np.array_equal(getattr(mg, alias)(x, 2.0).numpy(), getattr(x, name)(2.0).numpy())
        expected = getattr(torch, alias)(_t([1, 2]), 2).numpy().dtype
        assert getattr(mg, alias)(mg.tensor([1, 2]), 2).dtype == expected


def test_logit_eps_signbit_and_sgn():
    x = np.array([-0.5, 0.0, 0.01, 0.3, 0.5, 1.0, 1.5, NAN])
    for eps in (None, 0.0, 0.05, 0.2):
        for dtype in (torch.float32, torch.float64):
            same(mg.logit(mg.tensor(x.astype(_np_dtype(dtype))), eps), torch.logit(_t(x, dtype), eps))
    for values in (SPECIALS, np.array([-3, 0, 4]), np.array([True, False])):
        same(mg.signbit(mg.tensor(values)), torch.signbit(_t(values)))
        same(mg.sgn(mg.tensor(values)), torch.sgn(_t(values)))
    same(mg.tensor(np.array([-0.0, 0.0])).signbit(), torch.signbit(_t([-0.0, 0.0])))


# ------------------------------------------------------------------------------------------------
# binary maths
# ------------------------------------------------------------------------------------------------

BINARY = ["atan2", "hypot", "xlogy", "copysign", "fmax", "fmin", "fmod", "float_power", "logaddexp2",
          "ldexp"]
PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((0, 3), (3,)), ((), ())]


def _binary_inputs(name, sa, sb, seed=0):
    r = _rng(seed)
    a = r.uniform(-3, 3, sa)
    b = r.uniform(-3, 3, sb)
    if name == "xlogy":
        b = np.abs(b) + 0.2
        a = np.where(np.abs(a) < 0.5, 0.0, a)                  # zeros of x, where the grad is 0
    if name == "copysign":
        a = np.where(np.abs(a) < 0.2, 1.0, a)
    if name == "float_power":
        a = np.abs(a) + 0.3
    if name == "fmod":                                      # a / b away from integers (jumps)
        b = np.where(np.abs(b) < 0.5, 1.7, b)
        q = a / b
        a = np.where(np.abs(q - np.round(q)) < 0.1, a + 0.3 * b, a)
    if name in ("fmax", "fmin"):
        b = b + 1e-3                                          # no ties
    if name == "ldexp":
        b = np.round(b)
    return a, b


@pytest.mark.parametrize("name", BINARY)
def test_binary_values_match_torch(name):
    mfn, tfn = getattr(mg, name), getattr(torch, name)
    grid_a, grid_b = SPECIALS[:, None], SPECIALS[None, :]
    for dtype in (torch.float32, torch.float64):
        nd = _np_dtype(dtype)
        with np.errstate(all="ignore"):
            same(mfn(mg.tensor(grid_a.astype(nd)), mg.tensor(grid_b.astype(nd))),
                 tfn(_t(grid_a, dtype), _t(grid_b, dtype)), rtol=1e-9)
        for sa, sb in PAIRS:
            a, b = _binary_inputs(name, sa, sb)
            m = getattr(mg.tensor(a.astype(nd)), name)(mg.tensor(b.astype(nd)))
            same(m, tfn(_t(a, dtype), _t(b, dtype)), rtol=1e-9)
    ia, ib = np.array([[-3], [0], [5]]), np.array([2, -3, 7, 1])
    for ta, tb in ((ia, ib), (ia.astype(np.int32), ib.astype(np.int32)), (ia > 0, ib > 0)):
        if torch_raises(lambda: tfn(_t(ta), _t(tb))):
            with pytest.raises((TypeError, ZeroDivisionError)):
                mfn(mg.tensor(ta), mg.tensor(tb))
        else:
            same(mfn(mg.tensor(ta), mg.tensor(tb)), tfn(_t(ta), _t(tb)), rtol=1e-6)


@pytest.mark.parametrize("name", [n for n in BINARY if n != "ldexp"])
def test_binary_gradients_match_torch(name):
    for sa, sb in [((3, 4), (3, 4)), ((2, 1, 3), (4, 1)), ((), (3,))]:
        grads_match(getattr(mg, name), getattr(torch, name), _binary_inputs(name, sa, sb, seed=2))


def test_binary_scalar_operands_and_special_gradients():
    x = np.array([1.5, -2.0, 0.0, 3.0])
    same(mg.atan2(mg.tensor(x), 2.0), torch.atan2(_t(x), _t(2.0)))
    same(mg.fmod(mg.tensor(x), 1.5), torch.fmod(_t(x), 1.5))
    same(mg.fmod(mg.tensor([5, -5, 7]), 3), torch.fmod(_t([5, -5, 7]), 3))
    same(mg.fmod(mg.tensor([5, -5]), 2.5), torch.fmod(_t([5, -5]), 2.5))
    same(mg.xlogy(2.0, mg.tensor(np.abs(x))), torch.xlogy(2.0, _t(np.abs(x))))
    same(mg.float_power(mg.tensor([1, 2, 3]), 2), torch.float_power(_t([1, 2, 3]), 2))
    same(mg.float_power(2, mg.tensor(np.array([1.0, 2.0], np.float32))),
         torch.float_power(2, _t([1.0, 2.0], torch.float32)))
    same(mg.ldexp(mg.tensor(np.array([1.0, -2.0])), mg.tensor([3, -1])),
         torch.ldexp(_t([1.0, -2.0]), _t([3, -1])))
    same(mg.ldexp(mg.tensor([1, 2]), mg.tensor([2, 3])), torch.ldexp(_t([1, 2]), _t([2, 3])))
    grads_match(mg.ldexp, torch.ldexp, [x, np.array([1.0, 2.0, -1.0, 0.0])])
    # torch's choices where the formulas divide by zero or on ties
    with np.errstate(all="ignore"):
        grads_match(mg.atan2, torch.atan2, [np.array([0.0, 1.0]), np.array([0.0, 0.0])], check=False)
        grads_match(mg.hypot, torch.hypot, [np.array([0.0, 3.0]), np.array([0.0, 4.0])], check=False)
        grads_match(mg.xlogy, torch.xlogy, [np.array([0.0, 0.0, 1.0]), np.array([0.0, -1.0, 0.0])],
                    check=False)
        grads_match(mg.copysign, torch.copysign, [np.array([0.0, -0.0, 3.0]), np.array([-1.0, 1.0, -1.0])],
                    check=False)
    tie = [np.array([1.0, 2.0, 3.0, NAN, 1.0]), np.array([1.0, 1.0, 4.0, 2.0, NAN])]
    grads_match(mg.fmax, torch.fmax, tie, check=False)
    grads_match(mg.fmin, torch.fmin, tie, check=False)


def test_heaviside_and_binary_errors():
    x, v = np.array([-1.5, 0.0, 2.0, NAN, -0.0]), np.array([0.5])
    same(mg.heaviside(mg.tensor(x), mg.tensor(v)), torch.heaviside(_t(x), _t(v)))
    same(mg.tensor([-2, 0, 3]).heaviside(mg.tensor([7])), torch.heaviside(_t([-2, 0, 3]), _t([7])))
    assert not mg.heaviside(mg.tensor(x, requires_grad=True), mg.tensor(v)).requires_grad
    with pytest.raises(TypeError, match="same dtype"):
        mg.heaviside(mg.tensor([1.0]), mg.tensor([1]))
    with pytest.raises(TypeError, match="floating"):
        mg.hypot(mg.tensor([1]), mg.tensor([2]))
    with pytest.raises(TypeError, match="floating"):
        mg.logaddexp2(mg.tensor([1]), mg.tensor([2]))
    with pytest.raises(ZeroDivisionError):
        mg.fmod(mg.tensor([5, -5]), mg.tensor([0, 3]))
    with pytest.raises(TypeError):
        mg.fmod(mg.tensor([True]), mg.tensor([True]))
    with pytest.raises(ValueError, match="broadcast"):
        mg.atan2(mg.ones(3), mg.ones(4))
    with pytest.raises(TypeError, match="float32 and float64"):
        mg.hypot(mg.ones(3), mg.ones(3, dtype=mg.float64))


# ------------------------------------------------------------------------------------------------
# in-place variants
# ------------------------------------------------------------------------------------------------

INPLACE_UNARY = ["abs", "absolute", "acos", "arccos", "acosh", "arccosh", "asin", "arcsin", "asinh",
                 "arcsinh", "atan", "arctan", "atanh", "arctanh", "ceil", "floor", "round", "trunc", "fix",
                 "frac", "cos", "cosh", "sin", "sinh", "tan", "tanh", "sigmoid", "relu", "neg", "negative",
                 "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "square",
                 "reciprocal", "sign", "sgn", "erf", "erfc", "erfinv", "lgamma", "digamma", "sinc",
                 "deg2rad", "rad2deg", "logit", "nan_to_num"]
_POSITIVE = {"acosh", "arccosh"}
_UNIT = {"acos", "arccos", "asin", "arcsin", "atanh", "arctanh", "erfinv", "logit", "log", "log2", "log10",
         "sqrt", "rsqrt", "log1p"}


def _inplace_input(name, shape=(3, 4), seed=0):
    x = _rng(seed).uniform(-0.9, 0.9, shape)
    if name in _UNIT:
        x = np.abs(x) * 0.9 + 0.05
    if name in _POSITIVE:
        x = np.abs(x) + 1.2
    if name in ("lgamma", "digamma"):
        x = np.abs(x) + 0.3
    return x


@pytest.mark.parametrize("name", INPLACE_UNARY)
def test_unary_inplace_matches_torch(name):
    x = _inplace_input(name)
    for dtype in (torch.float32, torch.float64):
        m, t = mg.tensor(x.astype(_np_dtype(dtype))), _t(x, dtype)
        version = m._version
        out = getattr(m, name + "_")()
        assert out is m and m._version == version + 1
        getattr(t, name + "_")()
        same(m, t, rtol=1e-9)
    # in the graph: a non-leaf takes the new value's node; its gradient is the out-of-place op's
    # (torch has no derivative for some in-place forms, e.g. acosh_)
    a_m = mg.tensor(x, requires_grad=True)
    a_t = _t(x).requires_grad_(True)
    y_m = a_m * 1.5
    getattr(y_m, name + "_")()
    y_t = getattr(a_t * 1.5, name)()
    c = _rng(5).standard_normal(x.shape)
    (y_m * mg.tensor(c)).sum().backward()
    (y_t * _t(c)).sum().backward()
    np.testing.assert_allclose(a_m.grad.numpy(), a_t.grad.numpy(force=True), rtol=1e-8, atol=1e-10)
    # a leaf that requires grad cannot be modified, as in torch
    with pytest.raises(RuntimeError, match="leaf"):
        getattr(mg.tensor(x, requires_grad=True), name + "_")()
    # an integer tensor cannot hold a float result (torch: "result type Float can't be cast ...")
    ints = np.array([1, 2, 3])
    if torch_raises(lambda: getattr(_t(ints), name + "_")()):
        with pytest.raises((RuntimeError, TypeError)):
            getattr(mg.tensor(ints), name + "_")()
        assert mg.tensor(ints).tolist() == [1, 2, 3]
    else:
        m = mg.tensor(ints)
        getattr(m, name + "_")()
        same(m, getattr(_t(ints), name + "_")())


BINARY_INPLACE = [  # (name, other, self values)
    ("pow", 2.0, None), ("atan2", "t", None), ("arctan2", "t", None), ("hypot", "t", None),
    ("copysign", "t", None), ("fmod", 0.7, None), ("remainder", 0.7, None), ("xlogy", "pos", None),
    ("ldexp", "int", None), ("multiply", "t", None), ("divide", "pos", None), ("true_divide", 3.0, None),
    ("subtract", "t", None), ("lerp", "lerp", None), ("clamp_min", 0.1, None), ("clamp_max", -0.1, None),
    ("addcmul", "addc", None), ("addcdiv", "addc", None), ("heaviside", "heav", None),
    ("floor_divide", 0.7, None),
]


def _other(kind, shape, torch_side):
    r = _rng(9)
    if kind == "t":
        v = r.uniform(-2, 2, shape[-1:])
    elif kind == "pos":
        v = r.uniform(0.5, 2, shape[-1:])
    elif kind == "int":         # (torch's in-place backward gives 0 for negative int exponents)
        return (_t([1, 2, 0, 3]) if torch_side else mg.tensor([1, 2, 0, 3])),
    elif kind == "lerp":
        v = r.uniform(-2, 2, shape)
        return (_t(v) if torch_side else mg.tensor(v)), 0.3
    elif kind == "addc":
        v, w = r.uniform(-2, 2, shape), r.uniform(0.5, 2, shape[-1:])
        return ((_t(v), _t(w)) if torch_side else (mg.tensor(v), mg.tensor(w)))
    elif kind == "heav":
        return (_t([0.5]) if torch_side else mg.tensor(np.array([0.5]))),
    else:
        return (kind,)
    return (_t(v) if torch_side else mg.tensor(v)),


@pytest.mark.parametrize("name,other,_", BINARY_INPLACE)
def test_binary_inplace_matches_torch(name, other, _):
    x = _rng(4).uniform(-2, 2, (3, 4))
    x[0, 0] = 0.0
    m, t = mg.tensor(x), _t(x)
    assert getattr(m, name + "_")(*_other(other, x.shape, False)) is m
    getattr(t, name + "_")(*_other(other, x.shape, True))
    same(m, t)
    if name in ("heaviside", "floor_divide"):
        return
    a_m, a_t = mg.tensor(x, requires_grad=True), _t(x).requires_grad_(True)
    y_m, y_t = a_m + 0.25, a_t + 0.25
    getattr(y_m, name + "_")(*_other(other, x.shape, False))
    getattr(y_t, name + "_")(*_other(other, x.shape, True))
    y_m.sum().backward()
    y_t.sum().backward()
    np.testing.assert_allclose(a_m.grad.numpy(), a_t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_inplace_grad_flows_to_the_other_operand():
    x, w = _rng(1).uniform(0.5, 2, (2, 3)), _rng(2).uniform(0.5, 2, (3,))
    wm, wt = mg.tensor(w, requires_grad=True), _t(w).requires_grad_(True)
    chains = [lambda y, v: y.addcmul_(v, v, value=0.5).atan2_(v), lambda y, v: y.hypot_(v),
              lambda y, v: y.xlogy_(v), lambda y, v: y.copysign_(v), lambda y, v: y.lerp_(v, 0.25)]
    for chain in chains:      # (torch refuses a chain whose later op changes a value saved before)
        ym, yt = mg.tensor(x) * 1.0, _t(x) * 1.0
        chain(ym, wm)
        chain(yt, wt)
        same(ym, yt)
        ym.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(wm.grad.numpy(), wt.grad.numpy(), rtol=1e-9)


def test_comparison_and_logical_inplace():
    x = np.array([[1.0, 2.0, NAN], [0.0, -1.0, 2.0]])
    for name in ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
                 "not_equal", "logical_and", "logical_or", "logical_xor"):
        m, t = mg.tensor(x), _t(x)
        getattr(m, name + "_")(mg.tensor([1.0, 2.0, 0.0]))
        getattr(t, name + "_")(_t([1.0, 2.0, 0.0]))
        same(m, t)
        mi, ti = mg.tensor([3, 1, 0]), _t([3, 1, 0])
        getattr(mi, name + "_")(mg.tensor([1]))
        getattr(ti, name + "_")(_t([1]))
        same(mi, ti)
    m, t = mg.tensor(x), _t(x)
    m.logical_not_()
    t.logical_not_()
    same(m, t)
    # in the graph the values pass no gradient back, and the tensor keeps requiring grad (torch)
    a_m, a_t = mg.tensor(x, requires_grad=True), _t(x).requires_grad_(True)
    y_m, y_t = a_m * 2, a_t * 2
    y_m.gt_(1.0)
    y_t.gt_(1.0)
    assert y_m.requires_grad == y_t.requires_grad
    (y_m * a_m).sum().backward()
    (y_t * a_t).sum().backward()
    np.testing.assert_allclose(a_m.grad.numpy(), a_t.grad.numpy())
    with pytest.raises(RuntimeError, match="can't be cast"):
        mg.tensor([True, False]).copysign_(mg.tensor([1, -2]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        mg.tensor([1, 2]).atan2_(mg.tensor([1, -2]))


def test_reduction_like_inplace_and_fill_diagonal():
    x = _rng(3).standard_normal((4, 4))
    for name, args in (("cumsum", (1,)), ("cumprod", (0,)), ("tril", (1,)), ("triu", (-1,)),
                       ("nan_to_num", ()), ("clamp_min", (0.0,)), ("clamp_max", (0.5,))):
        m, t = mg.tensor(x), _t(x)
        getattr(m, name + "_")(*args)
        getattr(t, name + "_")(*args)
        same(m, t)
    m, t = mg.tensor([[1, 2], [3, 4]], dtype=mg.int32), _t([[1, 2], [3, 4]], torch.int32)
    m.cumsum_(0)
    t.cumsum_(0)
    same(m, t)
    y = np.array([NAN, INF, -INF, 1.0])
    m, t = mg.tensor(y), _t(y)
    m.nan_to_num_(nan=0.5, posinf=9.0)
    t.nan_to_num_(nan=0.5, posinf=9.0)
    same(m, t)
    for shape, wrap in (((4, 4), False), ((7, 3), False), ((7, 3), True), ((3, 5), True), ((3, 3, 3), False)):
        m, t = mg.zeros(*shape), torch.zeros(*shape)
        m.fill_diagonal_(2.5, wrap=wrap)
        t.fill_diagonal_(2.5, wrap=wrap)
        same(m, t)
    with pytest.raises(ValueError, match="equal length"):
        mg.zeros(2, 3, 4).fill_diagonal_(1.0)
    with pytest.raises(ValueError):
        mg.zeros(3).fill_diagonal_(1.0)
    # the gradient of fill_diagonal_ in the graph: zero on the diagonal
    a_m, a_t = mg.tensor(x, requires_grad=True), _t(x).requires_grad_(True)
    (a_m * 1).fill_diagonal_(0.0).sum().backward()
    (a_t * 1).fill_diagonal_(0.0).sum().backward()
    np.testing.assert_array_equal(a_m.grad.numpy(), a_t.grad.numpy())


def test_float_power_inplace_needs_float64():
    m, t = mg.tensor([1.0, 2.0], dtype=mg.float64), _t([1.0, 2.0])
    m.float_power_(2)
    t.float_power_(2)
    same(m, t)
    for values in (np.array([1.0, 2.0], np.float32), np.array([1, 2])):
        assert torch_raises(lambda: _t(values).float_power_(2))
        with pytest.raises(RuntimeError, match="float64"):
            mg.tensor(values).float_power_(2)


def test_shape_inplace_ops_match_torch():
    x = _rng(6).standard_normal((2, 1, 3))
    for name, args in (("squeeze_", ()), ("squeeze_", (1,)), ("unsqueeze_", (0,)), ("unsqueeze_", (-1,)),
                       ("transpose_", (0, 2)), ("swapaxes_", (1, 2)), ("swapdims_", (0, 1))):
        m, t = mg.tensor(x), _t(x)
        assert getattr(m, name)(*args) is m
        getattr(t, name)(*args)
        same(m, t)
        a_m, a_t = mg.tensor(x, requires_grad=True), _t(x).requires_grad_(True)
        y_m, y_t = a_m * 2, a_t * 2
        getattr(y_m, name)(*args)
        getattr(y_t, name)(*args)
        c = _rng(1).standard_normal(tuple(y_t.shape))
        (y_m * mg.tensor(c)).sum().backward()
        (y_t * _t(c)).sum().backward()
        np.testing.assert_allclose(a_m.grad.numpy(), a_t.grad.numpy())
        with pytest.raises(RuntimeError, match="leaf"):
            getattr(mg.tensor(x, requires_grad=True), name)(*args)
    m, t = mg.tensor(x[0]), _t(x[0])
    m.t_()
    t.t_()
    same(m, t)
    with pytest.raises(ValueError):
        mg.zeros(2, 2, 2).t_()
    # a reshape keeps the memory: a view taken before still aliases the tensor
    base = mg.zeros(2, 3)
    row = base[0]
    base.unsqueeze_(0)
    base.add_(1.0)
    assert base.shape == (1, 2, 3) and row.tolist() == [1.0, 1.0, 1.0]
    # a transpose writes back to the memory it came from, as a torch view would
    src = mg.zeros(2, 3)
    part = src[0:2]
    part.t_()
    part.add_(mg.tensor([[1.0, 2.0]]))
    assert part.shape == (3, 2) and src.tolist() == [[1.0] * 3, [2.0] * 3]


def test_inplace_on_views_follows_the_existing_rules():
    base = mg.tensor(_rng(0).uniform(0.5, 1.5, (2, 3)), requires_grad=True)
    y = base * 1.0
    v = y[0]
    with pytest.raises(RuntimeError, match="view"):
        v.exp_()
    with mg.no_grad():
        t = base.detach()
        t.T.exp_()                          # writes back through the transpose's source
    np.testing.assert_allclose(base.detach().numpy(), np.exp(_rng(0).uniform(0.5, 1.5, (2, 3))))
    # exp saved its output, not h: changing h in place is fine (as in torch)
    a, ta = mg.tensor([0.5, 0.7], requires_grad=True), torch.tensor([0.5, 0.7], requires_grad=True)
    h, th = a * 1.0, ta * 1.0
    s, ts = h.exp(), th.exp()
    h.asin_()
    th.asin_()
    (s * h).sum().backward()
    (ts * th).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy().astype(np.float32), rtol=1e-6)
    # a value saved for backward, changed in place: backward raises
    h2 = a * 1.0
    s2 = h2.sinh()                         # sinh saved h2 itself
    h2.cos_()
    with pytest.raises(RuntimeError):
        s2.sum().backward()


# ------------------------------------------------------------------------------------------------
# reductions
# ------------------------------------------------------------------------------------------------

def _with_nans(shape, seed=0):
    x = _rng(seed).standard_normal(shape)
    if x.size:
        x.reshape(-1)[:: 3] = NAN
    return x


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (-1, True), ((0, 2), False), ((), True)])
def test_nansum_nanmean_count_nonzero(dim, keepdim):
    x = _with_nans((3, 4, 2))
    for dtype in (torch.float32, torch.float64):
        m, t = mg.tensor(x.astype(_np_dtype(dtype))), _t(x, dtype)
        same(mg.nansum(m, dim, keepdim), torch.nansum(t, dim, keepdim))
        same(m.nanmean(dim, keepdim), torch.nanmean(t, dim, keepdim))
    same(mg.count_nonzero(mg.tensor(x), dim), torch.count_nonzero(_t(x), dim))
    grads_match(lambda a: mg.nansum(a, dim, keepdim), lambda a: torch.nansum(a, dim, keepdim), [x])
    grads_match(lambda a: a.nanmean(dim, keepdim), lambda a: a.nanmean(dim, keepdim), [x], check=False)


def test_nan_reductions_edge_cases():
    for x in (np.zeros((0, 3)), np.array(NAN), np.full((2, 2), NAN), np.array(2.0)):
        same(mg.nansum(mg.tensor(x)), torch.nansum(_t(x)))
        with np.errstate(all="ignore"):
            same(mg.nanmean(mg.tensor(x), 0 if x.ndim else None), torch.nanmean(_t(x), 0 if x.ndim else None))
    ints = np.array([[1, 0, 3], [0, 0, 5]])
    same(mg.nansum(mg.tensor(ints), 1), torch.nansum(_t(ints), 1))
    same(mg.tensor(ints).nansum(dtype=mg.float64), torch.nansum(_t(ints), dtype=torch.float64))
    same(mg.count_nonzero(mg.tensor(ints > 0)), torch.count_nonzero(_t(ints > 0)))
    same(mg.tensor(np.array([0.0, NAN, -0.0])).count_nonzero(), torch.count_nonzero(_t([0.0, NAN, -0.0])))
    with pytest.raises(TypeError, match="floating"):
        mg.nanmean(mg.tensor(ints))
    with pytest.raises(np.exceptions.AxisError):
        mg.nansum(mg.ones(2, 3), 2)


def test_aminmax():
    x = np.array([[1.0, 5.0, 5.0], [-2.0, NAN, 0.0]])
    for dim, keepdim in ((None, False), (None, True), (0, False), (-1, True)):
        same(mg.aminmax(mg.tensor(x), dim=dim, keepdim=keepdim), torch.aminmax(_t(x), dim=dim,
                                                                               keepdim=keepdim))
        same(mg.tensor([[3, 1], [2, 2]]).aminmax(dim=dim, keepdim=keepdim),
             torch.aminmax(_t([[3, 1], [2, 2]]), dim=dim, keepdim=keepdim))
    r = mg.aminmax(mg.tensor([1.0, 2.0]))
    assert r.min.item() == 1.0 and r.max.item() == 2.0
    y = np.array([[1.0, 5.0, 5.0, 0.0], [-2.0, 3.0, 7.0, 7.0]])              # ties share the grad
    grads_match(lambda a: mg.aminmax(a, dim=1).max * 2 + mg.aminmax(a, dim=1).min,
                lambda a: torch.aminmax(a, dim=1).max * 2 + torch.aminmax(a, dim=1).min, [y], check=False)
    with pytest.raises(ValueError):
        mg.aminmax(mg.zeros(0))
    with pytest.raises(ValueError):
        mg.aminmax(mg.zeros(2, 0), dim=1)


INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_quantile_matches_torch(interpolation):
    x = _rng(2).standard_normal((3, 7))
    xn = x.copy()
    xn[1, 2] = NAN
    xn[2] = NAN
    qs = [0.0, 0.25, 0.3, 0.5, 0.9, 1.0]
    for dtype in (torch.float32, torch.float64):
        nd = _np_dtype(dtype)
        for fname in ("quantile", "nanquantile"):
            mfn, tfn = getattr(mg, fname), getattr(torch, fname)
            for data in (x, xn):
                for dim in (None, 0, 1, -1):
                    for keepdim in (False, True):
                        for q in (0.3, qs):
                            mq = mg.tensor(np.array(q, nd)) if isinstance(q, list) else q
                            tq = _t(q, dtype) if isinstance(q, list) else q
                            same(mfn(mg.tensor(data.astype(nd)), mq, dim, keepdim,
                                     interpolation=interpolation),
                                 tfn(_t(data, dtype), tq, dim, keepdim, interpolation=interpolation))
    same(mg.tensor(np.array(2.5)).quantile(0.5, interpolation=interpolation),
         torch.quantile(_t(2.5), 0.5, interpolation=interpolation))
    same(mg.quantile(mg.tensor([1.0, 2.0]), mg.tensor(0.5, dtype=mg.float32), interpolation=interpolation),
         torch.quantile(_t([1.0, 2.0], torch.float32), _t(0.5, torch.float32), interpolation=interpolation))
    grads_match(lambda a: mg.quantile(a, mg.tensor([0.1, 0.5, 0.8], dtype=mg.float64), 1,
                                      interpolation=interpolation),
                lambda a: torch.quantile(a, _t([0.1, 0.5, 0.8]), 1, interpolation=interpolation), [x])
    grads_match(lambda a: mg.nanquantile(a, 0.4, interpolation=interpolation),
                lambda a: torch.nanquantile(a, 0.4, interpolation=interpolation), [xn[:2]], check=False)


def test_quantile_errors():
    x = mg.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        mg.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        x.quantile(mg.tensor([-0.1, 0.5]))
    with pytest.raises(TypeError, match="same dtype"):
        mg.quantile(x, mg.tensor([0.5], dtype=mg.float64))
    with pytest.raises(TypeError, match="float or double"):
        mg.quantile(mg.tensor([1, 2]), 0.5)
    with pytest.raises(ValueError, match="non-empty"):
        mg.quantile(mg.zeros(0), 0.5)
    with pytest.raises(ValueError, match="interpolation"):
        mg.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(ValueError, match="1D"):
        mg.quantile(x, mg.tensor([[0.5]]))
    with pytest.raises(np.exceptions.AxisError):
        mg.quantile(x, 0.5, dim=1)


# ------------------------------------------------------------------------------------------------
# products
# ------------------------------------------------------------------------------------------------

def test_dot_vdot_mv_inner():
    r = _rng(7)
    a, b, mat = r.standard_normal(4), r.standard_normal(4), r.standard_normal((3, 4))
    grads_match(mg.dot, torch.dot, [a, b])
    grads_match(mg.vdot, torch.vdot, [a, b])
    grads_match(mg.mv, torch.mv, [mat, a])
    for sa, sb in (((3, 4), (5, 4)), ((2, 3, 4), (4,)), ((), (2, 3)), ((4,), (4,)), ((0, 4), (2, 4))):
        u, v = r.standard_normal(sa), r.standard_normal(sb)
        grads_match(mg.inner, torch.inner, [u, v], check=u.size > 0 and v.size > 0)
    same(mg.dot(mg.tensor([1, 2]), mg.tensor([3, 4])), torch.dot(_t([1, 2]), _t([3, 4])))
    same(mg.tensor([1, 2, 3]).inner(mg.tensor([[1, 0, 1]])), _t([1, 2, 3]).inner(_t([[1, 0, 1]])))
    same(mg.zeros(0).dot(mg.zeros(0)), torch.zeros(0).dot(torch.zeros(0)))
    with pytest.raises(ValueError, match="1D"):
        mg.dot(mg.ones(2, 2), mg.ones(2, 2))
    with pytest.raises(ValueError, match="inconsistent"):
        mg.dot(mg.ones(3), mg.ones(2))
    with pytest.raises(TypeError, match="same dtype"):
        mg.dot(mg.tensor([1, 2]), mg.tensor([1.0, 2.0]))
    with pytest.raises(ValueError):
        mg.mv(mg.ones(2, 3), mg.ones(2))
    with pytest.raises(ValueError):
        mg.inner(mg.ones(2, 3), mg.ones(2))


@pytest.mark.parametrize("sa,sb,dims", [((3, 4, 5), (4, 5, 2), 2), ((3, 4), (4, 2), 1), ((2, 3), (4,), 0),
                                        ((3, 4, 5), (5, 2, 3), ([0, 2], [2, 0])), ((2, 3), (3, 2), ([1],
                                                                                                    [0])),
                                        ((2, 3), (2, 3), ([0, 1], [0, 1]))])
def test_tensordot(sa, sb, dims):
    r = _rng(8)
    grads_match(lambda a, b: mg.tensordot(a, b, dims), lambda a, b: torch.tensordot(a, b, dims),
                [r.standard_normal(sa), r.standard_normal(sb)])


def test_tensordot_errors_and_ints():
    same(mg.tensordot(mg.tensor([[1, 2], [3, 4]]), mg.tensor([[1, 0], [0, 1]]), 1),
         torch.tensordot(_t([[1, 2], [3, 4]]), _t([[1, 0], [0, 1]]), 1))
    with pytest.raises(ValueError, match="match"):
        mg.tensordot(mg.ones(2, 3), mg.ones(2, 3), 1)
    with pytest.raises(ValueError, match="same length"):
        mg.tensordot(mg.ones(2, 3), mg.ones(2, 3), ([0, 1], [0]))
    with pytest.raises(ValueError):
        mg.tensordot(mg.ones(2), mg.ones(2), -1)


def test_kron_cross_trace():
    r = _rng(9)
    for sa, sb in (((2, 3), (3, 2)), ((2,), (2, 3)), ((2, 1, 2), (3,)), ((), (2,)), ((0, 2), (2, 2))):
        grads_match(mg.kron, torch.kron, [r.standard_normal(sa), r.standard_normal(sb)],
                    check=r is not None and 0 not in sa)
    same(mg.kron(mg.tensor([1, 2]), mg.tensor([[1, 10]])), torch.kron(_t([1, 2]), _t([[1, 10]])))
    for sa, sb, dim in (((4, 3), (4, 3), None), ((3, 2), (3, 1), 0), ((2, 3, 3), (1, 3, 3), -1),
                        ((2, 3, 3), (2, 3, 3), 1)):
        a, b = r.standard_normal(sa), r.standard_normal(sb)
        grads_match(lambda u, v: mg.cross(u, v, dim), lambda u, v: torch.linalg.cross(u, v, dim=dim)
                    if dim is not None else torch.cross(u, v, dim=next(i for i, s in enumerate(
                        np.broadcast_shapes(sa, sb)) if s == 3)), [a, b])
    same(mg.tensor([1, 0, 0]).cross(mg.tensor([0, 1, 0])), torch.linalg.cross(_t([1, 0, 0]), _t([0, 1, 0])))
    with pytest.raises(ValueError, match="size 3"):
        mg.cross(mg.ones(2, 4), mg.ones(2, 4))
    with pytest.raises(ValueError, match="same number of dimensions"):
        mg.cross(mg.ones(3, 3), mg.ones(3))
    with pytest.raises(ValueError, match="does not have size 3"):
        mg.cross(mg.ones(3, 4), mg.ones(3, 4), dim=1)
    for shape in ((3, 3), (2, 5), (4, 2), (0, 3)):
        grads_match(mg.trace, torch.trace, [r.standard_normal(shape)], check=0 not in shape)
    same(mg.tensor([[1, 2], [3, 4]], dtype=mg.int32).trace(), torch.trace(_t([[1, 2], [3, 4]], torch.int32)))
    with pytest.raises(ValueError, match="matrix"):
        mg.trace(mg.ones(3))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, float("inf")])
def test_cdist(p):
    r = _rng(10)
    for sa, sb in (((4, 3), (5, 3)), ((2, 4, 3), (2, 5, 3)), ((2, 4, 3), (5, 3)), ((3, 2), (0, 2))):
        a, b = r.standard_normal(sa), r.standard_normal(sb)
        grads_match(lambda u, v: mg.cdist(u, v, p), lambda u, v: torch.cdist(u, v, p), [a, b],
                    check=b.size > 0 and p != float("inf"))
    a = r.standard_normal((3, 2))
    grads_match(lambda u, v: mg.cdist(u, v, p), lambda u, v: torch.cdist(u, v, p), [a, a[:2]], check=False)
    with pytest.raises(ValueError, match="columns"):
        mg.cdist(mg.ones(2, 3), mg.ones(2, 4))
    with pytest.raises(TypeError, match="floating"):
        mg.cdist(mg.tensor([[1, 2]]), mg.tensor([[1, 2]]))


def test_add_products():
    r = _rng(11)
    inp, m1, m2 = r.standard_normal((3,)), r.standard_normal((2, 4)), r.standard_normal((4, 3))
    v1, v2 = r.standard_normal(2), r.standard_normal(3)
    b1, b2 = r.standard_normal((5, 2, 4)), r.standard_normal((5, 4, 3))
    kw = dict(beta=0.5, alpha=2.0)

    def both(name, **kw):
        return (lambda *args: getattr(mg, name)(*args, **kw),
                lambda *args: getattr(torch, name)(*args, **kw))

    grads_match(*both("addmm", **kw), [inp, m1, m2])
    grads_match(*both("addmv", **kw), [inp[:2], m1, r.standard_normal(4)])
    grads_match(*both("addr", **kw), [r.standard_normal((2, 1)), v1, v2])
    grads_match(*both("addbmm", **kw), [inp, b1, b2])
    grads_match(*both("addbmm"), [r.standard_normal((2, 3)), b1, b2])
    grads_match(lambda i, a, b: i.baddbmm(a, b, alpha=3), lambda i, a, b: i.baddbmm(a, b, alpha=3),
                [r.standard_normal((5, 2, 3)), b1, b2])
    t1, t2 = r.standard_normal((2, 3)), r.uniform(0.5, 2, (3,))
    grads_match(*both("addcmul", value=-0.5), [inp, t1, t2])
    grads_match(lambda i, a, b: i.addcdiv(a, b, value=2), lambda i, a, b: i.addcdiv(a, b, value=2),
                [inp, t1, t2])
    # beta = 0 ignores the input's NaN and inf, as torch
    nan_in = np.full(3, NAN)
    same(mg.addmv(mg.tensor(nan_in[:2]), mg.tensor(m1), mg.tensor(r.standard_normal(4)), beta=0) * 0,
         torch.zeros(2, dtype=torch.float64))
    same(mg.addr(mg.tensor([[1, 2, 3]]), mg.tensor([1, 2]), mg.tensor([0, 1, 2])),
         torch.addr(_t([[1, 2, 3]]), _t([1, 2]), _t([0, 1, 2])))
    same(mg.addcmul(mg.tensor([1, 2]), mg.tensor([3, 4]), mg.tensor([5, 6]), value=2),
         torch.addcmul(_t([1, 2]), _t([3, 4]), _t([5, 6]), value=2))
    with pytest.raises(TypeError, match="addcdiv"):
        mg.addcdiv(mg.ones(2), mg.tensor([1, 2]), mg.tensor([1, 2]))
    with pytest.raises(ValueError):
        mg.addmv(mg.ones(3), mg.ones(2, 4), mg.ones(4))
    with pytest.raises(ValueError):
        mg.addbmm(mg.ones(2, 3), mg.ones(5, 2, 4), mg.ones(4, 4, 3))
    # the in-place forms
    for name, args_m, args_t in (("addmm_", (mg.tensor(m1), mg.tensor(m2)), (_t(m1), _t(m2))),
                                 ("addbmm_", (mg.tensor(b1), mg.tensor(b2)), (_t(b1), _t(b2)))):
        m, t = mg.tensor(np.ones((2, 3))), torch.ones(2, 3, dtype=torch.float64)
        getattr(m, name)(*args_m, beta=0.5)
        getattr(t, name)(*args_t, beta=0.5)
        same(m, t)
    m, t = mg.ones(2, dtype=mg.float64), torch.ones(2, dtype=torch.float64)
    m.addmv_(mg.tensor(m1), mg.tensor(r.standard_normal(4)))
    with pytest.raises(ValueError, match="shape"):
        mg.ones(3, dtype=mg.float64).addcmul_(mg.tensor(t1), mg.tensor(t2))


# ------------------------------------------------------------------------------------------------
# shape and indexing
# ------------------------------------------------------------------------------------------------

def test_diag_family():
    r = _rng(12)
    for shape in ((4,), (3, 4), (2, 3, 4), (0,), ()):
        x = r.standard_normal(shape)
        for offset, d1, d2 in ((0, -2, -1), (1, 0, 2), (-2, 2, 0), (0, 1, 0)):
            if len(shape) + 1 <= max(d1, d2, -d1 - 1, -d2 - 1):
                continue
            grads_match(lambda a: mg.diag_embed(a, offset, d1, d2), lambda a: torch.diag_embed(a, offset,
                                                                                               d1, d2),
                        [x], check=x.size > 0)
        for k in (-2, 0, 1, 5):
            if len(shape) in (1, 2):
                grads_match(lambda a: mg.diag(a, k), lambda a: torch.diag(a, k), [x], check=x.size > 0)
            grads_match(lambda a: a.diagflat(k), lambda a: torch.diagflat(a, k), [x], check=x.size > 0)
    same(mg.diag(mg.tensor([1, 2])), torch.diag(_t([1, 2])))
    same(mg.tensor([True, False]).diag_embed(), torch.diag_embed(_t([True, False])))
    with pytest.raises(ValueError):
        mg.diag(mg.ones(2, 2, 2))
    with pytest.raises(ValueError, match="identical"):
        mg.diag_embed(mg.ones(3), 0, 0, -2)


def test_diff():
    r = _rng(13)
    x = r.standard_normal((3, 5))
    for n, dim, pre, app in ((1, -1, None, None), (2, 0, r.standard_normal((2, 5)), None),
                             (3, 1, None, r.standard_normal((3, 2))), (0, 0, None, None), (9, 1, None, None),
                             (1, 1, r.standard_normal((3, 1)), r.standard_normal((3, 1)))):
        def fm(a, n=n, dim=dim, pre=pre, app=app):
            return mg.diff(a, n, dim, None if pre is None else mg.tensor(pre),
                           None if app is None else mg.tensor(app))

        def ft(a, n=n, dim=dim, pre=pre, app=app):
            return torch.diff(a, n, dim, None if pre is None else _t(pre), None if app is None else _t(app))

        grads_match(fm, ft, [x], check=n not in (0, 9))
    for values in (np.array([1, 4, 9, 16]), np.array([True, False, False, True])):
        same(mg.tensor(values).diff(), torch.diff(_t(values)))
        same(mg.diff(mg.tensor(values), 2), torch.diff(_t(values), 2))
    same(mg.diff(mg.zeros(0)), torch.diff(torch.zeros(0)))
    with pytest.raises(ValueError, match="at least 1"):
        mg.diff(mg.tensor(1.0))
    with pytest.raises(ValueError):
        mg.diff(mg.ones(3), prepend=mg.ones(1, 1))


def test_splits():
    x = np.arange(60.0).reshape(3, 4, 5)
    for spec, dim in ((3, 1), (4, 2), (7, 0), ([1, 3], 2), ([0, 2, 2, 5], 1), ([4, 2], 2), ([-2], 2),
                      (mg.tensor([1, 3]), 1), (mg.tensor(2), 2)):
        tspec = _t(spec.numpy()) if isinstance(spec, mg.Tensor) else spec
        same(mg.tensor_split(mg.tensor(x), spec, dim), torch.tensor_split(_t(x), tspec, dim))
    same(mg.tensor(x).split_with_sizes([1, 3], 1), _t(x).split_with_sizes([1, 3], 1))
    for fn, arg in (("hsplit", 2), ("hsplit", [1, 3]), ("vsplit", 3), ("vsplit", [1]), ("dsplit", 5),
                    ("dsplit", [2, 3])):
        same(getattr(mg, fn)(mg.tensor(x), arg), getattr(torch, fn)(_t(x), arg))
        same(getattr(mg.tensor(x), fn)(arg), getattr(_t(x), fn)(arg))
    same(mg.hsplit(mg.arange(6), 3), torch.hsplit(torch.arange(6), 3))
    # gradients through the pieces (some unused)
    grads_match(lambda a: mg.tensor_split(a, [1, 3], 2)[1] * 2, lambda a: torch.tensor_split(a, [1, 3],
                                                                                             2)[1] * 2,
                [x])
    grads_match(lambda a: mg.cat(mg.tensor_split(a, 3, 1)[::2], 1),
                lambda a: torch.cat(torch.tensor_split(a, 3, 1)[::2], 1), [x])
    with pytest.raises(ValueError, match="divisible"):
        mg.hsplit(mg.ones(2, 6), 4)
    with pytest.raises(ValueError, match="at least 2"):
        mg.vsplit(mg.ones(6), 2)
    with pytest.raises(ValueError, match="at least 3"):
        mg.dsplit(mg.ones(2, 6), 2)
    with pytest.raises(ValueError, match="larger than 0"):
        mg.tensor_split(mg.ones(3), 0)
    with pytest.raises(ValueError, match="add up"):
        mg.ones(3).split_with_sizes([1, 1])
    with pytest.raises(TypeError):
        mg.tensor_split(mg.ones(3), mg.tensor([1.0]))


def test_rot90_flips_take_unfold():
    r = _rng(14)
    x = r.standard_normal((2, 3, 4))
    for k, dims in ((1, (0, 1)), (2, (1, 2)), (3, (2, 0)), (-1, (0, 2)), (4, (0, 1)), (5, (-1, -2))):
        grads_match(lambda a: mg.rot90(a, k, dims), lambda a: torch.rot90(a, k, dims), [x])
    grads_match(mg.fliplr, torch.fliplr, [x])
    grads_match(mg.flipud, torch.flipud, [x[0]])
    same(mg.tensor([[1, 2], [3, 4]]).rot90(), torch.rot90(_t([[1, 2], [3, 4]])))
    with pytest.raises(ValueError, match="different"):
        mg.rot90(mg.tensor(x), 1, (0, 0))
    with pytest.raises(ValueError, match="rotation dims"):
        mg.rot90(mg.tensor(x), 1, (0, 1, 2))
    with pytest.raises(ValueError):
        mg.fliplr(mg.ones(3))
    with pytest.raises(ValueError):
        mg.flipud(mg.tensor(1.0))
    idx = np.array([[0, -1, 5], [23, 5, 5]])                   # repeats accumulate in the gradient
    grads_match(lambda a: mg.take(a, mg.tensor(idx)), lambda a: torch.take(a, _t(idx)), [x])
    same(mg.tensor(np.array(7.0)).take(mg.tensor([0, 0])), torch.take(_t(7.0), _t([0, 0])))
    same(mg.take(mg.tensor(x), mg.tensor(np.zeros((0, 2), np.int64))), torch.take(_t(x), torch.zeros(0,
                                                                                                     2).long()))
    with pytest.raises(IndexError, match="out of range"):
        mg.take(mg.tensor(x), mg.tensor([24]))
    with pytest.raises(TypeError):
        mg.take(mg.tensor(x), mg.tensor([1.0]))
    for dim, size, step in ((0, 1, 1), (1, 2, 1), (2, 2, 3), (-1, 4, 1), (2, 0, 1), (2, 3, 2)):
        grads_match(lambda a: a.unfold(dim, size, step), lambda a: a.unfold(dim, size, step), [x],
                    check=size > 0)
    same(mg.tensor(np.array(5.0)).unfold(0, 1, 1), _t(5.0).unfold(0, 1, 1))
    same(mg.arange(7).unfold(0, 3, 2), torch.arange(7).unfold(0, 3, 2))
    with pytest.raises(ValueError, match="maximum size"):
        mg.arange(3.0).unfold(0, 4, 1)
    with pytest.raises(ValueError, match="step"):
        mg.arange(3.0).unfold(0, 2, 0)


def test_scatter_family():
    r = _rng(15)
    x = r.standard_normal((2, 3, 4))
    grads_match(lambda a, s: mg.select_scatter(a, s, 1, -1), lambda a, s: torch.select_scatter(a, s, 1, -1),
                [x, r.standard_normal((2, 4))])
    grads_match(lambda a, s: a.slice_scatter(s, 2, 1, None, 2), lambda a, s: a.slice_scatter(s, 2, 1,
                                                                                             None, 2),
                [x, r.standard_normal((2, 3, 2))])
    grads_match(lambda a, s: mg.slice_scatter(a, s), lambda a, s: torch.slice_scatter(a, s), [x, x * 2])
    for offset, d1, d2 in ((0, 1, 2), (1, 0, 2), (-1, 2, 1), (0, 0, 1)):
        src = torch.diagonal(_t(x), offset, d1, d2).numpy() + 1
        grads_match(lambda a, s: mg.diagonal_scatter(a, s, offset, d1, d2),
                    lambda a, s: torch.diagonal_scatter(a, s, offset, d1, d2), [x, src])
    same(mg.select_scatter(mg.zeros(2, 3, dtype=mg.int64), mg.tensor([1, 2]), 1, 0),
         torch.select_scatter(torch.zeros(2, 3, dtype=torch.int64), _t([1, 2]), 1, 0))
    with pytest.raises(ValueError, match="size equal"):
        mg.select_scatter(mg.zeros(2, 3), mg.ones(1), 1, 0)
    with pytest.raises(IndexError):
        mg.select_scatter(mg.zeros(2, 3), mg.ones(2), 1, 3)
    with pytest.raises(ValueError, match="size equal"):
        mg.slice_scatter(mg.zeros(4), mg.ones(3), 0, 0, 2)
    with pytest.raises(ValueError, match="size equal"):
        mg.diagonal_scatter(mg.zeros(3, 3), mg.ones(2))


def test_index_put_and_masked_scatter():
    r = _rng(16)
    x = r.standard_normal((3, 4))
    i0, i1 = np.array([0, 0, 2, 1]), np.array([1, 1, 3, -1])
    for acc in (False, True):
        vals = r.standard_normal(4)
        m = mg.index_put(mg.tensor(x), (mg.tensor(i0), mg.tensor(i1)), mg.tensor(vals), acc)
        t = torch.index_put(_t(x), (_t(i0), _t(i1)), _t(vals), acc)
        same(m, t)
        uniq = (np.array([0, 2, 1]), np.array([1, 3, 0]))            # no repeats: grads are defined
        grads_match(lambda a, v: a.index_put((mg.tensor(uniq[0]), mg.tensor(uniq[1])), v, acc),
                    lambda a, v: a.index_put((_t(uniq[0]), _t(uniq[1])), v, acc), [x, vals[:3]])
        grads_match(lambda a, v: a.index_put((mg.tensor(i0),), v,
                                             True) if acc else a.index_put((mg.tensor(i0[1:]),), v),
                    lambda a, v: a.index_put((_t(i0),), v, True) if acc else a.index_put((_t(i0[1:]),), v),
                    [x, r.standard_normal(4)])
    mask = x > 0
    m, t = mg.tensor(x), _t(x)
    m.index_put_((mg.tensor(mask),), mg.tensor(0.0, dtype=mg.float64))
    t.index_put_((_t(mask),), _t(0.0))
    same(m, t)
    m, t = mg.zeros(5), torch.zeros(5)
    m.index_put_((mg.tensor([1, 1, 3]),), mg.tensor(1.0), accumulate=True)
    t.index_put_((_t([1, 1, 3]),), _t(1.0, torch.float32), accumulate=True)
    same(m, t)
    src = r.standard_normal(20)
    for mshape in ((3, 4), (4,), (1, 4)):
        mk = r.random(mshape) < 0.5
        grads_match(lambda a, s: mg.masked_scatter(a, mg.tensor(mk), s),
                    lambda a, s: torch.masked_scatter(a, _t(mk), s), [x, src])
    m, t = mg.tensor(x), _t(x)
    m.masked_scatter_(mg.tensor(mask), mg.tensor(src))
    t.masked_scatter_(_t(mask), _t(src))
    same(m, t)
    with pytest.raises(ValueError, match="source"):
        mg.masked_scatter(mg.zeros(3), mg.tensor([True, False, True]), mg.tensor([1.0]))
    with pytest.raises(TypeError, match="bool"):
        mg.masked_scatter(mg.zeros(3), mg.tensor([1, 0, 1]), mg.ones(3))
    with pytest.raises(IndexError):
        mg.index_put(mg.zeros(3), (mg.tensor([3]),), mg.tensor(1.0))
    with pytest.raises(TypeError, match="tuple"):
        mg.index_put(mg.zeros(3), mg.tensor([1]), mg.tensor(1.0))
    with pytest.raises(TypeError, match="dtype"):
        mg.index_put(mg.zeros(3), (mg.tensor([1]),), mg.tensor(1.0, dtype=mg.float64))


def test_meshgrid_searchsorted_bucketize():
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]), np.array([6.0, 7.0, 8.0, 9.0])
    for indexing in ("ij", "xy"):
        same(mg.meshgrid(mg.tensor(a), mg.tensor(b), mg.tensor(c), indexing=indexing),
             torch.meshgrid(_t(a), _t(b), _t(c), indexing=indexing))
        same(mg.meshgrid([mg.tensor(a), mg.tensor(np.array(2.0))], indexing=indexing),
             torch.meshgrid([_t(a), _t(2.0)], indexing=indexing))
        grads_match(lambda u, v: mg.meshgrid(u, v, indexing=indexing)[0] * mg.meshgrid(u, v,
                                                                                       indexing=indexing)[1],
                    lambda u, v: torch.meshgrid(u, v, indexing=indexing)[0] * torch.meshgrid(u, v,
                                                                                              indexing=indexing)[1],
                    [a, b])
    with pytest.raises(ValueError, match="0D or 1D"):
        mg.meshgrid(mg.ones(2, 2))
    with pytest.raises(ValueError, match="indexing"):
        mg.meshgrid(mg.ones(2), indexing="yx")
    seq = np.array([1.0, 3.0, 3.0, 5.0])           # (a NaN boundary is undefined behaviour in torch)
    vals = np.array([[0.0, 3.0, 4.0], [6.0, NAN, 1.0]])
    for right in (False, True):
        same(mg.searchsorted(mg.tensor(seq), mg.tensor(vals), right=right),
             torch.searchsorted(_t(seq), _t(vals), right=right))
        same(mg.bucketize(mg.tensor(vals), mg.tensor(seq), right=right),
             torch.bucketize(_t(vals), _t(seq), right=right))
    rows = np.array([[1, 3, 5], [2, 4, 6]])
    same(mg.searchsorted(mg.tensor(rows), mg.tensor([[3, 6], [0, 5]]), side="right", out_int32=True),
         torch.searchsorted(_t(rows), _t([[3, 6], [0, 5]]), side="right", out_int32=True))
    same(mg.searchsorted(mg.tensor([1, 3, 5]), 3), torch.searchsorted(_t([1, 3, 5]), 3))
    same(mg.bucketize(3, mg.tensor([1, 3, 5])), torch.bucketize(3, _t([1, 3, 5])))
    order = np.array([2, 0, 1])
    same(mg.searchsorted(mg.tensor([5, 1, 3]), mg.tensor([2, 4]), sorter=mg.tensor(order)),
         torch.searchsorted(_t([5, 1, 3]), _t([2, 4]), sorter=_t(order)))
    with pytest.raises(ValueError, match="opposites"):
        mg.searchsorted(mg.tensor([1, 2]), mg.tensor([1]), right=True, side="left")
    with pytest.raises(ValueError, match="leading dims"):
        mg.searchsorted(mg.tensor(rows), mg.tensor([[1], [2], [3]]))
    with pytest.raises(ValueError, match="1 dimension"):
        mg.bucketize(mg.tensor([1]), mg.tensor(rows))


def test_equal_isclose_and_module_functions():
    a = np.array([1.0, NAN, INF, -INF, 1.0 + 1e-9, 0.0])
    b = np.array([1.0, NAN, INF, INF, 1.0, 1e-9])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 1e-8}, {"rtol": 1e-12, "atol": 0.0}):
        same(mg.isclose(mg.tensor(a), mg.tensor(b), **kw), torch.isclose(_t(a), _t(b), **kw))
        same(mg.tensor(a).isclose(mg.tensor(b[:1]), **kw), _t(a).isclose(_t(b[:1]), **kw))
    same(mg.isclose(mg.tensor([1, 2]), mg.tensor([1, 3])), torch.isclose(_t([1, 2]), _t([1, 3])))
    with pytest.raises(TypeError, match="did not match"):
        mg.isclose(mg.tensor([1, 2]), mg.tensor([1.0, 2.0]))
    for u, v in (([1, 2], [1, 2]), ([1, 2], [[1, 2]]), ([1.0, NAN], [1.0, NAN]), ([1, 2], [1, 3]), ([], [])):
        assert mg.equal(mg.tensor(u), mg.tensor(v)) == torch.equal(_t(u), _t(v))
        assert mg.tensor(u).equal(mg.tensor(v)) is torch.equal(_t(u), _t(v))
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = mg.clone(x)
    assert y.requires_grad and y.data is not x.data
    same(mg.ravel(mg.tensor([[1, 2], [3, 4]])), torch.ravel(_t([[1, 2], [3, 4]])))
    same(mg.argwhere(mg.tensor([[0, 1], [2, 0]])), torch.argwhere(_t([[0, 1], [2, 0]])))
    same(mg.broadcast_tensors(mg.ones(2, 1), mg.zeros(3)), torch.broadcast_tensors(torch.ones(2, 1),
                                                                                   torch.zeros(3)))
    assert mg.broadcast_shapes((2, 1), (3,), 1) == tuple(torch.broadcast_shapes((2, 1), (3,), 1))
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in ((), (3,), (2, 3), (2, 3, 4)):
            same(getattr(mg, fn)(mg.zeros(shape)), getattr(torch, fn)(torch.zeros(shape)))
    parts = [np.arange(3.0), np.arange(3.0, 6.0)]
    for fn in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
        same(getattr(mg, fn)([mg.tensor(p) for p in parts]), getattr(torch, fn)([_t(p) for p in parts]))
    same(mg.msort(mg.tensor([[3, 1], [2, 5]])), torch.msort(_t([[3, 1], [2, 5]])))
    same(mg.rsub(mg.tensor([1.0, 2.0]), 5.0, alpha=2), torch.rsub(_t([1.0, 2.0], torch.float32), 5.0,
                                                                  alpha=2))
    same(mg.clamp_min(mg.tensor([1.0, -2.0]), 0.0), torch.clamp_min(_t([1.0, -2.0], torch.float32), 0.0))
    same(mg.isin(mg.tensor([1, 2, 3]), mg.tensor([2, 5])), torch.isin(_t([1, 2, 3]), _t([2, 5])))
    same(mg.logical_xor(mg.tensor([1, 0]), mg.tensor([True, True])), torch.logical_xor(_t([1, 0]),
                                                                                       _t([True, True])))
    for name in ("isclose", "meshgrid", "diag", "searchsorted", "bucketize", "cdist", "tensordot", "kron",
                 "clone", "equal", "quantile", "nanquantile", "dot", "inner", "take", "cross", "trace"):
        assert hasattr(mg, name), name


def test_sum_to_size_bitwise_and_small_methods():
    x = _rng(17).standard_normal((2, 3, 4))
    grads_match(lambda a: a.sum_to_size(3, 1), lambda a: a.sum_to_size(3, 1), [x])
    grads_match(lambda a: a.sum_to_size((1, 3, 4)), lambda a: a.sum_to_size((1, 3, 4)), [x])
    with pytest.raises(ValueError, match="expandable"):
        mg.tensor(x).sum_to_size(2, 4)
    i, j = np.array([12, -3, 7]), np.array([10, 5, -1])
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        same(getattr(mg.tensor(i), name)(mg.tensor(j)), getattr(_t(i), name)(_t(j)))
        m, t = mg.tensor(i), _t(i)
        getattr(m, name + "_")(mg.tensor(j))
        getattr(t, name + "_")(_t(j))
        same(m, t)
    same(mg.tensor(i).bitwise_not(), _t(i).bitwise_not())
    same(mg.tensor([True, False]).bitwise_not(), _t([True, False]).bitwise_not())
    with pytest.raises(TypeError):
        mg.ones(2).bitwise_and(mg.ones(2))
    m = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert np.array_equal(m.H.numpy(), m.t().numpy()) and np.array_equal(m.mH.numpy(), m.mT.numpy())
    assert np.array_equal(m.adjoint().numpy(), m.mT.numpy())
    assert m.conj() is m and m.resolve_conj() is m and m.resolve_neg() is m and not m.is_conj()
    assert mg.tensor([3]).is_nonzero() and not mg.tensor([0.0]).is_nonzero()
    with pytest.raises(RuntimeError):
        mg.ones(2).is_nonzero()
    assert m.is_same_size(mg.zeros(2, 2)) and not m.is_same_size(mg.zeros(4))
    assert m.get_device() == torch.ones(1).get_device() == -1


# ------------------------------------------------------------------------------------------------
# metadata
# ------------------------------------------------------------------------------------------------

def test_metadata_matches_torch():
    for shape in ((), (3,), (3, 4), (2, 0, 3), (2, 3, 4)):
        m, t = mg.zeros(shape), torch.zeros(shape)
        assert m.stride() == t.stride()
        for d in range(-len(shape), len(shape)):
            assert m.stride(d) == t.stride(d)
        assert m.storage_offset() == t.storage_offset() == 0
        assert m.nbytes == t.nbytes and m.itemsize == t.itemsize
    with pytest.raises(IndexError):
        mg.zeros(2, 3).stride(2)
    base, tbase = mg.zeros(3, 4), torch.zeros(3, 4)
    assert base[1].storage_offset() == tbase[1].storage_offset() == 4
    assert base[1:3].storage_offset() == tbase[1:3].storage_offset()
    assert base[2].data_ptr() == base.data_ptr() + 8 * base.itemsize
    assert base.data_ptr() == base.data.ctypes.data
    for np_dtype, tdtype in ((mg.float32, torch.float32), (mg.float64, torch.float64), (mg.int64,
                                                                                        torch.int64),
                             (mg.int32, torch.int32), (mg.int16, torch.int16), (mg.int8, torch.int8),
                             (mg.uint8, torch.uint8), (mg.bool_, torch.bool)):
        m, t = mg.zeros(2, dtype=np_dtype), torch.zeros(2, dtype=tdtype)
        assert m.is_signed() == t.is_signed(), np_dtype
        assert m.type() == t.type(), (m.type(), t.type())
        assert m.itemsize == t.itemsize and m.nbytes == t.nbytes
        assert m.is_complex() is t.is_complex() is False
        assert m.is_floating_point() == t.is_floating_point()
    m = mg.tensor([1.5, 2.5])
    assert m.type(mg.float64).dtype == mg.float64
    assert m.type("torch.LongTensor").tolist() == [1, 2]
    with pytest.raises(ValueError):
        m.type("torch.HalfTensor")
    assert m.is_cpu and not m.is_cuda and not m.is_meta and not m.is_sparse and not m.is_quantized
    a = mg.tensor([1.0], requires_grad=True)
    b = a * 2
    assert not a.retains_grad and not b.retains_grad
    b.retain_grad()
    assert b.retains_grad
    ta = torch.tensor([1.0], requires_grad=True)
    tb = ta * 2
    tb.retain_grad()
    assert tb.retains_grad and not ta.retains_grad


# ------------------------------------------------------------------------------------------------
# further functions: polygamma, mvlgamma, angle, frexp, gcd / lcm, shifts, nextafter, dist, cov,
# corrcoef, nanmedian, renorm, put, index_reduce, prelu, random in-place fills, detach_
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_polygamma(n):
    x = np.array([-2.5, -0.3, 0.3, 1.7, 5.0, 40.0, NAN, -INF, -1e-3])
    for dtype in (torch.float32, torch.float64):
        same(mg.polygamma(n, mg.tensor(x.astype(_np_dtype(dtype)))), torch.polygamma(n, _t(x, dtype)),
             rtol=1e-9 if n != 1 else 1e-8)
    poles = np.array([0.0, -1.0, -3.0])
    same(mg.polygamma(n, mg.tensor(poles)), torch.polygamma(n, _t(poles)) if n != 1 else torch.full((3,), INF,
         dtype=torch.float64))            # (torch's trigamma is 6.6e32, not inf, at -1)
    same(mg.tensor([1, 2]).polygamma(n), _t([1, 2]).polygamma(n), rtol=1e-6)
    grads_match(lambda a: mg.polygamma(n, a), lambda a: torch.polygamma(n, a),
                [_rng(n).uniform(0.4, 4.0, (2, 3))], rtol=1e-7)
    m, t = mg.tensor(x[2:6]), _t(x[2:6])
    m.polygamma_(n)
    t.polygamma_(n)
    same(m, t, rtol=1e-8)
    if n:
        assert mg.polygamma(n, mg.tensor([INF])).item() == 0.0      # the limit (torch: nan for n >= 2)
    with pytest.raises(ValueError, match="negative"):
        mg.polygamma(-1, mg.tensor([1.0]))


def test_mvlgamma_angle_frexp():
    x = np.array([[2.5, 3.0], [1.2, 7.5]])
    for p in (1, 2, 3):
        grads_match(lambda a: mg.mvlgamma(a, p), lambda a: torch.mvlgamma(a, p), [x])
        same(mg.tensor(x).mvlgamma(p), _t(x).mvlgamma(p))
    with pytest.raises(ValueError, match=r"\(p-1\)/2"):
        mg.mvlgamma(mg.tensor([0.5]), 3)
    with pytest.raises(ValueError):
        mg.mvlgamma(mg.tensor([5.0]), 0)
    for values in (np.array([-1.0, 0.0, -0.0, 2.0, NAN, -INF]), np.array([-1, 2, 0]), np.array([True])):
        same(mg.angle(mg.tensor(values)), torch.angle(_t(values)))
    grads_match(mg.angle, torch.angle, [np.array([-1.0, 2.0, -3.0])], check=False)
    v = np.array([8.0, 0.3, 0.0, -3.0, INF, -INF, NAN, 1e-310])
    for dtype in (torch.float32, torch.float64):
        same(mg.frexp(mg.tensor(v.astype(_np_dtype(dtype)))), torch.frexp(_t(v, dtype)))
    r = mg.tensor(v).frexp()
    assert r.mantissa.dtype == mg.float64 and r.exponent.dtype == mg.int32
    grads_match(lambda a: mg.frexp(a).mantissa, lambda a: torch.frexp(a).mantissa,
                [np.array([8.0, 0.3, -3.0, 100.0])], check=False)
    with pytest.raises(TypeError, match="floating"):
        mg.frexp(mg.tensor([1]))


def test_integer_functions_and_nextafter():
    a, b = np.array([-4, 0, 6, 15, 7]), np.array([6, 0, -9, 10, 0])
    for dtype in (torch.int64, torch.int32, torch.int16):
        nd = _np_dtype(dtype)
        for name in ("gcd", "lcm"):
            same(getattr(mg, name)(mg.tensor(a.astype(nd)), mg.tensor(b.astype(nd))),
                 getattr(torch, name)(_t(a, dtype), _t(b, dtype)))
            m, t = mg.tensor(a.astype(nd)), _t(a, dtype)
            getattr(m, name + "_")(mg.tensor(b.astype(nd)))
            getattr(t, name + "_")(_t(b, dtype))
            same(m, t)
    with pytest.raises(TypeError, match="integer"):
        mg.gcd(mg.tensor([1.0]), mg.tensor([2.0]))
    x, s = np.array([8, -3, 1, -1]), np.array([1, 2, 63, 70])
    for dtype in (torch.int64, torch.int32, torch.int8, torch.uint8):
        nd = _np_dtype(dtype)
        xs = np.abs(x) if dtype == torch.uint8 else x
        for name in ("bitwise_left_shift", "bitwise_right_shift"):
            same(getattr(mg.tensor(xs.astype(nd)), name)(mg.tensor(s)), getattr(_t(xs, dtype), name)(_t(s)))
        same(mg.tensor(xs.astype(nd)) >> 1, _t(xs, dtype) >> 1)
        same(mg.tensor(xs.astype(nd)) << 2, _t(xs, dtype) << 2)
    same(1 << mg.tensor([2, 3]), 1 << _t([2, 3]))
    u, w = np.array([1.0, 0.0, -1.0, INF, 1.0]), np.array([2.0, -1.0, -INF, 0.0, 1.0])
    for dtype in (torch.float32, torch.float64):
        nd = _np_dtype(dtype)
        same(mg.nextafter(mg.tensor(u.astype(nd)), mg.tensor(w.astype(nd))), torch.nextafter(_t(u, dtype),
                                                                                         _t(w, dtype)))
    with pytest.raises(TypeError):
        mg.nextafter(mg.tensor([1]), mg.tensor([2]))
    with pytest.raises(TypeError):
        mg.nextafter(mg.tensor([1.0]), mg.tensor([2.0], dtype=mg.float64))


@pytest.mark.parametrize("p", [0, 1, 2, 3.5, INF, -INF])
def test_dist(p):
    r = _rng(20)
    a, b = r.standard_normal((3, 4)), r.standard_normal((4,))
    if p == 0:                     # a count: gradient 0 (torch's own backward fails here)
        u, v = mg.tensor(a, requires_grad=True), mg.tensor(b, requires_grad=True)
        out = mg.dist(u, v, 0)
        same(out, torch.dist(_t(a), _t(b), 0))
        out.backward()
        assert not u.grad.numpy().any() and not v.grad.numpy().any()
    else:
        grads_match(lambda u, v: mg.dist(u, v, p), lambda u, v: torch.dist(u, v, p), [a, b],
                    check=p not in (INF, -INF))
    same(mg.tensor(a).dist(mg.tensor(a), p), _t(a).dist(_t(a), p))
    with pytest.raises(TypeError):
        mg.dist(mg.tensor([1, 2]), mg.tensor([0, 0]))


def test_cov_and_corrcoef():
    r = _rng(21)
    x = r.standard_normal((3, 6))
    for kw in ({}, {"correction": 0}, {"correction": 2}):
        grads_match(lambda a: mg.cov(a, **kw), lambda a: torch.cov(a, **kw), [x])
    fw, aw = np.array([1, 2, 1, 3, 1, 1]), r.uniform(0.5, 2.0, 6)
    for kw_m, kw_t in (({"fweights": mg.tensor(fw)}, {"fweights": _t(fw)}),
                       ({"aweights": mg.tensor(aw)}, {"aweights": _t(aw)}),
                       ({"fweights": mg.tensor(fw), "aweights": mg.tensor(aw), "correction": 1},
                        {"fweights": _t(fw), "aweights": _t(aw), "correction": 1})):
        grads_match(lambda a: mg.cov(a, **kw_m), lambda a: torch.cov(a, **kw_t), [x])
    for values in (x[0], x[:1], np.array([1, 2, 4]), np.array([[1, 2], [3, 5]])):
        same(mg.cov(mg.tensor(values)), torch.cov(_t(values)))
        with np.errstate(all="ignore"):
            same(mg.tensor(values).corrcoef(), _t(values).corrcoef())
    grads_match(mg.corrcoef, torch.corrcoef, [x])
    with np.errstate(all="ignore"), pytest.warns(UserWarning, match="degrees of freedom"):
        same(mg.cov(mg.tensor(x[:, :1])), torch.cov(_t(x[:, :1])))           # N - correction = 0
    with pytest.raises(ValueError, match="two or fewer"):
        mg.cov(mg.ones(2, 2, 2))
    with pytest.raises(ValueError, match="fweights"):
        mg.cov(mg.tensor(x), fweights=mg.tensor([1, 2]))
    with pytest.raises(TypeError, match="integral"):
        mg.cov(mg.tensor(x), fweights=mg.tensor(aw))
    with pytest.raises(ValueError, match="negative"):
        mg.cov(mg.tensor(x), aweights=mg.tensor(-aw))


def test_nanmedian():
    a = np.array([[1.0, NAN, 3.0, 2.0, 0.5], [NAN, NAN, NAN, NAN, NAN], [5.0, 1.0, NAN, 2.0, 7.0]])
    for dim, keepdim in ((1, False), (-1, True), (0, False)):
        m = mg.nanmedian(mg.tensor(a), dim, keepdim)
        t = torch.nanmedian(_t(a), dim, keepdim)
        same(m.values, t.values)
        valid = ~np.all(np.isnan(a), axis=dim, keepdims=keepdim)    # an all-NaN slice's index: unspecified
        np.testing.assert_array_equal(m.indices.numpy()[valid], t.indices.numpy()[valid])
    same(mg.tensor(a).nanmedian(), _t(a).nanmedian())
    same(mg.nanmedian(mg.tensor(np.array([NAN, NAN]))), torch.nanmedian(_t([NAN, NAN])))
    same(mg.nanmedian(mg.tensor([3, 1, 2, 2])), torch.nanmedian(_t([3, 1, 2, 2])))
    b = np.array([[1.0, NAN, 3.0, 2.0, 0.5], [4.0, NAN, 6.5, 9.0, 8.0]])
    grads_match(lambda x: mg.nanmedian(x, 1).values, lambda x: torch.nanmedian(x, 1).values, [b], check=False)
    grads_match(lambda x: mg.nanmedian(x), lambda x: torch.nanmedian(x), [b], check=False)
    ties = np.array([2.0, 1.0, 2.0, NAN, 5.0])                        # ties share the gradient
    grads_match(lambda x: mg.nanmedian(x), lambda x: torch.nanmedian(x), [ties], check=False)
    assert np.isnan(float(mg.nanmedian(mg.zeros(0))))   # torch's NaN for no elements


def test_renorm_put_index_reduce():
    r = _rng(22)
    x = r.standard_normal((3, 4, 2)) * 2
    for p, dim, maxnorm in ((2, 0, 1.5), (1, 1, 3.0), (INF, -1, 2.0), (3, 2, 100.0)):
        grads_match(lambda a: a.renorm(p, dim, maxnorm), lambda a: a.renorm(p, dim, maxnorm), [x],
                    check=p != INF)
        m, t = mg.tensor(x), _t(x)
        m.renorm_(p, dim, maxnorm)
        t.renorm_(p, dim, maxnorm)
        same(m, t)
    with pytest.raises(ValueError, match="non-positive"):
        mg.renorm(mg.tensor(x), -1, 0, 1.0)
    with pytest.raises(ValueError, match="at least 2"):
        mg.renorm(mg.ones(3), 2, 0, 1.0)
    idx = np.array([[1, -1], [5, 1]])
    for acc in (False, True):
        src = r.standard_normal((2, 2))
        same(mg.put(mg.tensor(x), mg.tensor(idx), mg.tensor(src), acc), _t(x).put(_t(idx), _t(src), acc))
        m, t = mg.tensor(x), _t(x)
        m.put_(mg.tensor(idx), mg.tensor(src), accumulate=acc)
        t.put_(_t(idx), _t(src), accumulate=acc)
        same(m, t)
    uniq = np.array([0, 7, -2])
    grads_match(lambda a, s: a.put(mg.tensor(uniq), s), lambda a, s: a.put(_t(uniq), s), [x,
                                                                                          r.standard_normal(3)])
    grads_match(lambda a, s: a.put(mg.tensor(idx), s, True), lambda a, s: a.put(_t(idx), s, True),
                [x, r.standard_normal((2, 2))])
    with pytest.raises(IndexError):
        mg.put(mg.zeros(3), mg.tensor([3]), mg.tensor([1.0]))
    with pytest.raises(ValueError, match="same number"):
        mg.put(mg.zeros(3), mg.tensor([0, 1]), mg.tensor([1.0]))
    base, index = r.standard_normal((4, 3)), np.array([0, 2, 0, 3, 0])
    source = r.uniform(0.5, 2.0, (5, 3))
    for reduce in ("prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            grads_match(lambda a, s: a.index_reduce(0, mg.tensor(index), s, reduce,
                                                    include_self=include_self),
                        lambda a, s: a.index_reduce(0, _t(index), s, reduce, include_self=include_self),
                        [base, source])
            m, t = mg.tensor(base), _t(base)
            m.index_reduce_(0, mg.tensor(index), mg.tensor(source), reduce, include_self=include_self)
            t.index_reduce_(0, _t(index), _t(source), reduce, include_self=include_self)
            same(m, t)
    with pytest.raises(ValueError, match="reduce"):
        mg.index_reduce(mg.tensor(base), 0, mg.tensor(index), mg.tensor(source), "sum")
    with pytest.raises(ValueError, match="shape"):
        mg.index_reduce(mg.tensor(base), 0, mg.tensor(index), mg.tensor(source[:2]), "prod")


def test_prelu_and_small_aliases():
    r = _rng(23)
    for shape, wshape in (((2, 3, 4), (3,)), ((2, 3), (1,)), ((5,), (1,)), ((2, 3, 4), ()), ((), ())):
        x = r.standard_normal(shape)
        x.reshape(-1)[0] = 0.0                         # the gradient at 0 goes to the weight side
        grads_match(mg.prelu, torch.prelu, [x, r.uniform(0.1, 0.5, wshape)], check=False)
    with pytest.raises(ValueError, match="channel size"):
        mg.prelu(mg.ones(2, 3), mg.ones(2))
    assert torch_raises(lambda: torch.prelu(torch.ones(5), torch.ones(5)))
    with pytest.raises(ValueError, match="channel size"):
        mg.prelu(mg.ones(5), mg.ones(5))
    with pytest.raises(TypeError):
        mg.prelu(mg.tensor([1, 2]), mg.tensor([0.1]))
    x = mg.tensor([[1, 0], [2, 0], [0, 3]])
    for size, fill in ((5, -1), (1, -5), (0, 0)):
        same(x.nonzero_static(size=size, fill_value=fill), _t(x.numpy()).nonzero_static(size=size,
                                                                                        fill_value=fill))
    same(mg.narrow_copy(mg.tensor([1.0, 2.0, 3.0]), 0, 1, 2), torch.narrow_copy(_t([1.0, 2.0, 3.0],
                                                                                torch.float32), 0, 1, 2))
    same(mg.arange(7).unsafe_chunk(3), torch.arange(7).unsafe_chunk(3))
    same(mg.arange(7).unsafe_split(3), torch.arange(7).unsafe_split(3))
    same(mg.arange(7).unsafe_split_with_sizes([2, 5]), torch.arange(7).unsafe_split_with_sizes([2, 5]))


def test_random_inplace_fills():
    mg.manual_seed(0)
    t = mg.zeros(4000, dtype=mg.float64)
    assert t.bernoulli_(0.3) is t and set(np.unique(t.numpy())) <= {0.0, 1.0}
    assert abs(t.numpy().mean() - 0.3) < 0.04
    ints = mg.zeros(1000, dtype=mg.int64).bernoulli_(mg.tensor(np.full(1000, 0.9)))
    assert ints.dtype == mg.int64 and 0.85 < ints.numpy().mean() < 0.95
    e = mg.zeros(4000).exponential_(2.0)
    assert e.numpy().min() >= 0 and abs(e.numpy().mean() - 0.5) < 0.05
    g = mg.zeros(4000, dtype=mg.int32).geometric_(0.25)
    assert g.numpy().min() >= 1 and abs(g.numpy().mean() - 4.0) < 0.3
    ln = mg.zeros(4000, dtype=mg.float64).log_normal_(0.0, 0.5)
    assert ln.numpy().min() > 0 and abs(np.log(ln.numpy()).std() - 0.5) < 0.05
    c = mg.zeros(4000, dtype=mg.float64).cauchy_(1.0, 2.0)
    assert abs(np.median(c.numpy()) - 1.0) < 0.3
    for tensor, args, lo, hi in ((mg.zeros(2000), (5,), 0, 4), (mg.zeros(2000, dtype=mg.int64), (3, 10),
                                                                3, 9),
                                 (mg.zeros(200, dtype=mg.bool_), (), 0, 1), (mg.zeros(200, dtype=mg.int8),
                                                                             (), 0, 127),
                                 (mg.zeros(2000, dtype=mg.float32), (), 0, 2 ** 24)):
        v = tensor.random_(*args).numpy()
        assert v.min() >= lo and v.max() <= hi and len(np.unique(v)) > 1, (tensor.dtype, args)
    draws = []
    for _ in range(2):
        mg.manual_seed(5)
        draws.append(mg.zeros(5).exponential_().numpy())
    np.testing.assert_array_equal(draws[0], draws[1])
    one = mg.zeros(3).cauchy_(generator=mg.Generator().manual_seed(3))
    two = mg.zeros(3).cauchy_(generator=mg.Generator().manual_seed(3))
    np.testing.assert_array_equal(one.numpy(), two.numpy())
    p = mg.tensor(np.array([0.0, 1.0, 0.5]))
    draws = mg.bernoulli(p)
    assert draws.dtype == mg.float64 and draws.tolist()[:2] == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="leaf"):
        mg.zeros(3, requires_grad=True).exponential_()
    with pytest.raises(ValueError):
        mg.zeros(3).exponential_(-1.0)
    with pytest.raises(ValueError):
        mg.zeros(3).geometric_(0.0)
    with pytest.raises(ValueError):
        mg.zeros(3).bernoulli_(1.5)
    with pytest.raises(ValueError):
        mg.zeros(3).random_(5, 2)
    with pytest.raises(TypeError):
        mg.zeros(3, dtype=mg.int64).exponential_()
    # in the graph the filled tensor passes a zero gradient back and keeps requiring grad (torch)
    w = mg.ones(3, requires_grad=True)
    y = w * 2
    y.uniform_()
    y.bernoulli_(0.5)
    (y * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), y.detach().numpy())


def test_detach_inplace():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.detach_() is y and not y.requires_grad and y.is_leaf and y.grad_fn is None
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = tx * 2
    ty.detach_()
    assert ty.requires_grad == y.requires_grad and ty.is_leaf == y.is_leaf
    x.detach_()
    assert not x.requires_grad
    z = mg.tensor([1.0, 2.0], requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="view"):
        z[0:1].detach_()
    assert torch_raises(lambda: (tx.detach().requires_grad_() * 1)[0:1].detach_())


# ------------------------------------------------------------------------------------------------
# square-matrix functions
# ------------------------------------------------------------------------------------------------

def _well_conditioned(shape, seed=0):
    r = _rng(seed)
    return r.standard_normal(shape) + 3 * np.eye(shape[-1])


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (2, 0, 0)])
def test_inverse_det_slogdet_logdet(shape):
    a = _well_conditioned(shape)
    if a.size:
        a[..., 0, :] *= -1                                    # some negative determinants
    check = a.size > 0
    grads_match(mg.inverse, torch.inverse, [a], check=check)
    grads_match(mg.det, torch.det, [a], check=check)
    grads_match(lambda x: mg.slogdet(x).logabsdet, lambda x: torch.slogdet(x).logabsdet, [a], check=check)
    same(mg.slogdet(mg.tensor(a)), torch.slogdet(_t(a)))
    with np.errstate(all="ignore"):
        same(mg.tensor(a).logdet(), _t(a).logdet())
    b = np.abs(_well_conditioned(shape, 1)) + 3 * np.eye(shape[-1])     # positive determinants
    grads_match(mg.logdet, torch.logdet, [b], check=check)
    for dtype in (torch.float32,):
        same(mg.tensor(a.astype(np.float32)).inverse(), _t(a, dtype).inverse(), rtol=1e-5)
        same(mg.tensor(a.astype(np.float32)).det(), _t(a, dtype).det(), rtol=1e-5)


def test_det_of_singular_matrices_and_errors():
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    same(mg.det(mg.tensor(sing)), torch.det(_t(sing)), atol=1e-12)
    # the gradient of det is the cofactor matrix, non-zero at rank n - 1; torch's depends on its
    # LAPACK (the cofactors with MKL on Intel, zeros on an AMD EPYC): checked against the cofactors
    x = mg.tensor(sing, requires_grad=True)
    mg.det(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]],
                               atol=1e-12)
    assert gradcheck(mg.det, [mg.tensor(sing, requires_grad=True)], atol=1e-6, rtol=1e-5)
    rank1 = np.array([[1.0, 2.0], [2.0, 4.0]])
    # the cofactor matrix [[4, -2], [-2, 1]] (torch 2.x returns 0 for this 2 x 2 rank-1 matrix)
    x = mg.tensor(rank1, requires_grad=True)
    mg.det(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    assert gradcheck(mg.det, [mg.tensor(rank1, requires_grad=True)])
    same(mg.slogdet(mg.tensor(rank1)).logabsdet, torch.slogdet(_t(rank1)).logabsdet)    # -inf
    assert mg.slogdet(mg.tensor(rank1)).sign.item() == 0.0   # (torch's sign of a singular matrix varies)
    with np.errstate(all="ignore"):
        same(mg.logdet(mg.tensor(rank1)), torch.logdet(_t(rank1)))
    with pytest.raises(RuntimeError, match="singular"):
        mg.inverse(mg.zeros(2, 2))
    assert torch_raises(lambda: torch.inverse(torch.zeros(2, 2)))
    with pytest.raises(ValueError, match="square"):
        mg.inverse(mg.ones(2, 3))
    with pytest.raises(ValueError, match="square"):
        mg.det(mg.ones(3))
    with pytest.raises(TypeError, match="floating"):
        mg.det(mg.tensor([[1, 2], [3, 4]]))


def test_matrix_power_and_cholesky():
    a = _well_conditioned((2, 3, 3), 4) / 3
    for n in (1, 2, 3, 5, -1, -2):
        grads_match(lambda x: mg.matrix_power(x, n), lambda x: torch.matrix_power(x, n), [a])
    grads_match(lambda x: x.matrix_power(0), lambda x: x.matrix_power(0), [a], check=False)
    same(mg.matrix_power(mg.tensor([[1, 2], [3, 4]]), 3), torch.matrix_power(_t([[1, 2], [3, 4]]), 3))
    with pytest.raises(ValueError):
        mg.matrix_power(mg.ones(2, 3), 2)
    r = _rng(5).standard_normal((2, 4, 4))
    spd = r @ np.swapaxes(r, -1, -2) + 4 * np.eye(4)
    for upper in (False, True):
        grads_match(lambda x: mg.cholesky(x, upper), lambda x: torch.linalg.cholesky(x, upper=upper), [spd],
                    check=False)
        # gradcheck through a symmetric parametrisation (cholesky reads one triangle only)
        assert gradcheck(lambda x: mg.cholesky(x @ x.mT + mg.eye(4, dtype=mg.float64) * 4, upper),
                         [mg.tensor(r, requires_grad=True)])
        same(mg.tensor(spd[0].astype(np.float32)).cholesky(upper), torch.linalg.cholesky(
            _t(spd[0], torch.float32), upper=upper), rtol=1e-5)
    with pytest.raises(RuntimeError, match="positive-definite"):
        mg.cholesky(mg.tensor([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "log1p", "expm1",
                                  "sigmoid", "erf", "log2", "log10", "exp2"])
def test_existing_unary_ops_compute_integer_and_bool_inputs_in_float32(name):
    """numpy computes bool and int8 in float16 (exp(True) was 2.71875); torch computes in float32."""
    for values, dtype in ((np.array([True, False]), torch.bool), (np.array([1, 3, 7], np.int8), torch.int8),
                          (np.array([2, 5], np.uint8), torch.uint8), (np.array([1, 4, 9]), torch.int64)):
        with np.errstate(divide="ignore"):                       # log(0) = -inf
            same(getattr(mg, name)(mg.tensor(values)), getattr(torch, name)(_t(values, dtype)), rtol=3e-7)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("scalar", [False, True])
def test_scatter_legacy_reduce_add_and_multiply_equal_torch(reduce, dim, scalar):
    """Tensor.scatter(_)(dim, index, src | value, reduce='add' | 'multiply'), torch's legacy reduce:
    repeated indices accumulate (values as torch, which has no derivative for it; ours are those of
    scatter_add / scatter_reduce('prod', include_self=True), gradchecked)."""
    rng = _rng(3)
    x = rng.uniform(0.5, 2.0, (3, 4))
    index = rng.integers(0, x.shape[dim], (2, 3))
    src = 2.5 if scalar else rng.uniform(0.5, 2.0, (2, 3))
    want = torch.tensor(x).scatter(dim, torch.tensor(index), src if scalar else torch.tensor(src),
                                   reduce=reduce).numpy()
    got = mg.tensor(x).scatter(dim, mg.tensor(index), src if scalar else mg.tensor(src), reduce=reduce)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    inplace = mg.tensor(x).scatter_(dim, mg.tensor(index), src if scalar else mg.tensor(src), reduce=reduce)
    np.testing.assert_allclose(inplace.numpy(), want, rtol=1e-12)
    mx = mg.tensor(x, requires_grad=True)
    if scalar:
        assert gradcheck(lambda a: a.scatter(dim, mg.tensor(index), src, reduce=reduce), (mx,))
    else:
        ms = mg.tensor(src, requires_grad=True)
        assert gradcheck(lambda a, b: a.scatter(dim, mg.tensor(index), b, reduce=reduce), (mx, ms))
    with pytest.raises(ValueError, match="reduce must be"):
        mx.scatter(dim, mg.tensor(index), 1.0, reduce="mean")


def test_fuzz_findings_zero_d_results_square_of_bool_empty_median():
    """From a 3 000-case fuzz of the new maths against torch: 0-d inputs give 0-d results (heaviside,
    nextafter, gcd, lcm, ldexp with an int exponent kept float64), square of bool is int64, and
    the median of an empty float tensor is NaN (torch; an empty int one is refused)."""
    a, b = np.array(1.5), np.array(3.0)
    for name in ("heaviside", "nextafter"):
        got = getattr(mg, name)(mg.tensor(a), mg.tensor(b))
        want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
        assert got.shape == tuple(want.shape) == () and got.dtype == np.float64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for name in ("gcd", "lcm"):
        assert getattr(mg, name)(mg.tensor(np.array(4)), mg.tensor(np.array(6))).shape == ()
    got = mg.ldexp(mg.tensor(a), mg.tensor(np.array(3)))
    assert got.shape == () and got.dtype == np.float64 and float(got) == 12.0
    sq = mg.square(mg.tensor([True, False]))
    assert sq.dtype == np.int64 and torch.square(torch.tensor([True, False])).dtype == torch.int64
    for name in ("median", "nanmedian"):
        x = mg.tensor(np.zeros((0, 3), np.float32), requires_grad=True)
        y = getattr(mg, name)(x)
        assert y.shape == () and np.isnan(float(y)) and y.dtype == np.float32
        assert np.isnan(float(getattr(torch, name)(torch.zeros(0, 3))))
        y.backward()
        assert x.grad.shape == (0, 3)
        with pytest.raises(ValueError, match="empty int64"):
            getattr(mg, name)(mg.tensor(np.zeros(0, np.int64)))


@pytest.mark.parametrize("sa, sb, dims", [((0,), (0,), 1), ((2, 0), (0, 3), 1), ((0, 2), (2, 0), 1),
                                          ((2, 3), (3, 0), 1), ((0,), (0,), 0)])
def test_tensordot_and_inner_with_empty_dims_equal_torch(sa, sb, dims):
    """Zero-size contracted or free dims (a reshape to (-1, 0) was ambiguous): torch's result, and
    an empty contraction is 0."""
    x, y = _rng(8).standard_normal(sa), _rng(9).standard_normal(sb)
    got = mg.tensordot(mg.tensor(x), mg.tensor(y), dims).numpy()
    want = torch.tensordot(torch.tensor(x), torch.tensor(y), dims).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if len(sa) == 1 and dims == 1:
        assert float(mg.inner(mg.tensor(x), mg.tensor(y))) == 0.0


def test_polygamma_far_below_zero_by_reflection():
    """x far below 0: reflection, not a walk of |x| steps (scipy's Hurwitz zeta and the earlier
    series took 0.3 s at -1e7; at -1e12 that walk would not finish); values against mpmath at
    60 digits, and at -1e12 + 1/4 against the reflection's own dominant term."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    xs = np.array([-1000.5, -70.25, -65.75, -3000.3, -64.5])
    for n in (1, 2, 3, 8):
        got = mg.polygamma(n, mg.tensor(xs)).numpy()
        want = np.array([float(mpmath.polygamma(n, mpmath.mpf(float(v)))) for v in xs])
        np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=f"n={n}")
    # psi'(x) + psi'(1 - x) = pi^2 / sin^2(pi x): at x = -1e12 + 1/4, psi'(1 - x) ~ 1e-12
    far = mg.polygamma(1, mg.tensor(np.array([-1e12 + 0.25]))).numpy()
    np.testing.assert_allclose(far, [2 * np.pi ** 2], rtol=1e-9)
