"""Optimizers, the fused AdamW kernel and LR schedules: hand-computed steps, torch parity, state_dict."""
import math
import pickle

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.kernels import adamw as adamw_kernel
from minigrad.optim.adamw import adamw_step_numpy
from minigrad.optim.lr_scheduler import LambdaLR, WarmupConstantLR, WarmupCosineLR

F64 = np.float64
adamw_step = adamw_kernel.adamw_step


def _param(values, dtype=F64):
    return nn.Parameter(np.array(values, dtype=dtype))


def _step(opt, param, grad):
    param.grad = mg.Tensor(np.array(grad, dtype=param.dtype))
    opt.step()


# ---- hand-computed steps (PyTorch's formulas, numbers written out) --------------------------------
def test_sgd_weight_decay_by_hand():
    p = _param([1.0, -2.0])
    opt = optim.SGD([p], lr=0.1, weight_decay=0.1)
    _step(opt, p, [0.5, 0.25])            # d = g + 0.1 p = [0.6, 0.05]; p -= 0.1 d
    np.testing.assert_allclose(p.data, [0.94, -2.005], rtol=0, atol=1e-15)


@pytest.mark.parametrize("kwargs, after1, after2", [
    # b1 = g1 = [0.5, 0.25];  b2 = 0.9 b1 + g2 = [-0.55, 0.725]
    (dict(momentum=0.9), [0.95, -2.025], [1.005, -2.0975]),
    # d1 = g1 + 0.9 b1 = [0.95, 0.475];  d2 = g2 + 0.9 b2 = [-1.495, 1.1525]
    (dict(momentum=0.9, nesterov=True), [0.905, -2.0475], [1.0545, -2.16275]),
    # the first step ignores dampening; b2 = 0.9 b1 + 0.5 g2 = [-0.05, 0.475]
    (dict(momentum=0.9, dampening=0.5), [0.95, -2.025], [0.955, -2.0725]),
])
def test_sgd_momentum_by_hand(kwargs, after1, after2):
    p = _param([1.0, -2.0])
    opt = optim.SGD([p], lr=0.1, **kwargs)
    _step(opt, p, [0.5, 0.25])
    np.testing.assert_allclose(p.data, after1, rtol=0, atol=1e-15)
    _step(opt, p, [-1.0, 0.5])
    np.testing.assert_allclose(p.data, after2, rtol=0, atol=1e-15)


