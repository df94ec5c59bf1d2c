"""Adam, the torch.optim.lr_scheduler schedules, loss modules, Softmax / LogSoftmax / LeakyReLU / Flatten:
hand-computed values, parity with PyTorch (fp64, several steps), state_dict round trips, validation."""
import math
import pickle
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.optim import lr_scheduler as sched
from tests.test_optim import _param, _step

F64 = np.float64


# ---- Adam ---------------------------------------------------------------------------------------------
def test_adam_by_hand():
    p = _param([1.0, -2.0])
    opt = optim.Adam([p], lr=0.1, weight_decay=0.1)
    # L2: g' = g + 0.1 p = [0.6, -0.45]; m = 0.1 g'; v = 0.001 g'^2, so m_hat = g', sqrt(v_hat) = |g'|
    _step(opt, p, [0.5, -0.25])
    np.testing.assert_allclose(p.data, [1 - 0.1 * 0.6 / (0.6 + 1e-8), -2 + 0.1 * 0.45 / (0.45 + 1e-8)],
                               rtol=0, atol=1e-15)
    state = opt.state[p]
    np.testing.assert_allclose(state["exp_avg"], [0.06, -0.045], rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"], [3.6e-4, 2.025e-4], rtol=1e-14)
    # step 2: the decay term uses the updated p; no decoupled shrink of p
    p1 = p.data.copy()
    g2 = np.array([-1.0, 0.5]) + 0.1 * p1
    m = 0.9 * np.array([0.06, -0.045]) + 0.1 * g2
    v = 0.999 * np.array([3.6e-4, 2.025e-4]) + 0.001 * g2 * g2
    _step(opt, p, [-1.0, 0.5])
    expected = p1 - 0.1 * (m / 0.19) / (np.sqrt(v / 0.001999) + 1e-8)
    np.testing.assert_allclose(p.data, expected, rtol=0, atol=1e-14)
    assert state["step"] == 2


def test_adam_leaves_the_grad_alone_and_matches_adamw_without_decay():
    p = _param([1.0, -2.0, 3.0])
    opt = optim.Adam([p], lr=0.1, weight_decay=0.5)
    _step(opt, p, [0.5, 0.25, -1.0])
    np.testing.assert_array_equal(p.grad.data, [0.5, 0.25, -1.0])      # the L2 term went into a copy
    rng = np.random.default_rng(0)
    a, b = _param(rng.standard_normal(6)), _param(rng.standard_normal(6))
    b.data[:] = a.data
    opt_a = optim.Adam([a], lr=0.01, amsgrad=True)
    opt_b = optim.AdamW([b], lr=0.01, weight_decay=0.0, amsgrad=True)
    for _ in range(5):
        g = rng.standard_normal(6)
        _step(opt_a, a, g)
        _step(opt_b, b, g)
    np.testing.assert_array_equal(a.data, b.data)                       # one shared update, bit for bit


def test_adamw_is_adam_with_decoupled_decay():
    assert issubclass(optim.AdamW, optim.Adam)                          # as in torch
    assert "_update" not in vars(optim.AdamW)                           # the update is shared, not copied
    p = _param([1.0])
    assert optim.Adam([p]).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                            amsgrad=False)
    assert optim.AdamW([p]).defaults["weight_decay"] == 1e-2
    assert sorted(optim.AdamW([p]).state_dict()["param_groups"][0]) == [
        "amsgrad", "betas", "eps", "lr", "params", "weight_decay"]     # checkpoints unchanged


def test_adam_amsgrad_switched_on_mid_training():
    p = _param([0.0])
    opt = optim.Adam([p], lr=0.1)
    _step(opt, p, [10.0])
    assert "max_exp_avg_sq" not in opt.state[p]
    opt.param_groups[0]["amsgrad"] = True
    _step(opt, p, [0.0])                                                # v = 0.0999; the max starts at 0
    np.testing.assert_allclose(opt.state[p]["max_exp_avg_sq"], [0.0999], rtol=1e-15)


@pytest.mark.parametrize("kwargs, match", [
    (dict(lr=-1e-3), "lr must be >= 0"),
    (dict(eps=-1.0), "eps must be >= 0"),
    (dict(weight_decay=-0.1), "weight_decay must be >= 0"),
    (dict(betas=(1.0, 0.999)), r"Adam: betas\[0\] must be in \[0, 1\)"),
    (dict(betas=(0.9, -0.1)), r"betas\[1\] must be in \[0, 1\)"),
    (dict(betas=(0.9,)), "betas must be a pair"),
])
def test_adam_rejects_bad_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optim.Adam([_param([1.0])], **kwargs)


