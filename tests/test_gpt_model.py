"""The Llama-style GPT: whole-model gradcheck (tied and untied), a PyTorch twin with the same weights,
KV-cache decoding against the full forward, generation options, names and input errors."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad.autograd import gradcheck
from minigrad.models import GPT, GPTConfig
from tests.op_helpers import check_thread_count_invariance, record


def tiny(tied, dtype=np.float64, **kw):
    args = dict(vocab_size=11, d_model=8, n_layer=2, n_head=2, n_kv_head=1, ffn_hidden=6, max_seq_len=16,
                tie_embeddings=tied)
    args.update(kw)
    mg.manual_seed(0)
    model = GPT(GPTConfig(**args), dtype=dtype)
    rng = np.random.default_rng(1)
    for p in model.parameters():         # O(1) weights so every path carries signal
        p.data[...] = rng.standard_normal(p.shape) * (0.5 if p.ndim == 2 else 0.3) + (p.ndim == 1)
    return model


def ids(B, T, V, seed=0):
    return np.random.default_rng(seed).integers(0, V, (B, T))


@pytest.mark.parametrize("tied", [True, False])
def test_whole_model_gradcheck(tied):
    model = tiny(tied)
    x, y = ids(2, 5, 11), ids(2, 5, 11, seed=1)
    y[0, 2] = -100
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    assert ("lm_head.weight" in names) is (not tied)
    loss = lambda *_: F.cross_entropy(model(x).reshape(-1, 11), y.reshape(-1))
    vectors = [p for p in params if p.ndim == 1]          # every element
    matrices = [p for p in params if p.ndim == 2]         # random directions (fast=True) for speed
    for group, fast in ((vectors, False), (matrices, True)):
        others = [p for p in params if all(p is not q for q in group)]
        for p in others:
            p.requires_grad_(False)
        try:
            assert gradcheck(loss, group, eps=1e-6, atol=1e-10, rtol=1e-6, fast=fast, n_projections=4)
        finally:
            for p in others:
                p.requires_grad_(True)
        record("gpt.model", gradcheck.last_errors)
        assert len(gradcheck.last_errors) == len(group)


def test_state_dict_names_and_tied_loading():
    model = tiny(True, np.float32, n_layer=1)
    sd = model.state_dict()
    assert list(sd) == [
        "embed_tokens.weight", "layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight",
        "layers.0.self_attn.v_proj.weight", "layers.0.self_attn.o_proj.weight",
        "layers.0.mlp.gate_proj.weight", "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight",
        "layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight", "norm.weight"]
    assert sd["layers.0.self_attn.k_proj.weight"].shape == (4, 8)      # (out, in), one kv head
    other = tiny(True, np.float32, n_layer=1)
    other.load_state_dict(sd)                                          # without lm_head.weight
    other.load_state_dict({**sd, "lm_head.weight": sd["embed_tokens.weight"]})   # with it (HF)
    with pytest.raises(ValueError, match="tie_embeddings=False"):
        other.load_state_dict({**sd, "lm_head.weight": sd["embed_tokens.weight"] + 1})
    untied = tiny(False, np.float32, n_layer=1)
    assert "lm_head.weight" in untied.state_dict()


def test_default_init_is_hf_like():
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, d_model=64, n_layer=2, n_head=4))
    assert model.config.ffn_hidden == 192 and model.config.kv_heads == 4
    w = model.layers[1].mlp.down_proj.weight.data
    assert w.dtype == np.float32 and abs(w.std() - 0.02) < 0.003
    assert np.all(model.norm.weight.data == 1)


@pytest.mark.parametrize("tied", [True, False])
def test_kv_cache_decoding_equals_full_forward(tied):
    model = tiny(tied, np.float32, max_seq_len=32, n_head=4, n_kv_head=2, d_model=16, ffn_hidden=24)
    seq = ids(3, 20, 11, seed=4)
    full = model(seq).data
    cfg = model.config
    shape = (3, 20, cfg.kv_heads, cfg.head_dim)
    caches = [(np.zeros(shape, np.float32), np.zeros(shape, np.float32)) for _ in model.layers]
    with mg.no_grad():
        got = [model(seq[:, :9], caches, 0).data]                  # prefill 9 tokens (BLAS driver)
        got.append(model(seq[:, 9:12], caches, 9).data)            # 3 at once (C driver)
        for t in range(12, 20):                                    # then one token at a time
            got.append(model(seq[:, t:t + 1], caches, t).data)
    np.testing.assert_allclose(np.concatenate(got, 1), full, rtol=0, atol=2e-5)


def test_generate_greedy_matches_argmax_of_full_forward():
    model = tiny(True, np.float32)
    prompt = ids(2, 3, 11, seed=5)
    out = model.generate(prompt, 8, temperature=0)
    assert out.shape == (2, 11) and out.dtype == np.int64
    seq = prompt
    for _ in range(8):
        nxt = model(seq).data[:, -1].argmax(-1)
        seq = np.concatenate([seq, nxt[:, None]], 1)
    np.testing.assert_array_equal(out.data, seq)
    assert model.training
    assert model.layers[0].mlp.packed_weight().requires_grad      # the decode-time pack was released


def test_generate_sampling_options():
    model = tiny(False, np.float32)
    prompt = ids(2, 2, 11, seed=6)
    a = model.generate(prompt, 6, temperature=0.8, top_k=3, seed=123).data
    b = model.generate(mg.tensor(prompt), 6, temperature=0.8, top_k=3, seed=123).data
    np.testing.assert_array_equal(a, b)
    assert np.all((a >= 0) & (a < 11))
    assert np.array_equal(model.generate(prompt, 5, top_k=1, seed=1).data,
                          model.generate(prompt, 5, temperature=0).data)
    assert np.array_equal(model.generate(prompt, 5, top_p=1e-6, seed=2).data,
                          model.generate(prompt, 5, temperature=0).data)
    assert model.generate(prompt, 0).shape == (2, 2)
    for bad in (dict(temperature=-1), dict(top_k=0), dict(top_p=0.0), dict(top_p=1.5)):
        with pytest.raises(ValueError):
            model.generate(prompt, 2, **bad)


def test_input_errors():
    model = tiny(True, np.float32)
    with pytest.raises(IndexError, match=r"outside \[0, 11\)"):
        model(np.array([[1, 11]]))
    with pytest.raises(IndexError):
        model(np.array([[-1, 2]]))
    with pytest.raises(ValueError, match="longer than max_seq_len 16"):
        model(ids(1, 17, 11))
    with pytest.raises(TypeError, match="integers"):
        model(np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match=r"\(batch, time\)"):
        model(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model.generate(ids(1, 10, 11), 7)
    with pytest.raises(ValueError, match="multiple of n_kv_head"):
        GPTConfig(vocab_size=5, d_model=8, n_layer=1, n_head=4, n_kv_head=3)
    with pytest.raises(ValueError, match="even size"):
        GPTConfig(vocab_size=5, d_model=6, n_layer=1, n_head=2)


def test_generate_names_a_bad_seed_or_sampling_argument():
    # regression: numpy's "expected non-negative integer" / operator errors not naming the argument
    model = tiny(False, np.float32)
    prompt = ids(1, 2, 11)
    for bad, err, match in ((dict(seed=-1), ValueError, "seed must be an int >= 0"),
                            (dict(seed=1.5), TypeError, "seed must be an int"),
                            (dict(temperature=None), TypeError, "temperature must be a number, got None"),
                            (dict(temperature="1"), TypeError, "temperature must be a number"),
                            (dict(top_p="0.5"), TypeError, "top_p must be a number"),
                            (dict(top_p=float("nan")), ValueError, r"top_p must be in \(0, 1\]")):
        with pytest.raises(err, match=match):
            model.generate(prompt, 2, **bad)
    out = model.generate(prompt, 2, temperature=np.float32(0.5), top_p=np.float64(0.9), seed=np.int64(3))
    assert out.shape == (1, 4)


BASE = dict(vocab_size=11, d_model=8, n_layer=1, n_head=2)


@pytest.mark.parametrize("field, value, err", [
    ("vocab_size", 20.7, TypeError), ("vocab_size", True, TypeError), ("max_seq_len", 2.9, TypeError),
    ("d_model", "8", TypeError), ("n_kv_head", 0, ValueError), ("ffn_hidden", 0, ValueError),
    ("tie_embeddings", "no", TypeError), ("tie_embeddings", 1, TypeError),
    ("rope_base", 0.0, ValueError), ("rope_base", -1.0, ValueError), ("rope_base", float("nan"), ValueError),
    ("rope_base", "1e4", TypeError), ("norm_eps", 0.0, ValueError), ("norm_eps", -1e-5, ValueError),
    ("norm_eps", float("inf"), ValueError), ("norm_eps", None, TypeError)])
def test_config_rejects_values_that_used_to_fail_at_the_first_forward_or_never(field, value, err):
    with pytest.raises(err, match=f"GPTConfig: {field} must be"):
        GPTConfig(**{**BASE, field: value})


def test_config_stores_plain_python_values():
    cfg = GPTConfig(**{**BASE, "vocab_size": np.int64(11), "n_kv_head": np.int32(1)}, rope_base=500,
                    tie_embeddings=np.bool_(False))
    assert type(cfg.vocab_size) is int and type(cfg.n_kv_head) is int and cfg.vocab_size == 11
    assert type(cfg.rope_base) is float and cfg.tie_embeddings is False


def test_training_steps_reduce_loss():
    model = tiny(False, np.float32, n_layer=1)
    x = ids(4, 12, 11, seed=7)
    y = np.roll(x, -1, 1)
    opt = mg.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.0)
    losses = []
    for _ in range(15):
        loss = F.cross_entropy(model(x).reshape(-1, 11), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


# ---------------------------------------------------------------- PyTorch twin
def torch_llama(torch, sd, cfg, idx):
    """A Llama forward written directly in torch from a GPT state dict (HF conventions)."""
    H, Hkv, hd = cfg.n_head, cfg.kv_heads, cfg.head_dim
    B, T = idx.shape
    inv = 1.0 / cfg.rope_base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = (torch.cat([f(ang), f(ang)], -1).to(torch.float32) for f in (torch.cos, torch.sin))

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * w

    def rot(x):                                                  # (B, h, T, hd), rotate_half
        return x * cos + torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1) * sin

    x = sd["embed_tokens.weight"][idx]
    for i in range(cfg.n_layer):
        p = f"layers.{i}."
        h = rms(x, sd[p + "input_layernorm.weight"])
        q = (h @ sd[p + "self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
        k = (h @ sd[p + "self_attn.k_proj.weight"].T).view(B, T, Hkv, hd).transpose(1, 2)
        v = (h @ sd[p + "self_attn.v_proj.weight"].T).view(B, T, Hkv, hd).transpose(1, 2)
        k, v = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
        o = torch.nn.functional.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True)
        x = x + o.transpose(1, 2).reshape(B, T, -1) @ sd[p + "self_attn.o_proj.weight"].T
        h = rms(x, sd[p + "post_attention_layernorm.weight"])
        up = h @ sd[p + "mlp.up_proj.weight"].T
        g = torch.nn.functional.silu(h @ sd[p + "mlp.gate_proj.weight"].T) * up
        x = x + g @ sd[p + "mlp.down_proj.weight"].T
    head = sd["embed_tokens.weight"] if cfg.tie_embeddings else sd["lm_head.weight"]
    return rms(x, sd["norm.weight"]) @ head.T


@pytest.mark.parametrize("tied", [True, False])
def test_matches_torch_logits_and_every_gradient(tied):
    torch = pytest.importorskip("torch")
    mg.manual_seed(3)
    model = GPT(GPTConfig(vocab_size=50, d_model=32, n_layer=2, n_head=4, n_kv_head=2, ffn_hidden=40,
                          max_seq_len=64, tie_embeddings=tied))
    x, y = ids(3, 21, 50, seed=8), ids(3, 21, 50, seed=9)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, 50), y.reshape(-1))
    loss.backward()
    sd = {k: torch.from_numpy(v).requires_grad_() for k, v in model.state_dict().items()}
    tlogits = torch_llama(torch, sd, model.config, torch.from_numpy(x))
    tloss = torch.nn.functional.cross_entropy(tlogits.reshape(-1, 50), torch.from_numpy(y).reshape(-1))
    tloss.backward()
    np.testing.assert_allclose(logits.data, tlogits.detach().numpy(), rtol=0, atol=2e-5)
    assert abs(loss.item() - tloss.item()) < 1e-5
    for name, p in model.named_parameters():
        want = sd[name].grad.numpy()
        np.testing.assert_allclose(p.grad.data, want, rtol=0, atol=2e-5 * max(1.0, np.abs(want).max()),
                                   err_msg=name)


def test_fused_residual_norm_path_equals_plain_blocks():
    """model(idx) runs the blocks with each residual add fused into the next norm; the plain
    LlamaDecoderLayer.forward chain followed by the final norm gives the same logits."""
    model = tiny(True, n_layer=3)
    x = ids(2, 5, 11)
    h = model.embed_tokens(x)
    for layer in model.layers:
        h = layer(h)
    want = model.norm(h) @ model.embed_tokens.weight.T
    np.testing.assert_allclose(model(x).data, want.data, rtol=1e-12, atol=1e-12)


def test_keep_freed_memory_is_idempotent():
    from minigrad.heap import keep_freed_memory
    first = keep_freed_memory()
    assert isinstance(first, bool) and keep_freed_memory() is first


def test_threads_agree_on_parallel_sizes():
    """B x T = 160 rows: the kernels' parallel paths, attention's transposed keys (see op_helpers)."""
    mg.manual_seed(3)
    model = GPT(GPTConfig(vocab_size=13, d_model=16, n_layer=2, n_head=4, n_kv_head=2, ffn_hidden=24,
                          max_seq_len=64, tie_embeddings=False), dtype=np.float64)
    check_thread_count_invariance(model, np.random.default_rng(4).integers(0, 13, (4, 40)))


def test_frozen_pack_is_per_thread():
    """generate() freezes the packed q/k/v and gate/up weights; a thread training the same model
    meanwhile must keep the differentiable stack (and every gradient)."""
    import threading

    from minigrad.models.gpt import _Packed

    model = tiny(False)
    packs = [m for m in model.modules() if isinstance(m, _Packed)]
    frozen, done, seen = threading.Event(), threading.Event(), []

    def decode():
        for m in packs:
            m.freeze_pack(True)
        seen.append(all(not m.packed_weight().requires_grad for m in packs))
        frozen.set()
        done.wait()
        for m in packs:
            m.freeze_pack(False)

    t = threading.Thread(target=decode)
    t.start()
    try:
        frozen.wait()
        model(ids(2, 5, 11)).sum().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None]
    finally:
        done.set()
        t.join()
    assert seen == [True] and missing == []
    assert all(m.packed_weight().requires_grad for m in packs)


@pytest.mark.parametrize("tie,n_kv", [(True, None), (False, 1)])
def test_param_shapes_is_the_models_state_dict(tie, n_kv):
    # GPTConfig.param_shapes restates the model's structure for checks made before building it;
    # the two must not drift apart
    cfg = GPTConfig(vocab_size=37, d_model=24, n_layer=3, n_head=4, n_kv_head=n_kv, ffn_hidden=40,
                    tie_embeddings=tie)
    model = GPT(cfg)
    assert list(cfg.param_shapes()) == [(k, v.shape) for k, v in model.state_dict().items()]
