"""F.rwkv7_channel_mix, F.layer_norm and add_layer_norm: numpy references, fp64 gradchecks over every input,
fp32 vs fp64, carried token-shift state, torch where installed, bad inputs."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad.autograd import gradcheck
from minigrad.ops.rwkv7 import add_layer_norm


def ref_channel_mix(x, shift, x_k, wk, wv):
    prev = np.concatenate([shift[:, None], x[:, :-1]], axis=1)
    xk = x + (prev - x) * x_k.reshape(-1)
    return (np.maximum(xk @ wk.T, 0) ** 2) @ wv.T, x[:, -1]


def ref_layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * w + b


def channel_mix_case(B, T, C, Fh, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B, T, C)), rng.standard_normal((B, C)),
            rng.uniform(0, 1, (1, 1, C)), 0.5 * rng.standard_normal((Fh, C)),
            0.5 * rng.standard_normal((C, Fh))]


@pytest.mark.parametrize("B,T,C,Fh", [(1, 1, 3, 5), (2, 5, 4, 7), (3, 3, 6, 24)])
def test_channel_mix_matches_reference_and_gradchecks(B, T, C, Fh):
    arrs = channel_mix_case(B, T, C, Fh, seed=B + T)
    ts = [mg.tensor(a, requires_grad=True) for a in arrs]
    out, new_shift = F.rwkv7_channel_mix(*ts)
    ref_out, ref_shift = ref_channel_mix(*arrs)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(new_shift.numpy(), ref_shift, rtol=0, atol=0)
    assert gradcheck(lambda *t: F.rwkv7_channel_mix(*t), ts, rtol=1e-6)


def test_channel_mix_without_shift_state_uses_zeros():
    arrs = channel_mix_case(2, 4, 3, 6)
    out, _ = F.rwkv7_channel_mix(mg.tensor(arrs[0]), None, *(mg.tensor(a) for a in arrs[2:]))
    ref, _ = ref_channel_mix(arrs[0], np.zeros_like(arrs[1]), *arrs[2:])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_channel_mix_pieces_with_carried_shift_equal_whole():
    x, shift, *params = channel_mix_case(2, 7, 4, 8, seed=3)
    tp = [mg.tensor(p) for p in params]
    whole, _ = F.rwkv7_channel_mix(mg.tensor(x), mg.tensor(shift), *tp)
    s, outs = mg.tensor(shift), []
    for lo, hi in ((0, 3), (3, 4), (4, 7)):
        o, s = F.rwkv7_channel_mix(mg.tensor(x[:, lo:hi].copy()), s, *tp)
        outs.append(o.numpy())
    np.testing.assert_allclose(np.concatenate(outs, 1), whole.numpy(), rtol=1e-12, atol=1e-12)


def test_channel_mix_fp32_matches_fp64():
    arrs = channel_mix_case(2, 6, 8, 32, seed=4)
    res = {}
    for dt in (np.float32, np.float64):
        ts = [mg.tensor(a, dtype=dt, requires_grad=True) for a in arrs]
        out, _ = F.rwkv7_channel_mix(*ts)
        (out * out).sum().backward()
        res[dt] = [out.numpy()] + [t.grad.numpy() for t in ts]
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        assert np.abs(a32 - a64).max() <= 1e-4 * np.abs(a64).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_square_backward_from_saved_square_is_exact(dtype):
    """The backward gets relu(h) back as sqrt(relu(h)^2): exact (IEEE sqrt of a correctly rounded
    square) over magnitudes 1e-18 .. 1e18, zero where h <= 0."""
    from minigrad.kernels import channel_mix
    rng = np.random.default_rng(7)
    h = (rng.choice([-1.0, 1.0], (64, 33)) * 10.0 ** rng.uniform(-18, 18, (64, 33))).astype(dtype)
    h[0, :5] = [0.0, -0.0, 1.0, -1.0, np.finfo(dtype).tiny ** 0.5 * 4]
    ga = rng.standard_normal(h.shape).astype(dtype)
    a = h.copy()
    channel_mix.relu_square_forward(a, a)
    np.testing.assert_array_equal(a, np.maximum(h, 0) * np.maximum(h, 0))
    g = ga.copy()
    channel_mix.relu_square_backward(g, a)
    np.testing.assert_array_equal(g, 2 * ga * np.maximum(h, 0))


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (2, 3, 7), (4, 64)])
def test_layer_norm_matches_reference_and_gradchecks(shape):
    rng = np.random.default_rng(len(shape))
    x = 2 * rng.standard_normal(shape) + 0.5
    w, b = rng.uniform(0.5, 1.5, shape[-1]), rng.standard_normal(shape[-1])
    ts = [mg.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.layer_norm(*ts, eps=1e-5)
    np.testing.assert_allclose(y.numpy(), ref_layer_norm(x, w, b, 1e-5), rtol=1e-10, atol=1e-10)
    if shape[-1] > 1:
        assert gradcheck(lambda *t: F.layer_norm(*t, eps=1e-5), ts, rtol=1e-6)


def test_layer_norm_fp32_matches_fp64():
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal((16, 48)), rng.uniform(0.5, 1.5, 48), rng.standard_normal(48)]
    res = {}
    for dt in (np.float32, np.float64):
        ts = [mg.tensor(a, dtype=dt, requires_grad=True) for a in arrs]
        y = F.layer_norm(*ts)
        (y * y * y).sum().backward()
        res[dt] = [y.numpy()] + [t.grad.numpy() for t in ts]
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        assert np.abs(a32 - a64).max() <= 1e-4 * np.abs(a64).max()


@pytest.mark.parametrize("shape", [(1, 3), (3, 5), (2, 3, 7), (70, 16)])
def test_add_layer_norm_matches_add_then_layer_norm_and_gradchecks(shape):
    """(s, y) = (x + r, layer_norm(x + r)): values against numpy, and every input's gradient through
    both outputs by central differences (70 rows: the kernels' parallel path)."""
    rng = np.random.default_rng(sum(shape))
    x, r = rng.standard_normal(shape), 2 * rng.standard_normal(shape) + 0.5
    w, b = rng.uniform(0.5, 1.5, shape[-1]), rng.standard_normal(shape[-1])
    ts = [mg.tensor(a, requires_grad=True) for a in (x, r, w, b)]
    s, y = add_layer_norm(*ts, eps=1e-5)
    np.testing.assert_array_equal(s.numpy(), x + r)
    np.testing.assert_allclose(y.numpy(), ref_layer_norm(x + r, w, b, 1e-5), rtol=1e-10, atol=1e-10)
    u = mg.tensor(rng.standard_normal(shape))   # weights the two outputs differently

    def loss(*t):
        s, y = add_layer_norm(*t, eps=1e-5)
        return (s * s * u).sum() + (y * y * y).sum()
    assert gradcheck(loss, ts, rtol=1e-6)
    # fp32 kernels against their fp64 path
    res = {}
    for dt in (np.float32, np.float64):
        tt = [mg.tensor(a, dtype=dt, requires_grad=True) for a in (x, r, w, b)]
        s, y = add_layer_norm(*tt)
        ((s * s).sum() + (y * y * y).sum()).backward()
        res[dt] = [s.numpy(), y.numpy()] + [t.grad.numpy() for t in tt]
    for a32, a64 in zip(res[np.float32], res[np.float64]):
        assert np.abs(a32 - a64).max() <= 1e-4 * np.abs(a64).max()


def test_add_layer_norm_rejects_bad_inputs():
    x = mg.tensor(np.ones((2, 4)))
    w, b = mg.tensor(np.ones(4)), mg.tensor(np.zeros(4))
    with pytest.raises(ValueError, match="add_layer_norm: r"):
        add_layer_norm(x, mg.tensor(np.ones((2, 3))), w, b)
    with pytest.raises(TypeError, match="mix float32 and float64"):
        add_layer_norm(x, mg.tensor(np.ones((2, 4)), dtype=np.float32), w, b)
    with pytest.raises(ValueError, match="add_layer_norm: eps"):
        add_layer_norm(x, x, w, b, eps=0.0)


def test_against_torch():
    torch = pytest.importorskip("torch")
    x, shift, x_k, wk, wv = channel_mix_case(2, 5, 8, 16, seed=9)
    tt = [torch.tensor(a, requires_grad=True) for a in (x, shift, x_k, wk, wv)]
    prev = torch.cat([tt[1][:, None], tt[0][:, :-1]], 1)
    xk = tt[0] + (prev - tt[0]) * tt[2]
    out_t = torch.relu(xk @ tt[3].T) ** 2 @ tt[4].T
    ln_w = torch.rand(8, dtype=torch.float64, requires_grad=True)
    ln_b = torch.randn(8, dtype=torch.float64, requires_grad=True)
    loss_t = torch.nn.functional.layer_norm(out_t, (8,), ln_w, ln_b).pow(2).sum()
    loss_t.backward()
    ms = [mg.tensor(a, requires_grad=True) for a in (x, shift, x_k, wk, wv)]
    mw, mb = (mg.tensor(t.detach().numpy(), requires_grad=True) for t in (ln_w, ln_b))
    out, _ = F.rwkv7_channel_mix(*ms)
    y = F.layer_norm(out, mw, mb)
    (y * y).sum().backward()
    for m, t in zip(ms + [mw, mb], tt + [ln_w, ln_b]):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_bad_inputs_raise_clear_errors():
    x, shift, x_k, wk, wv = (mg.tensor(a) for a in channel_mix_case(1, 3, 4, 6))
    with pytest.raises(ValueError, match="value_weight"):
        F.rwkv7_channel_mix(x, shift, x_k, wk, wk)
    with pytest.raises(ValueError, match="shift_state"):
        F.rwkv7_channel_mix(x, shift[:, :2], x_k, wk, wv)
    with pytest.raises(ValueError, match="weight"):
        F.layer_norm(x, mg.tensor(np.ones(3)), mg.tensor(np.zeros(4)))
    with pytest.raises(ValueError, match="eps"):
        F.layer_norm(x, mg.tensor(np.ones(4)), mg.tensor(np.zeros(4)), eps=-1.0)


def test_in_place_edit_of_a_saved_input_is_detected():
    x = mg.tensor(np.random.default_rng(0).random((3, 4)), requires_grad=True)
    w, b = mg.tensor(np.ones(4), requires_grad=True), mg.tensor(np.zeros(4), requires_grad=True)
    y = F.layer_norm(x, w, b)
    with mg.no_grad():
        x += 1
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


def test_float32_tanh_kernel_within_two_ulp():
    """The decay LoRA's tanh (kernels/_vmath.h mg_tanhf: series below |x| 0.55, exp form
    above) against float64 tanh, over both branches, the switch point, tiny and huge inputs."""
    from minigrad.kernels import rwkv7_time_mix as tm
    x = np.concatenate([np.linspace(-12, 12, 200_000), np.linspace(-0.6, 0.6, 200_000),
                        np.linspace(-1e-4, 1e-4, 1_000), [0.55, -0.55, 1e-30, -1e-30, 88.0, -300.0]])
    x = np.resize(x.astype(np.float32), (len(x) + 63) // 64 * 64)
    h = x.reshape(-1, 64).copy()
    tm.tanh_forward(h)
    ref = np.tanh(x.astype(np.float64))
    ulps = np.abs(h.ravel() - ref) / np.spacing(np.abs(ref).astype(np.float32))
    assert ulps.max() <= 2.0
    special = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0] + [0.0] * 59], np.float32)
    tm.tanh_forward(special)
    assert np.isnan(special[0, 0]) and special[0, 1] == 1 and special[0, 2] == -1
    assert special[0, 3] == 0 and np.signbit(special[0, 4])


