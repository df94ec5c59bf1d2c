"""The fused RWKV-7 time-mix node (F.rwkv7_time_mix) against an fp64 numpy reference.

Method of ../shared/reference/test_timemix_bwd.c: an fp64 reference forward, central
differences of L = sum(c_out * out) + (the state / v_first outputs, weighted the same way), and
the per-tensor relative error max|g - fd| / max|fd| for EVERY parameter, the input, both states
and v_first (layer > 0). Also: fp32 vs fp64, chunked (state-carrying) vs whole, bad inputs.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad.ops.rwkv7 import TIME_MIX_PARAMS, VALUE_RESIDUAL_PARAMS

TOL = 1e-6        # fp64 target for the per-tensor relative error (the reference file accepts 1e-3)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def reference_time_mix(x, p, shift, wkv, v_first, layer_id, N):
    """Plain fp64 numpy x070 time mix, one token at a time. Returns out, shift, wkv, v_first."""
    B, T, C = x.shape
    H = C // N
    S = wkv.copy()
    prev = np.concatenate([shift[:, None], x[:, :-1]], axis=1)
    lerp = {c: x + (prev - x) * p[f"x_{c}"].reshape(C) for c in "rwkvag"}
    r = lerp["r"] @ p["receptance.weight"].T
    k = lerp["k"] @ p["key.weight"].T
    v = lerp["v"] @ p["value.weight"].T
    w = np.exp(-np.exp(-0.5) * _sigmoid(p["w0"].reshape(C) + np.tanh(lerp["w"] @ p["w1"]) @ p["w2"]))
    a = _sigmoid(p["a0"].reshape(C) + (lerp["a"] @ p["a1"]) @ p["a2"])
    g = _sigmoid(lerp["g"] @ p["g1"]) @ p["g2"]
    if layer_id == 0:
        v_first = v
    else:
        v = v + (v_first - v) * _sigmoid(p["v0"].reshape(C) + (lerp["v"] @ p["v1"]) @ p["v2"])
    heads = lambda t: t.reshape(B, T, H, N)   # noqa: E731
    kk = heads(k * p["k_k"].reshape(C))
    kk = kk / np.maximum(np.linalg.norm(kk, axis=-1, keepdims=True), 1e-12)
    k = heads(k * (1 + (a - 1) * p["k_a"].reshape(C)))
    r, w, v, a = heads(r), heads(w), heads(v), heads(a)
    y = np.empty((B, T, H, N))
    for t in range(T):
        sa = np.einsum("bhij,bhj->bhi", S, -kk[:, t])
        S = (S * w[:, t, :, None, :] + v[:, t, :, :, None] * k[:, t, :, None, :]
             + sa[..., None] * (kk[:, t] * a[:, t])[:, :, None, :])
        y[:, t] = np.einsum("bhij,bhj->bhi", S, r[:, t])
    mean = y.mean(-1, keepdims=True)
    var = ((y - mean) ** 2).mean(-1, keepdims=True)
    y = ((y - mean) / np.sqrt(var + 64e-5)).reshape(B, T, C) * p["ln_x.weight"] + p["ln_x.bias"]
    y = y + ((r * k * p["r_k"]).sum(-1, keepdims=True) * v).reshape(B, T, C)
    out = (y * g) @ p["output.weight"].T
    return out, x[:, -1].copy(), S, v_first


def make_case(B, T, H, N, layer_id, lora=(3, 3, 3, 3), seed=0):
    """Random params in the reference file's ranges (weights 0.3, vectors 0.5, ln_x.weight ~ 1)."""
    rng = np.random.default_rng(seed)
    C = H * N
    u = lambda *s, scale=1.0: scale * (rng.random(s) - 0.5)   # noqa: E731
    dw, da, dv, dg = lora
    p = {f"x_{c}": u(1, 1, C) for c in "rwkvag"}
    for name in ("receptance", "key", "value", "output"):
        p[f"{name}.weight"] = u(C, C, scale=0.6)
    p.update(w0=u(1, 1, C), a0=u(1, 1, C), k_k=u(1, 1, C), k_a=u(1, 1, C), r_k=u(H, N))
    p.update(w1=u(C, dw, scale=0.6), w2=u(dw, C, scale=0.6), a1=u(C, da, scale=0.6),
             a2=u(da, C, scale=0.6), g1=u(C, dg, scale=0.6), g2=u(dg, C, scale=0.6))
    if layer_id > 0:
        p.update(v0=u(1, 1, C), v1=u(C, dv, scale=0.6), v2=u(dv, C, scale=0.6))
    p["ln_x.weight"] = 1.0 + u(C, scale=0.4)
    p["ln_x.bias"] = u(C, scale=0.4)
    inputs = dict(x=u(B, T, C, scale=2.0), shift=u(B, C, scale=2.0),
                  wkv=u(B, H, N, N, scale=0.6), v_first=u(B, T, C, scale=1.2))
    return p, inputs


