"""RWKV-7 model: config, official names/init, forward vs an fp64 numpy reference, whole vs chunked vs
token-by-token, fp32 vs fp64, whole-model gradcheck, grads through a carried state, PyTorch parity,
generation and input validation."""
import os
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.models import RWKV7, RWKV7Config
from minigrad.models.rwkv7_init import expected_shapes, official_init

sys.path.insert(0, os.path.dirname(__file__))
from rwkv7_numpy_reference import reference_forward  # noqa: E402

from tests.op_helpers import check_thread_count_invariance  # noqa: E402

TINY = dict(vocab_size=7, d_model=8, n_layer=2, head_size=4, d_decay_lora=3, d_aaa_lora=4, d_mv_lora=2,
            d_gate_lora=5, ffn_hidden=12)
SMALL = dict(vocab_size=11, d_model=12, n_layer=3, head_size=4, d_decay_lora=3, d_aaa_lora=5, d_mv_lora=2,
             d_gate_lora=4, ffn_hidden=20)


pytestmark = pytest.mark.usefixtures("one_thread")   # tiny models (tests/conftest.py)


def random_weights(cfg, seed=0, dtype=np.float64, scale=0.3):
    """Official init plus noise, so no parameter is zero (the official init zeroes output projections)."""
    rng = np.random.default_rng(seed)
    p = official_init(cfg, seed=seed, dtype=np.float64)
    p = {k: v + scale * rng.standard_normal(v.shape) for k, v in p.items()}
    p["emb.weight"] *= 3.0
    return {k: v.astype(dtype) for k, v in p.items()}


def make(cfg_kwargs, seed=0, dtype=np.float64):
    cfg = RWKV7Config(**cfg_kwargs)
    weights = random_weights(cfg, seed, dtype)
    return RWKV7.from_state_dict(weights), weights


def tokens(cfg_kwargs, B, T, seed=1):
    return np.random.default_rng(seed).integers(0, cfg_kwargs["vocab_size"], (B, T))


def as_np(state):
    return [tuple(s.data for s in layer) for layer in state]


# ---- config, names, init -------------------------------------------------------------------------
def test_official_sizing_rules():
    cfg = RWKV7Config(vocab_size=65536, d_model=768, n_layer=12)  # the released 0.1B model
    assert (cfg.d_decay_lora, cfg.d_aaa_lora, cfg.d_mv_lora, cfg.d_gate_lora) == (64, 64, 32, 128)
    assert cfg.ffn_hidden == 4 * 768 and cfg.head_size == 64 and cfg.n_head == 12
    cfg = RWKV7Config(vocab_size=256, d_model=2048, n_layer=24)  # the released 1.5B model
    assert (cfg.d_decay_lora, cfg.d_aaa_lora, cfg.d_mv_lora, cfg.d_gate_lora) == (96, 96, 64, 256)
    with pytest.raises(ValueError, match="multiple of head_size"):
        RWKV7Config(vocab_size=10, d_model=100, n_layer=1)


def test_state_dict_names_and_shapes():
    cfg = RWKV7Config(vocab_size=50, d_model=128, n_layer=3)
    model = RWKV7(cfg, seed=0)
    sd = model.state_dict()
    assert {k: tuple(v.shape) for k, v in sd.items()} == expected_shapes(cfg)
    assert "blocks.0.att.v0" not in sd and "blocks.1.att.v0" in sd and "blocks.0.ln0.weight" in sd
    assert "blocks.1.ln0.weight" not in sd
    assert sd["blocks.0.att.x_r"].shape == (1, 1, 128) and sd["blocks.2.att.r_k"].shape == (2, 64)
    assert sd["blocks.0.att.receptance.weight"].shape == (128, 128)
    assert sd["blocks.0.ffn.key.weight"].shape == (512, 128)
    assert sd["blocks.0.att.w1"].shape == (128, cfg.d_decay_lora)


