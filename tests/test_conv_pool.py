"""conv1d / conv2d, nn.Conv1d / nn.Conv2d and pooling (max / avg / adaptive, functional and modules):
forward and gradients against torch (float64), minigrad's own gradcheck, float32 vs float64, module
state_dict / init / repr, torch's tie and NaN rules for max pooling, and the error cases."""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from torch_parity import TOL, leaf as _leaf, np_of as _np, parity as _parity, rng as _rng, tleaf as _tleaf  # noqa: E402, I001
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


# ---- conv forward / backward against torch -------------------------------------------------------
CONV_CASES = [
    # (dims, input shape, weight shape, kwargs, bias)
    (2, (2, 3, 7, 6), (4, 3, 3, 2), {}, True),
    (2, (3, 4, 9, 8), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2), True),
    (2, (2, 4, 7, 6), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2), True),
    (2, (2, 3, 8, 7), (5, 3, 4, 2), dict(padding="same"), True),            # even kernel: asymmetric
    (2, (2, 3, 8, 7), (5, 3, 3, 3), dict(padding="same", dilation=(2, 3)), False),
    (2, (2, 3, 8, 7), (5, 3, 3, 3), dict(padding="valid", stride=(3, 2)), True),
    (2, (1, 6, 5, 5), (6, 1, 3, 3), dict(padding=1, groups=6), True),       # depthwise
    (2, (3, 7, 6), (4, 3, 3, 3), dict(padding=2, dilation=2), True),          # unbatched
    (2, (2, 3, 5, 5), (4, 3, 1, 1), {}, True),                                  # 1x1
    (2, (2, 3, 5, 4), (4, 3, 5, 4), {}, True),                                  # kernel = input
    (2, (0, 3, 5, 4), (4, 3, 3, 3), dict(padding=1), True),                   # empty batch
    (1, (2, 3, 11), (4, 3, 3), {}, True),
    (1, (2, 4, 9), (6, 2, 4), dict(padding="same", groups=2), False),
    (1, (2, 4, 10), (4, 1, 3), dict(stride=3, padding=2, groups=4, dilation=2), True),
    (1, (3, 12), (5, 3, 5), dict(stride=2, padding=(1,)), True),              # unbatched
]


@pytest.mark.parametrize("d,xs,ws,kw,bias", CONV_CASES)
def test_conv_matches_torch(d, xs, ws, kw, bias):
    r = _rng(len(xs) + sum(ws))
    x, w = r.standard_normal(xs), r.standard_normal(ws)
    b = r.standard_normal(ws[0]) if bias else None
    f_mg, f_t = (F.conv2d, TF.conv2d) if d == 2 else (F.conv1d, TF.conv1d)
    _parity(lambda a, c, e: f_mg(a, c, e, **kw), lambda a, c, e: f_t(a, c, e, **kw), [x, w, b])


@pytest.mark.parametrize("d,xs,ws,kw", [
    (2, (2, 4, 5, 6), (4, 2, 3, 2), dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)),
    (2, (3, 5, 5), (2, 3, 2, 2), dict(padding="same")),
    (1, (2, 3, 7), (4, 3, 3), dict(stride=2, padding=1)),
    (1, (2, 4, 8), (2, 2, 2), dict(padding="same", dilation=3, groups=2)),
])
def test_conv_gradcheck(d, xs, ws, kw):
    r = _rng(3)
    x, w, b = _leaf(r.standard_normal(xs)), _leaf(r.standard_normal(ws)), _leaf(r.standard_normal(ws[0]))
    f = F.conv2d if d == 2 else F.conv1d
    assert gradcheck(lambda a, c, e: f(a, c, e, **kw), [x, w, b])
    assert max(gradcheck.last_errors) < 1e-7


