"""Unary and binary elementwise ops: forward vs numpy, fp64 gradcheck on several shapes, edge cases."""
import math

import numpy as np
import pytest
from op_helpers import check_op, fp32_matches_fp64, leaf, positive, randn

import minigrad as mg
from minigrad.ops import special

SHAPES = [(3, 4), (), (1, 5), (2, 1, 3)]


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_gelu(x):
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


def _away(low, scale=1.0):
    """Input maker with |x| >= low (away from a kink)."""
    return lambda *s, seed=0: scale * randn(*s, seed=seed, low=low)


def _scaled(scale):
    return lambda *s, seed=0: scale * randn(*s, seed=seed)


# name -> (op on a Tensor, numpy reference, input maker)
UNARY = {
    "exp": (lambda x: x.exp(), np.exp, randn),
    "log": (lambda x: x.log(), np.log, positive),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, positive),
    "rsqrt": (lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), positive),
    "abs": (lambda x: x.abs(), np.abs, _away(0.1)),
    "neg": (lambda x: -x, np.negative, randn),
    "tanh": (lambda x: x.tanh(), np.tanh, randn),
    "sin": (lambda x: x.sin(), np.sin, _scaled(3.0)),
    "cos": (lambda x: mg.cos(x), np.cos, _scaled(3.0)),
    "log1p": (lambda x: x.log1p(), np.log1p, positive),
    "expm1": (lambda x: mg.expm1(x), np.expm1, randn),
    "sigmoid": (lambda x: x.sigmoid(), _np_sigmoid, randn),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), _away(0.1)),
    "silu": (lambda x: x.silu(), lambda x: x * _np_sigmoid(x), randn),
    "gelu": (lambda x: x.gelu(), _np_gelu, _scaled(2.0)),
    "gelu_tanh": (lambda x: x.gelu(approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), randn),
    "erf": (lambda x: x.erf(), np.vectorize(math.erf), randn),
    "softplus": (lambda x: x.softplus(), _np_softplus, _scaled(3.0)),
    "softplus_beta": (lambda x: x.softplus(beta=2.0, threshold=3.0),
                      lambda x: _np_softplus(x, 2.0, 3.0), _away(0.05, 2.0)),
    "clamp": (lambda x: x.clamp(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), _away(0.01)),
    "clamp_min": (lambda x: x.clamp(min=0.2), lambda x: np.maximum(x, 0.2), randn),
    "pow_scalar": (lambda x: x ** 3, lambda x: x ** 3, randn),
    "pow_half": (lambda x: x ** 0.5, np.sqrt, positive),
    "pow_square": (lambda x: x ** 2, np.square, randn),
    "rpow": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, randn),
    "square_reused": (lambda x: x * x, np.square, randn),
    "x_div_x_plus": (lambda x: x / (x * x + 1), lambda x: x / (x * x + 1), randn),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_and_gradcheck(name, shape):
    op, ref, make = UNARY[name]
    x = make(*shape, seed=len(name))
    if name in ("clamp", "clamp_min"):
        x = x[np.abs(x - 0.2) > 1e-3] if x.ndim else x  # keep away from the kinks
        x = np.where(np.abs(x + 0.5) < 1e-3, 0.0, x)
    check_op("elementwise", op, x, ref=ref)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_fp32_stays_fp32_and_matches_fp64(name):
    op, _, make = UNARY[name]
    fp32_matches_fp64(op, make(4, 5, seed=3))


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power),
    "maximum": (mg.maximum, np.maximum),
    "minimum": (mg.minimum, np.minimum),
    "max_method": (lambda a, b: a.max(b), np.maximum),
}
PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (2, 3)), ((1,), (3, 1)), ((2, 3), ())]


@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting_forward_and_gradcheck(name, shapes):
    op, ref = BINARY[name]
    a = positive(*shapes[0], seed=1) if name == "pow" else randn(*shapes[0], seed=1)
    b = randn(*shapes[1], seed=2)
    if name == "div":
        b = np.where(b >= 0, b + 0.5, b - 0.5)
    check_op("binary", op, a, b, ref=ref)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow"])
def test_binary_with_python_scalars_both_sides(name):
    op, ref = BINARY[name]
    x = positive(3, 2, seed=4)
    check_op("binary", lambda t: op(t, 1.5), x, ref=lambda v: ref(v, 1.5))
    check_op("binary", lambda t: op(1.5, t), x, ref=lambda v: ref(1.5, v))
    check_op("binary", lambda t: op(t, np.float64(2.0)), x, ref=lambda v: ref(v, 2.0))


def test_reused_inputs_accumulate():
    x = positive(2, 3, seed=5)
    check_op("binary", lambda t: t * t - t / (t + 1) + t ** t, x,
             ref=lambda v: v * v - v / (v + 1) + v ** v)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_fp32(name):
    op, _ = BINARY[name]
    fp32_matches_fp64(op, positive(3, 4, seed=6), positive(4, seed=7))