def run_fused(p, inputs, layer_id, N, dtype=np.float64, requires_grad=True):
    """F.rwkv7_time_mix on Tensors; returns (outputs, param Tensors, input Tensors)."""
    tp = {k: mg.tensor(v, dtype=dtype, requires_grad=requires_grad) for k, v in p.items()}
    ti = {k: mg.tensor(v, dtype=dtype, requires_grad=requires_grad) for k, v in inputs.items()}
    outs = F.rwkv7_time_mix(ti["x"], tp, ti["shift"], ti["wkv"],
                            ti["v_first"] if layer_id > 0 else None, layer_id=layer_id, head_size=N)
    return outs, tp, ti


def fd_check(p, inputs, layer_id, N, seed=1):
    """Per-tensor relative errors {name: err} of the fused backward vs central differences."""
    rng = np.random.default_rng(seed)
    ref = reference_time_mix(inputs["x"], p, inputs["shift"], inputs["wkv"], inputs["v_first"],
                             layer_id, N)
    cots = [rng.standard_normal(o.shape) for o in ref]
    if layer_id > 0:
        cots[3] = np.zeros_like(cots[3])     # v_first passes through unchanged: no output grad

    def loss():
        outs = reference_time_mix(inputs["x"], p, inputs["shift"], inputs["wkv"],
                                  inputs["v_first"], layer_id, N)
        return sum(float((o * c).sum()) for o, c in zip(outs, cots))

    outs, tp, ti = run_fused(p, inputs, layer_id, N)
    for o, o_ref in zip(outs, ref):
        np.testing.assert_allclose(o.numpy(), o_ref, rtol=1e-10, atol=1e-10)
    diff = [(o, c) for o, c in zip(outs, cots) if o.requires_grad and np.any(c)]
    mg.autograd.backward([o for o, _ in diff], [c for _, c in diff])

    checked = dict(p)
    checked.update(x=inputs["x"], shift=inputs["shift"], wkv=inputs["wkv"])
    if layer_id > 0:
        checked["v_first"] = inputs["v_first"]
    tensors = {**tp, **ti}
    errors = {}
    for name, arr in checked.items():
        g = tensors[name].grad
        assert g is not None, f"no gradient reached {name}"
        fd = np.zeros_like(arr)
        for e in range(arr.size):
            old = arr.flat[e]
            h = 1e-5 * (1.0 + abs(old))
            arr.flat[e] = old + h
            lp = loss()
            arr.flat[e] = old - h
            lm = loss()
            arr.flat[e] = old
            fd.flat[e] = (lp - lm) / (2 * h)
        errors[name] = np.abs(g.numpy() - fd).max() / max(np.abs(fd).max(), 1e-12)
    return errors