def test_official_init_values():
    cfg = RWKV7Config(vocab_size=300, d_model=64, n_layer=4, head_size=16)
    p = RWKV7(cfg, seed=3).state_dict()
    assert not p["blocks.1.att.output.weight"].any() and not p["blocks.1.ffn.value.weight"].any()
    assert not p["blocks.2.att.w1"].any()
    np.testing.assert_allclose(p["blocks.1.att.ln_x.weight"], (2 / 4) ** 0.7, rtol=1e-6)
    r = p["blocks.0.att.receptance.weight"].astype(np.float64)
    np.testing.assert_allclose(r @ r.T, np.eye(64), atol=1e-5)
    k = p["blocks.0.att.key.weight"].astype(np.float64)
    np.testing.assert_allclose(k @ k.T, 0.01 * np.eye(64), atol=1e-6)
    h = p["head.weight"].astype(np.float64)  # (300, 64): orthonormal columns, gain 0.5 sqrt(300/64)
    np.testing.assert_allclose(h.T @ h, 0.25 * 300 / 64 * np.eye(64), atol=1e-4)
    assert np.abs(p["emb.weight"]).max() <= 1e-4
    np.testing.assert_allclose(p["blocks.0.att.x_r"][0, 0, 0], 1.0)
    np.testing.assert_allclose(p["blocks.3.att.k_a"], 1.02, rtol=1e-6)
    np.testing.assert_allclose(p["blocks.3.att.r_k"], -0.04, rtol=1e-6)
    # seed makes the init reproducible
    q = RWKV7(cfg, seed=3).state_dict()
    assert all(np.array_equal(q[n], p[n]) for n in p)


def test_from_state_dict_roundtrip_and_errors():
    model, weights = make(SMALL)
    assert model.config == RWKV7Config(**SMALL)
    extra = dict(weights)
    extra["blocks.0.att.v0"] = np.zeros((1, 1, 12))  # official layer-0 leftovers are ignored
    extra["blocks.0.att.v1"] = np.zeros((12, 2))
    again = RWKV7.from_state_dict(extra)
    idx = tokens(SMALL, 2, 5)
    np.testing.assert_array_equal(model(idx).data, again(idx).data)
    missing = {k: v for k, v in weights.items() if k != "blocks.1.att.k_k"}
    with pytest.raises(KeyError, match="blocks.1.att.k_k"):
        RWKV7.from_state_dict(missing)
    bad = dict(weights)
    bad["blocks.1.att.a0"] = np.zeros((1, 1, 13))
    with pytest.raises(ValueError, match="blocks.1.att.a0"):
        RWKV7.from_state_dict(bad)
    no_blocks = {k: v for k, v in weights.items() if not k.startswith("blocks.")}
    # was: "max() arg is an empty sequence"
    with pytest.raises(ValueError, match=r"no blocks\.\{i\}\.\* tensors"):
        RWKV7.from_state_dict(no_blocks)


# ---- forward -------------------------------------------------------------------------------------
@pytest.mark.parametrize("B,T", [(1, 1), (2, 5), (3, 37)])
def test_forward_matches_numpy_reference(B, T):
    model, weights = make(SMALL)
    idx = tokens(SMALL, B, T)
    logits, state = model(idx, return_state=True)
    ref, ref_state = reference_forward(weights, idx, SMALL["head_size"])
    np.testing.assert_allclose(logits.data, ref, rtol=1e-10, atol=1e-10)
    for ours, theirs in zip(as_np(state), ref_state):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-11), (np.float32, 2e-5)])
def test_whole_chunked_and_token_by_token_agree(dtype, tol):
    model, _ = make(SMALL, dtype=dtype)
    idx = tokens(SMALL, 2, 23)
    whole = model(idx).data
    for pieces in ([7, 16], [1, 5, 17], [1] * 23):
        state, outs, t = None, [], 0
        for n in pieces:
            logits, state = model(idx[:, t:t + n], state=state, return_state=True)
            outs.append(logits.data)
            t += n
        np.testing.assert_allclose(np.concatenate(outs, 1), whole, rtol=tol, atol=tol)


def test_fp32_matches_fp64():
    m64, weights = make(SMALL)
    m32 = RWKV7.from_state_dict({k: v.astype(np.float32) for k, v in weights.items()})
    assert m32.dtype == np.float32 and m64.dtype == np.float64
    idx = tokens(SMALL, 2, 40)
    l32, l64 = m32(idx), m64(idx)
    assert l32.dtype == np.float32
    np.testing.assert_allclose(l32.data, l64.data, rtol=1e-4, atol=1e-4 * np.abs(l64.data).max())


