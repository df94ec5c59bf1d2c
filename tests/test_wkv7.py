"""F.wkv7: the chunk-checkpointed WKV7 kernel against a naive numpy per-step loop, central
differences for every input and the initial state, fp32 vs fp64, carried state, bad inputs."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F


def naive_wkv7(r, w, k, v, a, b, s0):
    """S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T ; y_t = S_t r_t, one step at a time."""
    B, T, H, N = r.shape
    S = s0.copy()
    y = np.zeros((B, T, H, N))
    for bi in range(B):
        for h in range(H):
            for t in range(T):
                Sm = S[bi, h]
                S[bi, h] = (Sm * w[bi, t, h][None, :] + np.outer(v[bi, t, h], k[bi, t, h])
                            + np.outer(Sm @ a[bi, t, h], b[bi, t, h]))
                y[bi, t, h] = S[bi, h] @ r[bi, t, h]
    return y, S


def make_inputs(B, T, H, N, seed=0):
    """Time-mix-like inputs: w in (0.4, 1), a = -kk, b = kk * alpha with unit-norm kk."""
    rng = np.random.default_rng(seed)
    r, k, v = (rng.standard_normal((B, T, H, N)) for _ in range(3))
    w = rng.uniform(0.4, 1.0, (B, T, H, N))
    kk = rng.standard_normal((B, T, H, N))
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    a, b = -kk, kk * rng.uniform(0.0, 1.0, (B, T, H, N))
    s0 = 0.5 * rng.standard_normal((B, H, N, N))
    return [r, w, k, v, a, b, s0]


NAMES = ("r", "w", "k", "v", "a", "b", "state")
SHAPES = {
    "one_step": (2, 1, 2, 3),
    "T37_not_multiple_of_chunk": (1, 37, 1, 3),
    "batch_heads": (3, 5, 2, 4),
    "exactly_one_chunk": (1, 16, 2, 2),
    # N = 19: the backward's blocked lane sums (16 rows fp32, 8 rows fp64) plus a row tail
    "lane_blocks_and_tail": (1, 3, 1, 19),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_forward_matches_naive_loop(shape):
    arrs = make_inputs(*SHAPES[shape], seed=1)
    y, sT = F.wkv7(*(mg.tensor(x) for x in arrs))
    y_ref, s_ref = naive_wkv7(*arrs)
    np.testing.assert_allclose(y.numpy(), y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sT.numpy(), s_ref, rtol=1e-12, atol=1e-12)


def test_head_size_64_fast_path_matches_naive_loop():
    arrs = make_inputs(2, 3, 1, 64, seed=4)
    for dt, tol in ((np.float64, 1e-11), (np.float32, 2e-4)):
        y, sT = F.wkv7(*(mg.tensor(x, dtype=dt) for x in arrs))
        y_ref, s_ref = naive_wkv7(*arrs)
        np.testing.assert_allclose(y.numpy(), y_ref, rtol=tol, atol=tol * np.abs(y_ref).max())
        np.testing.assert_allclose(sT.numpy(), s_ref, rtol=tol, atol=tol * np.abs(s_ref).max())


def fd_errors(arrs, chunk=16, seed=0):
    """Per-input relative error of the kernel's grads vs central differences of the naive loop."""
    rng = np.random.default_rng(seed)
    y_ref, s_ref = naive_wkv7(*arrs)
    gy, gs = rng.standard_normal(y_ref.shape), rng.standard_normal(s_ref.shape)
    ts = [mg.tensor(x, requires_grad=True) for x in arrs]
    y, sT = F.wkv7(*ts, chunk=chunk)
    mg.autograd.backward([y, sT], [gy, gs])
    errors = {}
    for name, x, t in zip(NAMES, arrs, ts):
        fd = np.zeros_like(x)
        for e in range(x.size):
            old = x.flat[e]
            x.flat[e] = old + 1e-6
            yp, sp = naive_wkv7(*arrs)
            x.flat[e] = old - 1e-6
            ym, sm = naive_wkv7(*arrs)
            x.flat[e] = old
            fd.flat[e] = (((yp - ym) * gy).sum() + ((sp - sm) * gs).sum()) / 2e-6
        errors[name] = np.abs(t.grad.numpy() - fd).max() / np.abs(fd).max()
    return errors


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_gradient_matches_central_differences(shape):
    errors = fd_errors(make_inputs(*SHAPES[shape], seed=2))
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, f"{shape}: worst {worst} {errors[worst]:.2e}; {errors}"


