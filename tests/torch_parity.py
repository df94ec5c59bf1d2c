"""Helpers of the tests that compare minigrad ops with PyTorch's on float64 copies (torch required)."""
import numpy as np
import torch

import minigrad as mg

TOL = 1e-10


def rng(seed):
    return np.random.default_rng(seed)


def leaf(a, dtype=np.float64):
    return mg.tensor(np.asarray(a, dtype=dtype), requires_grad=True)


def tleaf(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def np_of(t):
    return t.detach().numpy()


def parity(fn_mg, fn_t, arrays, seed=0, tol=TOL, none=()):
    """Run both on float64 copies of `arrays` (None stays None), compare outputs (NaN where torch's
    are; int outputs exactly) and, through a random cotangent, the grads of every array."""
    ms = [None if a is None else leaf(a) for a in arrays]
    ts = [None if a is None else tleaf(a) for a in arrays]
    ym, yt = fn_mg(*ms), fn_t(*ts)
    if isinstance(yt, tuple):
        for a, b in zip(ym[1:], yt[1:]):
            assert a.dtype == np.int64 and np.array_equal(a.data, b.numpy()), (a.data, b.numpy())
        ym, yt = ym[0], yt[0]
    assert ym.shape == tuple(yt.shape)
    assert ym.dtype == np.float64
    np.testing.assert_allclose(ym.data, np_of(yt), rtol=tol, atol=tol)
    g = rng(seed + 1).standard_normal(tuple(yt.shape))
    ym.backward(mg.tensor(g))
    yt.backward(torch.tensor(g))
    for i, (m, t) in enumerate(zip(ms, ts)):
        if m is None:
            continue
        assert m.grad is not None, f"no grad for argument {i}"
        np.testing.assert_allclose(m.grad.data, t.grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=f"grad of argument {i}")
    return ym
