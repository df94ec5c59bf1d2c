"""F.cross_entropy / nn.CrossEntropyLoss with torch's whole signature: class weights, label smoothing,
class-probability targets, K-dim and unbatched inputs, ignore_index, reductions.

fp64 gradcheck of every path; values and gradients against torch.nn.functional.cross_entropy in
fp64 (skipped without torch); the fp32 kernel against its fp64 path; edge cases (all targets
ignored, zero total weight, -inf logits, a large common offset) and the errors bad arguments raise.
"""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.kernels import cross_entropy as kernel
from tests.op_helpers import record

REDUCTIONS = ("mean", "sum", "none")


def rng(seed):
    return np.random.default_rng(seed)


# name: (input shape, soft targets, weighted, label_smoothing, ignore_index, which targets are ignored)
#   ignored: None, "some" (every third) or "all"
CASES = {
    "weight": ((5, 7), False, True, 0.0, -100, None),
    "smoothing": ((5, 7), False, False, 0.2, -100, None),
    "weight+smoothing": ((6, 7), False, True, 0.3, -100, None),
    "weight+smoothing+ignore": ((7, 6), False, True, 0.25, -100, "some"),
    "ignore_index in range": ((7, 6), False, True, 0.1, 2, "some"),
    "smoothing=1": ((4, 5), False, True, 1.0, -100, "some"),
    "all ignored": ((4, 5), False, True, 0.2, -100, "all"),
    "K=1": ((3, 5, 4), False, True, 0.2, -100, "some"),
    "K=1 plain": ((3, 5, 4), False, False, 0.0, -100, "some"),
    "K=2": ((2, 5, 3, 2), False, True, 0.1, -100, "some"),
    "unbatched": ((5,), False, True, 0.2, -100, None),
    "unbatched plain": ((6,), False, False, 0.0, -100, None),
    "odd C": ((9, 13), False, True, 0.15, -100, "some"),
    "one class": ((4, 1), False, True, 0.3, -100, None),
    "soft": ((5, 7), True, False, 0.0, -100, None),
    "soft+weight+smoothing": ((5, 7), True, True, 0.2, -100, None),
    "soft K=1": ((3, 5, 4), True, True, 0.1, -100, None),
    "soft K=2": ((2, 5, 3, 2), True, False, 0.3, -100, None),
    "soft unbatched": ((5,), True, True, 0.2, -100, None),
}


def make(name, seed=0):
    """(logits, target, weight) as fp64 numpy arrays (target int64 or float probabilities)."""
    shape, soft, weighted, _, ignore_index, ignored = CASES[name]
    r = rng(seed)
    C = shape[1] if len(shape) > 1 else shape[0]
    z = r.standard_normal(shape) * 2
    if soft:
        q = r.uniform(0.05, 1.0, shape)
        target = q / q.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    else:
        batch = (shape[0],) + shape[2:] if len(shape) > 1 else ()
        target = r.integers(0, C, batch)
        if ignore_index >= 0:                  # keep the in-range ignore_index out of the real targets
            target = np.where(target == ignore_index, (ignore_index + 1) % C, target)
        if ignored == "some":
            target.reshape(-1)[::3] = ignore_index
        elif ignored == "all":
            target[...] = ignore_index
    weight = r.uniform(0.3, 2.0, C) if weighted else None
    return z, target, weight


def kwargs(name):
    _, _, _, eps, ignore_index, _ = CASES[name]
    return dict(ignore_index=ignore_index, label_smoothing=eps)


def leaf(a):
    return mg.tensor(np.asarray(a, np.float64), requires_grad=True)


def nan_mean(name, reduction):
    return reduction == "mean" and CASES[name][5] == "all"


# ---------------------------------------------------------------- gradcheck (fp64)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name, reduction):
    if nan_mean(name, reduction):
        pytest.skip("the loss is nan (0/0): see test_all_targets_ignored")
    z, target, weight = make(name)
    soft = CASES[name][1]
    inputs = [leaf(z)]
    if soft:                                    # probability targets and weight are differentiable
        inputs.append(leaf(target))
        if weight is not None:
            inputs.append(leaf(weight))

        def fn(a, *rest):
            t = rest[0]
            w = rest[1] if len(rest) > 1 else None
            return F.cross_entropy(a, t, weight=w, reduction=reduction, **kwargs(name))
    else:
        w = None if weight is None else mg.tensor(weight)

        def fn(a):
            return F.cross_entropy(a, target, weight=w, reduction=reduction, **kwargs(name))
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-10, rtol=1e-6)
    record("cross_entropy_torch", gradcheck.last_errors)


