"""`python -m minigrad train --init-from PATH [--lora R]` and `export`: fine-tuning tiny pretrained models
written to temporary directories (a GPT saved with save_hf next to a BPE tokenizer.json, an official-format
RWKV-7 .safetensors read with the RWKV World tokenizer), full and LoRA, resume bit-for-bit, the base
weights untouched under LoRA, sample / eval / export of the runs, hostile inputs; and the size overrides
of training from scratch."""
import csv
import json
import os
import re
import shutil

import numpy as np
import pytest
from _tiny_pretrained import LINE, write_corpus, write_tiny_gpt

import minigrad as mg
from minigrad import io
from minigrad.__main__ import main
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.nn.lora import LoraLinear, lora_layers
from minigrad.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")



def quiet(*args, **kwargs):
    pass


def run(capsys, *argv):
    """(exit code, stdout, stderr) of `python -m minigrad *argv` run in this process."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, command="train"):
    assert rc == 1 and err.startswith(f"minigrad {command}: error:"), err
    assert err.count("\n") == 1 and "Traceback" not in err, err


def params(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


def logits(model, ids):
    with mg.no_grad():
        return np.asarray(model(np.asarray(ids, dtype=np.int64)).data)


def logged(run_dir, column):
    """The non-empty values of one metrics.csv column, as floats."""
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        return [float(r[column]) for r in csv.DictReader(f) if r[column]]


def val_losses(run_dir):
    return logged(run_dir, "val_loss")


# ---- tiny pretrained models ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), 60)


@pytest.fixture(scope="module")
def gpt_base(tmp_path_factory):
    """A tiny GPT (context 48) with random weights, saved with save_hf next to a BPE tokenizer.json."""
    pytest.importorskip("tokenizers")
    return write_tiny_gpt(tmp_path_factory.mktemp("gpt"))


@pytest.fixture(scope="module")
def rwkv_base(tmp_path_factory):
    """A tiny RWKV-7 with the World vocabulary (65536), weights perturbed (the official init zeroes the
    output projections), as an official .safetensors; read with the `rwkv` package's World tokenizer."""
    pytest.importorskip("rwkv")
    model = RWKV7(RWKV7Config(vocab_size=65536, d_model=32, n_layer=2, head_size=16), seed=0)
    rng = np.random.default_rng(0)
    for p in model.parameters():
        p.data += rng.normal(0.0, 0.1, p.shape).astype(p.data.dtype)
    return model.save_pretrained(str(tmp_path_factory.mktemp("rwkv") / "RWKV-x070-tiny.safetensors"))


BASES = {"gpt": "gpt_base", "rwkv7": "rwkv_base"}


def base_path(request, kind):
    return request.getfixturevalue(BASES[kind])


def load_base(path):
    return GPT.from_hf(path) if os.path.isdir(path) else RWKV7.from_pretrained(path)


def ft(corpus, out, init_from, **kw):
    """A fine-tune's TrainConfig: 12 steps of 2 x 16 tokens, evaluated every 3."""
    base = dict(init_from=init_from, corpus=corpus, steps=12, out=str(out), eval_every=3, eval_batches=2,
                batch_size=2, seq_len=16, sample_tokens=0, progress=False, plot=False, seed=3, threads=1)
    return TrainConfig(**{**base, **kw})


# LoRA on GPT with dropout: its packed projections then run the layers as modules, drawing from
# minigrad's generator, which resume must restore
MODES = {"full": dict(lr=1e-2), "lora": dict(lr=3e-2, lora=4)}
CASES = [("gpt", "full"), ("gpt", "lora"), ("rwkv7", "full"), ("rwkv7", "lora")]