@pytest.mark.parametrize("dtype,value", [(np.float32, 100.1), (np.float32, 3000.3), (np.float32, 1e6),
                                         (np.float64, 1e12)])
def test_layer_norm_of_a_constant_row_is_its_bias(dtype, value):
    # audit: the float32 lane sum rounded a constant row's mean, so x - mean was the rounding error
    # and y came out near +-w instead of b (100.1: 0.005; 1e5: -0.98); the mean is now corrected
    C, eps = 64, 1e-5
    x = mg.tensor(np.full((3, C), value, dtype), requires_grad=True)
    w = mg.tensor(np.linspace(0.5, 1.5, C).astype(dtype), requires_grad=True)
    b = mg.tensor(np.linspace(-1, 1, C).astype(dtype), requires_grad=True)
    y = F.layer_norm(x, w, b, eps)
    np.testing.assert_array_equal(y.data, np.broadcast_to(b.data, (3, C)))
    g = np.random.default_rng(0).standard_normal((3, C)).astype(dtype)
    y.backward(mg.tensor(g))
    gw = g * w.data                                  # xhat = 0: gx = rstd (g w - mean(g w))
    expect = (gw - gw.mean(1, keepdims=True)) / np.sqrt(eps)
    np.testing.assert_allclose(x.grad.data, expect, rtol=1e-4 if dtype == np.float32 else 1e-9)