# ---- learning-rate schedulers ---------------------------------------------------------------------------
def _opt(lrs=(0.1,)):
    return optim.SGD([{"params": [_param([0.0])], "lr": lr} for lr in lrs])


def _lrs(scheduler, steps):
    out = [scheduler.get_last_lr()]
    for _ in range(steps):
        scheduler.step()
        out.append(scheduler.get_last_lr())
    return out


@pytest.mark.parametrize("make, expected", [
    (lambda o: sched.StepLR(o, step_size=2, gamma=0.5), [1, 1, 0.5, 0.5, 0.25, 0.25, 0.125]),
    (lambda o: sched.MultiStepLR(o, milestones=[3, 1, 3], gamma=0.1), [1, 0.1, 0.1, 0.001, 0.001]),
    (lambda o: sched.ExponentialLR(o, gamma=0.5), [1, 0.5, 0.25, 0.125]),
    (lambda o: sched.CosineAnnealingLR(o, T_max=4, eta_min=0.2),
     [1, 0.2 + 0.4 * (1 + math.sqrt(0.5)), 0.6, 0.2 + 0.4 * (1 - math.sqrt(0.5)), 0.2,
      0.2 + 0.4 * (1 - math.sqrt(0.5)), 0.6]),                       # past T_max the cosine goes on
    (lambda o: sched.LinearLR(o), [1 / 3, 7 / 15, 9 / 15, 11 / 15, 13 / 15, 1, 1]),
    (lambda o: sched.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=2), [1, 0.5, 0, 0]),
    (lambda o: sched.SequentialLR(o, [sched.LinearLR(o, 0.5, total_iters=2), sched.ExponentialLR(o, 0.5)],
                                  milestones=[3]), [0.5, 0.75, 1, 1, 0.5, 0.25]),
])
def test_schedulers_by_hand(make, expected):
    opt = _opt((1.0,))
    got = [lrs[0] for lrs in _lrs(make(opt), len(expected) - 1)]
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-15)
    assert opt.param_groups[0]["lr"] == got[-1]


def _schedules(S, opt):
    """Constructors of the same schedules, with S = minigrad's lr_scheduler or torch's (same API)."""
    return [
        lambda: S.StepLR(opt, 3, gamma=0.5),
        lambda: S.MultiStepLR(opt, [2, 5, 5, 9], gamma=0.3),
        lambda: S.ExponentialLR(opt, 0.9),
        lambda: S.CosineAnnealingLR(opt, 7, eta_min=1e-3),
        lambda: S.CosineAnnealingLR(opt, 5),
        lambda: S.LinearLR(opt),
        lambda: S.LinearLR(opt, 0.25, 0.5, total_iters=6),
        lambda: S.SequentialLR(opt, [S.LinearLR(opt, 0.1, total_iters=4), S.CosineAnnealingLR(opt, 10, 1e-3)],
                               [4]),
        lambda: S.SequentialLR(opt, [S.ExponentialLR(opt, 0.8), S.StepLR(opt, 2, 0.5),
                                     S.MultiStepLR(opt, [1, 3], 0.5)], [3, 8]),
        lambda: S.ConstantLR(opt),
        lambda: S.ConstantLR(opt, factor=0.2, total_iters=7),
        lambda: S.PolynomialLR(opt, total_iters=9, power=2.5),
        lambda: S.CosineAnnealingWarmRestarts(opt, 4, eta_min=1e-3),
        lambda: S.CosineAnnealingWarmRestarts(opt, 2, T_mult=2),
        lambda: S.CosineAnnealingWarmRestarts(opt, 1, T_mult=3, eta_min=1e-4),
        lambda: S.OneCycleLR(opt, max_lr=[0.5, 0.2], total_steps=26),
        lambda: S.OneCycleLR(opt, 0.4, epochs=3, steps_per_epoch=9, pct_start=0.25, anneal_strategy="linear",
                             three_phase=True, div_factor=10, final_div_factor=100),
        lambda: S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 3), S.PolynomialLR(opt, 10)], [3]),
    ]


N_SCHEDULES = len(_schedules(sched, None))


@pytest.mark.parametrize("index", range(N_SCHEDULES))
def test_schedulers_match_torch(index):
    torch = pytest.importorskip("torch")
    lrs = (0.1, 0.03)
    opt = _opt(lrs)
    topt = torch.optim.SGD([{"params": [torch.zeros(1, dtype=torch.float64, requires_grad=True)], "lr": lr}
                            for lr in lrs])
    ours, theirs = _schedules(sched, opt)[index](), _schedules(torch.optim.lr_scheduler, topt)[index]()
    for step in range(25):                                # well past T_max / total_iters / milestones
        np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-12, atol=0,
                                   err_msg=f"step {step}")
        np.testing.assert_allclose([g["lr"] for g in opt.param_groups], [g["lr"] for g in topt.param_groups],
                                   rtol=1e-12, atol=0)
        opt.step()
        topt.step()
        ours.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")               # torch's notes about SequentialLR internals
            theirs.step()