@pytest.fixture(scope="module")
def runs(request, corpus, tmp_path_factory):
    """{(model, mode): (straight result, run dir, resumed result, resumed run dir)}: 12 steps straight,
    and 6 steps + --resume + 6 steps, for every case."""
    out = {}
    for kind, mode in CASES:
        init_from = base_path(request, kind)
        kw = dict(MODES[mode], **({"lora_dropout": 0.1} if (kind, mode) == ("gpt", "lora") else {}))
        tmp = tmp_path_factory.mktemp(f"{kind}-{mode}")
        straight = train(ft(corpus, tmp / "a", init_from, **kw), log=quiet)
        train(ft(corpus, tmp / "b", init_from, stop_at=6, **kw), log=quiet)
        resumed = train(ft(corpus, tmp / "b", init_from, resume=True, **kw), log=quiet)
        out[kind, mode] = (straight, str(tmp / "a"), resumed, str(tmp / "b"))
    return out


# ---- fine-tuning: loss, resume, base weights, checkpoint format ---------------------------------


@pytest.mark.parametrize("kind,mode", CASES)
def test_finetune_lowers_the_loss_and_resumes_bit_for_bit(runs, kind, mode):
    straight, a, resumed, b = runs[kind, mode]
    losses = val_losses(a)
    assert len(losses) == 4 and losses[-1] < losses[0] - 0.05, losses
    assert straight["step"] == resumed["step"] == 12 and straight["train_loss"] == resumed["train_loss"]
    pa, pb = params(straight["model"]), params(resumed["model"])
    assert pa.keys() == pb.keys()
    for k in pa:
        assert np.array_equal(pa[k], pb[k]), k
    assert logged(a, "train_loss") == logged(b, "train_loss") and val_losses(a) == val_losses(b)


@pytest.mark.parametrize("kind,mode", CASES)
def test_checkpoints_record_where_the_run_started(request, runs, kind, mode):
    straight, a, _, _ = runs[kind, mode]
    ckpt = io.load_checkpoint(a)
    path = base_path(request, kind)
    assert ckpt.extra["init_from"] == {"path": os.path.abspath(path),
                                       "kind": "hf" if kind == "gpt" else "rwkv7"}
    assert ckpt.extra["train"]["init_from"] == os.path.abspath(path) and ckpt.model_type == kind
    assert ckpt.extra["train"]["model"] is None and ckpt.extra["train"]["seq_len"] == 16
    assert ckpt.extra["train"]["weight_decay"] == 0.0 and ckpt.tokenizer is not None
    if mode == "full":
        assert ckpt.lora is None and len(io.list_checkpoints(a)) == 1        # --keep 1 by default
        return
    # a LoRA checkpoint: the adapters alone, their config, and the base model named with a fingerprint
    assert len(io.list_checkpoints(a)) == 3
    assert ckpt.model_state and all(".lora_A." in k or ".lora_B." in k for k in ckpt.model_state)
    assert ckpt.lora["r"] == 4 and ckpt.lora["lora_alpha"] == 8 and ckpt.lora["base"]["path"] == \
        os.path.abspath(path)
    n_linear = 7 if kind == "gpt" else 6        # all-linear: every projection of a block
    assert len(ckpt.lora["modules"]) == 2 * n_linear
    assert ckpt.lora["base"]["fingerprint"] == io.weights_fingerprint(load_base(path))


@pytest.mark.parametrize("kind", ["gpt", "rwkv7"])
def test_lora_leaves_the_base_weights_bit_identical(request, runs, kind):
    straight, a, _, _ = runs[kind, "lora"]
    model, base = straight["model"], params(load_base(base_path(request, kind)))
    trained = params(model)
    for name, value in base.items():
        assert np.array_equal(trained[name], value), name
    assert {n for n in trained if n not in base} == {n for n in trained if ".lora_" in n}
    assert all(not np.array_equal(trained[n], 0) for n in trained if ".lora_B." in n)   # B has moved
    # the checkpoint rebuilds this very model, adapters applied: the same outputs
    rebuilt = io.load_checkpoint(a).build_model()
    assert isinstance(dict(rebuilt.named_modules())[lora_layers(model)[0][0]], LoraLinear)
    ids = np.arange(24).reshape(2, 12) % 200
    np.testing.assert_array_equal(logits(rebuilt.eval(), ids), logits(model.eval(), ids))