def test_conv_only_some_grads_and_no_grad():
    r = _rng(4)
    x = mg.tensor(r.standard_normal((2, 3, 6, 6)))                     # no grad for the input
    w = _leaf(r.standard_normal((4, 3, 3, 3)))
    y = F.conv2d(x, w, padding=1)
    y.sum().backward()
    tw = _tleaf(w.data)
    TF.conv2d(torch.tensor(x.data), tw, padding=1).sum().backward()
    np.testing.assert_allclose(w.grad.data, tw.grad.numpy(), rtol=TOL, atol=TOL)
    with mg.no_grad():
        z = F.conv2d(_leaf(x.data), w, padding=1)
    assert not z.requires_grad and z.grad_fn is None


def test_conv_float32_matches_float64_and_keeps_dtype():
    r = _rng(5)
    x, w, b = r.standard_normal((2, 4, 9, 9)), r.standard_normal((6, 2, 3, 3)), r.standard_normal(6)
    outs = {}
    for dt in (np.float32, np.float64):
        X, W, B = (_leaf(a, dt) for a in (x, w, b))
        y = F.conv2d(X, W, B, stride=2, padding=1, groups=2)
        assert y.dtype == dt
        y.backward(mg.tensor(np.ones(y.shape, dtype=dt)))
        assert X.grad.dtype == dt and W.grad.dtype == dt and B.grad.dtype == dt
        outs[dt] = (y.data, X.grad.data, W.grad.data, B.grad.data)
    for a32, a64 in zip(outs[np.float32], outs[np.float64]):
        np.testing.assert_allclose(a32, a64, rtol=1e-5, atol=1e-5)


def test_conv_larger_shape_matches_torch_float32():
    r = _rng(6)
    x, w = r.standard_normal((4, 16, 20, 20)).astype(np.float32), r.standard_normal((8, 16, 3, 3)).astype(
        np.float32)
    y = F.conv2d(mg.tensor(x), mg.tensor(w), padding=1)
    np.testing.assert_allclose(y.data, _np(TF.conv2d(torch.tensor(x), torch.tensor(w), padding=1)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("call,torch_raises", [
    (lambda c, x, w: c.conv2d(x((3, 5, 5)), w((4, 3, 3, 3))), False),        # unbatched is fine
    (lambda c, x, w: c.conv2d(x((1, 2, 3, 5, 5)), w((4, 3, 3, 3))), True),   # 5-D input
    (lambda c, x, w: c.conv1d(x((2, 3, 5, 5)), w((4, 3, 3))), True),
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3))), True),         # weight ndim
    (lambda c, x, w: c.conv2d(x((2, 4, 5, 5)), w((4, 3, 3, 3))), True),      # channels
    (lambda c, x, w: c.conv2d(x((2, 4, 5, 5)), w((3, 2, 3, 3)), groups=2), True),   # out % groups
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), groups=0), True),
    (lambda c, x, w: c.conv2d(x((2, 3, 2, 2)), w((4, 3, 3, 3))), True),      # kernel > input
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), dilation=3), True),   # dilated > input
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), padding=-1), True),
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), padding="same", stride=2), True),
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), padding="full"), True),
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), stride=0), True),
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), w((3,))), True),   # bias shape
    (lambda c, x, w: c.conv2d(x((2, 3, 5, 5)), w((4, 3, 3, 3)), stride=(1, 1, 1)), True),
])
def test_conv_errors(call, torch_raises):
    def mx(s):
        return mg.tensor(np.ones(s))

    def tx(s):
        return torch.ones(s, dtype=torch.float64)

    if not torch_raises:
        call(F, mx, mx)
        call(TF, tx, tx)
        return
    with pytest.raises((ValueError, TypeError, RuntimeError)):
        call(F, mx, mx)
    with pytest.raises((ValueError, TypeError, RuntimeError)):
        call(TF, tx, tx)