def test_small_chunks_give_the_same_gradients():
    arrs = make_inputs(2, 11, 2, 3, seed=3)
    grads = []
    for chunk in (1, 4, 16):
        ts = [mg.tensor(x, requires_grad=True) for x in arrs]
        y, sT = F.wkv7(*ts, chunk=chunk)
        mg.autograd.backward([y, sT], [np.cos(y.numpy()), np.sin(sT.numpy())])
        grads.append([t.grad.numpy() for t in ts])
    for other in grads[1:]:
        for g0, g1 in zip(grads[0], other):
            np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-12)


def test_two_calls_carrying_the_state_equal_one_call_including_grads():
    arrs = make_inputs(2, 21, 2, 3, seed=5)
    whole = [mg.tensor(x, requires_grad=True) for x in arrs]
    y, sT = F.wkv7(*whole)
    cy, cs = np.cos(np.arange(y.numpy().size)).reshape(y.shape), np.ones(sT.shape)
    mg.autograd.backward([y, sT], [cy, cs])
    split = [mg.tensor(x, requires_grad=True) for x in arrs]
    y1, s1 = F.wkv7(*(t[:, :13] for t in split[:6]), split[6])
    y2, s2 = F.wkv7(*(t[:, 13:] for t in split[:6]), s1)
    np.testing.assert_allclose(np.concatenate([y1.numpy(), y2.numpy()], 1), y.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s2.numpy(), sT.numpy(), rtol=1e-12, atol=1e-12)
    mg.autograd.backward([y1, y2, s2], [cy[:, :13], cy[:, 13:], cs])
    for t_whole, t_split in zip(whole, split):
        np.testing.assert_allclose(t_split.grad.numpy(), t_whole.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_fp32_matches_fp64():
    arrs = make_inputs(2, 40, 2, 8, seed=6)
    res = {}
    for dt in (np.float32, np.float64):
        ts = [mg.tensor(x, dtype=dt, requires_grad=True) for x in arrs]
        y, sT = F.wkv7(*ts)
        mg.autograd.backward([y, sT], [np.ones(y.shape, dt), np.ones(sT.shape, dt)])
        res[dt] = [y.numpy(), sT.numpy()] + [t.grad.numpy() for t in ts]
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        assert np.abs(a32 - a64).max() <= 1e-4 * np.abs(a64).max()


def test_fp32_matches_fp64_with_full_lane_blocks():
    arrs = make_inputs(2, 20, 1, 37, seed=7)    # N = 37: two fp32 / four fp64 blocks + tail
    res = {}
    for dt in (np.float32, np.float64):
        ts = [mg.tensor(x, dtype=dt, requires_grad=True) for x in arrs]
        y, sT = F.wkv7(*ts)
        mg.autograd.backward([y, sT], [np.ones(y.shape, dt), np.ones(sT.shape, dt)])
        res[dt] = [t.grad.numpy() for t in ts]
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        assert np.abs(a32 - a64).max() <= 1e-4 * np.abs(a64).max()


def test_no_grad_forward_matches_and_records_nothing():
    arrs = make_inputs(1, 5, 1, 3)
    ts = [mg.tensor(x, requires_grad=True) for x in arrs]
    with mg.no_grad():
        y, _ = F.wkv7(*ts)
    assert not y.requires_grad
    np.testing.assert_allclose(y.numpy(), naive_wkv7(*arrs)[0], rtol=1e-12, atol=1e-12)


def test_state_defaults_to_zeros():
    arrs = make_inputs(1, 4, 2, 3)
    y, sT = F.wkv7(*(mg.tensor(x) for x in arrs[:6]))
    y_ref, s_ref = naive_wkv7(*arrs[:6], np.zeros_like(arrs[6]))
    np.testing.assert_allclose(y.numpy(), y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sT.numpy(), s_ref, rtol=1e-12, atol=1e-12)


def test_bad_inputs_raise_clear_errors():
    r, w, k, v, a, b, s0 = (mg.tensor(x) for x in make_inputs(1, 4, 2, 3))
    with pytest.raises(ValueError, match=r"k has shape \(1, 3, 2, 3\)"):
        F.wkv7(r, w, k[:, :3], v, a, b)
    with pytest.raises(ValueError, match="state"):
        F.wkv7(r, w, k, v, a, b, s0[:, :1])
    with pytest.raises(TypeError):
        F.wkv7(r, w.to(mg.float32), k, v, a, b)
    with pytest.raises(ValueError, match="4 dims"):
        F.wkv7(r[0], w[0], k[0], v[0], a[0], b[0])
    with pytest.raises(ValueError, match="chunk"):
        F.wkv7(r, w, k, v, a, b, chunk=0)