@pytest.mark.parametrize("kind,mode", CASES)
def test_sample_and_eval_on_a_finetuned_run(runs, capsys, kind, mode):
    _, a, _, _ = runs[kind, mode]
    argv = ["sample", "--ckpt", a, "--prompt", "the king", "--tokens", "8", "--seed", "1"]
    rc, out, err = run(capsys, *argv)
    assert rc == 0 and out.startswith("the king"), err
    assert run(capsys, *argv)[1] == out         # seeded
    rc, out, err = run(capsys, "eval", "--ckpt", a, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["seq_len"] == 16 and res["batch_size"] == 2 and "val split" in res["data"]
    assert res["loss"] == pytest.approx(val_losses(a)[-1], abs=0.5)     # all windows vs 2 batches


def test_the_closing_sample_never_samples_ids_without_text(corpus, tmp_path):
    """A model whose vocabulary is padded beyond its tokenizer's (RWKV-7: 65536 against 65530), here with
    uniform logits (final norm 0): the closing sample must not pick the ids that decode to nothing."""
    pytest.importorskip("tokenizers")
    from minigrad.data import BPETokenizer

    tok = BPETokenizer.train(LINE * 20, vocab_size=300)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size + 2000, d_model=32, n_layer=1, n_head=2, ffn_hidden=64,
                          max_seq_len=48))
    model.norm.weight.data[...] = 0
    model.save_hf(str(tmp_path / "padded"), tokenizer=tok)
    res = train(ft(corpus, tmp_path / "run", str(tmp_path / "padded"), steps=1, sample_tokens=20,
                   prompt="the"), log=quiet)
    assert res["sample"].startswith("the") and len(tok.encode(res["sample"])) >= 15


# ---- export ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_export_hf_gives_the_runs_logits(runs, tmp_path, capsys, mode):
    straight, a, _, _ = runs["gpt", mode]
    out = tmp_path / "hf"
    rc, text, err = run(capsys, "export", "--ckpt", a, "--hf", out,
                        *(["--adapter", tmp_path / "adapter"] if mode == "lora" else []))
    assert rc == 0 and "tokenizer.json" in text, err
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(out))
    exported, model = GPT.from_hf(str(out)), straight["model"].eval()
    ids = np.arange(30).reshape(2, 15) % 250
    np.testing.assert_allclose(logits(exported, ids), logits(model, ids), atol=1e-5, rtol=0)
    assert exported.tokenizer.encode(LINE).tolist() == io.load_checkpoint(a).tokenizer.encode(LINE).tolist()
    if mode == "lora":      # the PEFT directory on the base model gives the run's model again
        from minigrad.nn.lora import load_adapter
        base = GPT.from_hf(io.load_checkpoint(a).lora["base"]["path"])
        load_adapter(base, str(tmp_path / "adapter"))
        np.testing.assert_allclose(logits(base.eval(), ids), logits(model, ids), atol=1e-5, rtol=0)


def test_export_hf_loads_in_transformers(runs, tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("USE_HUB_KERNELS", "0")
    straight, a, _, _ = runs["gpt", "lora"]
    assert run(capsys, "export", "--ckpt", a, "--hf", tmp_path)[0] == 0
    ref = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path)).eval()
    ids = np.arange(30).reshape(2, 15) % 250
    with torch.no_grad():
        theirs = ref(torch.from_numpy(ids.astype(np.int64))).logits.float().numpy()
    np.testing.assert_allclose(theirs, logits(straight["model"].eval(), ids), atol=1e-4, rtol=0)


