"""batch_norm / group_norm / instance_norm and nn.BatchNorm1d/2d, nn.GroupNorm, nn.InstanceNorm1d/2d:
forward, gradients and running statistics against torch (float64), minigrad's gradcheck, float32
vs float64, state_dict keys and loading torch's state_dict, train/eval behaviour, error cases."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from torch_parity import TOL, leaf as _leaf, np_of as _np, parity as _parity, rng as _rng, tleaf as _tleaf  # noqa: E402, I001


# ---- group_norm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups,affine", [
    ((4, 6, 5, 3), 3, True),
    ((4, 6, 5, 3), 1, True),
    ((4, 6, 5, 3), 6, False),
    ((3, 4, 7), 2, True),
    ((5, 4), 2, True),                      # (N, C): one value per channel
    ((2, 8, 2, 3, 2), 4, True),             # 3 spatial dims
    ((1, 6, 1, 1), 2, True),
])
def test_group_norm_matches_torch(shape, groups, affine):
    r = _rng(sum(shape))
    x = r.standard_normal(shape) * 3 + 1
    C = shape[1]
    w, b = (r.standard_normal(C), r.standard_normal(C)) if affine else (None, None)
    _parity(lambda a, c, e: F.group_norm(a, groups, c, e, eps=1e-4),
            lambda a, c, e: TF.group_norm(a, groups, c, e, eps=1e-4), [x, w, b])


def test_group_norm_gradcheck():
    r = _rng(1)
    x, w, b = _leaf(r.standard_normal((2, 4, 3, 2))), _leaf(r.standard_normal(4)), _leaf(r.standard_normal(4))
    assert gradcheck(lambda a, c, e: F.group_norm(a, 2, c, e), [x, w, b])
    assert gradcheck(lambda a: F.group_norm(a, 4), [_leaf(r.standard_normal((3, 4, 5)))])


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_group_norm_module(affine, bias):
    ours = nn.GroupNorm(3, 6, eps=1e-3, affine=affine, bias=bias, dtype=mg.float64)
    ref = torch.nn.GroupNorm(3, 6, eps=1e-3, affine=affine, bias=bias, dtype=torch.float64)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert repr(ours) == repr(ref)
    if affine:
        with torch.no_grad():
            ref.weight.normal_()
            if bias:
                ref.bias.normal_()
    ours.load_state_dict(ref.state_dict())
    x = _rng(2).standard_normal((4, 6, 5))
    X, tX = _leaf(x), _tleaf(x)
    y, ty = ours(X), ref(tX)
    np.testing.assert_allclose(y.data, _np(ty), rtol=TOL, atol=TOL)
    y.sum().backward()
    (ty * 1).sum().backward()
    np.testing.assert_allclose(X.grad.data, tX.grad.numpy(), rtol=1e-9, atol=1e-9)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.data, p.grad.numpy(), rtol=TOL, atol=TOL)


# ---- batch_norm (functional) --------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (3, 4, 5, 2), (2, 2, 3, 2, 2)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_functional_matches_torch(shape, training):
    r = _rng(len(shape))
    C = shape[1]
    x = r.standard_normal(shape) * 2 - 1
    w, b = r.standard_normal(C), r.standard_normal(C)
    rm0, rv0 = r.standard_normal(C), r.random(C) + 0.5
    rm, rv = mg.tensor(rm0.copy()), mg.tensor(rv0.copy())
    trm, trv = torch.tensor(rm0.copy()), torch.tensor(rv0.copy())
    _parity(lambda a, c, e: F.batch_norm(a, rm, rv, c, e, training=training, momentum=0.3, eps=1e-3),
            lambda a, c, e: TF.batch_norm(a, trm, trv, c, e, training=training, momentum=0.3, eps=1e-3),
            [x, w, b])
    np.testing.assert_allclose(rm.data, trm.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rv.data, trv.numpy(), rtol=1e-12, atol=1e-12)
    if training:                                   # updated with the unbiased variance
        n = x.size // C
        axes = (0,) + tuple(range(2, x.ndim))
        np.testing.assert_allclose(rv.data, 0.7 * rv0 + 0.3 * x.var(axis=axes) * n / (n - 1), rtol=1e-12)
        assert not rm.requires_grad and rm.grad_fn is None
    else:
        np.testing.assert_array_equal(rm.data, rm0)


def test_batch_norm_training_without_running_stats_and_gradcheck():
    r = _rng(3)
    x = r.standard_normal((5, 3, 4))
    _parity(lambda a: F.batch_norm(a, None, None, training=True),
            lambda a: TF.batch_norm(a, None, None, training=True), [x])
    X, w, b = _leaf(x), _leaf(r.standard_normal(3)), _leaf(r.standard_normal(3))
    assert gradcheck(lambda a, c, e: F.batch_norm(a, None, None, c, e, training=True), [X, w, b])
    rm, rv = mg.tensor(r.standard_normal(3)), mg.tensor(r.random(3) + 0.5)
    assert gradcheck(lambda a, c, e: F.batch_norm(a, rm, rv, c, e, training=False), [X, w, b])


# ---- BatchNorm modules --------------------------------------------------------------------------
def _pair(cls_name, *args, **kw):
    return (getattr(nn, cls_name)(*args, **kw, dtype=mg.float64),
            getattr(torch.nn, cls_name)(*args, **kw, dtype=torch.float64))


def _step_matches(ours, ref, x, g):
    """One forward on x and backward of g through both modules: outputs, input grads and states agree."""
    X, tX = _leaf(x), _tleaf(x)
    y, ty = ours(X), ref(tX)
    np.testing.assert_allclose(y.data, _np(ty), rtol=TOL, atol=TOL)
    y.backward(mg.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(X.grad.data, tX.grad.numpy(), rtol=1e-9, atol=1e-9)
    _same_state(ours, ref)


def _same_state(ours, ref, tol=1e-12):
    sd, tsd = ours.state_dict(), ref.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        assert sd[k].dtype == tsd[k].numpy().dtype, k
        np.testing.assert_allclose(sd[k], tsd[k].numpy(), rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("cls_name,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                            ("BatchNorm2d", (4, 3, 3, 2))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_module_train_eval_matches_torch(cls_name, shape, momentum):
    ours, ref = _pair(cls_name, 3, momentum=momentum)
    assert repr(ours) == repr(ref)
    _same_state(ours, ref)
    r = _rng(4)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    ours.load_state_dict(ref.state_dict())
    for step in range(3):                                   # training: batch statistics
        x = r.standard_normal(shape) * (step + 1) + step
        _step_matches(ours, ref, x, r.standard_normal(shape))
    assert int(ours.num_batches_tracked.item()) == 3
    np.testing.assert_allclose(ours.weight.grad.data, ref.weight.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.bias.grad.data, ref.bias.grad.numpy(), rtol=1e-9, atol=1e-9)
    ours.eval()
    ref.eval()
    x = r.standard_normal(shape)
    before = ours.state_dict()
    y, ty = ours(_leaf(x)), ref(_tleaf(x))                  # eval: running statistics, no update
    np.testing.assert_allclose(y.data, _np(ty), rtol=TOL, atol=TOL)
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    # eval output really uses the running statistics (not the batch's)
    rm, rv = ours.running_mean.data, ours.running_var.data
    ch = (3,) + (1,) * (x.ndim - 2)
    expect = ((x - rm.reshape(ch)) / np.sqrt(rv + 1e-5).reshape(ch) * ours.weight.data.reshape(ch)
              + ours.bias.data.reshape(ch))
    np.testing.assert_allclose(y.data, expect, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(affine=False), dict(track_running_stats=False), dict(bias=False),
                                dict(affine=False, track_running_stats=False)])
def test_batchnorm_module_options(kw):
    ours, ref = _pair("BatchNorm2d", 4, **kw)
    assert repr(ours) == repr(ref)
    _same_state(ours, ref)
    r = _rng(5)
    for mode in ("train", "eval", "train"):
        getattr(ours, mode)()
        getattr(ref, mode)()
        x = r.standard_normal((3, 4, 2, 3))
        np.testing.assert_allclose(ours(mg.tensor(x)).data, _np(ref(torch.tensor(x))), rtol=TOL, atol=TOL)
        _same_state(ours, ref)


def test_batchnorm_load_torch_state_dict_float32():
    ref = torch.nn.BatchNorm2d(5)
    r = _rng(6)
    ref.train()
    for _ in range(3):
        ref(torch.tensor(r.standard_normal((4, 5, 3, 3)).astype(np.float32)))
    with torch.no_grad():
        ref.weight.uniform_(0.5, 2)
        ref.bias.normal_()
    ref.eval()
    ours = nn.BatchNorm2d(5)
    ours.load_state_dict(ref.state_dict())
    assert ours.num_batches_tracked.dtype == np.int64 and ours.num_batches_tracked.item() == 3
    ours.eval()
    x = r.standard_normal((2, 5, 4, 4)).astype(np.float32)
    y = ours(mg.tensor(x))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.data, _np(ref(torch.tensor(x))), rtol=1e-5, atol=1e-5)
    ours.double()
    assert ours.running_mean.dtype == np.float64 and ours.num_batches_tracked.dtype == np.int64


def test_batchnorm_float32_matches_float64():
    r = _rng(7)
    x = r.standard_normal((4, 3, 5, 5))
    outs = []
    for dt in (mg.float32, mg.float64):
        m = nn.BatchNorm2d(3, dtype=dt)
        X = _leaf(x, dt)
        y = m(X)
        (y * y).sum().backward()
        outs.append((y.data, X.grad.data, m.running_var.data, m.weight.grad.data))
        assert y.dtype == dt and m.running_mean.dtype == dt
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_batchnorm_reset_and_grad_free_buffers():
    m = nn.BatchNorm1d(2)
    m(mg.tensor(_rng(8).standard_normal((4, 2)).astype(np.float32), requires_grad=True))
    assert not m.running_mean.requires_grad and m.num_batches_tracked.item() == 1
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    m.reset_running_stats()
    np.testing.assert_array_equal(m.running_mean.data, 0)
    np.testing.assert_array_equal(m.running_var.data, 1)
    assert m.num_batches_tracked.item() == 0


# ---- instance norm -----------------------------------------------------------------------------
@pytest.mark.parametrize("cls_name,shape", [("InstanceNorm1d", (3, 4, 6)), ("InstanceNorm1d", (4, 6)),
                                            ("InstanceNorm2d", (2, 4, 3, 5)), ("InstanceNorm2d", (4, 3, 5))])
@pytest.mark.parametrize("kw", [{}, dict(affine=True), dict(track_running_stats=True, momentum=0.2)])
def test_instance_norm_module_matches_torch(cls_name, shape, kw):
    ours, ref = _pair(cls_name, 4, **kw)
    assert repr(ours) == repr(ref)
    _same_state(ours, ref)
    if ref.affine:
        with torch.no_grad():
            ref.weight.normal_()
            ref.bias.normal_()
        ours.load_state_dict(ref.state_dict())
    r = _rng(9)
    for mode in ("train", "train", "eval"):
        getattr(ours, mode)()
        getattr(ref, mode)()
        x = r.standard_normal(shape) * 2 + 1
        _step_matches(ours, ref, x, r.standard_normal(shape))


def test_instance_norm_gradcheck():
    r = _rng(10)
    x, w, b = _leaf(r.standard_normal((2, 3, 4))), _leaf(r.standard_normal(3)), _leaf(r.standard_normal(3))
    assert gradcheck(lambda a, c, e: F.instance_norm(a, weight=c, bias=e), [x, w, b])


# ---- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda f, t: f.group_norm(t((2, 3, 4)), 2),                                     # C % groups
    lambda f, t: f.group_norm(t((2, 4, 4)), 2, t((3,))),                            # weight shape
    lambda f, t: f.batch_norm(t((1, 3)), None, None, training=True),                # one value/channel
    lambda f, t: f.batch_norm(t((2, 3, 4)), None, None, training=False),            # eval needs stats
    lambda f, t: f.batch_norm(t((2, 3, 4)), t((4,)), t((4,))),                      # stats shape
    lambda f, t: f.instance_norm(t((2, 3, 1))),                                     # one spatial value
])
def test_norm_errors_like_torch(call):
    with pytest.raises((ValueError, TypeError)):
        call(F, lambda s: mg.tensor(np.ones(s)))
    with pytest.raises((ValueError, RuntimeError)):
        call(TF, lambda s: torch.ones(s, dtype=torch.float64))


def test_norm_module_errors():
    with pytest.raises(ValueError):
        nn.BatchNorm1d(3)(mg.ones(2, 3, 4, 5))                      # 4-D into BatchNorm1d
    with pytest.raises(ValueError):
        nn.BatchNorm2d(3)(mg.ones(2, 3, 4))
    with pytest.raises(ValueError):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError):
        nn.GroupNorm(2, 4)(mg.ones(2, 6, 3))
    with pytest.raises(ValueError):
        nn.InstanceNorm1d(3, affine=True)(mg.ones(2, 4, 5))
    with pytest.raises(TypeError):
        nn.BatchNorm1d(3)(mg.ones(4, 3, dtype=mg.float64))          # float64 input, float32 stats
    with pytest.raises(TypeError):
        F.batch_norm(mg.tensor(np.ones((2, 3), np.int64)), None, None, training=True)
    with pytest.raises(TypeError):
        F.group_norm(mg.tensor(np.ones((2, 4, 3), np.int64)), 2)
    with pytest.raises(RuntimeError):
        nn.BatchNorm1d(3).load_state_dict({"weight": np.ones(3, np.float32)})      # strict: missing keys


def test_errors_torch_raises_for_degenerate_statistics():
    """From a 1 500-case fuzz against torch: batch_norm in training with eps <= 0, and group_norm
    when N * C / groups * spatial size is 1 (torch's check), raise as torch does."""
    x = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match="eps must be positive during training"):
        F.batch_norm(mg.tensor(x), mg.zeros(3, dtype=mg.float64), mg.ones(3, dtype=mg.float64), training=True,
                     eps=0.0)
    with pytest.raises(ValueError):
        torch.nn.functional.batch_norm(torch.tensor(x), torch.zeros(3, dtype=torch.float64),
                                       torch.ones(3, dtype=torch.float64), training=True, eps=0.0)
    for shape, groups in (((1, 1), 1), ((1, 2, 1), 2)):
        with pytest.raises(ValueError, match="more than 1 value per channel"):
            F.group_norm(mg.tensor(np.ones(shape)), groups)
        with pytest.raises(ValueError):
            torch.nn.functional.group_norm(torch.ones(shape, dtype=torch.float64), groups)
    assert F.group_norm(mg.tensor(np.arange(4.0).reshape(2, 2, 1)), 2).shape == (2, 2, 1)