@pytest.mark.parametrize("index", range(N_SCHEDULES))
def test_scheduler_state_dict_round_trip(index):
    opt_a, opt_b = _opt((0.1, 0.03)), _opt((0.1, 0.03))
    sched_a = _schedules(sched, opt_a)[index]()
    for _ in range(6):
        sched_a.step()
    saved = pickle.loads(pickle.dumps(sched_a.state_dict()))
    assert "optimizer" not in saved
    sched_b = _schedules(sched, opt_b)[index]()
    sched_b.load_state_dict(saved)
    assert sched_b.get_last_lr() == sched_a.get_last_lr() and sched_b.last_epoch == 6
    for _ in range(10):
        sched_a.step()
        sched_b.step()
        assert sched_b.get_last_lr() == sched_a.get_last_lr()
        assert [g["lr"] for g in opt_b.param_groups] == [g["lr"] for g in opt_a.param_groups]


def test_multisteplr_loads_torchs_state_dict():
    torch = pytest.importorskip("torch")
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    tsched = torch.optim.lr_scheduler.MultiStepLR(topt, [2, 4, 4], gamma=0.5)
    for _ in range(3):
        topt.step()
        tsched.step()
    opt = _opt((1.0,))
    ours = sched.MultiStepLR(opt, [1], gamma=0.5)
    ours.load_state_dict(tsched.state_dict())             # milestones as torch's Counter
    assert ours.milestones == [2, 4, 4] and ours.last_epoch == 3
    for _ in range(3):
        topt.step()
        tsched.step()
        ours.step()
        assert ours.get_last_lr() == tsched.get_last_lr()


def test_scheduler_resume_with_last_epoch():
    opt = _opt((1.0,))
    s = sched.StepLR(opt, 2, gamma=0.5)
    for _ in range(5):
        s.step()
    resumed = sched.StepLR(opt, 2, gamma=0.5, last_epoch=4)   # uses the groups' initial_lr
    assert resumed.last_epoch == 5 and resumed.get_last_lr() == [0.25]
    with pytest.raises(KeyError, match="initial_lr"):
        sched.ExponentialLR(_opt(), 0.5, last_epoch=3)


@pytest.mark.parametrize("make, error, match", [
    (lambda o: sched.StepLR(o, 0), ValueError, "step_size must be an int >= 1"),
    (lambda o: sched.StepLR(o, 2.5), TypeError, "step_size must be an int"),
    (lambda o: sched.ExponentialLR(o, float("nan")), ValueError, "gamma must be finite"),
    (lambda o: sched.MultiStepLR(o, [1.5]), TypeError, "milestones must be an int"),
    (lambda o: sched.CosineAnnealingLR(o, 0), ValueError, "T_max must be an int >= 1"),
    (lambda o: sched.LinearLR(o, start_factor=0.0), ValueError, r"start_factor must be in \(0, 1\]"),
    (lambda o: sched.LinearLR(o, start_factor=1.5), ValueError, r"start_factor must be in \(0, 1\]"),
    (lambda o: sched.LinearLR(o, end_factor=-0.1), ValueError, r"end_factor must be in \[0, 1\]"),
    (lambda o: sched.LinearLR(o, total_iters=0), ValueError, "total_iters must be an int >= 1"),
    (lambda o: sched.SequentialLR(o, [], []), ValueError, "at least one scheduler"),
    (lambda o: sched.SequentialLR(o, [sched.StepLR(o, 1), sched.StepLR(o, 1)], []), ValueError,
     "2 schedulers need 1 milestones"),
    (lambda o: sched.SequentialLR(o, [sched.StepLR(_opt(), 1)], []), ValueError, "another optimizer"),
    (lambda o: sched.SequentialLR(o, [o], []), TypeError, "must be an LRScheduler"),
    (lambda o: sched.SequentialLR(o, [sched.StepLR(o, 1)] * 3, [4, 2]), ValueError, "increasing order"),
])
def test_scheduler_validation(make, error, match):
    with pytest.raises(error, match=match):
        make(_opt())