def test_python_scalar_keeps_float32():
    x = mg.ones(2, 2)
    for y in (x + 1, 2.5 * x, x / 3, 1 - x, x ** 2, 2 ** x, x + np.float64(1.0), mg.maximum(x, 0.5)):
        assert y.dtype == mg.float32


def test_maximum_minimum_split_ties_evenly():
    a = leaf(np.array([1.0, 2.0, 5.0]))
    b = leaf(np.array([1.0, 3.0, 4.0]))
    mg.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.data, [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(b.grad.data, [0.5, 1.0, 0.0])
    x = leaf(np.array([1.0, -2.0]))
    mg.minimum(x, x).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])


def test_kinks_follow_pytorch():
    x = leaf(np.array([-1.0, 0.0, 1.0]))
    (x.relu() + x.abs()).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [-1.0, 0.0, 2.0])
    x = leaf(np.array([-1.0, -0.5, 0.0, 0.7, 1.0]))
    x.clamp(-0.5, 0.7).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 1.0, 1.0, 1.0, 0.0])   # inside the closed range
    p = leaf(np.array([0.0, 2.0]))
    (p ** 0).sum().backward()
    np.testing.assert_array_equal(p.grad.data, [0.0, 0.0])
    e = leaf(np.array([1.0, 2.0]))
    (mg.tensor(np.array([0.0, 0.0]), dtype=mg.float64) ** e).sum().backward()
    np.testing.assert_array_equal(e.grad.data, [0.0, 0.0])


def test_pow_with_tensor_exponent():
    check_op("binary", lambda a, b: a ** b, positive(2, 3, seed=8), randn(3, seed=9),
             ref=np.power)


def test_where_broadcasts_and_routes_gradient():
    cond = randn(3, 1, seed=10) > 0
    a, b = randn(3, 4, seed=11), randn(4, seed=12)
    check_op("binary", lambda x, y: mg.where(cond, x, y), a, b, ref=lambda x, y: np.where(cond, x, y))
    check_op("binary", lambda x: mg.where(cond, x, 0.0), a, ref=lambda x: np.where(cond, x, 0.0))
    check_op("binary", lambda x: x.masked_fill(mg.tensor(cond), -1e9), a,
             ref=lambda x: np.where(cond, -1e9, x))
    assert not mg.where(cond, 1.0, 2.0).requires_grad


def test_comparisons_return_bool_tensors_without_grad():
    x = leaf(randn(3, 4, seed=13))
    y = leaf(randn(4, seed=14))
    for out, ref in [(x < y, np.less), (x <= y, np.less_equal), (x > y, np.greater),
                     (x >= y, np.greater_equal), (x == y, np.equal), (x != y, np.not_equal)]:
        assert out.dtype == np.bool_ and not out.requires_grad and out.grad_fn is None
        np.testing.assert_array_equal(out.data, ref(x.data, y.data))
    assert (x > 0).dtype == np.bool_
    assert (0 < x).shape == (3, 4)
    assert {x: 1}[x] == 1       # still hashable
    assert (x == None) is False  # noqa: E711 - Python falls back to identity


def test_erf_matches_math_erf_to_a_few_ulps():
    x = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-300, 30, 500),
                        -np.geomspace(1e-8, 9, 500)])
    ref = np.array([math.erf(v) for v in x])
    err = np.abs(special.erf(x) - ref) / np.spacing(np.maximum(np.abs(ref), 1e-300))
    assert err.max() <= 8
    refc = np.array([math.erfc(v) for v in x])
    relc = np.abs(special.erfc(x) - refc) / np.maximum(refc, 1e-300)
    assert relc[refc > 1e-300].max() < 5e-14          # exp(-z^2) rounding of z^2 for large z
    x32 = x.astype(np.float32)
    assert special.erf(x32).dtype == np.float32
    assert np.abs(special.erf(x32) - ref).max() < 5e-7
    np.testing.assert_array_equal(special.erf(np.array([np.inf, -np.inf, 0.0])), [1.0, -1.0, 0.0])
    assert np.isnan(special.erf(np.array([np.nan]))).all()


def test_gelu_tails_are_stable():
    x = leaf(np.array([-40.0, -10.0, 0.0, 10.0, 40.0]))
    y = x.gelu()
    assert np.isfinite(y.data).all()
    np.testing.assert_allclose(y.data, [0.0, -10 * 0.5 * math.erfc(10 / math.sqrt(2)), 0.0, 10.0, 40.0],
                               rtol=1e-12, atol=1e-300)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.data[[0, 2, 4]], [0.0, 0.5, 1.0])