def test_conv_dtype_errors():
    x32, w64 = mg.ones(1, 2, 4, 4), mg.ones(3, 2, 2, 2, dtype=mg.float64)
    with pytest.raises(TypeError):
        F.conv2d(x32, w64)
    with pytest.raises(TypeError, match="float32 or float64"):
        F.conv2d(mg.tensor(np.ones((1, 2, 4, 4), dtype=np.int64)), mg.tensor(np.ones((3, 2, 2, 2), np.int64)))
    with pytest.raises(TypeError, match="float32 or float64"):
        F.max_pool2d(mg.tensor(np.ones((1, 2, 4, 4), dtype=np.int64)), 2)
    with pytest.raises(TypeError):
        F.conv2d(np.ones((1, 2, 4, 4)), mg.ones(3, 2, 2, 2))


# ---- nn.Conv1d / nn.Conv2d ------------------------------------------------------------------------
MODULE_CASES = [
    (2, dict(in_channels=3, out_channels=4, kernel_size=3)),
    (2, dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), groups=2)),
    (2, dict(in_channels=3, out_channels=4, kernel_size=4, padding="same", bias=False)),
    (2, dict(in_channels=3, out_channels=2, kernel_size=3, padding=2, padding_mode="reflect")),
    (2, dict(in_channels=3, out_channels=2, kernel_size=(3, 2), padding=(1, 2), padding_mode="replicate")),
    (2, dict(in_channels=3, out_channels=2, kernel_size=3, padding="same", dilation=2,
             padding_mode="circular")),
    (1, dict(in_channels=3, out_channels=5, kernel_size=3, stride=2, padding=1)),
    (1, dict(in_channels=4, out_channels=4, kernel_size=4, padding="same", groups=4, padding_mode="reflect")),
    (1, dict(in_channels=2, out_channels=3, kernel_size=2, padding=3, padding_mode="circular")),
]


@pytest.mark.parametrize("d,kw", MODULE_CASES)
def test_conv_module_matches_torch(d, kw):
    ours = (nn.Conv2d if d == 2 else nn.Conv1d)(**kw, dtype=mg.float64)
    ref = (torch.nn.Conv2d if d == 2 else torch.nn.Conv1d)(**kw, dtype=torch.float64)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert repr(ours) == repr(ref)
    ours.load_state_dict(ref.state_dict())
    r = _rng(7)
    shape = (2, kw["in_channels"]) + (7, 6)[:d]
    x = r.standard_normal(shape)
    X, tX = _leaf(x), _tleaf(x)
    y, ty = ours(X), ref(tX)
    np.testing.assert_allclose(y.data, _np(ty), rtol=TOL, atol=TOL)
    g = r.standard_normal(tuple(ty.shape))
    y.backward(mg.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(X.grad.data, tX.grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(ours.weight.grad.data, ref.weight.grad.numpy(), rtol=TOL, atol=TOL)
    if ref.bias is not None:
        np.testing.assert_allclose(ours.bias.grad.data, ref.bias.grad.numpy(), rtol=TOL, atol=TOL)
    # unbatched through the module
    np.testing.assert_allclose(ours(mg.tensor(x[0])).data, _np(ref(torch.tensor(x[0]))), rtol=TOL, atol=TOL)


def test_conv_padding_mode_gradcheck():
    for mode in ("reflect", "replicate", "circular"):
        m = nn.Conv2d(2, 2, 3, padding=(2, 1), padding_mode=mode, dtype=mg.float64)
        x = _leaf(_rng(8).standard_normal((1, 2, 4, 5)))
        assert gradcheck(lambda a, w, b, mm=m: mm(a), [x, m.weight, m.bias])


def test_conv_module_default_init():
    mg.manual_seed(0)
    m = nn.Conv2d(8, 16, (3, 5), groups=2)
    assert m.weight.shape == (16, 4, 3, 5) and m.weight.dtype == np.float32
    bound = 1 / math.sqrt(4 * 3 * 5)               # kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), ...)
    w, b = m.weight.data, m.bias.data
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.abs(b).max() <= bound and np.std(w) > 0.5 * bound / math.sqrt(3)
    assert abs(w.mean()) < 0.1 * bound
    m1 = nn.Conv1d(3, 2, 4, bias=False)
    assert m1.bias is None and list(m1.state_dict()) == ["weight"]
    assert np.abs(m1.weight.data).max() <= 1 / math.sqrt(12)
    mg.manual_seed(0)
    again = nn.Conv2d(8, 16, (3, 5), groups=2)
    assert np.array_equal(again.weight.data, w)          # minigrad's generator drives the init


def test_conv_module_errors():
    with pytest.raises(ValueError):
        nn.Conv2d(3, 4, 3, groups=2)                     # in_channels % groups
    with pytest.raises(ValueError):
        nn.Conv2d(4, 3, 3, groups=2)                     # out_channels % groups
    with pytest.raises(ValueError):
        nn.Conv2d(4, 4, 3, groups=0)
    with pytest.raises(ValueError):
        nn.Conv2d(4, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError):
        nn.Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError):
        nn.Conv2d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError):
        nn.Conv2d(4, 4, 3, padding=-1)
    with pytest.raises(ValueError):
        nn.Conv1d(2, 2, 3, padding=4, padding_mode="reflect")(mg.ones(1, 2, 4))   # pad >= size
    with pytest.raises(TypeError):
        nn.Conv2d(4, 4, 3, dtype=np.int32)