def test_adamw_by_hand():
    p = _param([1.0, -2.0])
    opt = optim.AdamW([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    # step 1: p *= 1 - 0.1*0.1; m = 0.1 g = [0.05, -0.025]; v = 0.001 g^2 = [2.5e-4, 6.25e-5]
    # m_hat = m / 0.1 = [0.5, -0.25]; sqrt(v_hat) = sqrt(v / 0.001) = [0.5, 0.25]
    # p = [0.99, -1.98] - 0.1 * [0.5 / (0.5 + 1e-8), -0.25 / (0.25 + 1e-8)] = [0.890000002, -1.880000004]
    _step(opt, p, [0.5, -0.25])
    np.testing.assert_allclose(p.data, [0.890000002, -1.880000004], rtol=0, atol=1e-15)
    state = opt.state[p]
    np.testing.assert_allclose(state["exp_avg"], [0.05, -0.025], rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"], [2.5e-4, 6.25e-5], rtol=1e-15)
    # step 2, g = [-1, 0.5]: m = 0.9 m + 0.1 g = [-0.055, 0.0275]
    # v = 0.999 v + 0.001 g^2 = [0.00124975, 0.0003124375]; 1 - 0.9^2 = 0.19; 1 - 0.999^2 = 0.001999
    _step(opt, p, [-1.0, 0.5])
    m = np.array([-0.055, 0.0275])
    v = np.array([0.00124975, 0.0003124375])
    p1 = np.array([0.890000002, -1.880000004])
    expected = p1 * 0.99 - 0.1 * (m / 0.19) / (np.sqrt(v / 0.001999) + 1e-8)
    np.testing.assert_allclose(state["exp_avg"], m, rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg_sq"], v, rtol=1e-14)
    np.testing.assert_allclose(p.data, expected, rtol=0, atol=1e-15)
    assert state["step"] == 2


def test_adamw_amsgrad_keeps_the_max_second_moment():
    p = _param([0.0])
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.0, amsgrad=True)
    _step(opt, p, [10.0])   # v = 0.001 * 100 = 0.1
    _step(opt, p, [0.0])    # v = 0.0999 but max stays 0.1
    np.testing.assert_allclose(opt.state[p]["max_exp_avg_sq"], [0.1], rtol=1e-15)
    np.testing.assert_allclose(opt.state[p]["exp_avg_sq"], [0.0999], rtol=1e-15)


# ---- parity with torch.optim over several steps -------------------------------------------------
CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.3)),
    ("AdamW", dict(lr=1e-2, betas=(0.3, 0.9), weight_decay=0.0)),  # beta1 < 0.5: lerp's other branch
    ("AdamW", dict(lr=1e-2, amsgrad=True)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, weight_decay=0.1)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.3)),
    ("Adam", dict(lr=1e-2, betas=(0.3, 0.9))),
    ("Adam", dict(lr=1e-2, weight_decay=0.05, amsgrad=True)),
    ("RMSprop", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, eps=1e-6, weight_decay=0.1)),
    ("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=1e-2, momentum=0.5, weight_decay=0.01)),
    ("Adagrad", dict(lr=1e-1)),
    ("Adagrad", dict(lr=1e-1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, kwargs", CONFIGS)
def test_matches_torch(name, kwargs, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    shapes = [(7, 5), (5,), (3, 2, 4)]
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ours = [nn.Parameter(a.copy()) for a in init]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    # two groups: the second with its own lr
    opt = getattr(optim, name)([{"params": ours[:2]}, {"params": ours[2:], "lr": 0.02}], **kwargs)
    topt = getattr(torch.optim, name)([{"params": theirs[:2]}, {"params": theirs[2:], "lr": 0.02}], **kwargs)
    for _ in range(8):
        for p, tp in zip(ours, theirs):
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad, tp.grad = mg.Tensor(g.copy()), torch.tensor(g.copy())
        opt.step()
        topt.step()
    # Only rounding differs (torch's CPU kernels use fused multiply-adds in places).
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=tol, atol=tol)
        for key, value in opt.state[p].items():           # the moments / momentum under torch's names
            if isinstance(value, np.ndarray):
                np.testing.assert_allclose(value, topt.state[tp][key].numpy(), rtol=tol, atol=tol)


# ---- optimizer mechanics --------------------------------------------------------------------------
def test_step_skips_params_without_grad_and_bumps_version():
    a, b = _param([1.0]), _param([2.0])
    opt = optim.SGD([a, b], lr=1.0)
    version = a._version
    _step(opt, a, [1.0])
    assert a.data[0] == 0.0 and b.data[0] == 2.0
    assert a._version > version
    assert b not in opt.state or not opt.state[b]


def test_zero_grad():
    p = _param([1.0, 2.0])
    opt = optim.SGD([p], lr=1.0)
    p.grad = mg.Tensor(np.ones(2))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.data, [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None


def test_step_rejects_grad_of_wrong_dtype():
    p = _param([1.0, 2.0])
    opt = optim.AdamW([p])
    p.grad = mg.Tensor(np.ones(2, dtype=np.float32))
    with pytest.raises(ValueError, match="does not match its parameter"):
        opt.step()


def test_closure_is_called_with_grad_enabled():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.5)

    def closure():
        assert mg.is_grad_enabled()
        p.grad = mg.Tensor(np.array([2.0]))
        return 3.0

    with mg.no_grad():
        assert opt.step(closure) == 3.0
    assert p.data[0] == 0.0


@pytest.mark.parametrize("make, match", [
    (lambda p: optim.SGD([], lr=0.1), "empty parameter list"),
    (lambda p: optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1), "more than one parameter group"),
    (lambda p: optim.SGD([p, p], lr=0.1), "same parameter twice"),
    (lambda p: optim.SGD([p], lr=-1.0), "lr must be >= 0"),
    (lambda p: optim.SGD([p], lr=0.1, nesterov=True), "nesterov"),
    (lambda p: optim.AdamW([p], betas=(0.9, 1.0)), r"betas\[1\] must be in \[0, 1\)"),
    (lambda p: optim.AdamW([p], lr=float("nan")), "lr must be finite"),
    (lambda p: optim.SGD(p, lr=0.1), "iterable of Tensors"),
])
def test_constructor_errors(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make(_param([1.0]))


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.AdamW(ps, lr=0.1)], ids=["SGD", "AdamW"])
@pytest.mark.parametrize("key,value", [("lr", float("nan")), ("lr", -1.0), ("weight_decay", -0.5)])
def test_bad_group_hyperparameters_raise_at_step_before_anything_moves(make, key, value):
    # audit: SGD applied a NaN or negative per-group lr (also one set by a scheduler) silently
    a, b = (nn.Parameter(np.ones(3, np.float32)) for _ in range(2))
    opt = make([{"params": [a]}, {"params": [b], key: value}])
    for p in (a, b):
        p.grad = mg.ones(3)
    with pytest.raises(ValueError, match=key):
        opt.step()
    assert np.array_equal(a.data, np.ones(3)) and np.array_equal(b.data, np.ones(3))
    opt.param_groups[1][key] = opt.param_groups[0][key]
    opt.param_groups[0]["lr"] = -2.0                   # what a scheduler with min_lr=-2 would set
    with pytest.raises(ValueError, match="lr must be >= 0"):
        opt.step()
    assert np.array_equal(a.data, np.ones(3))


@pytest.mark.parametrize("name, kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                          ("AdamW", dict(lr=1e-2, amsgrad=True)),
                                          ("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True))])
def test_state_dict_round_trip_is_exact(name, kwargs):
    rng = np.random.default_rng(2)
    init = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,)]]
    grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in init] for _ in range(6)]
    a = [nn.Parameter(x.copy()) for x in init]
    opt_a = getattr(optim, name)([{"params": a[:1]}, {"params": a[1:], "lr": 0.03}], **kwargs)
    for gs in grads[:3]:
        for p, g in zip(a, gs):
            p.grad = mg.Tensor(g)
        opt_a.step()
    saved = pickle.loads(pickle.dumps(opt_a.state_dict()))
    b = [nn.Parameter(p.data.copy()) for p in a]
    opt_b = getattr(optim, name)([{"params": b[:1]}, {"params": b[1:]}], **kwargs)
    opt_b.load_state_dict(saved)
    assert opt_b.param_groups[1]["lr"] == 0.03
    for gs in grads[3:]:
        for pa, pb, g in zip(a, b, gs):
            pa.grad, pb.grad = mg.Tensor(g), mg.Tensor(g.copy())
        opt_a.step()
        opt_b.step()
    for pa, pb in zip(a, b):
        np.testing.assert_array_equal(pa.data, pb.data)
    # the loaded state is a copy: stepping b never touched `saved`
    key = "momentum_buffer" if name == "SGD" else "exp_avg"
    assert not np.array_equal(saved["state"][0][key], opt_b.state[b[0]][key])


