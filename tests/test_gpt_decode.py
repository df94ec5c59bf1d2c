"""models/gpt_decode.KVDecoder (GPT.generate's tape-free decode steps): logits and KV caches bit for
bit those of GPT.forward with caches, on every architecture variant; generate equal with and without
it; every case it must not take (hooks, LoRA outside the packed projections, replaced modules)
refused and decoded by forward instead."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.models import GPT, GPTConfig
from minigrad.models.gpt import LlamaMLP
from minigrad.models.gpt_decode import KVDecoder

pytestmark = pytest.mark.usefixtures("one_thread")   # tiny models (tests/conftest.py)

VARIANTS = {
    "tied-mha": dict(),
    "untied-gqa": dict(n_kv_head=1, tie_embeddings=False),
    "qwen2-biases": dict(n_kv_head=2, attention_bias=True, hf_model_type="qwen2", tie_embeddings=False),
    "llama-biases": dict(attention_bias=True, mlp_bias=True),
    "head-dim-llama3": dict(n_kv_head=2, head_dim=6, rope_scaling=dict(
        rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=8)),
    "linear-scaling-odd": dict(d_model=20, n_head=5, n_kv_head=1, ffn_hidden=13,
                               rope_scaling=dict(rope_type="linear", factor=2.0)),
}


def model_of(variant, dtype=np.float64, seed=0):
    kw = dict(vocab_size=23, d_model=16, n_layer=3, n_head=4, ffn_hidden=10, max_seq_len=40)
    kw.update(VARIANTS[variant])
    mg.manual_seed(seed)
    model = GPT(GPTConfig(**kw), dtype=dtype)
    rng = np.random.default_rng(seed)
    for p in model.parameters():          # O(1) weights and biases: every path carries signal
        p.data[...] = rng.standard_normal(p.shape) * (0.4 if p.ndim == 2 else 0.2) + (p.ndim == 1) * 0.8
    return model.eval()


def caches_for(model, B, T):
    cfg = model.config
    shape = (B, T, cfg.kv_heads, cfg.head_dim)
    return [(np.zeros(shape, model.dtype), np.zeros(shape, model.dtype)) for _ in model.layers]


def frozen(model):
    from minigrad.models.gpt import _Packed

    packs = [m for m in model.modules() if isinstance(m, _Packed)]
    for m in packs:
        m.freeze_pack(True)
    return packs


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("B", [1, 3])
def test_steps_equal_forward_with_caches_bit_for_bit(variant, dtype, B):
    model = model_of(variant, dtype)
    assert KVDecoder.supports(model)
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, 23, (B, 5))
    steps = rng.integers(0, 23, (B, 9))
    ours, ref = caches_for(model, B, 14), caches_for(model, B, 14)
    packs = frozen(model)
    try:
        with mg.no_grad():
            model(prompt, ours, 0)
            model(prompt, ref, 0)
            decoder = KVDecoder(model, ours)
            for i in range(steps.shape[1]):
                t = 5 + i
                got = decoder.step(steps[:, i], t)
                want = model(steps[:, i:i + 1], ref, t).data[:, -1]
                assert got.dtype == dtype and got.shape == (B, 23)
                np.testing.assert_array_equal(got, want)
    finally:
        for m in packs:
            m.freeze_pack(False)
    for (k, v), (k2, v2) in zip(ours, ref):
        np.testing.assert_array_equal(k, k2)
        np.testing.assert_array_equal(v, v2)


def generate_both(model, monkeypatch, **kw):
    """(generate's tokens with the decoder, without it), same arguments."""
    prompt = np.random.default_rng(2).integers(0, 23, (2, 4))
    fast = model.generate(prompt, 12, **kw).data
    with monkeypatch.context() as m:
        m.setattr(KVDecoder, "supports", staticmethod(lambda model: False))
        slow = model.generate(prompt, 12, **kw).data
    return fast, slow


@pytest.mark.parametrize("variant", ["untied-gqa", "qwen2-biases"])
@pytest.mark.parametrize("kw", [dict(temperature=0), dict(temperature=1.3, top_k=7, top_p=0.9, seed=5)])
def test_generate_equals_the_forward_path(variant, kw, monkeypatch):
    fast, slow = generate_both(model_of(variant, np.float32), monkeypatch, **kw)
    np.testing.assert_array_equal(fast, slow)


def test_packed_lora_adapters_are_decoded_and_equal(monkeypatch):
    model = model_of("untied-gqa")
    nn.apply_lora(model, target_modules=["q_proj", "v_proj", "gate_proj"], r=2, init_lora_weights=False)
    assert KVDecoder.supports(model)
    fast, slow = generate_both(model, monkeypatch, temperature=0)
    np.testing.assert_array_equal(fast, slow)


def test_models_it_must_not_decode_are_refused_and_still_generate(monkeypatch):
    model = model_of("tied-mha")
    nn.apply_lora(model, target_modules=["o_proj"], r=2, init_lora_weights=False)   # branch added, not fused
    assert not KVDecoder.supports(model)
    fast, slow = generate_both(model, monkeypatch, temperature=0)
    np.testing.assert_array_equal(fast, slow)

    model = model_of("tied-mha")
    calls = []
    handle = model.layers[1].mlp.register_forward_hook(lambda m, args, out: calls.append(1))
    assert not KVDecoder.supports(model)
    model.generate(np.zeros((1, 3), np.int64), 4, temperature=0)
    assert len(calls) == 4          # the prompt and three decode steps ran the hooked module
    handle.remove()
    assert KVDecoder.supports(model)

    class DoubledMLP(LlamaMLP):     # a user's replacement module: its own forward must run
        def forward(self, x):
            return super().forward(x) * 2

    model = model_of("tied-mha")
    old = model.layers[0].mlp
    new = DoubledMLP.__new__(DoubledMLP)
    new.__dict__.update(old.__dict__)
    model.layers[0].mlp = new
    assert not KVDecoder.supports(model)
    fast, slow = generate_both(model, monkeypatch, temperature=0)
    np.testing.assert_array_equal(fast, slow)

    model = model_of("tied-mha")
    model.train()                   # generate switches to eval itself; dropout-free LoRA is fused
    nn.apply_lora(model, target_modules=["q_proj"], r=2, lora_dropout=0.5)
    model.train()
    assert not KVDecoder.supports(model)    # dropout active: the packed projections are called