# ---- loss modules -----------------------------------------------------------------------------------------
def _pair(torch, array):
    return mg.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def _check_grad(ours, theirs, tol=1e-13):
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(6, 5), (5,), (3, 5, 2, 4)])
def test_cross_entropy_loss_matches_torch(shape, reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(shape) * 3
    batch = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    target = rng.integers(0, 5, batch)
    if len(shape) > 1:
        target.reshape(-1)[::3] = 7                       # ignored rows (ignore_index = 7)
    x, tx = _pair(torch, logits)
    loss = nn.CrossEntropyLoss(ignore_index=7, reduction=reduction)(x, mg.tensor(target))
    tloss = torch.nn.CrossEntropyLoss(ignore_index=7, reduction=reduction)(tx, torch.tensor(target))
    assert tuple(loss.shape) == tuple(tloss.shape)
    np.testing.assert_allclose(loss.numpy(), tloss.detach().numpy(), rtol=1e-13, atol=1e-14)
    weight = rng.standard_normal(loss.shape)              # an upstream grad for 'none'
    (loss * mg.tensor(weight)).sum().backward()
    (tloss * torch.tensor(weight)).sum().backward()
    _check_grad(x, tx)


def test_cross_entropy_loss_known_value_and_targets():
    loss_fn = nn.CrossEntropyLoss()
    logits = mg.tensor(np.log(np.array([[1.0, 3.0], [2.0, 2.0]])))
    # softmax rows [1/4, 3/4] and [1/2, 1/2]: mean(-log 3/4, -log 1/2)
    expected = (math.log(4 / 3) + math.log(2)) / 2
    assert abs(loss_fn(logits, [1, 0]).item() - expected) < 1e-15       # a list / array target works too
    assert math.isnan(nn.CrossEntropyLoss(ignore_index=0)(logits, np.array([0, 0])).item())
    assert repr(loss_fn) == "CrossEntropyLoss()"


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(label_smoothing=1.5), ValueError, "label_smoothing must be between 0.0 and 1.0"),
    (dict(label_smoothing=float("nan")), ValueError, "label_smoothing must be finite"),
    (dict(weight=[1.0, 2.0]), TypeError, "must be a Tensor"),
    (dict(reduction="avg"), ValueError, "'avg' is not a valid value for reduction"),
    (dict(size_average=True), ValueError, "deprecated"),
    (dict(ignore_index=1.5), TypeError, "ignore_index must be an int"),
])
def test_cross_entropy_loss_rejects(kwargs, error, match):
    with pytest.raises(error, match=match):
        nn.CrossEntropyLoss(**kwargs)


def test_cross_entropy_loss_rejects_bad_inputs():
    loss_fn = nn.CrossEntropyLoss()
    with pytest.raises(TypeError, match="class probabilities and must be float"):
        loss_fn(mg.zeros(2, 3), np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="ignore_index is not supported for class-probability"):
        nn.CrossEntropyLoss(ignore_index=0)(mg.zeros(2, 3), mg.zeros(2, 3))
    with pytest.raises(ValueError, match=r"weight has shape \(2,\), expected \(3,\)"):
        nn.CrossEntropyLoss(weight=mg.ones(2))(mg.zeros(2, 3), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"targets has shape \(3,\), expected \(2,\)"):
        loss_fn(mg.zeros(2, 3), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"needs target of shape \(2, 4\), got \(2,\)"):
        loss_fn(mg.zeros(2, 3, 4), np.array([0, 1]))
    with pytest.raises(ValueError, match="0-d"):
        loss_fn(mg.tensor(1.0), np.array(0))