def test_fp32_gradients_match_fp64():
    m64, weights = make(SMALL)
    m32 = RWKV7.from_state_dict({k: v.astype(np.float32) for k, v in weights.items()})
    idx = tokens(SMALL, 2, 17)
    cot = np.random.default_rng(4).standard_normal((2, 17, SMALL["vocab_size"]))
    g64, g32 = _grads(m64, idx, [17], cot), _grads(m32, idx, [17], cot.astype(np.float32))
    for name, g in g64.items():
        assert g32[name].dtype == np.float32
        assert np.abs(g32[name] - g).max() <= 1e-4 * np.abs(g).max(), name


# ---- gradients -----------------------------------------------------------------------------------
@pytest.mark.parametrize("B,T,fast", [(2, 4, False), (1, 1, True), (3, 19, True)])
def test_whole_model_gradcheck_every_parameter(B, T, fast):
    """Every element of every parameter (fast=False), or random directions in each (fast=True)."""
    model, _ = make(TINY)
    params = list(model.parameters())
    idx = tokens(TINY, B, T)
    assert gradcheck(lambda *ps: model(idx), params, eps=1e-6, rtol=1e-6, atol=1e-9, fast=fast)
    assert max(gradcheck.last_errors) < 1e-6


def test_gradcheck_through_carried_state():
    """d(logits of chunk 2)/d(params, input state) flows back through the state of chunk 1."""
    model, _ = make(TINY)
    idx = tokens(TINY, 2, 7)
    _, start = model(idx[:, :3], return_state=True)
    start = [tuple(mg.tensor(s.data, requires_grad=True) for s in layer) for layer in start]
    flat_start = [s for layer in start for s in layer]

    def second_chunk(*_):  # gradcheck perturbs the tensors' data in place
        logits, end = model(idx[:, 3:], state=start, return_state=True)
        return (logits, *[s for layer in end for s in layer])

    assert gradcheck(second_chunk, flat_start + list(model.parameters()), eps=1e-6, rtol=1e-6, atol=1e-9,
                     fast=True)
    assert max(gradcheck.last_errors) < 1e-6


def _grads(model, idx, pieces, cot):
    model.zero_grad()
    state, loss, t = None, None, 0
    for n in pieces:
        logits, state = model(idx[:, t:t + n], state=state, return_state=True)
        term = (logits * mg.tensor(cot[:, t:t + n])).sum()
        loss = term if loss is None else loss + term
        t += n
    loss.backward()
    return {n: p.grad.data.copy() for n, p in model.named_parameters()}


def test_grads_whole_equal_grads_through_carried_state():
    model, _ = make(SMALL)
    idx = tokens(SMALL, 2, 21)
    cot = np.random.default_rng(5).standard_normal((2, 21, SMALL["vocab_size"]))
    whole = _grads(model, idx, [21], cot)
    for pieces in ([9, 12], [4, 1, 16], [1] * 21):
        split = _grads(model, idx, pieces, cot)
        for name, g in whole.items():
            np.testing.assert_allclose(split[name], g, rtol=1e-9, atol=1e-11, err_msg=name)