def test_export_rwkv7_official_files(runs, tmp_path, capsys):
    straight, a, _, _ = runs["rwkv7", "lora"]
    pth, st = tmp_path / "ft.pth", tmp_path / "ft.safetensors"
    rc, text, err = run(capsys, "export", "--ckpt", a, "--pth", pth, "--safetensors", st)
    assert rc == 0 and str(pth) in text and str(st) in text, err
    ids = np.arange(20).reshape(2, 10) * 97
    want = logits(straight["model"].eval(), ids)
    for path in (pth, st):
        np.testing.assert_allclose(logits(RWKV7.from_pretrained(str(path)), ids), want, atol=1e-5, rtol=0)


def test_export_errors_are_one_line(runs, tmp_path, capsys):
    gpt_full, rwkv_lora = runs["gpt", "full"][1], runs["rwkv7", "lora"][1]
    for argv in (["--ckpt", gpt_full],                                          # nothing to write
                 ["--ckpt", gpt_full, "--adapter", tmp_path / "a"],            # not a LoRA run
                 ["--ckpt", gpt_full, "--pth", tmp_path / "x.pth"],            # not RWKV-7
                 ["--ckpt", rwkv_lora, "--hf", tmp_path / "hf"],               # not a GPT
                 ["--ckpt", rwkv_lora, "--pth", tmp_path / "x.txt"],           # suffix
                 ["--ckpt", tmp_path / "missing", "--hf", tmp_path / "hf"]):
        assert_one_line_error(*run(capsys, "export", *argv)[::2], command="export")
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "hf")


# ---- hostile inputs -------------------------------------------------------------------------------


