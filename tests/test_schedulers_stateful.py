"""OneCycleLR's momentum cycling, ReduceLROnPlateau and fractional-epoch warm restarts against PyTorch
(the closed-form schedules' lr values are compared in test_nn_optim_additions.py)."""
import pickle
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim
from minigrad.optim import lr_scheduler as sched


def _pair(torch, name, lrs=(0.1, 0.03), **kwargs):
    ours = getattr(optim, name)([{"params": [mg.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs],
                                **kwargs)
    theirs = getattr(torch.optim, name)([{"params": [torch.zeros(1, requires_grad=True)], "lr": lr}
                                         for lr in lrs], **kwargs)
    return ours, theirs


def _same_groups(opt, topt, keys):
    for g, tg in zip(opt.param_groups, topt.param_groups):
        for key in keys:
            np.testing.assert_allclose(np.ravel(g[key]), np.ravel(tg[key]), rtol=1e-12, atol=0, err_msg=key)


@pytest.mark.parametrize("name, kwargs, moment", [
    ("AdamW", dict(), "betas"),
    ("Adam", dict(three_phase=True, anneal_strategy="linear"), "betas"),
    ("SGD", dict(base_momentum=[0.8, 0.7], max_momentum=0.9), "momentum"),
])
def test_onecycle_cycles_momentum_like_torch(name, kwargs, moment):
    torch = pytest.importorskip("torch")
    opt, topt = _pair(torch, name)
    ours = sched.OneCycleLR(opt, max_lr=[1.0, 0.3], total_steps=17, **kwargs)
    theirs = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=[1.0, 0.3], total_steps=17, **kwargs)
    for _ in range(17):
        _same_groups(opt, topt, ("lr", moment, "initial_lr", "max_lr", "min_lr"))
        ours.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")               # torch: "scheduler.step() before optimizer.step()"
            theirs.step()
    with pytest.raises(ValueError, match="tried to step 18 times; total_steps is 17"):
        ours.step()


def test_onecycle_rejects():
    opt = optim.Adagrad([mg.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="cycle_momentum needs an optimizer with momentum or betas"):
        sched.OneCycleLR(opt, 0.1, total_steps=10)
    sched.OneCycleLR(opt, 0.1, total_steps=10, cycle_momentum=False)
    with pytest.raises(ValueError, match="give total_steps, or epochs and steps_per_epoch"):
        sched.OneCycleLR(opt, 0.1, epochs=3)
    with pytest.raises(ValueError, match="anneal_strategy"):
        sched.OneCycleLR(opt, 0.1, total_steps=10, anneal_strategy="exp", cycle_momentum=False)
    with pytest.raises(ValueError, match="max_lr has 2 values for 1 param groups"):
        sched.OneCycleLR(opt, [0.1, 0.2], total_steps=10, cycle_momentum=False)


METRICS = [5.0, 4.0, 4.0, 3.9999, 4.1, 4.2, 3.0, 3.0, 3.0, 3.0, 2.9, 3.5, 3.5, 3.5, 3.5, 3.5, float("nan"),
           1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(patience=1),
    dict(mode="max", patience=0, factor=0.5),
    dict(patience=1, threshold=0.1, threshold_mode="abs", cooldown=2, min_lr=[0.02, 0.001]),
    dict(mode="max", patience=2, threshold=0.01, cooldown=1, min_lr=0.01, eps=0.05),
])
def test_reduce_on_plateau_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    opt, topt = _pair(torch, "SGD")
    ours = sched.ReduceLROnPlateau(opt, **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    for i, metric in enumerate(METRICS):
        arg = mg.tensor(metric) if i % 2 else metric
        ours.step(arg)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs.step(metric)
        assert ours.get_last_lr() == theirs.get_last_lr(), i
        assert (ours.best, ours.num_bad_epochs, ours.cooldown_counter, ours.last_epoch) == \
            (theirs.best, theirs.num_bad_epochs, theirs.cooldown_counter, theirs.last_epoch) or \
            (np.isnan(ours.best) and np.isnan(theirs.best))
        _same_groups(opt, topt, ("lr",))


def test_reduce_on_plateau_state_dict_and_checks():
    opt = optim.SGD([mg.zeros(1, requires_grad=True)], lr=1.0)
    a = sched.ReduceLROnPlateau(opt, patience=0)
    for m in (3.0, 3.0):
        a.step(m)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    saved = pickle.loads(pickle.dumps(a.state_dict()))
    assert "optimizer" not in saved
    b = sched.ReduceLROnPlateau(optim.SGD([mg.zeros(1, requires_grad=True)], lr=0.1), patience=5)
    b.load_state_dict(saved)
    assert (b.best, b.patience, b.last_epoch) == (3.0, 0, 2)
    for kwargs, match in [(dict(factor=1.0), "factor must be < 1.0"), (dict(mode="up"), "mode"),
                          (dict(threshold_mode="x"), "threshold_mode"), (dict(patience=-1), "patience")]:
        with pytest.raises(ValueError, match=match):
            sched.ReduceLROnPlateau(opt, **kwargs)


@pytest.mark.parametrize("T_0, T_mult", [(3, 1), (2, 2), (1, 3)])
def test_warm_restarts_fractional_epochs_match_torch(T_0, T_mult):
    torch = pytest.importorskip("torch")
    opt, topt = _pair(torch, "SGD")
    ours = sched.CosineAnnealingWarmRestarts(opt, T_0, T_mult, eta_min=1e-3)
    theirs = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0, T_mult, eta_min=1e-3)
    for epoch in np.arange(0, 20, 0.25):
        ours.step(float(epoch))
        theirs.step(float(epoch))
        np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-9, atol=1e-15)
        assert ours.last_epoch == theirs.last_epoch
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        ours.step(-1.0)


def test_warm_restarts_by_hand():
    opt = optim.SGD([mg.zeros(1, requires_grad=True)], lr=1.0)
    s = sched.CosineAnnealingWarmRestarts(opt, 2, T_mult=3)
    got = [s.get_last_lr()[0]] + [s.step() or s.get_last_lr()[0] for _ in range(9)]
    # runs of 2, 6, 18 steps: restarts (lr = 1) at steps 0, 2 and 8
    assert [got[0], got[2], got[8]] == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(got[1], 0.5, atol=1e-15)
    np.testing.assert_allclose(got[5], (1 + np.cos(np.pi * 3 / 6)) / 2, atol=1e-15)
