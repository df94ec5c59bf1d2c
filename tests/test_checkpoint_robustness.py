"""Checkpoints under damage and misuse: every single-bit flip of the header and sampled flips of
the data, random truncations, a wrong model type, mismatched shapes or layer counts, and a
mismatched optimizer give a CheckpointError / ValueError naming the problem, never a silent load
of different values or an unrelated exception. (The SIGKILL-during-save test is in test_io.py.)"""
import json
import os
import struct

import numpy as np
import pytest
from _tiny_training import Trainer

from minigrad import io
from minigrad.io import CheckpointError


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    trainer = Trainer("gpt")
    trainer.step(0)
    run = str(tmp_path_factory.mktemp("run"))
    path = io.save_checkpoint(run, 1, trainer.model, trainer.opt, rng={"seed": 5}, extra={"tokens": 64})
    return path, open(path, "rb").read(), io.load_checkpoint(path)


def _identical(a, b):
    if (a.step, a.model_type, a.config, a.rng, a.extra) != (b.step, b.model_type, b.config, b.rng, b.extra):
        return False
    if set(a.model_state) != set(b.model_state):
        return False
    if any(not np.array_equal(a.model_state[k], b.model_state[k]) for k in a.model_state):
        return False
    return repr(a.optimizer_state) == repr(b.optimizer_state)


def _outcomes(path, good, variants):
    out = {"error": 0, "same": 0}
    for label, payload in variants:
        with open(path, "wb") as f:
            f.write(payload)
        try:
            ckpt = io.load_checkpoint(path)
        except CheckpointError as e:
            assert "corrupted" in str(e) or "truncated" in str(e), (label, e)
            out["error"] += 1
            continue
        assert _identical(ckpt, good), f"{label}: a damaged file loaded different values silently"
        out["same"] += 1
    return out


def test_every_header_bit_flip_is_caught(saved, tmp_path):
    # regression: the digest covered only the data section; 1788 of 9080 single-bit header flips
    # loaded silently different values (config, step, optimizer hyperparameters) and 1780 raised
    # KeyError/TypeError instead of CheckpointError
    _, buf, good = saved
    n = 8 + struct.unpack("<Q", buf[:8])[0]
    variants = ((f"byte {i} bit {i % 8}", buf[:i] + bytes([buf[i] ^ (1 << (i % 8))]) + buf[i + 1:])
                for i in range(0, n, 3))
    out = _outcomes(str(tmp_path / "h.safetensors"), good, variants)
    print(f"header flips: {out}")
    assert out["error"] > 0.99 * (out["error"] + out["same"])


def test_sampled_data_bit_flips_and_truncations_are_caught(saved, tmp_path):
    _, buf, good = saved
    n = 8 + struct.unpack("<Q", buf[:8])[0]
    rng = np.random.default_rng(0)
    flips = [(f"data byte {i}", buf[:i] + bytes([buf[i] ^ 0x10]) + buf[i + 1:])
             for i in rng.integers(n, len(buf), 200)]
    cuts = [(f"truncated to {k}", buf[:k]) for k in rng.integers(0, len(buf), 100)]
    extra = [("appended byte", buf + b"\0"), ("empty", b""), ("zeros", bytes(len(buf)))]
    out = _outcomes(str(tmp_path / "d.safetensors"), good, flips + cuts + extra)
    assert out["same"] == 0, out


def test_a_hostile_header_cannot_make_the_loader_allocate_or_hang(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [1 << 40, 1 << 20], "data_offsets": [0, 8]}}).encode()
    path = str(tmp_path / "h.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(CheckpointError, match="do not fit shape"):
        io.load_safetensors(path)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 1 << 62) + b"{}")
    with pytest.raises(CheckpointError, match="exceeds the file size"):
        io.load_safetensors(path)


def test_wrong_model_type_is_named(saved):
    path, _, _ = saved
    rwkv = Trainer("rwkv7").model
    with pytest.raises(CheckpointError, match="holds a 'gpt' model, not a 'rwkv7'"):
        io.load_checkpoint(path, model=rwkv)


def test_mismatched_shapes_and_layers_are_named(saved):
    from minigrad.models.gpt import GPT, GPTConfig

    path, _, good = saved
    cfg = dict(good.config)
    wider = GPT(GPTConfig(**{**cfg, "d_model": 64}))
    with pytest.raises(CheckpointError, match=r"does not fit GPT: .*shape mismatches: .*embed_tokens.weight"):
        io.load_checkpoint(path, model=wider)
    deeper = GPT(GPTConfig(**{**cfg, "n_layer": 3}))
    with pytest.raises(CheckpointError, match=r"missing keys: layers.2"):
        io.load_checkpoint(path, model=deeper)
    before = deeper.state_dict()["embed_tokens.weight"]
    before = np.array(getattr(before, "data", before))
    after = deeper.state_dict()["embed_tokens.weight"]
    assert np.array_equal(before, np.array(getattr(after, "data", after))), "a failed load changed weights"


def test_optimizer_state_of_another_model_is_rejected(saved):
    import minigrad as mg

    path, _, _ = saved
    other = Trainer("rwkv7")
    with pytest.raises((CheckpointError, ValueError), match="load_state_dict|optimizer"):
        ckpt = io.load_checkpoint(path)
        other.opt.load_state_dict(ckpt.optimizer_state)
    assert isinstance(other.opt, mg.optim.AdamW)


def test_stale_temp_files_of_a_killed_save_are_removed(saved, tmp_path):
    trainer = Trainer("gpt")
    run = str(tmp_path)
    with open(os.path.join(run, ".tmp_ckpt_00000001.partial"), "wb") as f:
        f.write(b"half a checkpoint")
    io.save_checkpoint(run, 2, trainer.model, trainer.opt)
    assert not [f for f in os.listdir(run) if f.startswith(".tmp")]
    assert io.load_checkpoint(run).step == 2


def test_truncated_gguf_gives_a_clear_value_error(tmp_path):
    # regression: truncations raised IndexError / numpy dtype errors from inside the gguf package
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    import test_checkpoints_real as real

    GPT, _ = real._gpt()
    tokens, merges, _ = real._tiny_tokenizer()
    path = tmp_path / "tiny.gguf"
    real._write_gguf(path, real._small_gpt(True, seed=3, vocab=len(tokens)), tokens, merges)
    buf = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    for k in np.random.default_rng(0).integers(0, len(buf), 12):
        cut.write_bytes(buf[:k])
        with pytest.raises(ValueError):
            GPT.from_gguf(str(cut))
    cut.write_bytes(buf[:233])
    with pytest.raises(ValueError, match="not a readable GGUF file"):
        GPT.from_gguf(str(cut))