def test_sigmoid_softplus_do_not_overflow():
    x = leaf(np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0]))
    s = x.sigmoid()
    sp = x.softplus()
    assert np.isfinite(s.data).all() and np.isfinite(sp.data).all()
    (s + sp).sum().backward()
    assert np.isfinite(x.grad.data).all()


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = randn(5, 7, seed=15) * 3
    for name, fn, tfn in [
        ("gelu", lambda t: t.gelu(), lambda t: torch.nn.functional.gelu(t)),
        ("gelu_tanh", lambda t: t.gelu(approximate="tanh"),
         lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
        ("silu", lambda t: t.silu(), torch.nn.functional.silu),
        ("softplus", lambda t: t.softplus(beta=1.5, threshold=4.0),
         lambda t: torch.nn.functional.softplus(t, beta=1.5, threshold=4.0)),
        ("erf", lambda t: t.erf(), torch.erf),
        ("sigmoid", lambda t: t.sigmoid(), torch.sigmoid),
    ]:
        a = leaf(x)
        y = fn(a)
        y.backward(mg.tensor(np.cos(x), dtype=mg.float64))
        b = torch.tensor(x, requires_grad=True)
        ty = tfn(b)
        ty.backward(torch.tensor(np.cos(x)))
        np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-13, atol=1e-15, err_msg=name)
        np.testing.assert_allclose(a.grad.data, b.grad.numpy(), rtol=1e-12, atol=1e-14, err_msg=name)


def test_broadcast_errors_name_op_and_shapes():
    a, b = mg.ones(2, 3), mg.ones(4)
    for fn, msg in [(lambda: a + b, r"add: \(2, 3\) \+ \(4,\)"), (lambda: a * b, r"mul: \(2, 3\) \* \(4,\)"),
                    (lambda: a - b, r"sub: \(2, 3\) - \(4,\)"), (lambda: a / b, r"div: \(2, 3\) / \(4,\)"),
                    (lambda: mg.maximum(a, b), r"maximum: \(2, 3\), \(4,\)"),
                    (lambda: a < b, r"lt: \(2, 3\) < \(4,\)"),
                    (lambda: mg.where(mg.ones(5) > 0, a, b), r"where: \(5,\), \(2, 3\), \(4,\)")]:
        with pytest.raises(ValueError, match=msg):
            fn()
    with pytest.raises(TypeError, match="mix float32 and float64"):
        a + mg.ones(2, 3, dtype=mg.float64)
    with pytest.raises(ValueError, match="gelu: approximate"):
        a.gelu(approximate="fast")
    with pytest.raises(ValueError, match="clamp"):
        a.clamp()


def test_int_and_bool_inputs_become_the_default_float32():
    # as in PyTorch: a result that turns floating from non-float inputs takes the default dtype
    i, b = mg.arange(4), mg.tensor([True, False])
    for y in (i / 4, i / i.clamp(min=1), i + 1.5, b * 1.5, i.exp(), i.sqrt(), i ** 0.5,
              i.clamp(min=1.5), mg.where(b, 1.0, 0.0), mg.where(b, mg.arange(2), 0.5), i.sigmoid()):
        assert y.dtype == mg.float32
    w = mg.ones(4, requires_grad=True)
    ((i / 4) * w).sum().backward()                   # mixes with a float32 parameter
    assert w.grad.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert mg.where(b, 1, 0).dtype == mg.int64 and (i + 1).dtype == mg.int64
    d = mg.ones(4, dtype=mg.float64)
    assert (i + d).dtype == mg.float64 and (d * 1.5).dtype == mg.float64   # float64 asked for stays


def test_errors_that_are_not_broadcast_errors_keep_their_message():
    with pytest.raises(ValueError, match="pow: Integers to negative integer powers are not allowed"):
        mg.tensor([1, 2]) ** -1


def test_nan_passes_the_gradient_of_relu_maximum_minimum():
    # PyTorch: relu's gradient is 0 only where y <= 0; an operand of maximum / minimum loses only
    # where it compares smaller / larger, so at a NaN both operands get the gradient
    x = mg.tensor([float("nan"), 1.0, -1.0], requires_grad=True)
    x.relu().sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 0.0]
    for fn in (mg.maximum, mg.minimum):
        a = mg.tensor([float("nan"), 0.0], requires_grad=True)
        b = mg.tensor([0.0, float("nan")], requires_grad=True)
        fn(a, b).sum().backward()
        assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [1.0, 1.0], fn.__name__


def test_where_and_masked_fill_need_a_bool_mask():
    # regression: a float or int mask was read as "nonzero" (numpy's rule); PyTorch raises, and an
    # additive 0 / -inf attention mask passed by mistake selected everywhere without an error
    a, b = mg.tensor([1.0, 2.0]), mg.tensor([3.0, 4.0])
    for mask in (mg.tensor([0.0, float("-inf")]), mg.tensor([1, 0]), np.array([1, 0]), [1, 0]):
        with pytest.raises(TypeError, match="where: the mask must be bool"):
            mg.where(mask, a, b)
        with pytest.raises(TypeError, match="masked_fill: the mask must be bool"):
            a.masked_fill(mask, 0.0)
    for mask in (mg.tensor([True, False]), np.array([True, False]), [True, False]):
        np.testing.assert_array_equal(mg.where(mask, a, b).data, [1.0, 4.0])
        np.testing.assert_array_equal(a.masked_fill(mask, 0.0).data, [0.0, 2.0])