def test_state_dict_arrays_are_copies():
    p = _param([1.0, 2.0])
    opt = optim.AdamW([p])
    _step(opt, p, [1.0, 1.0])
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"][:] = 123.0
    assert not np.any(opt.state[p]["exp_avg"] == 123.0)


def test_load_state_dict_errors():
    p, q = _param([1.0, 2.0]), _param([3.0])
    opt = optim.AdamW([p, q])
    _step(opt, p, [1.0, 1.0])
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="1 parameters in the state but 2"):
        optim.AdamW([{"params": [p, q]}]).load_state_dict(
            {"state": {}, "param_groups": [{**sd["param_groups"][0], "params": [0]}]})
    with pytest.raises(ValueError, match="2 parameter groups, the optimizer 1"):
        optim.AdamW([p, q]).load_state_dict({"state": {}, "param_groups": sd["param_groups"] * 2})
    swapped = optim.AdamW([q, p])
    with pytest.raises(ValueError, match=r"has shape \(2,\), the parameter \(1,\)"):
        swapped.load_state_dict(sd)


# ---- the fused kernel -----------------------------------------------------------------------------
def _adam_arrays(n, dtype, seed=0, amsgrad=False):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(n), rng.standard_normal(n), 0.1 * rng.standard_normal(n),
              0.01 * rng.random(n)]
    if amsgrad:
        arrays.append(0.01 * rng.random(n))
    return [a.astype(dtype) for a in arrays]


HYPER = dict(lr=3e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)


@pytest.mark.parametrize("amsgrad", [False, True])
# 8_193 and 40_001: below two full chunks, split once per thread; 100_003: several full chunks
@pytest.mark.parametrize("n", [1, 17, 8_191, 8_193, 40_001, 100_003])
def test_kernel_matches_numpy_fp64(n, amsgrad):
    kern = _adam_arrays(n, F64, amsgrad=amsgrad)
    ref = [a.copy() for a in kern]
    for step in (1, 2, 3):
        adamw_step(*kern[:4], **HYPER, step=step, max_exp_avg_sq=kern[4] if amsgrad else None)
        adamw_step_numpy(*ref[:4], **HYPER, step=step, max_exp_avg_sq=ref[4] if amsgrad else None)
    for k, r in zip(kern, ref):
        np.testing.assert_allclose(k, r, rtol=1e-14, atol=1e-15)