# ---------------------------------------------------------------- against torch (fp64)
def _torch_pair(torch, name, reduction, seed=0):
    z, target, weight = make(name, seed)
    soft = CASES[name][1]
    mz, tz = leaf(z), torch.tensor(z, requires_grad=True)
    mt = leaf(target) if soft else mg.tensor(target)
    tt = torch.tensor(target, requires_grad=soft)
    mw = None if weight is None else (leaf(weight) if soft else mg.tensor(weight))
    tw = None if weight is None else torch.tensor(weight, requires_grad=soft)
    ours = F.cross_entropy(mz, mt, weight=mw, reduction=reduction, **kwargs(name))
    theirs = torch.nn.functional.cross_entropy(tz, tt, weight=tw, reduction=reduction, **kwargs(name))
    return (ours, mz, mt, mw), (theirs, tz, tt, tw)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, reduction):
    torch = pytest.importorskip("torch")
    (ours, mz, mt, mw), (theirs, tz, tt, tw) = _torch_pair(torch, name, reduction)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-13, atol=1e-13)
    g = rng(5).standard_normal(tuple(theirs.shape))
    (ours * mg.tensor(g)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(mz.grad.numpy(), tz.grad.numpy(), rtol=1e-12, atol=1e-13)
    if CASES[name][1]:                           # soft targets: target and weight gradients too
        np.testing.assert_allclose(mt.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-13)
        if mw is not None:
            np.testing.assert_allclose(mw.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_positional_arguments_follow_torch():
    torch = pytest.importorskip("torch")
    z, target, weight = make("ignore_index in range")
    args = (None, 2, None, "sum", 0.1)          # size_average, ignore_index, reduce, reduction, eps
    ours = F.cross_entropy(mg.tensor(z), mg.tensor(target), mg.tensor(weight), *args)
    theirs = torch.nn.functional.cross_entropy(torch.tensor(z), torch.tensor(target), torch.tensor(weight),
                                               *args)
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-13)


def test_zero_total_weight_is_nan_as_torch():
    # 'mean' divides by the weights of the targets left: 0 -> nan loss; torch's gradient is nan on
    # those rows and 0 on ignored ones, with or without smoothing
    torch = pytest.importorskip("torch")
    z = rng(1).standard_normal((3, 4))
    target = np.array([0, -100, 1])
    weight = np.array([0.0, 0.0, 1.0, 2.0])
    for eps in (0.0, 0.1):
        mz, tz = leaf(z), torch.tensor(z, requires_grad=True)
        ours = F.cross_entropy(mz, target, weight=mg.tensor(weight), label_smoothing=eps)
        theirs = torch.nn.functional.cross_entropy(tz, torch.tensor(target), weight=torch.tensor(weight),
                                                   label_smoothing=eps)
        ours.backward()
        theirs.backward()
        assert math.isnan(ours.item()) and math.isnan(theirs.item())
        np.testing.assert_array_equal(np.isnan(mz.grad.numpy()), np.isnan(tz.grad.numpy()))
        np.testing.assert_array_equal(mz.grad.numpy()[1], 0.0)


def test_nll_loss_zero_total_weight_as_torch():
    torch = pytest.importorskip("torch")
    logp = np.log(rng(2).dirichlet(np.ones(4), 3))
    weight = np.array([0.0, 0.0, 1.0, 1.0])
    for target in (np.array([0, -100, 1]), np.full(3, -100)):
        mx, tx = leaf(logp), torch.tensor(logp, requires_grad=True)
        ours = F.nll_loss(mx, target, weight=mg.tensor(weight))
        theirs = torch.nn.functional.nll_loss(tx, torch.tensor(target), weight=torch.tensor(weight))
        ours.backward()
        theirs.backward()
        assert math.isnan(ours.item()) and math.isnan(theirs.item())
        np.testing.assert_array_equal(mx.grad.numpy(), tx.grad.numpy())    # nan where torch has nan


def test_masked_logits_with_smoothing_as_torch():
    # -inf logits: -log p = inf for those classes, so the smoothing term is inf (torch too); the
    # gradient stays finite
    torch = pytest.importorskip("torch")
    z = np.array([[0.5, -np.inf, 1.0, 0.0], [2.0, 1.0, -np.inf, -1.0]])
    target = np.array([2, 0])
    weight = np.array([1.0, 0.5, 2.0, 1.5])
    mz, tz = leaf(z), torch.tensor(z, requires_grad=True)
    ours = F.cross_entropy(mz, target, weight=mg.tensor(weight), label_smoothing=0.1, reduction="none")
    theirs = torch.nn.functional.cross_entropy(tz, torch.tensor(target), weight=torch.tensor(weight),
                                               label_smoothing=0.1, reduction="none")
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    ours.sum().backward()
    theirs.sum().backward()
    assert np.all(np.isfinite(mz.grad.numpy()))
    np.testing.assert_allclose(mz.grad.numpy(), tz.grad.numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_module_matches_torch_and_keeps_weight_as_buffer(reduction):
    torch = pytest.importorskip("torch")
    z, target, weight = make("K=1")
    loss_fn = nn.CrossEntropyLoss(weight=mg.tensor(weight), ignore_index=-100, reduction=reduction,
                                  label_smoothing=0.2)
    tloss_fn = torch.nn.CrossEntropyLoss(weight=torch.tensor(weight), reduction=reduction,
                                         label_smoothing=0.2)
    mz, tz = leaf(z), torch.tensor(z, requires_grad=True)
    ours, theirs = loss_fn(mz, target), tloss_fn(tz, torch.tensor(target))
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-13, atol=1e-14)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(mz.grad.numpy(), tz.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert list(loss_fn.state_dict()) == ["weight"] == list(tloss_fn.state_dict())
    assert loss_fn.label_smoothing == 0.2 and loss_fn.ignore_index == -100


def test_module_weight_follows_float():
    loss_fn = nn.CrossEntropyLoss(weight=mg.tensor(np.array([1.0, 2.0, 3.0], np.float64)))
    z32 = mg.tensor(rng(0).standard_normal((4, 3)).astype(np.float32))
    with pytest.raises(TypeError, match="weight has dtype float64 but input is float32"):
        loss_fn(z32, np.array([0, 1, 2, 0]))
    assert loss_fn.float()(z32, np.array([0, 1, 2, 0])).dtype == mg.float32


# ---------------------------------------------------------------- fp32 kernel vs fp64 path
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["weight", "smoothing", "weight+smoothing+ignore", "K=2", "unbatched",
                                  "odd C", "soft+weight+smoothing"])
def test_fp32_matches_fp64(name, reduction):
    z, target, weight = make(name)
    results = []
    for dtype in (np.float32, np.float64):
        mz = mg.tensor(z.astype(dtype), requires_grad=True)
        t = target.astype(dtype) if CASES[name][1] else target
        w = None if weight is None else mg.tensor(weight.astype(dtype))
        out = F.cross_entropy(mz, t, weight=w, reduction=reduction, **kwargs(name))
        (out * mg.tensor(rng(9).standard_normal(out.shape).astype(dtype))).sum().backward()
        results.append((out.numpy(), mz.grad.numpy()))
    for lo, hi in zip(*results):
        assert lo.dtype == np.float32 and hi.dtype == np.float64
        np.testing.assert_allclose(lo, hi, rtol=0, atol=2e-5 * max(1.0, np.abs(hi).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unit_weights_without_smoothing_equal_the_plain_kernel_bitwise(dtype):
    # weight = 1, eps = 0 runs the general kernel branch with A = 1: the same arithmetic as the hot path
    z = rng(3).standard_normal((33, 50)).astype(dtype)
    target = rng(4).integers(0, 50, 33)
    target[::5] = -100
    for reduction in REDUCTIONS:
        outs = []
        for w in (None, mg.ones(50, dtype=mg.float32 if dtype == np.float32 else mg.float64)):
            mz = mg.tensor(z, requires_grad=True)
            loss = F.cross_entropy(mz, target, weight=w, reduction=reduction)
            loss.sum().backward()
            outs.append((loss.numpy(), mz.grad.numpy()))
        for a, b in zip(*outs):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype,offset", [(np.float32, 1e6), (np.float64, 1e15)])
def test_smoothing_keeps_a_large_common_offset_exact(dtype, offset):
    z = (offset + np.array([0.0, 1.0, 2.0, 3.0])).astype(dtype)
    w = np.array([1.0, 0.5, 2.0, 1.5])
    shift = z.astype(np.float64) - z.astype(np.float64).max()             # what the rounding left
    logp = shift - np.log(np.exp(shift).sum())
    eps = 0.1
    want = (1 - eps) * w[0] * -logp[0] + eps / 4 * (w * -logp).sum()
    loss = F.cross_entropy(mg.tensor(z[None]), np.array([0]), weight=mg.tensor(w.astype(dtype)),
                           label_smoothing=eps, reduction="sum")
    np.testing.assert_allclose(loss.item(), want, rtol=1e-6 if dtype == np.float32 else 1e-13)


def test_all_targets_ignored():
    z, target, weight = make("all ignored")
    for w in (None, mg.tensor(weight)):
        for eps in (0.0, 0.2):
            mz = leaf(z)
            loss = F.cross_entropy(mz, target, weight=w, label_smoothing=eps)
            assert math.isnan(loss.item())                                  # 0/0, as torch
            loss.backward()
            np.testing.assert_array_equal(mz.grad.numpy(), 0.0)
            total = F.cross_entropy(leaf(z), target, weight=w, label_smoothing=eps, reduction="sum")
            assert total.item() == 0


def test_empty_batch():
    z = mg.zeros(0, 4, dtype=mg.float64)
    assert math.isnan(F.cross_entropy(z, np.zeros(0, np.int64), label_smoothing=0.1).item())
    assert F.cross_entropy(z, np.zeros(0, np.int64), reduction="sum", label_smoothing=0.1).item() == 0
    assert math.isnan(F.cross_entropy(z, mg.zeros(0, 4, dtype=mg.float64)).item())
    assert F.cross_entropy(z, np.zeros(0, np.int64), reduction="none").shape == (0,)


def test_nan_logits_propagate():
    z = rng(0).standard_normal((3, 4))
    z[1, 2] = np.nan
    loss = F.cross_entropy(mg.tensor(z), np.array([0, 1, 2]), weight=mg.ones(4, dtype=mg.float64),
                           label_smoothing=0.1, reduction="none")
    assert np.isnan(loss.numpy()[1]) and np.all(np.isfinite(loss.numpy()[[0, 2]]))


def test_target_copied_for_backward():
    # changing the caller's targets in place after the forward must not change the gradient
    z, target, weight = make("weight+smoothing+ignore")
    t = mg.tensor(target.copy())
    mz = leaf(z)
    loss = F.cross_entropy(mz, t, weight=mg.tensor(weight), label_smoothing=0.25)
    want = leaf(z)
    F.cross_entropy(want, target, weight=mg.tensor(weight), label_smoothing=0.25).backward()
    t.data[...] = 0
    loss.backward()
    np.testing.assert_array_equal(mz.grad.numpy(), want.grad.numpy())


# ---------------------------------------------------------------- errors
def _z():
    return mg.tensor(rng(0).standard_normal((3, 4)).astype(np.float32))


@pytest.mark.parametrize("kw, error, match", [
    (dict(label_smoothing=-0.1), ValueError, r"label_smoothing must be between 0.0 and 1.0, got -0.1"),
    (dict(label_smoothing=1.5), ValueError, "label_smoothing must be between 0.0 and 1.0"),
    (dict(label_smoothing=float("nan")), ValueError, "label_smoothing must be finite"),
    (dict(label_smoothing="0.1"), TypeError, "label_smoothing must be a number"),
    (dict(label_smoothing=None), TypeError, "label_smoothing must be a number"),
    (dict(weight=mg.ones(3)), ValueError, r"weight has shape \(3,\), expected \(4,\)"),
    (dict(weight=mg.ones(4, 1)), ValueError, r"weight has shape \(4, 1\), expected \(4,\)"),
    (dict(weight=mg.ones(4, dtype=mg.float64)), TypeError, "weight has dtype float64 but input is float32"),
    (dict(weight=mg.tensor(np.ones(4, np.int64))), TypeError, "weight must be a float Tensor"),
    (dict(weight=[1.0, 1.0, 1.0, 1.0]), TypeError, "weight must be a float Tensor, got list"),
    (dict(weight=np.ones(4, np.int64)), TypeError, "weight must be a float Tensor, got int64"),
    (dict(size_average=True), ValueError, "deprecated"),
    (dict(reduce=False), ValueError, "deprecated"),
    (dict(reduction="avg"), ValueError, "'avg' is not a valid value for reduction"),
    (dict(ignore_index=1.5, label_smoothing=0.1), TypeError, "ignore_index must be an int"),
    (dict(ignore_index=2**70), ValueError, "ignore_index must be an int <= 9223372036854775807"),
    (dict(ignore_index=-2**70, weight=mg.ones(4)), ValueError, "ignore_index must be an int >= -922337"),
])
def test_bad_arguments_raise(kw, error, match):
    with pytest.raises(error, match=match):
        F.cross_entropy(_z(), np.array([0, 1, 2]), **kw)


def test_bad_targets_raise():
    z = _z()
    with pytest.raises(IndexError, match="targets contains 4"):
        F.cross_entropy(z, np.array([0, 4, 1]), weight=mg.ones(4), label_smoothing=0.1)
    with pytest.raises(IndexError, match="targets contains -1"):
        F.cross_entropy(mg.randn(2, 4, 3), np.array([[0, 1, 2], [3, -1, 0]]))
    with pytest.raises(IndexError, match="targets contains 5"):
        F.cross_entropy(mg.randn(2, 4, 3), np.array([[0, 1, 2], [3, 5, 2]]), ignore_index=2,
                        label_smoothing=0.1, weight=mg.ones(4))
    with pytest.raises(TypeError, match="integer class indices of shape \\(3,\\)"):
        F.cross_entropy(z, np.array([0.0, 1.0, 2.0]), label_smoothing=0.1)
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(z, np.array([0.0, 1.0, 2.0]))                     # the fused fast path
    with pytest.raises(TypeError, match="class probabilities and must be float"):
        F.cross_entropy(z, np.zeros((3, 4), np.int64))
    with pytest.raises(TypeError, match="target has dtype float64 but input is float32"):
        F.cross_entropy(z, mg.zeros(3, 4, dtype=mg.float64))
    with pytest.raises(ValueError, match="ignore_index is not supported for class-probability"):
        F.cross_entropy(z, mg.zeros(3, 4), ignore_index=0)
    with pytest.raises(ValueError, match=r"needs target of shape \(2, 3\), got \(2, 4\)"):
        F.cross_entropy(mg.randn(2, 4, 3), np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match=r"needs target of shape \(\), got \(1,\)"):
        F.cross_entropy(mg.randn(4), np.array([1]), label_smoothing=0.1)
    with pytest.raises(ValueError, match="0-d"):
        F.cross_entropy(mg.tensor(1.0), np.array(0))
    for target in (np.zeros((2, 3), np.int64), mg.zeros(2, 0, 3)):
        with pytest.raises(ValueError, match=r"input \(2, 0, 3\) has no classes"):
            F.cross_entropy(mg.zeros(2, 0, 3), target, label_smoothing=0.1)
    with pytest.raises(TypeError, match="input must be a Tensor"):
        F.cross_entropy([[0.0, 1.0]], np.array([0]), label_smoothing=0.1)


def test_nll_loss_weight_dtype_as_torch():
    logp = mg.tensor(np.log(rng(2).dirichlet(np.ones(4), 3)))
    with pytest.raises(TypeError, match="nll_loss: weight has dtype float32 but input is float64"):
        F.nll_loss(logp, np.array([0, 1, 2]), weight=mg.ones(4))
    out = F.nll_loss(logp, np.array([0, 1, 2]), weight=np.ones(4, np.float32))    # numpy: adopts
    assert out.dtype == mg.float64


def test_kernel_entry_points_validate_class_weight_and_smoothing():
    z = rng(0).standard_normal((3, 4))
    t = np.array([0, 1, 2])
    outs = [np.empty(3) for _ in range(3)]
    with pytest.raises(ValueError, match="class_weight has shape"):
        kernel.cross_entropy_forward(z, t, -100, *outs, np.ones(5), 0.1)
    with pytest.raises(ValueError, match="dtype mismatch"):
        kernel.cross_entropy_forward(z, t, -100, *outs, np.ones(4, np.float32), 0.1)
    for eps in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="label_smoothing must be in"):
            kernel.cross_entropy_forward(z, t, -100, *outs, None, eps)
        with pytest.raises(ValueError, match="label_smoothing must be in"):
            kernel.cross_entropy_backward(z, t, -100, *outs[1:], np.ones(3), np.empty((3, 4)), None, eps)
    kernel.cross_entropy_forward(z, t, -100, *outs, np.ones(4), 0.1)
    g = np.empty((3, 4))
    with pytest.raises(ValueError, match="class_weight has shape"):
        kernel.cross_entropy_backward(z, t, -100, *outs[1:], np.ones(3), g, np.ones(3), 0.1)
    kernel.cross_entropy_backward(z, t, -100, *outs[1:], np.ones(3), g, np.ones(4), 0.1)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(g, p - 0.9 * np.eye(4)[t] - 0.1 / 4, atol=1e-15)