# ---- PyTorch parity ------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [SMALL, dict(SMALL, n_layer=1)])
def test_logits_and_every_gradient_match_pytorch(cfg):
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from rwkv7_torch import RWKV7Torch

    model, weights = make(cfg)
    ref = RWKV7Torch.from_state_dict(weights, cfg["head_size"], wkv="loop", dtype=torch.float64)
    idx = tokens(cfg, 3, 19)
    cot = np.random.default_rng(9).standard_normal((3, 19, cfg["vocab_size"]))
    logits = model(idx)
    (logits * mg.tensor(cot)).sum().backward()
    t_logits, _ = ref(torch.tensor(idx))
    (t_logits * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(logits.data, t_logits.detach().numpy(), rtol=1e-10, atol=1e-10)
    t_grads = dict(ref.named_parameters())
    ours = dict(model.named_parameters())
    assert set(ours) == set(t_grads)
    for name, p in ours.items():
        g = t_grads[name].grad.numpy()
        scale = max(np.abs(g).max(), 1e-12)
        assert np.abs(p.grad.data - g).max() / scale < 1e-9, name


def test_pytorch_chunked_baseline_matches_its_loop():
    """The benchmark's chunked closed-form WKV (T not a multiple of 16, carried state) is exact."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from rwkv7_torch import RWKV7Torch

    _, weights = make(SMALL)
    idx = torch.tensor(tokens(SMALL, 2, 37))
    loop = RWKV7Torch.from_state_dict(weights, 4, wkv="loop", dtype=torch.float64)
    chunked = RWKV7Torch.from_state_dict(weights, 4, wkv="chunked", dtype=torch.float64)
    want, want_state = loop(idx)
    first, state = chunked(idx[:, :20])
    second, state = chunked(idx[:, 20:], state)
    np.testing.assert_allclose(torch.cat([first, second], 1).detach().numpy(), want.detach().numpy(),
                               rtol=1e-10, atol=1e-10)
    for ours, theirs in zip(state, want_state):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-10)


# ---- generation and validation -------------------------------------------------------------------
def test_generate_is_recurrent_and_reproducible():
    model, _ = make(SMALL)
    prompt = tokens(SMALL, 2, 5)
    greedy = model.generate(prompt, 6, temperature=0)
    assert greedy.shape == (2, 11) and np.array_equal(greedy[:, :5], prompt)
    full = model(greedy).data  # the parallel path agrees with the recurrent one
    np.testing.assert_array_equal(full[:, 4:-1].argmax(-1), greedy[:, 5:])
    np.testing.assert_array_equal(model.generate(prompt, 6, top_k=1), greedy)
    a = model.generate(prompt, 8, temperature=0.8, top_k=5, top_p=0.9, seed=123)
    b = model.generate(prompt, 8, temperature=0.8, top_k=5, top_p=0.9, seed=123)
    np.testing.assert_array_equal(a, b)
    assert ((0 <= a.data) & (a.data < SMALL["vocab_size"])).all()
    assert isinstance(model.generate(mg.tensor(prompt), 1), mg.Tensor)
    assert isinstance(model.generate(prompt, 1), mg.Tensor)      # as GPT.generate, for any idx


def test_clear_errors():
    model, _ = make(SMALL)
    with pytest.raises(IndexError, match="outside"):
        model(np.array([[1, 11]]))
    with pytest.raises(IndexError):
        model(np.array([[-1, 2]]))
    with pytest.raises(TypeError, match="integer"):
        model(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        model(np.array([1, 2]))
    _, state = model(tokens(SMALL, 2, 3), return_state=True)
    with pytest.raises(ValueError, match="shape"):
        model(tokens(SMALL, 3, 2), state=state)
    state32 = [tuple(s.to(mg.float32) for s in layer) for layer in state]
    with pytest.raises(TypeError, match="float32"):
        model(tokens(SMALL, 2, 2), state=state32)
    with pytest.raises(TypeError, match="RWKV7Config"):
        RWKV7(dict(SMALL))


def test_bad_state_seed_and_config_values_are_named():
    # regression: state=[1] gave "object of type 'int' has no len()", seed=-1 numpy's "expected
    # non-negative integer"; RWKV7Config accepted True as a size
    model, _ = make(SMALL)
    with pytest.raises(TypeError, match=r"state\[0\] must be an \(att_shift, .*tuple, got int"):
        model(tokens(SMALL, 1, 2), state=[1, 2, 3])
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        model.generate(tokens(SMALL, 1, 2), 2, seed=-1)
    with pytest.raises(TypeError, match="temperature must be a number"):
        model.generate(tokens(SMALL, 1, 2), 2, temperature="1")
    for field, value in (("vocab_size", True), ("d_model", 12.0), ("ffn_hidden", 2.5), ("d_gate_lora", "4")):
        with pytest.raises(TypeError, match=f"RWKV7Config: {field} must be an int"):
            RWKV7Config(**{**SMALL, field: value})
    with pytest.raises(ValueError, match="RWKV7Config: d_mv_lora must be an int >= 1"):
        RWKV7Config(**{**SMALL, "d_mv_lora": 0})
    assert type(RWKV7Config(**{**SMALL, "vocab_size": np.int64(11)}).vocab_size) is int


def test_threads_agree_on_parallel_sizes():
    """B x T = 160 rows: the row kernels' parallel path (see op_helpers)."""
    cfg = dict(SMALL, d_model=16, head_size=8)
    model, _ = make(cfg, seed=5)
    check_thread_count_invariance(model, tokens(cfg, 4, 40, seed=6))