def test_kernel_fp32_agrees_with_fp64():
    k64 = _adam_arrays(5000, F64)
    k32 = [a.astype(np.float32) for a in k64]
    for step in range(1, 6):
        adamw_step(*k64, **HYPER, step=step)
        adamw_step(*k32, **HYPER, step=step)
    for a32, a64 in zip(k32, k64):
        np.testing.assert_allclose(a32, a64, rtol=2e-5, atol=2e-6)


def test_kernel_is_bit_reproducible_across_runs_and_thread_counts():
    before = mg.get_num_threads()
    try:
        for n in (300_001, 40_001):     # full chunks; a smaller parameter split once per thread
            results = []
            for threads in (1, 2, 2, 3):
                mg.set_num_threads(threads)
                arrays = _adam_arrays(n, np.float32, seed=3)
                for step in (1, 2):
                    adamw_step(*arrays, **HYPER, step=step)
                results.append(arrays[0])
            for r in results[1:]:
                np.testing.assert_array_equal(r, results[0])
    finally:
        mg.set_num_threads(before)


def test_kernel_handles_empty_arrays():
    arrays = _adam_arrays(0, np.float32)
    adamw_step(*arrays, **HYPER, step=1)


@pytest.mark.parametrize("mutate, error, match", [
    (lambda a: a.__setitem__(1, a[1].astype(np.float32)), TypeError, "grad has dtype float32"),
    (lambda a: a.__setitem__(2, a[2][:-1]), ValueError, r"exp_avg has shape \(9,\), expected \(10,\)"),
    (lambda a: a.__setitem__(3, np.repeat(a[3], 2)[::2]), ValueError, "C-contiguous"),
    (lambda a: a.__setitem__(0, a[0].astype(np.int64)), TypeError, "float32 or float64"),
    (lambda a: a.__setitem__(2, a[0]), ValueError, "param and exp_avg share memory"),
    (lambda a: a[0].setflags(write=False), ValueError, "param is read-only"),
    (lambda a: a.__setitem__(1, list(a[1])), TypeError, "grad must be a numpy array"),
])
def test_kernel_validates_arrays(mutate, error, match):
    arrays = _adam_arrays(10, F64)
    mutate(arrays)
    with pytest.raises(error, match=match):
        adamw_step(*arrays, **HYPER, step=1)


@pytest.mark.parametrize("override, match", [
    (dict(lr=float("nan")), "lr must be finite"),
    (dict(eps=0.0), "eps must be a finite positive number"),
    (dict(beta1=1.0), r"beta1 must be in \[0, 1\)"),
    (dict(beta2=float("inf")), "beta2 must be finite"),
    (dict(weight_decay=-0.1), "must be >= 0"),
    (dict(step=0), "step must be an integer >= 1"),
    (dict(step=1.5), "step must be an integer >= 1"),
])
def test_kernel_validates_hyperparameters(override, match):
    arrays = _adam_arrays(10, F64)
    kwargs = {**HYPER, "step": 1, **override}
    with pytest.raises(ValueError, match=match):
        adamw_step(*arrays, **kwargs)


def test_kernel_validation_runs_before_any_write():
    arrays = _adam_arrays(10, F64)
    before = [a.copy() for a in arrays]
    with pytest.raises(ValueError):
        adamw_step(*arrays, **dict(HYPER, eps=-1.0), step=1)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)


# ---- schedules ------------------------------------------------------------------------------------
def _lrs(scheduler, n):
    out = [scheduler.get_last_lr()[0]]
    for _ in range(n - 1):
        scheduler.optimizer.step()
        scheduler.step()
        out.append(scheduler.get_last_lr()[0])
    return out


def test_warmup_cosine_values():
    opt = optim.SGD([_param([0.0])], lr=1.0)
    sched = WarmupCosineLR(opt, warmup_steps=4, total_steps=12, min_lr=0.1)
    lrs = _lrs(sched, 15)
    # warmup: (s + 1) / 5; cosine from 1.0 at s = 4 to 0.1 at s = 12; 0.55 half way (s = 8)
    np.testing.assert_allclose(lrs[:5], [0.2, 0.4, 0.6, 0.8, 1.0], rtol=1e-15)
    assert lrs[8] == pytest.approx(0.55, rel=1e-15)
    assert lrs[6] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.25)), rel=1e-15)
    assert lrs[12:] == [0.1, 0.1, 0.1]
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:]))
    assert opt.param_groups[0]["lr"] == 0.1


