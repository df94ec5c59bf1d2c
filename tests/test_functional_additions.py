"""F.dropout, the losses (mse, l1, smooth_l1, huber, nll, binary_cross_entropy_with_logits, kl_div),
one_hot, leaky_relu, elu, logsigmoid, glu, normalize, cosine_similarity and scaled_dot_product_attention
against torch.nn.functional in float64: values and the gradient of every float input, plus gradcheck
of the composites and known values."""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.autograd import gradcheck

RTOL, ATOL = 1e-12, 1e-12


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _pairs(torch, *arrays, grad=True):
    """(minigrad, torch) float64 tensor pairs of the same values, both requiring grad."""
    out = []
    for a in arrays:
        a = np.asarray(a, dtype=np.float64)
        out.append((mg.tensor(a.copy(), requires_grad=grad), torch.tensor(a.copy(), requires_grad=grad)))
    return out


def _check(torch, y, ty, pairs, seed=0):
    """Same values; then the same gradient of every input for one random cotangent."""
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    w = np.random.default_rng(seed).standard_normal(y.shape)
    (y * mg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for m, t in pairs:
        if t.grad is None:
            assert m.grad is None or not m.grad.numpy().any()
            continue
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=RTOL, atol=ATOL)


SHAPES = [(5,), (3, 4), (2, 3, 4)]
REDUCTIONS = ["mean", "sum", "none"]


