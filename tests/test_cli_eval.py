"""`python -m minigrad eval` and minigrad.evaluate: tiny models on tiny texts."""
import csv
import json
import math
import os
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import io
from minigrad.__main__ import main
from minigrad.data import ByteTokenizer, CharTokenizer, eval_batches
from minigrad.evaluate import checkpoint_split, evaluate_text, window_batches
from minigrad.models import GPT, GPTConfig
from minigrad.train import build_model, evaluate

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "été: the king doth love — sweet night, ünd the heart ✓ of my art.\n" * 3


def verse(n_bytes, seed=0):
    """ASCII verse of exactly n_bytes bytes (bytes = byte tokens)."""
    rng = np.random.default_rng(seed)
    words = ["thou", "art", "the", "king", "of", "my", "heart", "and", "love", "doth", "sweet", "night"]
    lines = [" ".join(rng.choice(words, size=6)).capitalize() + "." for _ in range(n_bytes // 20 + 1)]
    return "\n".join(lines)[:n_bytes]


def hand_nats(model, ids, seq_len):
    """Sum of -ln p over the windows ids[s:s+T] -> ids[s+1:s+T+1], one forward per window."""
    total = 0.0
    with mg.no_grad():
        for s in range(0, len(ids) - 1, seq_len):
            y = np.asarray(ids[s + 1:s + seq_len + 1], dtype=np.int64)
            x = np.asarray(ids[s:s + len(y)], dtype=np.int64)
            logits = model(mg.from_numpy(x[None]))
            loss = mg.F.cross_entropy(logits.reshape(-1, logits.shape[-1]), mg.from_numpy(y))
            total += loss.item() * len(y)
    return total


def tiny_model(kind, vocab, seed):
    """A tiny model whose every weight is perturbed: RWKV-7's official init zeroes output projections,
    so a fresh one ignores its context (and the state) altogether."""
    model = build_model(kind, "tiny", vocab, 16, seed=seed)
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data += rng.normal(0.0, 0.2, p.shape).astype(p.data.dtype)
    return model


def small_gpt(vocab, max_seq_len=16):
    mg.manual_seed(0)
    return GPT(GPTConfig(vocab_size=vocab, d_model=32, n_layer=2, n_head=2, ffn_hidden=64,
                         max_seq_len=max_seq_len))


# ---- evaluate_text ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gpt", "rwkv7"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_numbers_equal_a_hand_computation(kind, batch_size):
    tok = CharTokenizer.from_text(TEXT)
    model = tiny_model(kind, tok.vocab_size, seed=1)
    ids = tok.encode(TEXT)
    res = evaluate_text(model, tok, TEXT, seq_len=16, batch_size=batch_size)
    nats = hand_nats(model, ids, 16)
    assert res["tokens"] == len(ids) - 1 and (len(ids) - 1) % 16 != 0   # a last, partial window
    assert res["total_nats"] == pytest.approx(nats, rel=1e-5)
    assert res["loss"] == pytest.approx(nats / (len(ids) - 1), rel=1e-5)
    assert model.training          # the mode is given back


def test_windows_predict_every_token_but_the_first_once():
    ids = np.arange(23)
    batches = list(window_batches(ids, 5, 2))
    assert [x.shape for x, _ in batches] == [(2, 5), (2, 5), (1, 2)]
    assert np.array_equal(np.concatenate([y.ravel() for _, y in batches]), ids[1:])
    assert np.array_equal(np.concatenate([x.ravel() for x, _ in batches]), ids[:-1])


def test_bits_per_byte_arithmetic():
    tok = CharTokenizer.from_text(TEXT)
    res = evaluate_text(small_gpt(tok.vocab_size), tok, TEXT, seq_len=16, batch_size=4)
    n_bytes = len(TEXT.encode()) - len(TEXT[0].encode())      # the first character (2 bytes) is not predicted
    assert res["bytes"] == n_bytes and res["tokens"] == len(TEXT) - 1
    assert res["bits_per_byte"] == pytest.approx(res["total_nats"] / math.log(2) / n_bytes, rel=1e-12)
    assert res["bits_per_token"] == pytest.approx(res["loss"] / math.log(2), rel=1e-12)
    assert res["perplexity"] == pytest.approx(math.exp(res["loss"]), rel=1e-12)
    assert res["bits_per_byte"] < res["bits_per_token"]       # more bytes than characters

    byte = evaluate_text(small_gpt(256), ByteTokenizer(), TEXT, seq_len=16, batch_size=4)
    assert byte["tokens"] == byte["bytes"] == len(TEXT.encode()) - 1
    assert byte["bits_per_byte"] == pytest.approx(byte["bits_per_token"], rel=1e-12)


def test_bits_per_byte_of_bpe():
    pytest.importorskip("tokenizers")
    from minigrad.data import BPETokenizer
    tok = BPETokenizer.train(TEXT * 4, vocab_size=280)
    ids = tok.encode(TEXT)
    res = evaluate_text(small_gpt(tok.vocab_size), tok, ids, seq_len=16, batch_size=4)
    assert res["tokens"] == len(ids) - 1 < res["bytes"]
    assert res["bytes"] == len(TEXT.encode()) - len(tok.decode(ids[:1]).encode())


def test_stateful_rwkv7_equals_one_forward_over_the_whole_sequence():
    tok = CharTokenizer.from_text(TEXT)
    model = tiny_model("rwkv7", tok.vocab_size, seed=2)
    ids = tok.encode(TEXT)
    res = evaluate_text(model, tok, ids, seq_len=16, batch_size=8, stateful=True)
    whole = hand_nats(model, ids, len(ids))                        # one window: the whole text
    assert res["total_nats"] == pytest.approx(whole, rel=1e-5)
    assert res["batch_size"] == 1 and res["stateful"]
    windowed = evaluate_text(model, tok, ids, seq_len=16, batch_size=8)["total_nats"]
    assert abs(windowed - whole) > 1e-4 * whole                    # the state carried matters
    with pytest.raises(ValueError, match="stateful.*GPT has none"):
        evaluate_text(small_gpt(tok.vocab_size), tok, ids, seq_len=16, stateful=True)


def test_python_errors():
    tok = ByteTokenizer()
    gpt = small_gpt(256, max_seq_len=16)
    with pytest.raises(ValueError, match="seq_len 17 exceeds the model's max_seq_len 16"):
        evaluate_text(gpt, tok, TEXT, seq_len=17)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        evaluate_text(gpt, tok, TEXT, seq_len=8, batch_size=0)
    with pytest.raises(ValueError, match="has 1 token"):
        evaluate_text(gpt, tok, "a", seq_len=8)
    gpt.embed_tokens.weight.data[3] = np.nan
    with pytest.raises(ValueError, match="loss is nan .*embed_tokens.weight.*diverged"):
        evaluate_text(gpt, tok, TEXT, seq_len=8)


# ---- the command line on tiny `train` runs ---------------------------------------------------------


def train_run(tmp, name, model, n_bytes):
    """A tiny `minigrad train` run (12 steps, val loss logged at 6 and 12) on n_bytes of verse."""
    corpus = tmp / f"{name}.txt"
    corpus.write_text(verse(n_bytes))
    out = str(tmp / name)
    assert main(["train", "--model", model, "--config", "tiny", "--corpus", str(corpus), "--steps", "12",
                 "--eval-every", "6", "--eval-batches", "2", "--out", out, "--sample-tokens", "0",
                 "--threads", "1", "--no-progress", "--no-plot", "--seed", "5"]) == 0
    with open(os.path.join(out, "metrics.csv")) as f:
        logged = [float(r["val_loss"]) for r in csv.DictReader(f) if int(r["step"]) == 12][0]
    return out, logged


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    # 2570 bytes: val_fraction 0.1 holds out 257 tokens = 8 windows of 32 + 1, exactly the
    # 2 batches x 4 windows `train` evaluates: the full split is the logged batches
    exact = train_run(tmp, "exact", "gpt", 2570)
    sampled = train_run(tmp, "sampled", "rwkv7", 6000)       # 600 val tokens, 256 of them in batches
    return {"exact": exact, "sampled": sampled, "tmp": tmp}


def run_eval(capsys, *argv):
    rc = main(["eval", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_reproduces_the_logged_val_loss(runs, capsys):
    out, logged = runs["exact"]
    rc, text, _ = run_eval(capsys, "--ckpt", out, "--json")
    assert rc == 0
    res = json.loads(text)
    assert res["step"] == 12 and res["seq_len"] == 32 and res["batch_size"] == 4
    assert res["tokens"] == 256 and res["data"].startswith("val split (val_fraction 0.1)")
    assert res["loss"] == pytest.approx(logged, rel=1e-6, abs=1e-6)


def test_a_relative_corpus_path_is_recorded_absolute(runs, capsys, monkeypatch):
    """A run trained on `--corpus verse.txt` (relative) is evaluated from another directory."""
    tmp = runs["tmp"]
    (tmp / "rel.txt").write_text(verse(2570))
    monkeypatch.chdir(tmp)
    assert main(["train", "--model", "gpt", "--config", "tiny", "--corpus", "rel.txt", "--steps", "2",
                 "--eval-every", "2", "--out", "rel", "--sample-tokens", "0", "--threads", "1",
                 "--no-progress", "--no-plot"]) == 0
    capsys.readouterr()
    assert io.load_checkpoint(str(tmp / "rel")).extra["train"]["corpus"] == str(tmp / "rel.txt")
    monkeypatch.chdir(tmp.parent)
    rc, text, err = run_eval(capsys, "--ckpt", str(tmp / "rel"), "--json")
    assert rc == 0, err
    assert json.loads(text)["tokens"] == 256


def test_the_logged_val_loss_is_a_sample_of_the_split(runs, capsys):
    """Over the same eval_batches train drew the logged loss is reproduced; the full split differs by
    the sampling (256 of 599 tokens)."""
    out, logged = runs["sampled"]
    ckpt = io.load_checkpoint(out)
    cfg = ckpt.extra["train"]
    val_ids, _ = checkpoint_split(ckpt)
    assert len(val_ids) == 600
    batches = eval_batches(val_ids, cfg["batch_size"], cfg["seq_len"], cfg["eval_batches"])
    assert evaluate(ckpt.build_model(), batches) == pytest.approx(logged, rel=1e-6, abs=1e-6)
    rc, text, _ = run_eval(capsys, "--ckpt", out, "--json")
    res = json.loads(text)
    assert rc == 0 and res["tokens"] == 599
    assert res["loss"] == pytest.approx(logged, rel=0.1) and res["loss"] != pytest.approx(logged, rel=1e-6)
    rc, text, _ = run_eval(capsys, "--ckpt", out, "--json", "--stateful")
    assert rc == 0 and json.loads(text)["tokens"] == 599 and json.loads(text)["stateful"]


def test_cli_text_output_data_split_and_max_tokens(runs, capsys):
    out, _ = runs["exact"]
    rc, text, _ = run_eval(capsys, "--ckpt", out)
    assert rc == 0
    keys = [line.split(":")[0] for line in text.splitlines()]
    assert keys == ["checkpoint", "data", "windows", "tokens", "loss", "perplexity", "bits/token",
                    "bits/byte", "speed"]
    assert "tokens: 256 (256 bytes)" in text and "nats/token" in text and "tokens/s" in text

    other = runs["tmp"] / "other.txt"
    other.write_text("Thou art the night of my love.\n" * 5)
    rc, text, _ = run_eval(capsys, "--ckpt", out, "--data", str(other), "--json", "--seq-len", "16",
                           "--batch-size", "2")
    res = json.loads(text)
    assert rc == 0 and res["data"].startswith("all of") and res["tokens"] == len(other.read_text()) - 1
    assert res["seq_len"] == 16 and res["batch_size"] == 2

    rc, text, _ = run_eval(capsys, "--ckpt", out, "--split", "train", "--max-tokens", "100", "--json")
    res = json.loads(text)
    assert rc == 0 and res["tokens"] == 100 and res["data"].startswith("train split")


def save(tmp, name, model, **kw):
    """A checkpoint written by hand (not by `train`), in the run directory tmp/name."""
    return io.save_checkpoint(str(tmp / name), 1, model, model_type="gpt", **kw)


ERRORS = {  # name -> (argv after "eval" built from a dict of paths, the message)
    "missing": (lambda p: ["--ckpt", p["tmp"] + "/nope"], "no checkpoint at"),
    "empty dir": (lambda p: ["--ckpt", p["empty_dir"]], r"no checkpoints \(ckpt_\*.safetensors\)"),
    "corrupt file": (lambda p: ["--ckpt", p["corrupt"]], "truncated or corrupted"),
    "corrupt dir": (lambda p: ["--ckpt", os.path.dirname(p["corrupt"])], "no loadable checkpoint"),
    "no tokenizer": (lambda p: ["--ckpt", p["no_tok"]], "has no tokenizer"),
    "no corpus": (lambda p: ["--ckpt", p["no_corpus"]], "records no training corpus.*--data"),
    "corpus gone": (lambda p: ["--ckpt", p["gone"]], "no such file.*trained on it.*--data"),
    "empty val": (lambda p: ["--ckpt", p["no_val"]], "val split .* is empty .*held out no validation"),
    "empty data": (lambda p: ["--ckpt", p["run"], "--data", p["empty"]], "is empty"),
    "1 token": (lambda p: ["--ckpt", p["run"], "--data", p["one"]], "has 1 token"),
    "seq-len": (lambda p: ["--ckpt", p["run"], "--seq-len", "1025"], "1025 exceeds .*max_seq_len 1024"),
    "seq-len 0": (lambda p: ["--ckpt", p["run"], "--seq-len", "0"], "seq_len must be an int >= 1"),
    "batch 0": (lambda p: ["--ckpt", p["run"], "--batch-size", "0"], "batch_size must be an int >= 1"),
    "max-tokens": (lambda p: ["--ckpt", p["run"], "--max-tokens", "-3"], "max_tokens must be an int >= 1"),
    "threads 0": (lambda p: ["--ckpt", p["run"], "--threads", "0"], "must be an int >= 1"),
    "stateful gpt": (lambda p: ["--ckpt", p["run"], "--stateful"], "stateful.*GPT has none"),
    "nan": (lambda p: ["--ckpt", p["nan"], "--data", p["text"]], "loss is nan .*diverged"),
}


@pytest.fixture(scope="module")
def error_paths(runs):
    tmp = runs["tmp"] / "errors"
    tmp.mkdir()
    p = {"tmp": str(tmp), "run": runs["exact"][0]}
    for name, text in (("empty", ""), ("one", "a"), ("text", "Thou art the king.\n")):
        p[name] = str(tmp / f"{name}.txt")
        (tmp / f"{name}.txt").write_text(text)
    p["empty_dir"] = str(tmp / "none")
    os.makedirs(p["empty_dir"])
    p["corrupt"] = os.path.join(str(tmp / "bad"), "ckpt_00000001.safetensors")
    os.makedirs(os.path.dirname(p["corrupt"]))
    with open(io.latest_checkpoint(p["run"]), "rb") as f:
        open(p["corrupt"], "wb").write(f.read()[:3000])                # truncated
    model = build_model("gpt", "tiny", 256, 32, seed=0)
    p["no_tok"] = save(tmp, "no_tok", model)
    p["no_corpus"] = save(tmp, "no_corpus", model, tokenizer=ByteTokenizer())
    for name, settings in (("gone", {"corpus": str(tmp / "moved.txt")}),
                           ("no_val", {"corpus": p["text"], "val_fraction": 0.0})):
        p[name] = save(tmp, name, model, tokenizer=ByteTokenizer(), extra={"train": settings})
    model.layers[1].mlp.down_proj.weight.data[:] = np.nan
    p["nan"] = save(tmp, "nan", model, tokenizer=ByteTokenizer())
    return p


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_cli_errors_are_one_line(error_paths, capsys, case):
    argv, message = ERRORS[case]
    rc, out, err = run_eval(capsys, *argv(error_paths))
    assert rc == 1 and out == ""
    assert err.startswith("minigrad eval: error: ") and err.count("\n") == 1, err
    assert re.search(message, err), err