def test_finetune_settings_errors_are_one_line(gpt_base, rwkv_base, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    common = ["train", "--corpus", corpus, "--steps", "2", "--out", out, "--no-progress", "--no-plot"]
    for extra, match in ((["--init-from", tmp_path / "nowhere"], "--init-from .* does not exist"),
                         (["--init-from", corpus], "not a model file"),
                         (["--init-from", gpt_base, "--lora", "-1"], "lora must be an int >= 0"),
                         (["--lora", "4"], "--lora needs --init-from"),
                         (["--lora-alpha", "4"], "--lora-alpha is a setting of LoRA adapters"),
                         (["--init-from", gpt_base, "--seq-len", "49"], "seq_len 49 exceeds the model's "
                                                                       "max_seq_len 48"),
                         (["--init-from", gpt_base, "--model", "gpt"], "--model cannot be combined"),
                         (["--init-from", gpt_base, "--config", "tiny"], "--config cannot be combined"),
                         (["--init-from", gpt_base, "--tokenizer", "byte"], "--tokenizer cannot be combined"),
                         (["--init-from", gpt_base, "--bpe-vocab", "99"], "--bpe-vocab cannot be combined"),
                         (["--init-from", gpt_base, "--lora", "2", "--lora-targets", "nope"],
                          "matches no Linear layer"),
                         (["--init-from", gpt_base, "--lora", "2", "--lora-targets", "q_proj,"],
                          "comma-separated"),
                         (["--init-from", gpt_base, "--lora", "2", "--lora-dropout", "1"], "lora_dropout"),
                         (["--init-from", rwkv_base, "--lora", "2", "--lora-dropout", "0.1"],
                          "--lora-dropout must be 0 for RWKV-7")):
        rc, _, err = run(capsys, *common, *extra)
        assert_one_line_error(rc, err)
        assert re.search(match, err), (extra, err)
    assert not io.list_checkpoints(str(out))


def test_a_moved_or_changed_base_is_a_clear_error(gpt_base, corpus, tmp_path, capsys):
    base = tmp_path / "base"
    shutil.copytree(gpt_base, base)
    out = tmp_path / "run"
    train(ft(corpus, out, str(base), steps=2, lora=2), log=quiet)
    assert os.path.getsize(io.latest_checkpoint(str(out))) < 100_000     # no copy of the base
    capsys.readouterr()
    shutil.move(base, tmp_path / "elsewhere")
    for argv in (["sample", "--ckpt", out, "--tokens", "2"], ["eval", "--ckpt", out],
                 ["export", "--ckpt", out, "--hf", tmp_path / "hf"],
                 ["train", "--out", out, "--resume", "--steps", "4"]):
        rc, _, err = run(capsys, *argv)
        assert_one_line_error(rc, err, argv[0])
        assert "holds only LoRA adapters" in err and "no longer there" in err, err
    shutil.move(tmp_path / "elsewhere", base)
    assert run(capsys, "sample", "--ckpt", out, "--tokens", "2")[0] == 0
    changed = GPT.from_hf(str(base))
    changed.norm.weight.data[0] += 1e-3
    changed.save_hf(str(base))
    rc, _, err = run(capsys, "sample", "--ckpt", out, "--tokens", "2")
    assert_one_line_error(rc, err, "sample")
    assert "has changed since the adapters were trained" in err
    # --resume of another run, or with another --init-from / rank, is refused
    rc, _, err = run(capsys, "train", "--out", out, "--resume", "--steps", "4", "--init-from", gpt_base)
    assert_one_line_error(rc, err)
    assert "which started from --init-from" in err
    with pytest.raises(io.CheckpointError, match="--lora 2, not --lora 3"):
        train(ft(corpus, out, str(base), steps=4, lora=3, resume=True), log=quiet)


@pytest.mark.parametrize("field,value,match", [
    ("lora", 5, "field 'lora' must be an object"), ("lora.modules", "q_proj", "field 'lora' must be"),
    ("lora.base", {"path": 1}, "field 'lora' must be"), ("lora.r", 0, "r must be an int >= 1"),
    ("lora.modules", ["layers.0.nope"], "not the adapters its LoRA record names .unexpected layers.0.mlp"),
    ("lora.r", 3, "shape mismatch")])
def test_a_damaged_lora_record_is_a_clear_error(runs, tmp_path, capsys, field, value, match):
    shutil.copytree(runs["gpt", "lora"][1], tmp_path / "run")
    path = io.latest_checkpoint(str(tmp_path / "run"))
    tensors, meta = io.load_safetensors(path)
    info = json.loads(meta["minigrad"])
    *parents, last = field.split(".")
    target = info
    for key in parents:
        target = target[key]
    target[last] = value
    io.save_safetensors(path, tensors, {**meta, "minigrad": json.dumps(info)})
    rc, _, err = run(capsys, "sample", "--ckpt", path, "--tokens", "2")
    assert_one_line_error(rc, err, "sample")
    assert re.search(match, err), err


def test_a_resumed_full_finetune_no_longer_needs_its_base(gpt_base, corpus, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(gpt_base, base)
    train(ft(corpus, tmp_path / "run", str(base), steps=2), log=quiet)
    shutil.rmtree(base)
    assert train(ft(corpus, tmp_path / "run", str(base), steps=3, resume=True), log=quiet)["step"] == 3


def test_finetune_from_a_minigrad_lora_run_starts_from_its_merged_weights(runs, corpus, tmp_path):
    straight, a, _, _ = runs["gpt", "lora"]
    res = train(ft(corpus, tmp_path / "again", a, steps=2, lora=2, lr=1e-3), log=quiet)
    ckpt = io.load_checkpoint(str(tmp_path / "again"))
    assert ckpt.extra["init_from"] == {"path": io.latest_checkpoint(a), "kind": "minigrad"}
    merged = io.merged_model(io.load_checkpoint(a).build_model())
    assert ckpt.lora["base"]["fingerprint"] == io.weights_fingerprint(merged)
    assert ckpt.build_model() is not None and res["step"] == 2


def test_lora_checkpoints_without_a_base_reference_hold_the_base(gpt_base, tmp_path):
    """io.save_checkpoint of a LoRA model without `base`: the whole model, rebuilt with its adapters."""
    model = GPT.from_hf(gpt_base)
    mg.nn.apply_lora(model, r=2, lora_alpha=4, target_modules=["q_proj", "down_proj"])
    for name, p in model.named_parameters():
        if ".lora_B." in name:
            p.data[...] = np.random.default_rng(0).normal(size=p.shape)
    io.save_checkpoint(str(tmp_path), 1, model)
    ckpt = io.load_checkpoint(str(tmp_path))
    assert ckpt.lora["base"] is None and "embed_tokens.weight" in ckpt.model_state
    rebuilt = ckpt.build_model()
    assert sorted(n for n, _ in lora_layers(rebuilt)) == sorted(n for n, _ in lora_layers(model))
    ids = np.arange(10)[None] % 200
    np.testing.assert_array_equal(logits(rebuilt, ids), logits(model, ids))
    with pytest.raises(ValueError, match="base names the base model of LoRA adapters"):
        io.save_checkpoint(str(tmp_path), 2, GPT.from_hf(gpt_base), base={"path": "x", "kind": "hf",
                                                                          "fingerprint": "0"})


# ---- from scratch: size overrides ---------------------------------------------------------------


def test_size_overrides_are_recorded_and_resumed(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    common = ["--corpus", corpus, "--out", out, "--no-progress", "--no-plot", "--sample-tokens", "0",
              "--eval-batches", "1", "--threads", "1"]
    rc, _, err = run(capsys, "train", "--config", "tiny", "--d-model", 48, "--n-layer", 3, "--n-head", 4,
                     "--ffn-hidden", 96, "--steps", 2, *common)
    assert rc == 0, err
    ckpt = io.load_checkpoint(str(out))
    assert {k: ckpt.config[k] for k in ("d_model", "n_layer", "n_head", "ffn_hidden")} == \
        dict(d_model=48, n_layer=3, n_head=4, ffn_hidden=96)
    assert ckpt.extra["train"]["d_model"] == 48
    assert run(capsys, "train", "--out", out, "--resume", "--steps", 3, "--no-progress")[0] == 0
    assert io.load_checkpoint(str(out)).step == 3
    assert run(capsys, "sample", "--ckpt", out, "--tokens", 5)[0] == 0
    rc, _, err = run(capsys, "train", "--out", out, "--resume", "--steps", 4, "--d-model", 64)
    assert_one_line_error(rc, err)
    assert "holds a run with --d-model 48, not --d-model 64" in err
    rc, _, err = run(capsys, "train", "--model", "rwkv7", "--config", "tiny", "--head-size", 8, "--d-model",
                     40, "--steps", 1, *common[:2], "--out", tmp_path / "rwkv", *common[4:])
    assert rc == 0, err
    assert io.load_checkpoint(str(tmp_path / "rwkv")).config["head_size"] == 8


@pytest.mark.parametrize("argv,match", [
    (["--d-model", "30", "--n-head", "4"], "--d-model 30 must be a multiple of --n-head 4"),
    (["--d-model", "36", "--n-head", "4"], "must be even"),
    (["--d-model", "33"], r"--d-model 33 must be a multiple of --n-head 2 \(the tiny preset's\)"),
    (["--n-layer", "0"], "n_layer must be an int >= 1"),
    (["--head-size", "8"], "--head-size is not a setting of gpt"),
    (["--model", "rwkv7", "--n-head", "2"], "--n-head is not a setting of rwkv7"),
    (["--model", "rwkv7", "--d-model", "40"], "--d-model 40 must be a multiple of --head-size 16")])
def test_bad_size_overrides_are_one_line(corpus, tmp_path, capsys, argv, match):
    rc, _, err = run(capsys, "train", "--config", "tiny", "--corpus", corpus, "--steps", "1", "--out",
                     tmp_path, *argv)
    assert_one_line_error(rc, err)
    assert re.search(match, err), err
    assert os.listdir(tmp_path) == []
