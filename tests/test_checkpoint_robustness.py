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


# ---- audit of 2026-12 (models and checkpoints): loads that used to succeed silently wrong -------


def test_config_of_the_same_shapes_but_other_maths_is_rejected(saved):
    # regression: only names / shapes / dtypes were compared, so a GPT saved with n_head 4 loaded
    # into n_head 2 (same shapes; or another rope_base / norm_eps) and computed garbage
    from minigrad.models.gpt import GPT, GPTConfig

    path, _, good = saved
    cfg = dict(good.config)
    # head_dim=None: a saved config carries the resolved head_dim (explicit head_dim is supported now)
    for change, field in ((dict(n_head=2, n_kv_head=1, head_dim=None), "n_head"),
                          (dict(rope_base=100.0), "rope_base"), (dict(norm_eps=0.5), "norm_eps")):
        other = GPT(GPTConfig(**{**cfg, **change}))
        before = {k: np.array(v.data) for k, v in other.state_dict().items()}
        with pytest.raises(CheckpointError, match=f"another config: .*{field}: checkpoint"):
            io.load_checkpoint(path, model=other)
        assert all(np.array_equal(before[k], v.data) for k, v in other.state_dict().items())
    longer = GPT(GPTConfig(**{**cfg, "max_seq_len": 4 * cfg["max_seq_len"]}))  # a context length only
    io.load_checkpoint(path, model=longer)
    assert np.array_equal(longer.embed_tokens.weight.data, good.model_state["embed_tokens.weight"])


def test_n_kv_head_none_and_n_head_are_the_same_config(tmp_path):
    from minigrad.models.gpt import GPT, GPTConfig

    base = dict(vocab_size=40, d_model=16, n_layer=1, n_head=2, ffn_hidden=32)
    path = io.save_checkpoint(str(tmp_path), 1, GPT(GPTConfig(**base)))
    io.load_checkpoint(path, model=GPT(GPTConfig(**base, n_kv_head=2)))


def test_rwkv7_config_is_compared_too(tmp_path):
    from minigrad.models.rwkv7 import RWKV7Config

    model = Trainer("rwkv7").model
    claimed = RWKV7Config(**{**io.config_to_dict(model.config), "d_gate_lora": 16})
    path = io.save_checkpoint(str(tmp_path), 1, model, config=claimed)     # weights and config disagree
    with pytest.raises(CheckpointError, match="another config: d_gate_lora: checkpoint 16 vs model"):
        io.load_checkpoint(path, model=Trainer("rwkv7").model)


@pytest.mark.parametrize("change, match", [(dict(bogus=1), "unexpected keyword argument 'bogus'"),
                                           (dict(n_head="2"), "n_head must be an int"),
                                           (dict(vocab_size=0), "vocab_size must be an int >= 1")])
def test_invalid_saved_config_is_a_checkpoint_error(saved, tmp_path, change, match):
    # regression: a bare TypeError from GPTConfig(**config) in io.build_model
    path, _, good = saved
    model = Trainer("gpt").model
    bad = io.save_checkpoint(str(tmp_path), 1, model, config={**good.config, **change})
    with pytest.raises(CheckpointError, match=f"ckpt_00000001.*invalid: .*{match}"):
        io.load_checkpoint(bad).build_model()
    with pytest.raises(CheckpointError, match=match):
        io.load_checkpoint(bad, model=model)


def test_optimizer_of_another_class_is_rejected_old_checkpoints_still_load(saved, tmp_path):
    # regression: AdamW state loaded into SGD silently (lr / weight_decay replaced, exp_avg in state)
    import minigrad as mg

    path, _, good = saved
    assert good.optimizer_type == "AdamW"
    model = Trainer("gpt").model
    sgd = mg.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(CheckpointError, match="optimizer of class AdamW, not SGD"):
        io.load_checkpoint(path, model=model, optimizer=sgd)
    assert sgd.param_groups[0]["lr"] == 0.1 and not sgd.state
    tensors, meta = io.load_safetensors(path)                  # a checkpoint older than the field
    info = json.loads(meta["minigrad"])
    del info["optimizer_type"]
    old = str(tmp_path / "ckpt_00000001.safetensors")
    io.save_safetensors(old, tensors, {**meta, "minigrad": json.dumps(info)})
    assert io.load_checkpoint(old).optimizer_type is None
    adam = mg.optim.AdamW(model.parameters(), lr=1.0)
    io.load_checkpoint(old, model=model, optimizer=adam)
    assert adam.param_groups[0]["lr"] == good.optimizer_state["param_groups"][0]["lr"]