CASES = {
    "layer0_base": dict(B=1, T=5, H=2, N=4, layer_id=0, lora=(3, 3, 3, 3)),
    "layer1_value_residual": dict(B=1, T=6, H=2, N=4, layer_id=1, lora=(3, 3, 3, 3)),
    "batch_heads_unequal_lora": dict(B=2, T=4, H=3, N=6, layer_id=0, lora=(4, 3, 2, 5)),
    "batch_heads_layer2": dict(B=2, T=3, H=3, N=6, layer_id=2, lora=(4, 3, 2, 5)),
    "single_token": dict(B=2, T=1, H=2, N=4, layer_id=1, lora=(2, 3, 4, 5)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_gradient_matches_central_differences(case):
    cfg = dict(CASES[case])
    B, T, H, N, layer_id, lora = (cfg[k] for k in ("B", "T", "H", "N", "layer_id", "lora"))
    p, inputs = make_case(B, T, H, N, layer_id, lora, seed=len(case))
    errors = fd_check(p, inputs, layer_id, N)
    expected = set(TIME_MIX_PARAMS) | {"x", "shift", "wkv"} | ({"v_first"} if layer_id else set())
    if layer_id == 0:
        expected -= set(VALUE_RESIDUAL_PARAMS)
    assert set(errors) == expected
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOL, f"{case}: worst {worst} rel err {errors[worst]:.2e}; all {errors}"


def _run_case_outputs_and_grads(p, inputs, dtype):
    outs, tp, ti = run_fused(p, inputs, 1, 8, dtype=dtype)
    (outs[0] * outs[0]).sum().backward()
    return ([o.numpy().astype(np.float64) for o in outs[:3]],
            {k: t.grad.numpy().astype(np.float64) for k, t in {**tp, **ti}.items()})


# B x T rows: 14 runs the row kernels serially, 512 in parallel (PARALLEL_MIN_ROWS is 64)
@pytest.mark.parametrize("B,T", [(2, 7), (8, 64)])
def test_fp32_matches_fp64(B, T):
    p, inputs = make_case(B, T, 2, 8, 1, (4, 4, 4, 4), seed=3)
    res = {dt: _run_case_outputs_and_grads(p, inputs, dt) for dt in (np.float32, np.float64)}
    for o32, o64 in zip(res[np.float32][0], res[np.float64][0]):
        np.testing.assert_allclose(o32, o64, rtol=2e-4, atol=2e-4 * np.abs(o64).max())
    for name, g64 in res[np.float64][1].items():
        g32 = res[np.float32][1][name]
        assert np.abs(g32 - g64).max() <= 1e-3 * max(np.abs(g64).max(), 1e-6), name


def test_one_and_two_threads_agree():
    """fp64 results on parallel sizes do not depend on the thread count (catches races between
    the threads of a row kernel)."""
    from minigrad.threads import get_num_threads, set_num_threads
    p, inputs = make_case(8, 64, 2, 8, 1, (4, 4, 4, 4), seed=4)
    before, res = get_num_threads(), []
    try:
        for n in (1, 2, 3):
            set_num_threads(n)
            res.append(_run_case_outputs_and_grads(p, inputs, np.float64))
    finally:
        set_num_threads(before)
    for other in res[1:]:
        for a, b in zip(res[0][0], other[0]):
            np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
        for name, g in res[0][1].items():
            np.testing.assert_allclose(other[1][name], g, rtol=1e-9, atol=1e-10 * max(np.abs(g).max(), 1),
                                       err_msg=name)


def test_pieces_with_carried_state_equal_whole_sequence():
    N, layer_id = 4, 1
    p, inputs = make_case(2, 9, 2, N, layer_id, seed=5)
    whole, _, _ = run_fused(p, inputs, layer_id, N, requires_grad=False)
    shift, wkv = inputs["shift"], inputs["wkv"]
    pieces = []
    for lo, hi in ((0, 4), (4, 5), (5, 9)):
        part = dict(inputs, x=inputs["x"][:, lo:hi].copy(), shift=shift, wkv=wkv,
                    v_first=inputs["v_first"][:, lo:hi].copy())
        outs, _, _ = run_fused(p, part, layer_id, N, requires_grad=False)
        pieces.append(outs[0].numpy())
        shift, wkv = outs[1].numpy(), outs[2].numpy()
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), whole[0].numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(shift, whole[1].numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(wkv, whole[2].numpy(), rtol=1e-12, atol=1e-12)


def test_layer0_returns_value_and_layer1_passes_v_first_through():
    p, inputs = make_case(1, 3, 2, 4, 0, seed=2)
    outs, _, _ = run_fused(p, inputs, 0, 4)
    ref = reference_time_mix(inputs["x"], p, inputs["shift"], inputs["wkv"], None, 0, 4)
    np.testing.assert_allclose(outs[3].numpy(), ref[3], rtol=1e-12, atol=1e-12)
    p1, inputs1 = make_case(1, 3, 2, 4, 1, seed=2)
    vf = mg.tensor(inputs1["v_first"], requires_grad=True)
    tp = {k: mg.tensor(v) for k, v in p1.items()}
    outs1 = F.rwkv7_time_mix(mg.tensor(inputs1["x"]), tp, None, None, vf, layer_id=1, head_size=4)
    assert outs1[3] is vf


def test_bad_inputs_raise_clear_errors():
    p, inputs = make_case(1, 3, 2, 4, 1, seed=0)
    tp = {k: mg.tensor(v) for k, v in p.items()}
    x = mg.tensor(inputs["x"])
    vf = mg.tensor(inputs["v_first"])
    with pytest.raises(ValueError, match="v_first"):
        F.rwkv7_time_mix(x, tp, layer_id=1, head_size=4)
    with pytest.raises(ValueError, match="head_size"):
        F.rwkv7_time_mix(x, tp, v_first=vf, layer_id=1, head_size=3)
    bad = dict(tp, w2=mg.tensor(np.zeros((2, 8))))
    with pytest.raises(ValueError, match="w2"):
        F.rwkv7_time_mix(x, bad, v_first=vf, layer_id=1, head_size=4)
    with pytest.raises(ValueError, match="missing"):
        F.rwkv7_time_mix(x, {k: v for k, v in tp.items() if k != "r_k"}, v_first=vf, layer_id=1,
                         head_size=4)
    with pytest.raises(ValueError, match="wkv_state"):
        F.rwkv7_time_mix(x, tp, None, mg.tensor(np.zeros((1, 2, 4, 3))), vf, layer_id=1, head_size=4)
    with pytest.raises(TypeError):
        F.rwkv7_time_mix(x.to(mg.float32), tp, v_first=vf, layer_id=1, head_size=4)


def torch_time_mix(torch, x, p, shift, wkv, v_first, layer_id, N):
    """The official x070 time mix written with torch ops (autograd gives the reference grads)."""
    B, T, C = x.shape
    H = C // N
    prev = torch.cat([shift[:, None], x[:, :-1]], 1)
    xx = prev - x
    xr, xw, xk, xv, xa, xg = (x + xx * p[f"x_{c}"] for c in "rwkvag")
    r = xr @ p["receptance.weight"].T
    w = torch.exp(-np.exp(-0.5) * torch.sigmoid(p["w0"] + torch.tanh(xw @ p["w1"]) @ p["w2"]))
    k = xk @ p["key.weight"].T
    v = xv @ p["value.weight"].T
    if layer_id == 0:
        v_first = v
    else:
        v = v + (v_first - v) * torch.sigmoid(p["v0"] + (xv @ p["v1"]) @ p["v2"])
    a = torch.sigmoid(p["a0"] + (xa @ p["a1"]) @ p["a2"])
    g = torch.sigmoid(xg @ p["g1"]) @ p["g2"]
    kk = torch.nn.functional.normalize((k * p["k_k"]).view(B, T, H, N), dim=-1, p=2.0, eps=1e-12)
    k = k * (1 + (a - 1) * p["k_a"])
    heads = lambda t: t.view(B, T, H, N)   # noqa: E731
    r4, w4, k4, v4, a4 = heads(r), heads(w), heads(k), heads(v), heads(a)
    S, ys = wkv, []
    for t in range(T):
        sa = torch.einsum("bhij,bhj->bhi", S, -kk[:, t])
        S = (S * w4[:, t, :, None, :] + v4[:, t, :, :, None] * k4[:, t, :, None, :]
             + sa[..., None] * (kk[:, t] * a4[:, t])[:, :, None, :])
        ys.append(torch.einsum("bhij,bhj->bhi", S, r4[:, t]))
    y = torch.stack(ys, 1).reshape(B * T, C)
    y = torch.nn.functional.group_norm(y, H, p["ln_x.weight"], p["ln_x.bias"], eps=64e-5).view(B, T, C)
    y = y + ((r4 * k4 * p["r_k"]).sum(-1, keepdim=True) * v4).reshape(B, T, C)
    return (y * g) @ p["output.weight"].T, x[:, -1], S, v_first


@pytest.mark.parametrize("layer_id", [0, 1])
def test_against_torch_autograd(layer_id):
    torch = pytest.importorskip("torch")
    N = 4
    p, inputs = make_case(2, 5, 3, N, layer_id, (3, 4, 2, 5), seed=11 + layer_id)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    ti = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}
    ref = torch_time_mix(torch, ti["x"], tp, ti["shift"], ti["wkv"], ti["v_first"], layer_id, N)
    outs, mp, mi = run_fused(p, inputs, layer_id, N)
    rng = np.random.default_rng(0)
    cots = [rng.standard_normal(o.shape) for o in outs[:3]]
    if layer_id == 0:
        cots.append(rng.standard_normal(outs[3].shape))
    for o, o_ref in zip(outs, ref):
        np.testing.assert_allclose(o.numpy(), o_ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    torch.autograd.backward(list(ref[:len(cots)]), [torch.tensor(c) for c in cots])
    mg.autograd.backward(list(outs[:len(cots)]), cots)
    names = list(tp) + ["x", "shift", "wkv"] + (["v_first"] if layer_id else [])
    for name in names:
        t_grad = (tp.get(name) if name in tp else ti[name]).grad.numpy()
        m_grad = (mp.get(name) if name in mp else mi[name]).grad.numpy()
        np.testing.assert_allclose(m_grad, t_grad, rtol=1e-9, atol=1e-10 * np.abs(t_grad).max(),
                                   err_msg=name)