def test_conv_module_trains():
    mg.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 2))
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    r = _rng(9)
    x = mg.tensor(r.standard_normal((16, 1, 8, 8)).astype(np.float32))
    target = mg.tensor((x.data[:, 0, :4].mean((1, 2)) > x.data[:, 0, 4:].mean((1, 2))).astype(np.int64))
    losses = []
    for _ in range(40):
        loss = F.cross_entropy(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


# ---- max pooling --------------------------------------------------------------------------------
MAXPOOL_CASES = [
    (2, (2, 3, 7, 6), dict(kernel_size=3)),
    (2, (2, 3, 7, 6), dict(kernel_size=3, stride=1, padding=1)),
    (2, (2, 3, 7, 6), dict(kernel_size=(3, 2), stride=(2, 1), padding=1, dilation=(2, 1), ceil_mode=True)),
    (2, (2, 2, 8, 9), dict(kernel_size=2, stride=2, ceil_mode=True)),
    (2, (2, 2, 5, 5), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    (2, (3, 6, 5), dict(kernel_size=2)),                                       # unbatched
    (1, (2, 3, 10), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    (1, (3, 10), dict(kernel_size=4, stride=3, padding=1, dilation=2, ceil_mode=True)),
    (1, (2, 3, 9), dict(kernel_size=3, stride=1, padding=1, dilation=1)),
]


@pytest.mark.parametrize("values", ["distinct", "ties", "nan", "neg_inf"])
@pytest.mark.parametrize("d,xs,kw", MAXPOOL_CASES)
def test_max_pool_matches_torch(d, xs, kw, values):
    r = _rng(10)
    if values == "distinct":
        x = r.standard_normal(xs)
    else:                                     # many equal values: torch's first-max rule decides
        x = r.integers(0, 3, xs).astype(np.float64)
        if values == "nan":
            x[r.random(xs) < 0.15] = np.nan
        if values == "neg_inf":
            x[r.random(xs) < 0.6] = -np.inf
    f_mg, f_t = (F.max_pool2d, TF.max_pool2d) if d == 2 else (F.max_pool1d, TF.max_pool1d)
    y = _parity(lambda a: f_mg(a, **kw, return_indices=True), lambda a: f_t(a, **kw, return_indices=True),
                [x])
    z = f_mg(mg.tensor(x), **kw)                         # without indices: the same values
    np.testing.assert_array_equal(z.data, y.data)


def test_max_pool_signed_zero_ties_follow_torch():
    x = np.array([[[-0.0, 0.0, 0.0, -0.0, -1.0, -0.0]]])
    for k in (2, 3):
        y, i = F.max_pool1d(mg.tensor(x), k, 1, return_indices=True)
        ty, ti = TF.max_pool1d(torch.tensor(x), k, 1, return_indices=True)
        np.testing.assert_array_equal(np.signbit(y.data), np.signbit(ty.numpy()))
        np.testing.assert_array_equal(i.data, ti.numpy())


def test_max_pool_gradcheck():
    x = _leaf(_rng(11).permutation(2 * 3 * 6 * 5).reshape(2, 3, 6, 5) / 7.0)   # no ties
    assert gradcheck(lambda a: F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True), [x])
    x1 = _leaf(_rng(12).permutation(2 * 3 * 9).reshape(2, 3, 9) / 5.0)
    assert gradcheck(lambda a: F.max_pool1d(a, 3, stride=1, padding=1, dilation=2), [x1])


def test_max_pool_float32():
    x = _rng(13).standard_normal((2, 3, 8, 8))
    y32, i32 = F.max_pool2d(mg.tensor(x.astype(np.float32)), 3, 2, 1, return_indices=True)
    y64, i64 = F.max_pool2d(mg.tensor(x), 3, 2, 1, return_indices=True)
    assert y32.dtype == np.float32 and np.array_equal(i32.data, i64.data)
    np.testing.assert_allclose(y32.data, y64.data, rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda f, x: f.max_pool2d(x((2, 2, 5, 5)), 3, padding=2),       # pad > half the kernel
    lambda f, x: f.max_pool2d(x((2, 2, 5, 5)), 2, padding=-1),
    lambda f, x: f.max_pool2d(x((1, 1, 2, 2)), 3),                  # output too small
    lambda f, x: f.max_pool2d(x((1, 1, 4, 4)), 2, stride=0),
    lambda f, x: f.max_pool2d(x((1, 1, 4, 4)), 0),
    lambda f, x: f.max_pool2d(x((4, 4)), 2),                        # 2-D input
    lambda f, x: f.max_pool1d(x((1, 1, 4, 4)), 2),                  # 4-D input
    lambda f, x: f.max_pool2d(x((1, 1, 4, 4)), 2, dilation=0),
    lambda f, x: f.avg_pool2d(x((2, 2, 5, 5)), 3, padding=2),
    lambda f, x: f.avg_pool1d(x((2, 2, 5)), 2, padding=2),
    lambda f, x: f.avg_pool2d(x((1, 1, 2, 2)), 3),
    lambda f, x: f.avg_pool2d(x((1, 1, 4, 4)), 2, divisor_override=0),
    lambda f, x: f.avg_pool2d(x((5,)), 2),
])
def test_pool_errors(call):
    with pytest.raises((ValueError, TypeError)):
        call(F, lambda s: mg.tensor(np.ones(s)))
    with pytest.raises((ValueError, TypeError, RuntimeError, IndexError)):
        call(TF, lambda s: torch.ones(s, dtype=torch.float64))


# ---- average pooling ----------------------------------------------------------------------------
AVGPOOL_CASES = [
    (2, (2, 3, 7, 6), dict(kernel_size=3)),
    (2, (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (2, (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    (2, (2, 3, 7, 6), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True,
                           divisor_override=5)),
    (2, (3, 5, 8), dict(kernel_size=(2, 4), stride=1, padding=(1, 2), count_include_pad=False)),
    (1, (2, 3, 11), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    (1, (2, 3, 11), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    (1, (3, 10), dict(kernel_size=3)),
]


@pytest.mark.parametrize("d,xs,kw", AVGPOOL_CASES)
def test_avg_pool_matches_torch(d, xs, kw):
    x = _rng(14).standard_normal(xs)
    f_mg, f_t = (F.avg_pool2d, TF.avg_pool2d) if d == 2 else (F.avg_pool1d, TF.avg_pool1d)
    _parity(lambda a: f_mg(a, **kw), lambda a: f_t(a, **kw), [x])


def test_avg_pool_gradcheck_and_float32():
    x = _leaf(_rng(15).standard_normal((2, 2, 5, 6)))
    assert gradcheck(lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False), [x])
    x1 = _leaf(_rng(16).standard_normal((2, 2, 7)))
    assert gradcheck(lambda a: F.avg_pool1d(a, 2, 2, 1, ceil_mode=True), [x1])
    y32 = F.avg_pool2d(mg.tensor(x.data.astype(np.float32)), 3, 2, 1)
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32.data, F.avg_pool2d(mg.tensor(x.data), 3, 2, 1).data, rtol=1e-6)


# ---- adaptive pooling ---------------------------------------------------------------------------
ADAPTIVE_CASES = [
    (2, (2, 3, 7, 6), (3, 4)),
    (2, (2, 3, 7, 6), 1),
    (2, (2, 3, 5, 5), 5),
    (2, (3, 7, 6), (None, 4)),
    (2, (2, 2, 4, 5), (6, 7)),                     # larger than the input: windows repeat
    (1, (2, 3, 7), 5),
    (1, (3, 10), 3),
    (1, (2, 3, 4), 9),
]


@pytest.mark.parametrize("d,xs,out", ADAPTIVE_CASES)
def test_adaptive_avg_pool_matches_torch(d, xs, out):
    x = _rng(17).standard_normal(xs)
    f_mg, f_t = ((F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d) if d == 2 else
                 (F.adaptive_avg_pool1d, TF.adaptive_avg_pool1d))
    _parity(lambda a: f_mg(a, out), lambda a: f_t(a, out), [x], tol=1e-12)


@pytest.mark.parametrize("values", ["distinct", "ties", "nan"])
@pytest.mark.parametrize("d,xs,out", ADAPTIVE_CASES)
def test_adaptive_max_pool_matches_torch(d, xs, out, values):
    r = _rng(18)
    x = r.standard_normal(xs) if values == "distinct" else r.integers(0, 3, xs).astype(np.float64)
    if values == "nan":
        x[r.random(xs) < 0.15] = np.nan
    f_mg, f_t = ((F.adaptive_max_pool2d, TF.adaptive_max_pool2d) if d == 2 else
                 (F.adaptive_max_pool1d, TF.adaptive_max_pool1d))
    _parity(lambda a: f_mg(a, out, return_indices=True), lambda a: f_t(a, out, return_indices=True), [x])


def test_adaptive_gradcheck():
    x = _leaf(_rng(19).standard_normal((2, 2, 7, 5)))
    assert gradcheck(lambda a: F.adaptive_avg_pool2d(a, (3, 2)), [x])
    xm = _leaf(_rng(20).permutation(2 * 2 * 7 * 5).reshape(2, 2, 7, 5) / 9.0)
    assert gradcheck(lambda a: F.adaptive_max_pool2d(a, (3, 4)), [xm])
    x1 = _leaf(_rng(21).standard_normal((2, 3, 9)))
    assert gradcheck(lambda a: F.adaptive_avg_pool1d(a, 4), [x1])


def test_adaptive_errors():
    with pytest.raises((ValueError, TypeError)):
        F.adaptive_avg_pool2d(mg.ones(2, 3, 4, 4), (2, 2, 2))
    with pytest.raises((ValueError, TypeError)):
        F.adaptive_max_pool2d(mg.ones(4, 4), 2)
    with pytest.raises(TypeError):
        F.adaptive_avg_pool2d(mg.tensor(np.ones((1, 2, 4, 4), np.int64)), 2)
    with pytest.raises(NotImplementedError):          # torch: not implemented for 'Long'
        torch.nn.functional.adaptive_avg_pool2d(torch.ones(1, 2, 4, 4, dtype=torch.long), 2)


# ---- pooling modules ----------------------------------------------------------------------------
@pytest.mark.parametrize("name,args,kw,xs", [
    ("MaxPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True), (2, 3, 7, 6)),
    ("MaxPool2d", ((2, 3),), dict(return_indices=True), (2, 3, 7, 6)),
    ("MaxPool1d", (3,), dict(stride=2, dilation=2), (2, 3, 11)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False), (2, 3, 7, 6)),
    ("AvgPool2d", (2,), dict(divisor_override=3), (3, 6, 6)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, ceil_mode=True), (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((2, None),), {}, (2, 3, 7, 6)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool2d", (3,), dict(return_indices=True), (2, 3, 7, 6)),
    ("AdaptiveMaxPool1d", (4,), {}, (3, 10)),
])
def test_pool_modules_match_torch(name, args, kw, xs):
    ours, ref = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(ref)
    assert list(ours.state_dict()) == list(ref.state_dict()) == []
    x = _rng(22).standard_normal(xs)
    _parity(ours, ref, [x])


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_with_fewer_out_channels_than_groups_raises_as_torch(groups):
    """weight with 0 < groups out channels (0 included): torch's error, not an empty result."""
    x = mg.tensor(np.ones((1, 2, 5)))
    with pytest.raises(ValueError, match="expected weight to be at least"):
        mg.functional.conv1d(x, mg.tensor(np.ones((0, 2 // groups, 3))), groups=groups)
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv1d(torch.ones(1, 2, 5, dtype=torch.float64), torch.ones(0, 2 // groups, 3,
                                   dtype=torch.float64), groups=groups)


@pytest.mark.parametrize("d", [1, 2])
def test_adaptive_avg_pool_keeps_nan_and_inf_in_their_windows(d):
    """A NaN / inf reaches only the adaptive windows holding it (a pooling-matrix product would
    spread NaN to every window through 0 * NaN); values and gradients as torch."""
    shape = (2, 3, 8) if d == 1 else (2, 3, 7, 8)
    x = _rng(5).standard_normal(shape)
    x[..., 0] = np.nan
    x[0, 1, ..., -1] = np.inf
    f, tf = (F.adaptive_avg_pool1d, torch.nn.functional.adaptive_avg_pool1d) if d == 1 else \
        (F.adaptive_avg_pool2d, torch.nn.functional.adaptive_avg_pool2d)
    out = 3 if d == 1 else (3, 5)
    mx, tx = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got, want = f(mx, out), tf(tx, out)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, equal_nan=True)
    assert np.isfinite(got.numpy()).any()
    g = _rng(6).standard_normal(want.shape)
    got.backward(mg.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("case", [((1, 1, 8, 1), 2, 1, 1, 2, False), ((2, 1, 1), 3, None, 1, 2, True),
                                  ((1, 3, 1, 8), 2, 2, 1, 2, False)])
def test_max_pool_window_entirely_in_the_padding_is_minus_inf_as_torch(case):
    """With dilation a window can miss the input in a dim (every tap in the padding): -inf and
    torch's index there (values gathered elsewhere before); no gradient flows from it."""
    shape, k, s, p, dil, ceil = case
    x = _rng(7).standard_normal(shape)
    f, tf = (F.max_pool1d, torch.nn.functional.max_pool1d) if len(shape) == 3 else \
        (F.max_pool2d, torch.nn.functional.max_pool2d)
    mx = mg.tensor(x, requires_grad=True)
    y, idx = f(mx, k, s, p, dil, ceil, return_indices=True)
    ty, tidx = tf(torch.tensor(x), k, s, p, dil, ceil, return_indices=True)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    assert np.isneginf(y.numpy()).any()
    y.sum().backward()
    assert np.isfinite(mx.grad.numpy()).all()


def test_max_pool_padding_limit_ignores_dilation_as_torch():
    """torch checks pad <= kernel_size / 2 whatever the dilation."""
    x = mg.tensor(np.ones((1, 1, 8)))
    with pytest.raises(ValueError, match="pad should be at most half of kernel size"):
        F.max_pool1d(x, 3, padding=2, dilation=2)
    with pytest.raises(RuntimeError):
        torch.nn.functional.max_pool1d(torch.ones(1, 1, 8), 3, padding=2, dilation=2)