def test_unreadable_pth_is_a_checkpoint_error(tmp_path):
    # regression: torch's RuntimeError escaped RWKV7.from_pretrained for junk and truncated files (now
    # read by minigrad.torch_format, without torch)
    from minigrad.models import RWKV7

    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pth is not a readable PyTorch checkpoint"):
        RWKV7.from_pretrained(str(junk))
    good = Trainer("rwkv7").model.save_pretrained(str(tmp_path / "w.pth"))
    buf = open(good, "rb").read()
    cut = tmp_path / "cut.pth"
    for k in (0, 100, len(buf) // 2, len(buf) - 30):
        cut.write_bytes(buf[:k])
        with pytest.raises(CheckpointError, match="cut.pth"):
            RWKV7.from_pretrained(str(cut))


@pytest.mark.parametrize("change, match", [
    (lambda st, t: {**st, 5: t.zeros(3)}, "5: its key is of type int, not a string"),
    (lambda st, t: {**{"module." + k: v for k, v in st.items()}, (1, 2): t.zeros(3)},
     r"\(1, 2\): its key is of type tuple"),
    (lambda st, t: {**st, "head.weight": {"w": st["head.weight"]}},
     "'head.weight' holds a value of type dict"),
    (lambda st, t: {"state_dict": st, "epoch": 3}, "'state_dict' holds a value of type dict"),
    (lambda st, t: {**st, "version": 7}, "'version' holds a value of type int, not a tensor"),
])
def test_malformed_pth_entries_are_named(tmp_path, change, match):
    # regression: an int key raised AttributeError / TypeError from deep inside; non-tensor values were
    # silently dropped (then reported as "missing", or not at all); a sparse tensor gave torch's TypeError
    torch = pytest.importorskip("torch")
    from minigrad.models import RWKV7
    from minigrad.models.rwkv7_io import official_state

    state = {k: torch.from_numpy(v) for k, v in official_state(Trainer("rwkv7").model).items()}
    path = tmp_path / "bad.pth"
    torch.save(change(state, torch), path)
    with pytest.raises(CheckpointError, match=f"bad.pth: state dict entry {match}"):
        RWKV7.from_pretrained(str(path))


def test_sparse_pth_tensor_is_refused(tmp_path):
    # a sparse tensor gave torch's TypeError; torch_format refuses its rebuild function by name
    torch = pytest.importorskip("torch")
    from minigrad.models import RWKV7

    path = tmp_path / "bad.pth"
    torch.save({"head.weight": torch.eye(3).to_sparse()}, path)
    with pytest.raises(CheckpointError, match=r"bad.pth: refused .*_rebuild_sparse_tensor.*no sparse"):
        RWKV7.from_pretrained(str(path))


@pytest.mark.parametrize("name", ["w.pt", "w.bin", "w.pth"])
def test_rwkv7_save_pretrained_writes_what_from_pretrained_reads(tmp_path, name):
    # regression: save_pretrained("w.pt") wrote w.pt.safetensors, while from_pretrained reads .pt as torch
    from minigrad.models import RWKV7

    model = Trainer("rwkv7").model
    path = model.save_pretrained(str(tmp_path / name))
    assert path == str(tmp_path / name) and os.listdir(tmp_path) == [name]
    back = RWKV7.from_pretrained(path)
    assert all(np.array_equal(v.data, back.state_dict()[k].data) for k, v in model.state_dict().items())
    assert model.save_pretrained(str(tmp_path / "w")).endswith("w.safetensors")


def _with_info(path, dest, **change):
    """A copy of checkpoint `path` at `dest` whose metadata fields are replaced by `change`."""
    tensors, meta = io.load_safetensors(path)
    info = {**json.loads(meta["minigrad"]), **change}
    meta = {k: v for k, v in meta.items() if not k.startswith("minigrad.")}
    io.save_safetensors(dest, tensors, {**meta, "minigrad": json.dumps(info)})
    return dest


@pytest.mark.parametrize("change, field", [(dict(step=1.5), "step"), (dict(step=-100), "step"),
                                           (dict(step="abc"), "step"), (dict(step=float("nan")), "step"),
                                           (dict(step=True), "step"), (dict(rng=[1]), "rng"),
                                           (dict(extra=[1]), "extra"), (dict(config=[1]), "config"),
                                           (dict(optimizer_type=5), "optimizer_type"),
                                           (dict(model_type=["gpt"]), "model_type"),
                                           (dict(tokenizer=5), "tokenizer")])
def test_checkpoint_metadata_of_the_wrong_type_is_a_checkpoint_error(saved, tmp_path, change, field):
    # regression: step 1.5 / "abc" / -100, rng or extra lists were passed on to train --resume unchecked
    bad = _with_info(saved[0], str(tmp_path / "ckpt_00000001.safetensors"), **change)
    with pytest.raises(CheckpointError, match=f"metadata field '{field}' must be"):
        io.load_checkpoint(bad)


def test_damaged_tokenizer_record_skips_to_the_previous_checkpoint(saved, tmp_path):
    # regression: tokenizer_from_dict's ValueError / KeyError escaped load_checkpoint(dir)'s fallback
    path, _, good = saved
    _with_info(path, str(tmp_path / "ckpt_00000001.safetensors"))
    for step, tok in ((2, {"type": "zzz"}), (3, {"type": "char"})):
        _with_info(path, str(tmp_path / f"ckpt_0000000{step}.safetensors"), step=step, tokenizer=tok)
        with pytest.raises(CheckpointError, match="saved tokenizer cannot be rebuilt"):
            io.load_checkpoint(str(tmp_path / f"ckpt_0000000{step}.safetensors"))
    with pytest.warns(UserWarning, match="skipping damaged checkpoint"):
        assert io.load_checkpoint(str(tmp_path)).step == 1


def test_deeply_nested_checkpoint_metadata_is_a_checkpoint_error(saved, tmp_path):
    # regression: json.loads raised RecursionError on [[[[...]]]]
    tensors, meta = io.load_safetensors(saved[0])
    bad = str(tmp_path / "deep.safetensors")
    io.save_safetensors(bad, tensors, {"format": io.FORMAT, "minigrad": "[" * 100000 + "]" * 100000})
    with pytest.raises(CheckpointError, match="metadata is corrupted"):
        io.load_checkpoint(bad)
