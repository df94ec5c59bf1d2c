"""Regression tests of the session-19 audit (pretrained loading, generate controls, fine-tuning with
LoRA, chat): each test names the bug it pins down. Tiny models written to temporary directories; fast."""
import json
import os
import shutil

import numpy as np
import pytest
from _tiny_pretrained import write_corpus, write_tiny_gpt

from minigrad import io
from minigrad.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")


def quiet(*args, **kwargs):
    pass


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), 40)


@pytest.fixture(scope="module")
def gpt_base(tmp_path_factory):
    """A tiny GPT (context 48) with random weights, saved with save_hf next to a BPE tokenizer.json."""
    pytest.importorskip("tokenizers")
    return write_tiny_gpt(tmp_path_factory.mktemp("gpt"))


def finetune(corpus, out, init_from, **kw):
    """A short fine-tune's TrainConfig (6 steps of 2 x 16 tokens)."""
    base = dict(init_from=init_from, corpus=corpus, steps=6, out=str(out), eval_every=3, eval_batches=1,
                batch_size=2, seq_len=16, sample_tokens=0, progress=False, plot=False, seed=3, threads=1)
    return TrainConfig(**{**base, **kw})


# ---- LoRA checkpoints: the base model they name ------------------------------------------------------


def test_lora_base_whose_config_changed_is_refused(gpt_base, corpus, tmp_path):
    """Bug: a LoRA checkpoint reloads its base from disk and checked only the fingerprint of its weights;
    a base config.json edited afterwards (rope_theta, rms_norm_eps: the same weights, other maths) was
    used silently, so sample / eval / --resume computed another model. Now a CheckpointError names the
    changed fields."""
    base = str(tmp_path / "base")
    shutil.copytree(gpt_base, base)
    train(finetune(corpus, tmp_path / "run", base, lora=4, lr=3e-2), log=quiet)
    ckpt = io.load_checkpoint(str(tmp_path / "run"))
    ckpt.build_model()                                      # the untouched base loads
    config_path = os.path.join(base, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["rope_theta"] = config["rope_theta"] / 10
    with open(config_path, "w") as f:
        json.dump(config, f)
    with pytest.raises(io.CheckpointError, match="has changed since the adapters were trained.*rope_base"):
        io.load_checkpoint(str(tmp_path / "run")).build_model()


def test_export_refuses_to_overwrite_the_lora_base(gpt_base, corpus, tmp_path, capsys):
    """Bug: `export --ckpt LORA_RUN --hf DIR` with DIR the run's --init-from directory wrote the merged
    weights over the base model: its fingerprint changed and every checkpoint of the run (adapters
    only) became unusable, the original base lost. Now a one-line error, and nothing is written."""
    from minigrad.__main__ import main

    base = str(tmp_path / "base")
    shutil.copytree(gpt_base, base)
    run_dir = str(tmp_path / "run")
    train(finetune(corpus, run_dir, base, lora=4, lr=3e-2), log=quiet)
    before = {n: open(os.path.join(base, n), "rb").read() for n in os.listdir(base)}
    capsys.readouterr()
    rc = main(["export", "--ckpt", run_dir, "--hf", base + os.sep])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("minigrad export: error: --hf") and "base model" in err, err
    assert {n: open(os.path.join(base, n), "rb").read() for n in os.listdir(base)} == before
    io.load_checkpoint(run_dir).build_model()               # the run still loads
    assert main(["export", "--ckpt", run_dir, "--hf", str(tmp_path / "merged")]) == 0


# ---- generate: huge max_new_tokens -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_rwkv():
    from minigrad.models import RWKV7, RWKV7Config

    model = RWKV7(RWKV7Config(vocab_size=64, d_model=32, n_layer=2, head_size=16), seed=0)
    rng = np.random.default_rng(0)
    for p in model.parameters():
        p.data += rng.normal(0.0, 0.1, p.shape).astype(p.data.dtype)
    return model


def test_recurrent_generate_takes_a_huge_max_new_tokens(tiny_rwkv):
    """Bug: the Sampler allocated (B, T + max_new_tokens) ids up front, so RWKV-7 (no context limit)
    with a huge max_new_tokens -- `sample --ckpt RWKV.pth --tokens 100000000000` -- died with a
    MemoryError traceback before the first token. Now the buffer grows as tokens come."""
    prompt = np.array([[1, 2, 3]])
    first = int(tiny_rwkv.generate(prompt, 1, temperature=0).numpy()[0, -1])
    out = tiny_rwkv.generate(prompt, 10 ** 11, temperature=0, eos_token_id=first).numpy()
    np.testing.assert_array_equal(out, [[1, 2, 3, first]])


def test_growing_buffer_gives_the_same_tokens(tiny_rwkv, monkeypatch):
    """The grown buffer (a first allocation of 2 new ids, doubled as needed) gives exactly the ids,
    early stop and padding of one allocation."""
    from minigrad.models import sampling

    prompt, mask = np.array([[0, 5, 6], [1, 2, 3]]), np.array([[0, 1, 1], [1, 1, 1]])
    kw = dict(temperature=0.9, seed=4, attention_mask=mask, repetition_penalty=1.2)
    want = tiny_rwkv.generate(prompt, 21, **kw).numpy()
    eos = int(want[0, 8])
    want_eos = tiny_rwkv.generate(prompt, 21, eos_token_id=eos, pad_token_id=7, **kw).numpy()
    monkeypatch.setattr(sampling.Sampler, "CHUNK", 2)
    np.testing.assert_array_equal(tiny_rwkv.generate(prompt, 21, **kw).numpy(), want)
    got_eos = tiny_rwkv.generate(prompt, 21, eos_token_id=eos, pad_token_id=7, **kw).numpy()
    np.testing.assert_array_equal(got_eos, want_eos)
    assert want.shape == (2, 24) and (want_eos[0, 9:] == 7).all()      # row 0 stopped at eos, then pads


@pytest.mark.parametrize("cycle", [1, 2])
def test_a_lora_record_leading_back_to_itself_is_a_clear_error(tmp_path, capsys, cycle):
    """A crafted adapters-only checkpoint whose base is itself (or two naming each other) recursed
    until a RecursionError traceback; now a one-line CheckpointError."""
    from minigrad.__main__ import main
    from minigrad.models import GPT, GPTConfig
    from minigrad.nn import LoraConfig, apply_lora

    model = GPT(GPTConfig(vocab_size=16, d_model=8, n_layer=1, n_head=2, ffn_hidden=16, max_seq_len=8))
    apply_lora(model, LoraConfig(r=2, target_modules=("q_proj",)))
    runs = [tmp_path / f"run{i}" for i in range(cycle)]
    files = [io.checkpoint_path(str(r), 1) for r in runs]
    for i, run in enumerate(runs):    # run i's base is run i+1's checkpoint, the last's the first's
        base = {"path": files[(i + 1) % cycle], "kind": "minigrad", "fingerprint": "0" * 32}
        io.save_checkpoint(str(run), 1, model, base=base)
    with pytest.raises(io.CheckpointError, match="leads back to a checkpoint that needs it"):
        io.load_checkpoint(files[0]).build_model()
    capsys.readouterr()
    assert main(["info", "--ckpt", files[0]]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leads back" in err