def _loss_inputs(shape, seed, tie=1.0):
    """input and target with a few d = input - target at 0 and at +-tie (the kinks)."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shape) * 2, rng.standard_normal(shape)
    a.flat[0] = b.flat[0]
    if a.size > 2:
        a.flat[1], a.flat[2] = b.flat[1] + tie, b.flat[2] - tie
    return a, b


# ---- pointwise losses -------------------------------------------------------------------------------------
POINTWISE = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", dict(beta=1.0)),
             ("smooth_l1_loss", dict(beta=0.5)), ("smooth_l1_loss", dict(beta=0.0)),
             ("huber_loss", dict(delta=1.0)), ("huber_loss", dict(delta=2.5))]


@pytest.mark.parametrize("name, kw", POINTWISE)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pointwise_losses_match_torch(torch, name, kw, shape, reduction):
    tie = kw.get("beta", kw.get("delta", 1.0)) or 1.0
    (x, tx), (y, ty) = _pairs(torch, *_loss_inputs(shape, len(shape), tie))
    out = getattr(F, name)(x, y, reduction=reduction, **kw)
    tout = getattr(torch.nn.functional, name)(tx, ty, reduction=reduction, **kw)
    _check(torch, out, tout, [(x, tx), (y, ty)])


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_pointwise_losses_match_torch(torch, name, reduction):
    a, b = _loss_inputs((3, 4), 7)
    wt = np.random.default_rng(8).uniform(0.1, 2.0, (3, 4))
    (x, tx), (y, ty), (w, tw) = _pairs(torch, a, b, wt)
    out = getattr(F, name)(x, y, reduction=reduction, weight=w)
    tout = getattr(torch.nn.functional, name)(tx, ty, reduction=reduction, weight=tw)
    _check(torch, out, tout, [(x, tx), (y, ty), (w, tw)])


def test_pointwise_losses_known_values_and_errors():
    x, y = mg.tensor([0.0, 0.5, 3.0], dtype=mg.float64), mg.tensor([0.0, 0.0, 0.0], dtype=mg.float64)
    assert F.mse_loss(x, y, reduction="sum").item() == 9.25
    assert F.l1_loss(x, y).item() == 3.5 / 3
    np.testing.assert_array_equal(F.smooth_l1_loss(x, y, reduction="none").numpy(), [0.0, 0.125, 2.5])
    np.testing.assert_array_equal(F.huber_loss(x, y, reduction="none", delta=2.0).numpy(), [0.0, 0.125, 4.0])
    np.testing.assert_array_equal(F.smooth_l1_loss(x, y, reduction="none", beta=0.0).numpy(), [0, 0.5, 3])
    with pytest.warns(UserWarning, match="mse_loss: target size"):
        F.mse_loss(mg.zeros(3, 1), mg.zeros(3))
    with pytest.raises(ValueError, match="mse_loss: 'avg' is not a valid value for reduction"):
        F.mse_loss(x, y, reduction="avg")
    with pytest.raises(ValueError, match="l1_loss: size_average and reduce are deprecated"):
        F.l1_loss(x, y, size_average=True)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be >= 0"):
        F.smooth_l1_loss(x, y, beta=-1.0)
    with pytest.raises(ValueError, match="huber_loss: delta must be a finite positive number"):
        F.huber_loss(x, y, delta=0.0)
    with pytest.raises(ValueError, match="mse_loss: weight .* must have the same size"):
        F.mse_loss(x, y, weight=mg.ones(2, dtype=mg.float64))
    with pytest.raises(TypeError, match="l1_loss: input must be a float32 or float64 Tensor"):
        F.l1_loss(mg.tensor([1, 2]), y)


# ---- nll_loss ---------------------------------------------------------------------------------------------
NLL_CASES = [((5,), ()), ((4, 5), (4,)), ((3, 5, 2, 3), (3, 2, 3))]


@pytest.mark.parametrize("shape, tshape", NLL_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_matches_torch(torch, shape, tshape, reduction, weighted):
    rng = np.random.default_rng(len(shape))
    C = shape[0] if len(shape) == 1 else shape[1]
    target = rng.integers(0, C, tshape)
    if target.size > 1:
        target.flat[1] = -100                                   # ignore_index present
    elif target.size == 1 and reduction == "sum":
        target[...] = -100
    (x, tx), = _pairs(torch, rng.standard_normal(shape))
    weight = rng.uniform(0.2, 2.0, C) if weighted else None
    out = F.nll_loss(x, mg.tensor(target), weight=None if weight is None else mg.tensor(weight),
                     reduction=reduction)
    tout = torch.nn.functional.nll_loss(tx, torch.tensor(target), reduction=reduction,
                                        weight=None if weight is None else torch.tensor(weight))
    _check(torch, out, tout, [(x, tx)])


def test_nll_loss_custom_ignore_index_all_ignored_and_errors(torch):
    (x, tx), = _pairs(torch, np.random.default_rng(1).standard_normal((3, 4)))
    t = np.array([2, 2, 2])
    out = F.nll_loss(x, t, ignore_index=2)
    tout = torch.nn.functional.nll_loss(tx, torch.tensor(t), ignore_index=2)
    assert math.isnan(out.item()) and math.isnan(tout.item())
    out.backward()
    tout.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())         # zeros
    logp = mg.tensor(np.log([[0.25, 0.75], [0.5, 0.5]]))
    assert abs(F.nll_loss(logp, [1, 0]).item() - (math.log(4 / 3) + math.log(2)) / 2) < 1e-15
    with pytest.raises(IndexError, match="nll_loss: target contains 4, outside"):
        F.nll_loss(x, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match=r"nll_loss: input \(3, 4\) needs target of shape \(3,\)"):
        F.nll_loss(x, np.array([0, 1]))
    with pytest.raises(ValueError, match=r"nll_loss: weight has shape \(3,\), expected \(4,\)"):
        F.nll_loss(x, np.array([0, 1, 1]), weight=mg.ones(3, dtype=mg.float64))
    with pytest.raises(TypeError, match="nll_loss: class-probability"):
        F.nll_loss(x, np.zeros((3, 4)))


# ---- binary_cross_entropy_with_logits ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", ["plain", "pos_weight", "weight", "both"])
def test_bce_with_logits_matches_torch(torch, shape, reduction, extra):
    rng = np.random.default_rng(len(shape))
    logits = rng.standard_normal(shape) * 4
    logits.flat[0] = 0.0
    (x, tx), (y, ty) = _pairs(torch, logits, rng.uniform(0, 1, shape))
    kw, tkw = {}, {}
    if extra in ("pos_weight", "both"):
        pw = rng.uniform(0.5, 3.0, shape[-1])
        kw["pos_weight"], tkw["pos_weight"] = mg.tensor(pw), torch.tensor(pw)
    if extra in ("weight", "both"):
        w = rng.uniform(0.5, 3.0, shape[-1:])
        kw["weight"], tkw["weight"] = mg.tensor(w), torch.tensor(w)
    out = F.binary_cross_entropy_with_logits(x, y, reduction=reduction, **kw)
    tout = torch.nn.functional.binary_cross_entropy_with_logits(tx, ty, reduction=reduction, **tkw)
    _check(torch, out, tout, [(x, tx), (y, ty)])


def test_bce_with_logits_is_stable_for_extreme_logits(torch):
    a = np.array([-1000.0, -50.0, -1e-9, 0.0, 1e-9, 40.0, 1000.0])
    for yv in (0.0, 1.0, 0.3):
        (x, tx), (y, ty) = _pairs(torch, a, np.full(a.shape, yv))
        out = F.binary_cross_entropy_with_logits(x, y, reduction="none")
        tout = torch.nn.functional.binary_cross_entropy_with_logits(tx, ty, reduction="none")
        assert np.isfinite(out.numpy()).all()
        np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-15, atol=0)
        _check(torch, out, tout, [(x, tx), (y, ty)])
    x = mg.tensor([0.0], dtype=mg.float64, requires_grad=True)
    F.binary_cross_entropy_with_logits(x, mg.tensor([1.0], dtype=mg.float64)).backward()
    assert x.grad.item() == -0.5                          # sigmoid(0) - 1, also at the kink of |x|
    with pytest.raises(ValueError, match="binary_cross_entropy_with_logits: target size"):
        F.binary_cross_entropy_with_logits(mg.zeros(3), mg.zeros(3, 1))


# ---- kl_div -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["sum", "none", "batchmean", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(torch, shape, reduction, log_target):
    rng = np.random.default_rng(len(shape))
    logp = np.log(rng.dirichlet(np.ones(shape[-1]), shape[:-1]))
    q = rng.dirichlet(np.ones(shape[-1]), shape[:-1])
    (x, tx), (t, tt) = _pairs(torch, logp, np.log(q) if log_target else q)
    with pytest.warns(UserWarning) if reduction == "mean" else _nullcontext():
        out = F.kl_div(x, t, reduction=reduction, log_target=log_target)
    with pytest.warns(UserWarning) if reduction == "mean" else _nullcontext():
        tout = torch.nn.functional.kl_div(tx, tt, reduction=reduction, log_target=log_target)
    _check(torch, out, tout, [(x, tx), (t, tt)])


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_kl_div_zero_target_and_known_value(torch):
    p, q = np.array([[0.5, 0.5]]), np.array([[0.0, 1.0]])
    x = mg.tensor(np.log(p), requires_grad=True)
    t = mg.tensor(q, requires_grad=True)
    out = F.kl_div(x, t, reduction="batchmean")
    assert abs(out.item() - math.log(2)) < 1e-15                  # KL(q || p) = 1 * log(1 / 0.5)
    assert out.item() == torch.nn.functional.kl_div(torch.tensor(np.log(p)), torch.tensor(q),
                                                    reduction="batchmean").item()
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), -q)
    # d/dt xlogy(t, t) at t = 0: minigrad 0 (torch nan); elsewhere log t + 1
    np.testing.assert_allclose(t.grad.numpy(), [[0.0 - np.log(0.5), 1.0 - np.log(0.5)]])
    with pytest.raises(ValueError, match="kl_div: 'avg' is not a valid value"):
        F.kl_div(x, t, reduction="avg")


# ---- activations ------------------------------------------------------------------------------------------
def _act_input(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape) * 3
    a.flat[0] = 0.0
    return a


@pytest.mark.parametrize("name, kw", [("leaky_relu", {}), ("leaky_relu", dict(negative_slope=0.2)),
                                      ("leaky_relu", dict(negative_slope=-1.5)), ("elu", {}),
                                      ("elu", dict(alpha=0.5)), ("logsigmoid", {}), ("glu", {}),
                                      ("glu", dict(dim=0)), ("glu", dict(dim=1))])
@pytest.mark.parametrize("shape", [(4,), (4, 6), (2, 4, 6)])
def test_activations_match_torch(torch, name, kw, shape):
    if name == "glu" and kw.get("dim", 0) >= len(shape):
        pytest.skip("dim out of range")
    (x, tx), = _pairs(torch, _act_input(shape, len(shape)))
    _check(torch, getattr(F, name)(x, **kw), getattr(torch.nn.functional, name)(tx, **kw), [(x, tx)])


def test_activations_extreme_values(torch):
    a = np.array([-1000.0, -40.0, -1e-300, 0.0, 1e-300, 40.0, 1000.0])
    for name in ("logsigmoid", "elu"):
        (x, tx), = _pairs(torch, a)
        y = getattr(F, name)(x)
        assert np.isfinite(y.numpy()).all()
        _check(torch, y, getattr(torch.nn.functional, name)(tx), [(x, tx)])
        assert np.isfinite(x.grad.numpy()).all()
    assert F.logsigmoid(mg.tensor([-1000.0])).item() == -1000.0
    x = mg.tensor([0.0], dtype=mg.float64, requires_grad=True)
    F.leaky_relu(x, 0.1).backward()
    assert x.grad.item() == pytest.approx(0.1)                          # torch's gradient at 0
    with pytest.raises(ValueError, match=r"glu: halving dimension must be even.*size 3"):
        F.glu(mg.zeros(2, 3))
    with pytest.raises(ValueError, match="glu: does not support 0-d"):
        F.glu(mg.tensor(1.0))
    with pytest.raises(ValueError, match="elu: inplace=True is not supported"):
        F.elu(mg.zeros(2), inplace=True)
    with pytest.raises(TypeError, match="leaky_relu: negative_slope must be a number"):
        F.leaky_relu(mg.zeros(2), "0.1")


# ---- normalize, cosine_similarity --------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf])
@pytest.mark.parametrize("shape, dim", [((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((5,), 0)])
def test_normalize_matches_torch(torch, p, shape, dim):
    a = np.random.default_rng(len(shape)).standard_normal(shape)
    if len(shape) > 1:
        a[(slice(None),) * dim + (0,) if dim >= 0 else (..., 0)] = 0.0    # a zero vector or two
        a.flat[-1] = 0.0
    (x, tx), = _pairs(torch, a)
    _check(torch, F.normalize(x, p=p, dim=dim), torch.nn.functional.normalize(tx, p=p, dim=dim), [(x, tx)])


def test_normalize_zero_vector_and_eps(torch):
    (x, tx), = _pairs(torch, np.zeros((2, 3)))
    _check(torch, F.normalize(x), torch.nn.functional.normalize(tx), [(x, tx)])
    np.testing.assert_allclose(F.normalize(mg.tensor([[3.0, 4.0]])).numpy(), [[0.6, 0.8]], rtol=1e-7)
    (x, tx), = _pairs(torch, np.array([[1e-3, -2e-3], [3.0, 4.0]]))
    _check(torch, F.normalize(x, eps=0.1), torch.nn.functional.normalize(tx, eps=0.1), [(x, tx)])
    with pytest.raises(ValueError, match=r"normalize: p must be > 0"):
        F.normalize(mg.zeros(2, 2), p=0)


@pytest.mark.parametrize("s1, s2, dim", [((3, 4), (3, 4), 1), ((3, 4), (1, 4), 1), ((2, 3, 4), (3, 4), -1),
                                         ((2, 3, 4), (2, 3, 4), 0), ((5,), (5,), 0)])
def test_cosine_similarity_matches_torch(torch, s1, s2, dim):
    rng = np.random.default_rng(len(s1))
    (x1, t1), (x2, t2) = _pairs(torch, rng.standard_normal(s1), rng.standard_normal(s2))
    _check(torch, F.cosine_similarity(x1, x2, dim=dim),
           torch.nn.functional.cosine_similarity(t1, t2, dim=dim), [(x1, t1), (x2, t2)])


def test_cosine_similarity_zero_and_tiny_vectors(torch):
    a = np.random.default_rng(3).standard_normal((3, 4))
    b = np.random.default_rng(4).standard_normal((3, 4))
    a[0] = 0.0
    a[1] *= 1e-10                                 # below eps: the clamp, with the norm's gradient
    (x1, t1), (x2, t2) = _pairs(torch, a, b)
    y, ty = F.cosine_similarity(x1, x2), torch.nn.functional.cosine_similarity(t1, t2)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x1.grad.numpy(), t1.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(x2.grad.numpy(), t2.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert F.cosine_similarity(mg.tensor([[1.0, 0.0]]), mg.tensor([[0.0, 2.0]])).item() == 0.0
    with pytest.raises(ValueError, match="cosine_similarity: .* cannot be broadcast"):
        F.cosine_similarity(mg.zeros(3, 4), mg.zeros(2, 4))


# ---- one_hot ----------------------------------------------------------------------------------------------
def test_one_hot_matches_torch(torch):
    for t, n in [([0, 2, 1], -1), ([[1, 0], [3, 3]], 5), (2, 4), (np.zeros((0, 2), np.int64), 3)]:
        out = F.one_hot(mg.tensor(t), n)
        tout = torch.nn.functional.one_hot(torch.tensor(t), n)
        assert out.dtype == mg.int64 and not out.requires_grad
        np.testing.assert_array_equal(out.numpy(), tout.numpy())
        assert out.shape == tuple(tout.shape)
    np.testing.assert_array_equal(F.one_hot(np.array([1], np.int32), 2).numpy(), [[0, 1]])


@pytest.mark.parametrize("t, n, error, match", [
    ([0, 3], 3, ValueError, "one_hot: class values must be smaller than num_classes=3"),
    ([0, -1], 3, ValueError, "one_hot: class values must be non-negative"),
    (np.zeros(0, np.int64), -1, ValueError, "one_hot: cannot infer the number of classes"),
    ([0.0, 1.0], -1, TypeError, "one_hot: tensor must hold integer class indices"),
    ([0, 1], 2.0, TypeError, "one_hot: num_classes must be an int"),
])
def test_one_hot_errors(t, n, error, match):
    with pytest.raises(error, match=match):
        F.one_hot(mg.tensor(t), n)


# ---- dropout ----------------------------------------------------------------------------------------------
def test_dropout_matches_the_module_and_scales():
    x = mg.randn(50, 40, dtype=mg.float64, requires_grad=True)
    a = F.dropout(x, 0.3, generator=np.random.default_rng(5))
    b = nn.Dropout(0.3, generator=np.random.default_rng(5))(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    keep = a.numpy() != 0
    np.testing.assert_allclose(a.numpy()[keep], x.numpy()[keep] / 0.7, rtol=1e-15)
    assert abs(keep.mean() - 0.7) < 0.05
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), keep / 0.7, rtol=1e-15)
    mg.manual_seed(1)
    c = F.dropout(x, 0.5)
    mg.manual_seed(1)
    np.testing.assert_array_equal(nn.Dropout(0.5)(x).numpy(), c.numpy())       # the global generator
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    assert not F.dropout(x, 1.0).numpy().any()
    with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\]"):
        F.dropout(x, 1.5)
    with pytest.raises(ValueError, match="dropout: inplace=True"):
        F.dropout(x, 0.5, inplace=True)
    with pytest.raises(TypeError, match="dropout: training must be True or False"):
        F.dropout(x, 0.5, "yes")


# ---- scaled_dot_product_attention -------------------------------------------------------------------------
def _qkv(shape_q, shape_k, shape_v, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape_q), rng.standard_normal(shape_k), rng.standard_normal(shape_v)


SDPA_CASES = [  # q, k, v shapes, kwargs
    ((5, 4), (7, 4), (7, 3), {}),
    ((2, 5, 4), (2, 7, 4), (2, 7, 6), dict(scale=0.3)),
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4), {}),
    ((2, 3, 5, 4), (2, 1, 7, 4), (2, 1, 7, 4), {}),                       # broadcast kv heads
    ((2, 4, 5, 4), (2, 2, 7, 4), (2, 2, 7, 4), dict(enable_gqa=True)),
    ((2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 4), dict(is_causal=True)),     # fused route
    ((2, 4, 6, 4), (2, 2, 6, 4), (2, 2, 6, 4), dict(is_causal=True, enable_gqa=True)),   # fused GQA
    ((2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 5), dict(is_causal=True)),     # Ev != E: composed
    ((2, 3, 5, 4), (2, 3, 8, 4), (2, 3, 8, 4), dict(is_causal=True)),     # L < S, top-left
    ((2, 3, 8, 4), (2, 3, 5, 4), (2, 3, 5, 4), dict(is_causal=True, scale=0.7)),    # L > S
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4), dict(scale=-0.7)),       # (torch's causal CPU kernel
    # gives nan for a negative scale; its math backend agrees with minigrad there)
    ((3, 6, 4), (3, 6, 4), (3, 6, 4), dict(is_causal=True)),              # 3-D: composed
]


@pytest.mark.parametrize("sq, sk, sv, kw", SDPA_CASES)
def test_sdpa_matches_torch(torch, sq, sk, sv, kw):
    (q, tq), (k, tk), (v, tv) = _pairs(torch, *_qkv(sq, sk, sv))
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **kw)
    _check(torch, out, tout, [(q, tq), (k, tk), (v, tv)])


@pytest.mark.parametrize("kind", ["bool", "float", "bool_dead_row", "float_dead_row", "bool_full"])
def test_sdpa_masks_match_torch(torch, kind):
    rng = np.random.default_rng(2)
    (q, tq), (k, tk), (v, tv) = _pairs(torch, *_qkv((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)))
    pairs = [(q, tq), (k, tk), (v, tv)]
    if kind.startswith("bool"):
        m = rng.uniform(size=(2, 3, 5, 7) if kind == "bool_full" else (5, 7)) > 0.4
        m[..., 0, 0] = True
        if kind == "bool_dead_row":
            m[2] = False
        mask, tmask = mg.tensor(m), torch.tensor(m)
    else:
        m = rng.standard_normal((3, 1, 7))
        if kind == "float_dead_row":
            m[1, 0, :] = -math.inf
        (mask, tmask), = _pairs(torch, m)
        pairs.append((mask, tmask))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask)
    _check(torch, out, tout, pairs)
    if "dead" in kind:
        assert np.isfinite(out.numpy()).all()


def test_sdpa_routes_causal_4d_to_the_fused_kernel(monkeypatch):
    import minigrad.ops.sdp_attention as sdpa

    calls = []
    real = sdpa.causal_attention
    monkeypatch.setattr(sdpa, "causal_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    q = mg.randn(1, 2, 4, 8, dtype=mg.float64)
    F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert calls == [1]
    F.scaled_dot_product_attention(q, q[:, :, :3], q[:, :, :3], is_causal=True)     # L != S: composed
    F.scaled_dot_product_attention(q, q, q, is_causal=True, dropout_p=0.5)
    assert calls == [1]


def test_sdpa_dropout_and_errors():
    q = mg.randn(2, 4, 3, dtype=mg.float64)
    assert not F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).numpy().any()
    mg.manual_seed(3)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.4)
    mg.manual_seed(3)
    attn = F.dropout((q @ q.mT / math.sqrt(3)).softmax(-1), 0.4)
    np.testing.assert_allclose(a.numpy(), (attn @ q).numpy(), rtol=1e-14)
    with pytest.raises(ValueError, match="scaled_dot_product_attention: pass attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mg.ones(4, 4).bool(), is_causal=True)
    with pytest.raises(ValueError, match="scaled_dot_product_attention: attn_mask .* does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mg.ones(3, 4).bool())
    with pytest.raises(TypeError, match="scaled_dot_product_attention: attn_mask must be bool or float"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mg.ones(4, 4).long())
    with pytest.raises(ValueError, match="scaled_dot_product_attention: query .* do not fit"):
        F.scaled_dot_product_attention(q, mg.randn(2, 4, 2, dtype=mg.float64), q)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: dropout_p must be in \[0, 1\]"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=2.0)
    k = mg.randn(1, 3, 4, 3, dtype=mg.float64)
    with pytest.raises(ValueError, match="enable_gqa the query heads"):
        F.scaled_dot_product_attention(mg.randn(1, 4, 4, 3, dtype=mg.float64), k, k, enable_gqa=True)


# ---- gradcheck of the composites --------------------------------------------------------------------------
def _t(a):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def test_gradcheck_composites():
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((3, 4)) * 2, rng.standard_normal((3, 4))
    y01 = rng.uniform(0.05, 0.95, (3, 4))
    q = rng.dirichlet(np.ones(4), 3)
    ids = np.array([0, 3, -100])
    cases = [
        (lambda x, y: F.mse_loss(x, y), (_t(a), _t(b))),
        (lambda x, y: F.smooth_l1_loss(x, y, reduction="sum", beta=0.7), (_t(a), _t(b))),
        (lambda x, y: F.huber_loss(x, y, reduction="none", delta=0.8), (_t(a), _t(b))),
        (lambda x: F.nll_loss(x.log_softmax(1), ids, weight=mg.tensor(np.arange(1.0, 5.0))), (_t(a),)),
        (lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=mg.tensor(np.arange(1.0, 5.0))),
         (_t(a), _t(y01))),
        (lambda x, t: F.kl_div(x, t, reduction="batchmean"), (_t(a), _t(q))),
        (lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True), (_t(a), _t(np.log(q)))),
        (lambda x: F.elu(x, 0.7), (_t(a),)),
        (lambda x: F.leaky_relu(x, 0.2), (_t(a),)),
        (lambda x: F.logsigmoid(x), (_t(a * 10),)),
        (lambda x: F.glu(x, 1), (_t(a),)),
        (lambda x: F.normalize(x, p=3.0), (_t(a),)),
        (lambda x: F.normalize(x, p=math.inf, dim=0), (_t(a),)),
        (lambda x, y: F.cosine_similarity(x, y), (_t(a), _t(b))),
    ]
    for fn, inputs in cases:
        assert gradcheck(fn, inputs)
    qkv = [_t(rng.standard_normal(s)) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)]]
    mask = _t(rng.standard_normal((3, 5)))
    assert gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), qkv + [mask])
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), qkv)


# ---- nn modules over the functionals ----------------------------------------------------------------------
def test_loss_modules_match_torch(torch):
    rng = np.random.default_rng(12)
    (x, tx), = _pairs(torch, rng.standard_normal((4, 5)))
    t = np.array([1, -100, 4, 0])
    w = rng.uniform(0.5, 2.0, 5)
    out = nn.NLLLoss(weight=mg.tensor(w), reduction="sum")(x.log_softmax(1), t)
    tout = torch.nn.NLLLoss(weight=torch.tensor(w), reduction="sum")(tx.log_softmax(1), torch.tensor(t))
    _check(torch, out, tout, [(x, tx)])
    (x, tx), (y, ty) = _pairs(torch, rng.standard_normal((4, 5)), rng.uniform(0, 1, (4, 5)))
    pw = rng.uniform(0.5, 2.0, 5)
    out = nn.BCEWithLogitsLoss(pos_weight=mg.tensor(pw))(x, y)
    tout = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pw))(tx, ty)
    _check(torch, out, tout, [(x, tx), (y, ty)])
    for mod, tmod in [(nn.BCEWithLogitsLoss(pos_weight=mg.tensor(pw)),
                       torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pw))),
                      (nn.NLLLoss(mg.tensor(w)), torch.nn.NLLLoss(torch.tensor(w))),
                      (nn.NLLLoss(), torch.nn.NLLLoss())]:
        assert list(mod.state_dict()) == list(tmod.state_dict())          # weights are buffers, as torch
    with pytest.raises(ValueError, match="NLLLoss: 'x' is not a valid value for reduction"):
        nn.NLLLoss(reduction="x")


def test_sdpa_negative_scale_causal_matches_torch_math_backend(torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    (q, tq), (k, tk), (v, tv) = _pairs(torch, *_qkv((2, 3, 5, 4), (2, 3, 8, 4), (2, 3, 8, 4), seed=4))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=-0.7)
    with sdpa_kernel(SDPBackend.MATH):
        tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, scale=-0.7)
    _check(torch, out, tout, [(q, tq), (k, tk), (v, tv)])