@pytest.mark.parametrize("name", ["MSELoss", "L1Loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses_match_torch(name, reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    b[0, 0] = a[0, 0]                                   # |x - y| at 0: gradient 0, as torch
    x, tx = _pair(torch, a)
    y, ty = _pair(torch, b)
    loss = getattr(nn, name)(reduction=reduction)(x, y)
    tloss = getattr(torch.nn, name)(reduction=reduction)(tx, ty)
    np.testing.assert_allclose(loss.numpy(), tloss.detach().numpy(), rtol=1e-14, atol=1e-15)
    weight = rng.standard_normal(loss.shape)
    (loss * mg.tensor(weight)).sum().backward()
    (tloss * torch.tensor(weight)).sum().backward()
    _check_grad(x, tx)
    _check_grad(y, ty)


def test_pointwise_losses_known_values_and_checks():
    x, y = mg.tensor(np.array([1.0, -2.0])), np.array([0.0, 0.0])
    assert nn.MSELoss()(x, y).item() == 2.5 and nn.MSELoss(reduction="sum")(x, y).item() == 5.0
    assert nn.L1Loss()(x, y).item() == 1.5
    np.testing.assert_array_equal(nn.L1Loss(reduction="none")(x, y).numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.MSELoss(reduction="batchmean")
    with pytest.warns(UserWarning, match="broadcast"):
        nn.MSELoss()(mg.zeros(3, 1, dtype=mg.float64), mg.zeros(3, dtype=mg.float64))


# ---- Softmax, LogSoftmax, LeakyReLU, Flatten --------------------------------------------------------------
@pytest.mark.parametrize("name", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_modules_match_torch(name, dim):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, tx = _pair(torch, rng.standard_normal((3, 4, 5)) * 4)
    y, ty = getattr(nn, name)(dim)(x), getattr(torch.nn, name)(dim)(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-13, atol=1e-15)
    w = rng.standard_normal(y.shape)
    (y * mg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    _check_grad(x, tx)
    assert repr(getattr(nn, name)(dim)) == f"{name}(dim={dim})"


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4), (2, 3, 4, 5)])
def test_softmax_without_dim_uses_torchs_legacy_choice(shape):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(6).standard_normal(shape)
    with pytest.warns(UserWarning, match="implicit dimension"):
        y = nn.Softmax()(mg.tensor(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = torch.nn.Softmax()(torch.tensor(a))
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-14)


@pytest.mark.parametrize("slope", [0.01, 0.2, 1.5, -0.5])
def test_leaky_relu_matches_torch(slope):
    torch = pytest.importorskip("torch")
    a = np.array([-3.0, -0.5, 0.0, 0.0, 0.5, 2.0, -1e-300])
    x, tx = _pair(torch, a)
    y, ty = nn.LeakyReLU(slope)(x), torch.nn.LeakyReLU(slope)(tx)
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    w = np.arange(1.0, 8.0)
    (y * mg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())      # negative_slope at 0, as torch
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    with pytest.raises(ValueError, match="inplace=True is not supported"):
        nn.LeakyReLU(0.1, inplace=True)


@pytest.mark.parametrize("args", [(), (0,), (1, 2), (0, -2), (2, 3), (-3, -1)])
def test_flatten_matches_torch(args):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(7).standard_normal((2, 3, 4, 5))
    x, tx = _pair(torch, a)
    y, ty = nn.Flatten(*args)(x), torch.nn.Flatten(*args)(tx)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(a.shape))
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"


def test_flatten_rejects_bad_dims():
    with pytest.raises(TypeError, match="start_dim must be an int"):
        nn.Flatten(1.0)
    with pytest.raises(ValueError, match="start_dim"):
        nn.Flatten(3, 1)(mg.zeros(2, 3, 4, 5))


# ---- everything together: a classifier trained with Adam + a schedule, against torch -------------------
def test_classifier_with_adam_and_schedule_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((8, 2, 3, 2))
    y = rng.integers(0, 4, 8)
    y[1] = -100
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16, dtype=F64), nn.LeakyReLU(0.1),
                          nn.Linear(16, 4, dtype=F64))
    tmodel = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 16), torch.nn.LeakyReLU(0.1),
                                 torch.nn.Linear(16, 4)).double()
    with torch.no_grad():
        for name, tp in tmodel.named_parameters():
            tp.copy_(torch.tensor(model.get_parameter(name).numpy()))
    opt = optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-2, amsgrad=True)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-2, weight_decay=1e-2, amsgrad=True)
    sch = sched.SequentialLR(opt, [sched.LinearLR(opt, 0.5, total_iters=2), sched.CosineAnnealingLR(opt, 4)],
                             [2])
    tsch = torch.optim.lr_scheduler.SequentialLR(
        topt, [torch.optim.lr_scheduler.LinearLR(topt, 0.5, total_iters=2),
               torch.optim.lr_scheduler.CosineAnnealingLR(topt, 4)], [2])
    loss_fn, tloss_fn = nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()
    for _ in range(6):
        loss = loss_fn(model(mg.tensor(x)), y)
        tloss = tloss_fn(tmodel(torch.tensor(x)), torch.tensor(y))
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        sch.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tsch.step()
    for name, tp in tmodel.named_parameters():
        np.testing.assert_allclose(model.get_parameter(name).numpy(), tp.detach().numpy(), rtol=1e-11,
                                   atol=1e-13)


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_adam_eps_zero_is_refused_at_construction(cls):
    """The fused kernel needs eps > 0; eps=0 used to pass the constructor and fail at the first step
    with an error naming adamw_step."""
    p = mg.nn.Parameter(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="eps must be > 0"):
        getattr(mg.optim, cls)([p], eps=0.0)
