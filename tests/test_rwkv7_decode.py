"""RWKV-7's lean token-by-token decoder (models/rwkv7_decode.py) against the autograd forward it
replaces in generate: the same logits and states bit for bit, in fp32 and fp64, with LoRA adapters,
and the fallback to the autograd path when forward hooks must fire."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.models import RWKV7, RWKV7Config
from minigrad.models.rwkv7_decode import RecurrentDecoder
from minigrad.nn.lora import frozen_adapters, lora_layers

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = dict(vocab_size=13, d_model=12, n_layer=3, head_size=4, d_decay_lora=3, d_aaa_lora=4,
            d_mv_lora=2, d_gate_lora=5, ffn_hidden=20)


def noisy_model(dtype, seed=0, **overrides):
    model = RWKV7(RWKV7Config(**{**TINY, **overrides}), dtype=dtype, seed=seed)
    rng = np.random.default_rng(seed + 1)
    with mg.no_grad():
        for p in model.parameters():        # official init zeroes some projections: add signal
            p.data[...] += 0.3 * rng.standard_normal(p.shape)
    return model


def run_both(model, prompt, steps, seed=3):
    """Feed the same random ids to the decoder and to model(..., state=...) after the prompt."""
    rng = np.random.default_rng(seed)
    B = prompt.shape[0]
    with mg.no_grad():
        logits, state = model(prompt, return_state=True)
        decoder = RecurrentDecoder(model, state)
        for _ in range(steps):
            ids = rng.integers(0, model.config.vocab_size, B)
            ref, state = model(ids[:, None], state=state, return_state=True)
            got = decoder.step(ids)
            yield got, ref.data[:, -1], decoder.tensors(), state


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("B", [1, 3])
def test_decoder_equals_the_autograd_forward_bit_for_bit(dtype, B):
    model = noisy_model(dtype)
    prompt = np.random.default_rng(0).integers(0, TINY["vocab_size"], (B, 5))
    for got, ref, got_state, ref_state in run_both(model, prompt, steps=6):
        assert got.dtype == dtype and got.shape == (B, TINY["vocab_size"])
        np.testing.assert_array_equal(got, ref)
        for got_layer, ref_layer in zip(got_state, ref_state):
            for g, r in zip(got_layer, ref_layer):
                np.testing.assert_array_equal(g.data, r.data)


def test_decoder_with_head_size_64_and_lora_adapters_on_every_projection():
    model = noisy_model(np.float32, d_model=128, n_layer=2, head_size=64, vocab_size=17, ffn_hidden=64)
    nn.apply_lora(model, target_modules=["receptance", "key", "value", "output", "head"], r=2)
    rng = np.random.default_rng(5)
    for _, layer in lora_layers(model):
        for p in (layer.lora_A.weight, layer.lora_B.weight):
            p.data[...] = 0.3 * rng.standard_normal(p.shape)
    model.eval()
    prompt = rng.integers(0, 17, (2, 4))
    with frozen_adapters(model):
        for got, ref, _, _ in run_both(model, prompt, steps=4):
            np.testing.assert_array_equal(got, ref)


def test_generate_runs_the_decoder_and_matches_the_hooked_autograd_path():
    model = noisy_model(np.float64)
    prompt = np.random.default_rng(1).integers(0, TINY["vocab_size"], (2, 4))
    calls = []
    fast = model.generate(prompt, 7, temperature=0.9, top_k=5, seed=11).data
    handle = model.blocks[1].register_forward_hook(lambda module, args, out: calls.append(args[0].shape))
    slow = model.generate(prompt, 7, temperature=0.9, top_k=5, seed=11).data
    handle.remove()
    np.testing.assert_array_equal(fast, slow)
    # the hook saw the prompt once and each of the 6 decoded inputs (the 7th token is never fed back)
    assert [s[1] for s in calls] == [4] + [1] * 6


def test_decoder_does_not_touch_the_state_it_was_given():
    model = noisy_model(np.float32)
    with mg.no_grad():
        _, state = model(np.array([[1, 2, 3]]), return_state=True)
        before = [[s.data.copy() for s in layer] for layer in state]
        RecurrentDecoder(model, state).step(np.array([4]))
    for layer, saved in zip(state, before):
        for s, b in zip(layer, saved):
            np.testing.assert_array_equal(s.data, b)