def test_warmup_constant_and_lambda():
    opt = optim.SGD([_param([0.0])], lr=2.0)
    assert _lrs(WarmupConstantLR(opt, warmup_steps=3), 6) == [0.5, 1.0, 1.5, 2.0, 2.0, 2.0]
    opt = optim.SGD([_param([0.0])], lr=2.0)
    assert _lrs(WarmupConstantLR(opt), 3) == [2.0, 2.0, 2.0]
    opt = optim.SGD([{"params": [_param([0.0])]}, {"params": [_param([0.0])], "lr": 1.0}], lr=2.0)
    sched = LambdaLR(opt, [lambda s: 0.5 ** s, lambda s: 1.0 / (s + 1)])
    sched.step()
    sched.step()
    assert sched.get_last_lr() == [0.5, 1.0 / 3]


def test_lambda_lr_matches_torch():
    torch = pytest.importorskip("torch")
    fn = lambda s: 0.9 ** s
    opt = optim.SGD([_param([0.0])], lr=0.3)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.3)
    ours, theirs = LambdaLR(opt, fn), torch.optim.lr_scheduler.LambdaLR(topt, fn)
    for _ in range(5):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-15)
        topt.step()
        ours.step()
        theirs.step()


def test_scheduler_state_dict_resumes():
    opt = optim.SGD([_param([0.0])], lr=1.0)
    sched = WarmupCosineLR(opt, warmup_steps=2, total_steps=10)
    _lrs(sched, 5)
    sd = pickle.loads(pickle.dumps(sched.state_dict()))
    assert "optimizer" not in sd
    opt2 = optim.SGD([_param([0.0])], lr=1.0)
    sched2 = WarmupCosineLR(opt2, warmup_steps=2, total_steps=10)
    sched2.load_state_dict(sd)
    assert sched2.get_last_lr() == sched.get_last_lr()
    for _ in range(4):
        sched.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
        assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_load_state_dict_accepts_scalars_stored_as_arrays():
    p = _param([1.0, 2.0])
    opt = optim.AdamW([p])
    _step(opt, p, [1.0, 1.0])
    sd = opt.state_dict()
    sd["state"][0]["step"] = np.array(1)          # as a checkpoint format may return it
    sd["state"] = {str(k): v for k, v in sd["state"].items()}  # JSON turns int keys into strings
    fresh = optim.AdamW([_param([1.0, 2.0])])
    fresh.load_state_dict(sd)
    assert fresh.state[fresh.param_groups[0]["params"][0]]["step"] == 1


def test_kernel_accepts_numpy_scalars_like_python_ones():
    a = _adam_arrays(100, np.float32, seed=4)
    b = [x.copy() for x in a]
    adamw_step(*a, **HYPER, step=3)
    adamw_step(*b, **{k: np.float64(v) for k, v in HYPER.items()}, step=np.int64(3))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="step must be an integer"):
        adamw_step(*a, **HYPER, step=True)


def test_amsgrad_switched_on_mid_training_takes_effect():
    # audit: turning amsgrad on after the first step was silently ignored (no max_exp_avg_sq state)
    p, ref = _param([0.0, 0.0]), _param([0.0, 0.0])
    opt, plain = optim.AdamW([p], lr=0.1), optim.AdamW([ref], lr=0.1)
    for o, q in ((opt, p), (plain, ref)):
        _step(o, q, [0.1, 0.1])
    opt.param_groups[0]["amsgrad"] = True
    m, v, vmax = (opt.state[p][k].copy() for k in ("exp_avg", "exp_avg_sq", "exp_avg_sq"))
    vmax[:] = 0.0
    expect = p.data.copy()
    for g in (10.0, 0.1):
        grad = np.full(2, g)
        adamw_step_numpy(expect, grad, m, v, 0.1, 0.9, 0.999, 1e-8, 1e-2, opt.state[p]["step"] + 1,
                         max_exp_avg_sq=vmax)
        _step(opt, p, grad)
        _step(plain, ref, grad)
    assert "max_exp_avg_sq" in opt.state[p]
    np.testing.assert_allclose(p.data, expect, rtol=1e-12)
    assert not np.allclose(p.data, ref.data)


def test_adamw_betas_must_be_a_pair_and_sgd_lr_defaults_as_torch():
    # audit: betas=(0.9,) was accepted and failed at step(); SGD required lr (torch 2.x: 1e-3)
    with pytest.raises(ValueError, match="betas must be a pair"):
        optim.AdamW([_param([0.0])], betas=(0.9,))
    assert optim.SGD([_param([0.0])]).param_groups[0]["lr"] == 1e-3
