"""Checkpoint loading under wrong dtypes, damaged or hand-crafted files and bad save arguments:
each gives a clear error naming the tensor / key (CheckpointError, TypeError or ValueError), never a
silent cast, a BufferError from a memory map or a bare numpy / KeyError."""
import json
import os
import struct

import numpy as np
import pytest
from _tiny_training import Trainer, tiny_model

from minigrad import io
from minigrad.io import CheckpointError
from minigrad.models import GPT, RWKV7


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    trainer = Trainer("gpt")
    trainer.step(0)
    path = io.save_checkpoint(str(tmp_path_factory.mktemp("run")), 1, trainer.model, trainer.opt)
    return path


def _rewrite(src, dst, mutate):
    """Copy safetensors file `src` to `dst` with `mutate(tensors) -> tensors` applied (valid digests)."""
    tensors, meta = io.load_safetensors(src)
    io.save_safetensors(dst, mutate(dict(tensors)), meta)
    return dst


def _weights(model):
    return {k: np.array(getattr(v, "data", v)) for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# ---- damaged files through the memory-mapped readers (GPT.from_hf, RWKV7.from_pretrained) ------


def _damage(kind, buf):
    return {"cut 1": buf[:-1], "cut 7": buf[:-7], "junk": buf + b"xx", "empty": b"",
            "half": buf[:len(buf) // 2]}[kind]


@pytest.mark.parametrize("kind", ["cut 1", "cut 7", "junk", "empty", "half"])
def test_damaged_hf_file_raises_checkpoint_error(tmp_path, kind):
    # regression: BufferError "cannot close exported pointers exist" hid the CheckpointError
    tiny_model("gpt").save_hf(str(tmp_path))
    path = tmp_path / "model.safetensors"
    path.write_bytes(_damage(kind, path.read_bytes()))
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        GPT.from_hf(str(tmp_path))


@pytest.mark.parametrize("kind", ["cut 1", "junk", "empty"])
def test_damaged_rwkv7_file_raises_checkpoint_error(tmp_path, kind):
    path = tiny_model("rwkv7").save_pretrained(str(tmp_path / "r.safetensors"))
    with open(path, "rb") as f:
        buf = f.read()
    with open(path, "wb") as f:
        f.write(_damage(kind, buf))
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        RWKV7.from_pretrained(path)


# ---- minigrad checkpoints: dtypes must match the model exactly -------------------------------


@pytest.mark.parametrize("bad", [np.int32, np.bool_, np.uint8, np.float64])
def test_checkpoint_weight_of_another_dtype_is_rejected(saved, tmp_path, bad):
    # regression: int32 7s loaded as 7.0, uint8 200 as 200.0, float64 silently rounded to float32
    q = _rewrite(saved, str(tmp_path / "x.safetensors"),
                 lambda t: {**t, "model.norm.weight": np.full(t["model.norm.weight"].shape, 7).astype(bad)})
    model = tiny_model("gpt", seed=1)
    before = _weights(model)
    want = rf"norm.weight: dtype {np.dtype(bad)}, expected float32"
    with pytest.raises(CheckpointError, match=want):
        io.load_checkpoint(q, model)
    assert _same(before, _weights(model)), "a failed load changed weights"
    with pytest.raises(CheckpointError, match=want):
        io.load_checkpoint(q).build_model()


def test_float64_checkpoint_builds_a_float64_model(tmp_path):
    model = tiny_model("gpt", dtype=np.float64)
    path = io.save_checkpoint(str(tmp_path), 3, model)
    rebuilt = io.load_checkpoint(path).build_model()
    assert rebuilt.dtype == np.float64
    assert _same(_weights(model), _weights(rebuilt))
    with pytest.raises(CheckpointError, match="dtype float64, expected float32"):
        io.load_checkpoint(path, tiny_model("gpt"))


def test_optimizer_state_of_an_int_dtype_is_rejected(saved, tmp_path):
    q = _rewrite(saved, str(tmp_path / "x.safetensors"),
                 lambda t: {k: v.astype(np.int64) if k.startswith("optim.state") and v.ndim else v
                            for k, v in t.items()})
    trainer = Trainer("gpt", seed=1)
    before = _weights(trainer.model)
    with pytest.raises(CheckpointError, match=r"optim\.state\.0\.exp_avg: dtype int64, expected float32"):
        io.load_checkpoint(q, trainer.model, trainer.opt)
    assert _same(before, _weights(trainer.model))
    assert not trainer.opt.state


def test_missing_optimizer_array_is_named(saved, tmp_path):
    # regression: a bare KeyError: 'optim.state.0.exp_avg_sq'
    q = _rewrite(saved, str(tmp_path / "x.safetensors"),
                 lambda t: {k: v for k, v in t.items() if k != "optim.state.0.exp_avg_sq"})
    trainer = Trainer("gpt", seed=1)
    with pytest.raises(CheckpointError, match="'optim.state.0.exp_avg_sq'"):
        io.load_checkpoint(q, trainer.model, trainer.opt)


# ---- imports (HF, official RWKV-7): float -> float converted, int / bool rejected ------------


def _hf_with_norm(tmp_path, dtype):
    tiny_model("gpt").save_hf(str(tmp_path))
    path = str(tmp_path / "model.safetensors")
    _rewrite(path, path, lambda t: {**t, "model.norm.weight": t["model.norm.weight"].astype(dtype)})
    return str(tmp_path)


def test_hf_int_weight_is_rejected(tmp_path):
    # regression: an int64 model.norm.weight loaded
    with pytest.raises(TypeError, match="norm.weight: dtype int64, expected float32"):
        GPT.from_hf(_hf_with_norm(tmp_path, np.int64))


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_hf_other_float_weights_are_converted(tmp_path, dtype):
    model = GPT.from_hf(_hf_with_norm(tmp_path, dtype))
    assert model.norm.weight.data.dtype == np.float32


def test_rwkv7_int_weight_is_rejected_like_from_state_dict(tmp_path):
    # regression: from_pretrained cast int32 head.weight to float before its kind check
    from minigrad.models.rwkv7_io import official_state
    state = official_state(tiny_model("rwkv7"))
    state["head.weight"] = np.full(state["head.weight"].shape, 3, np.int32)
    path = str(tmp_path / "r.safetensors")
    io.save_safetensors(path, state, {"format": "pt"})
    with pytest.raises(TypeError, match="head.weight: dtype int32, expected float32"):
        RWKV7.from_pretrained(path)
    with pytest.raises(TypeError, match="head.weight must be floating point"):
        RWKV7.from_state_dict(state)
    state["head.weight"] = state["head.weight"].astype(np.float64)
    io.save_safetensors(path, state, {"format": "pt"})
    assert RWKV7.from_pretrained(path).dtype == np.float32


def test_hf_config_without_num_attention_heads_is_named(tmp_path):
    # regression: a bare KeyError from the support check
    tiny_model("gpt").save_hf(str(tmp_path))
    cfg_path = tmp_path / "config.json"
    for field in ("num_attention_heads", "hidden_size"):
        cfg = json.loads(cfg_path.read_text())
        saved = cfg.pop(field)
        cfg_path.write_text(json.dumps(cfg))
        with pytest.raises(ValueError, match=f"missing field '{field}'"):
            GPT.from_hf(str(tmp_path))
        cfg_path.write_text(json.dumps({**cfg, field: saved}))


@pytest.mark.parametrize("text,match", [
    ("{not json", "not valid JSON"), ("[1, 2]", "holds a JSON list"),
    ('{"num_attention_heads": 0}', "num_attention_heads must be an int >= 1"),
    ('{"num_attention_heads": 2.5}', "num_attention_heads must be an int"),
    # audit of 2026-12: AttributeError / TypeError, or silently truncated / treated as not given
    ('{"rope_scaling": "linear"}', "rope_scaling must be an object or null, got 'linear'"),
    ('{"hidden_size": "32"}', "hidden_size must be an int, got '32'"),
    ('{"vocab_size": 64.9}', "vocab_size must be an int, got 64.9"),
    ('{"num_key_value_heads": 0}', "num_key_value_heads must be an int >= 1"),
    ('{"rope_theta": 0}', "rope_theta must be a finite positive number"),
    ('{"rms_norm_eps": "1e-5"}', "rms_norm_eps must be a number"),
    ('{"tie_word_embeddings": "false"}', "tie_word_embeddings must be True or False")])
def test_hf_config_that_is_not_a_llama_config_object_is_named(tmp_path, text, match):
    # audit leftovers: JSONDecodeError / ZeroDivisionError escaped from config.json
    tiny_model("gpt").save_hf(str(tmp_path))
    cfg_path = tmp_path / "config.json"
    if text.startswith('{"'):
        text = json.dumps({**json.loads(cfg_path.read_text()), **json.loads(text)})
    cfg_path.write_text(text)
    with pytest.raises(ValueError, match=match):
        GPT.from_hf(str(tmp_path))


# ---- hand-crafted headers (no digests) ---------------------------------------------------------


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [-1, -1], "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": "ab", "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [2 ** 70], "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [0, 2 ** 70], "data_offsets": [0, 0]},
    {"dtype": "F32", "shape": [2 ** 62, 4], "data_offsets": [0, 0]},
    {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]},
    {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]},
    {"dtype": "F32", "shape": [1], "data_offsets": "ab"},
    {"dtype": "F32", "shape": [1], "data_offsets": 4},
    {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]},
    {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]},
    {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]},
    {"dtype": 5, "shape": [1], "data_offsets": [0, 4]},
    {"shape": [1], "data_offsets": [0, 4]},
    5, [1, 2], "F32",
])
def test_crafted_header_entry_gives_checkpoint_error(tmp_path, entry):
    header = json.dumps({"a": entry}).encode()
    header += b" " * (-len(header) % 8)
    path = str(tmp_path / "c.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + bytes(4))
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        io.load_safetensors(path)


def test_crafted_header_with_overlapping_tensors_is_rejected():
    entries = {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
               "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    header = json.dumps(entries).encode()
    with pytest.raises(CheckpointError, match="starts at byte 0, expected 4"):
        io.decode_safetensors(struct.pack("<Q", len(header)) + header + bytes(8))


# ---- save_checkpoint arguments ---------------------------------------------------------------


def test_negative_step_or_keep_is_rejected_before_writing(tmp_path):
    # regression: step -1 wrote ckpt_-0000001.safetensors (never listed); keep=-1 deleted the oldest
    model = tiny_model("gpt")
    run = str(tmp_path)
    io.save_checkpoint(run, 1, model)
    io.save_checkpoint(run, 2, model)
    before = sorted(os.listdir(run))
    with pytest.raises(ValueError, match="step must be an int >= 0"):
        io.save_checkpoint(run, -1, model)
    with pytest.raises(TypeError, match="step must be an int"):   # 2.7 was truncated to ckpt_2
        io.save_checkpoint(run, 2.7, model)
    with pytest.raises(ValueError, match="keep must be an int >= 0"):
        io.save_checkpoint(run, 3, model, keep=-1)
    with pytest.raises(TypeError, match="keep must be an int"):
        io.save_checkpoint(run, 3, model, keep=1.5)
    assert sorted(os.listdir(run)) == before
    io.save_checkpoint(run, 3, model, keep=0)
    assert [s for s, _ in io.list_checkpoints(run)] == [1, 2, 3]
