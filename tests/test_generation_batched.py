"""Batched generation from prompts of different lengths and token streaming, GPT.generate and
RWKV7.generate: left padding with an attention_mask (Hugging Face semantics: each row generates what
its unpadded prompt alone would; against transformers' LlamaForCausalLM.generate token for token),
the defaults unchanged, argument errors, the streamer protocol (put(prompt), put(new ids) per step,
end(); HF's order of calls), TextStreamer on multi-byte characters, and streaming through
train.generate_ids / generate_text across GPT's sliding windows."""
import io

import numpy as np
import pytest

import minigrad as mg
from minigrad.data.tokenizer import ByteTokenizer
from minigrad.models import GPT, GPTConfig, TextStreamer, gpt, sampling
from minigrad.models.sampling import left_padding, penalize_repetition, prompt_tokens
from minigrad.train import generate_ids, generate_text
from tests.test_generation_controls import V, tiny_gpt, tiny_rwkv7

pytestmark = pytest.mark.usefixtures("one_thread")   # tiny models (tests/conftest.py)

KINDS = ["gpt", "rwkv7"]
PROMPTS = [[1, 2, 3, 4, 5], [6, 7], [3, 3, 1, 9, 10, 2, 4], [8]]
PAD_ID = 7                        # what the left pads of the prompts hold (never attended)


@pytest.fixture(scope="module", params=KINDS)
def model(request):
    return tiny_gpt() if request.param == "gpt" else tiny_rwkv7()


def left_padded(prompts, pad_ids=PAD_ID):
    """(ids, attention_mask), both (B, T) int64, of prompts left-padded to the longest; pad_ids: an int
    or one per row."""
    T = max(map(len, prompts))
    pad_ids = np.broadcast_to(pad_ids, (len(prompts),))
    ids = np.array([[int(p)] * (T - len(row)) + list(row) for row, p in zip(prompts, pad_ids)], np.int64)
    mask = np.array([[0] * (T - len(row)) + [1] * len(row) for row in prompts], np.int64)
    return ids, mask


class Recorder:
    """A streamer that records its calls: ("put", array) and ("end", None)."""

    def __init__(self):
        self.calls = []

    def put(self, ids):
        self.calls.append(("put", np.array(ids.numpy() if hasattr(ids, "numpy") else ids)))

    def end(self):
        self.calls.append(("end", None))


@pytest.fixture
def spy_logits(monkeypatch):
    """The logits every Sampler step chooses from, (B, V) per step, recorded in a list."""
    seen, real = [], sampling.sample

    def sample(logits, *args, **kwargs):
        seen.append(np.array(logits))
        return real(logits, *args, **kwargs)
    monkeypatch.setattr(sampling, "sample", sample)
    return seen


# ---- left padding ----------------------------------------------------------------------------

def test_each_row_generates_as_its_prompt_alone(model, spy_logits):
    """The key property (fp64, greedy): a left-padded batch gives every row the new tokens, and at
    every step the logits (1e-10), of that row's unpadded prompt generated alone."""
    ids, mask = left_padded(PROMPTS)
    T, n = ids.shape[1], 9
    got = model.generate(ids, n, temperature=0, attention_mask=mask).numpy()
    batch_logits = np.stack(spy_logits)                         # (n, B, V)
    for b, row in enumerate(PROMPTS):
        spy_logits.clear()
        alone = model.generate(np.array([row]), n, temperature=0).numpy()
        np.testing.assert_array_equal(got[b, :T], ids[b])
        np.testing.assert_array_equal(got[b, T:], alone[0, len(row):], err_msg=f"row {b}")
        np.testing.assert_allclose(batch_logits[:, b], np.stack(spy_logits)[:, 0], rtol=1e-10, atol=1e-10)


def test_left_pads_are_not_penalised_as_repeats(model):
    """HF's repetition penalty ignores the pads (prompt_ignore_length = the mask's pad counts): with
    each row padded by the token it picks first alone, penalised rows still equal their prompt alone."""
    kw = dict(temperature=0, repetition_penalty=3.0, eos_token_id=[0, 9], pad_token_id=0)
    alone = [model.generate(np.array([row]), 6, **kw).numpy()[0, len(row):] for row in PROMPTS]
    ids, mask = left_padded(PROMPTS, pad_ids=[a[0] for a in alone])
    got = model.generate(ids, 6, attention_mask=mask, **kw).numpy()[:, ids.shape[1]:]
    for b, want in enumerate(alone):
        np.testing.assert_array_equal(got[b, :len(want)], want, err_msg=f"row {b}")
        assert (got[b, len(want):] == 0).all()


def test_unpadded_masks_take_the_unmasked_path(model, monkeypatch):
    """attention_mask None, all ones (int, bool, lists, a Tensor) or a batch of full rows: the very
    tokens of the plain call, and the masked attention never runs."""
    def no_masked_attention(*args):
        raise AssertionError("the masked path ran")
    monkeypatch.setattr(gpt, "padded_attention", no_masked_attention)
    ids = np.random.default_rng(3).integers(0, V, (3, 5))
    kw = dict(temperature=0.9, top_k=6, seed=1)
    plain = model.generate(ids, 8, **kw).numpy()
    ones = np.ones(ids.shape, np.int64)
    for mask in (None, ones, ones.astype(bool), ones.tolist(), mg.tensor(ones)):
        np.testing.assert_array_equal(model.generate(ids, 8, attention_mask=mask, **kw).numpy(), plain)


# tokens HEAD (before attention_mask and streamer existed) generated for prompt P0 below
P0 = np.array([[10, 6, 7, 9, 6], [8, 9, 2, 0, 3], [3, 9, 10, 0, 5]])
SAMPLED = dict(temperature=0.9, top_k=6, top_p=0.95, seed=3)
PENALISED = dict(temperature=0, repetition_penalty=1.3, eos_token_id=[2, 5], pad_token_id=0)
BEFORE = {
    ("gpt", "sampled"): [[0, 2, 5, 1, 2, 10, 10, 8, 10, 4, 3, 10], [2, 2, 3, 3, 2, 2, 2, 2, 10, 2, 2, 2],
                         [10, 7, 10, 3, 3, 2, 0, 2, 5, 10, 3, 2]],
    ("gpt", "penalised"): [[2, 0, 0, 0, 0, 0, 0, 0, 0, 0], [10, 10, 10, 10, 10, 0, 7, 3, 3, 2],
                           [2, 0, 0, 0, 0, 0, 0, 0, 0, 0]],
    ("rwkv7", "sampled"): [[0, 7, 7, 2, 7, 9, 9, 10, 9, 9, 5, 7], [7, 2, 1, 8, 6, 7, 7, 5, 5, 2, 1, 4],
                           [5, 5, 5, 5, 5, 5, 2, 1, 8, 7, 5, 5]],
    ("rwkv7", "penalised"): [[0, 7, 7, 5], [7, 5, 0, 0], [5, 0, 0, 0]],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("setting", ["sampled", "penalised"])
def test_defaults_generate_what_they_did_before(kind, setting):
    """No attention_mask, no streamer: the tokens the code before them generated (recorded)."""
    model = tiny_gpt() if kind == "gpt" else tiny_rwkv7()
    kw = SAMPLED if setting == "sampled" else PENALISED
    got = model.generate(P0, 12, **kw).numpy()
    np.testing.assert_array_equal(got[:, 5:], BEFORE[kind, setting])


@pytest.mark.parametrize("mask, error, match", [
    ([[1, 1, 0], [1, 1, 1]], ValueError, "only left padding"),
    ([[0, 1, 0], [1, 1, 1]], ValueError, "row 0 has a 0 after a 1"),
    ([[1, 1, 1], [0, 0, 0]], ValueError, "row 1 is all zeros"),
    ([[1, 1, 1]], ValueError, "shape"),
    ([[1, 1, 1, 1], [1, 1, 1, 1]], ValueError, "shape"),
    ([[0, 2, 1], [1, 1, 1]], ValueError, "only 0 and 1"),
    ([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]], TypeError, "attention_mask"),
])
def test_bad_attention_masks(model, mask, error, match):
    with pytest.raises(error, match=match):
        model.generate(np.zeros((2, 3), np.int64), 2, attention_mask=mask)


def test_left_padding_and_prompt_tokens():
    """The pad counts of a mask; the prompt tokens of each row without its pads."""
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]])
    np.testing.assert_array_equal(left_padding(mask, (3, 4)), [2, 0, 1])
    assert left_padding(np.ones((3, 4), bool), (3, 4)) is None
    seen = prompt_tokens(np.array([[5, 5, 1, 2], [5, 1, 2, 3], [4, 0, 4, 1]]), 6, np.array([2, 0, 1]))
    np.testing.assert_array_equal(seen, [[0, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 1], [1, 1, 0, 0, 1, 0]])


# ---- streaming -------------------------------------------------------------------------------

def test_streamer_gets_the_prompt_every_step_and_one_end(model):
    """put(prompt (B, T)), put(new ids (B,)) per step (a finished row's pad id included), end() once,
    int64 numpy copies; with an early stop at eos as many puts as new columns."""
    ids, mask = left_padded(PROMPTS)
    plain = model.generate(ids, 8, temperature=0, attention_mask=mask).numpy()
    eos = sorted(set(plain[:, ids.shape[1] + 2].tolist()))        # every row finishes by step 3
    rec = Recorder()
    got = model.generate(ids, 8, temperature=0, attention_mask=mask, eos_token_id=eos, pad_token_id=0,
                         streamer=rec).numpy()
    assert got.shape[1] < ids.shape[1] + 8                         # stopped early
    kinds = [kind for kind, _ in rec.calls]
    assert kinds == ["put"] * (got.shape[1] - ids.shape[1] + 1) + ["end"]
    puts = [value for _, value in rec.calls[:-1]]
    assert all(p.dtype == np.int64 for p in puts) and puts[0].shape == ids.shape
    np.testing.assert_array_equal(puts[0], ids)
    np.testing.assert_array_equal(np.stack(puts[1:], 1), got[:, ids.shape[1]:])
    rec = Recorder()
    model.generate(ids, 0, attention_mask=mask, streamer=rec)
    assert [kind for kind, _ in rec.calls] == ["put", "end"]


def test_bad_streamer(model):
    with pytest.raises(TypeError, match="streamer"):
        model.generate(np.zeros((1, 2), np.int64), 2, streamer=print)


TEXT = "naïve ✓ 😀 日本\nok é"


def streamed(ids_chunks, **kwargs):
    """What a TextStreamer over ByteTokenizer prints for these puts, then end()."""
    out = io.StringIO()
    streamer = TextStreamer(ByteTokenizer(), file=out, **kwargs)
    printed = []
    for chunk in ids_chunks:
        before = out.getvalue()
        streamer.put(np.asarray(chunk))
        printed.append(out.getvalue()[len(before):])
    streamer.end()
    return out.getvalue(), printed


def test_text_streamer_holds_back_incomplete_characters():
    """Byte tokens split multi-byte characters: nothing printed is ever a replacement character, and
    everything printed is the decoded text (and end()'s newline)."""
    tok = ByteTokenizer()
    ids = tok.encode(TEXT)
    prompt, new = ids[:3], ids[3:]
    text, printed = streamed([prompt[None]] + [np.array([i]) for i in new])
    assert text == tok.decode(ids) + "\n" == TEXT + "\n"
    assert not any("\ufffd" in p for p in printed)
    assert printed[:3] == ["na", "ï", "v"]         # the prompt ends in the first of "ï"'s two bytes: held
    text, _ = streamed([prompt[None]] + [np.array([i]) for i in new], skip_prompt=True)
    assert text == tok.decode(new) + "\n"
    with pytest.raises(ValueError, match="batch size 1"):
        TextStreamer(tok).put(np.zeros((2, 3), np.int64))


def byte_gpt(max_seq_len=64):
    mg.manual_seed(0)
    return GPT(GPTConfig(vocab_size=256, d_model=8, n_layer=1, n_head=2, ffn_hidden=8,
                         max_seq_len=max_seq_len), dtype=np.float64)


def force_tokens(monkeypatch, tokens):
    """Make every Sampler step choose the next of `tokens` (one row)."""
    it = iter(np.asarray(tokens).tolist())
    monkeypatch.setattr(sampling, "sample", lambda logits, *a, **k: np.full(len(logits), next(it), np.int64))


def test_text_streamer_through_generate(monkeypatch, capsys):
    """generate(..., streamer=TextStreamer(tok)) prints the prompt and the new text as it comes, on stdout."""
    tok = ByteTokenizer()
    ids = tok.encode(TEXT)
    force_tokens(monkeypatch, ids[4:])
    out = byte_gpt().generate(ids[None, :4], len(ids) - 4, streamer=TextStreamer(tok)).numpy()
    np.testing.assert_array_equal(out[0], ids)
    assert capsys.readouterr().out == TEXT + "\n"


@pytest.mark.parametrize("window_model", ["gpt", "rwkv7"])
def test_generate_text_streams_across_windows(monkeypatch, capsys, window_model):
    """train.generate_ids/generate_text: one put of the whole prompt, each new id once, one end(), also
    when GPT's sliding window restarts generation several times (max_seq_len 12, 30 new tokens) and
    when an eos stops it inside a later window."""
    model = byte_gpt(max_seq_len=12) if window_model == "gpt" else tiny_rwkv7()
    vocab = model.config.vocab_size
    prompt = np.arange(5, 10) % vocab
    rec = Recorder()
    out = generate_ids(model, prompt, 30, temperature=1.0, seed=4, streamer=rec)
    assert [kind for kind, _ in rec.calls] == ["put"] * 31 + ["end"]
    np.testing.assert_array_equal(rec.calls[0][1], prompt[None])
    np.testing.assert_array_equal(np.concatenate([v.reshape(-1) for _, v in rec.calls[:-1]]), out)
    eos = int(out[len(prompt) + 20])                               # stop in a later window
    rec = Recorder()
    stopped = generate_ids(model, prompt, 30, temperature=1.0, seed=4, eos_token_id=eos, streamer=rec)
    assert len(stopped) < len(out) and stopped[-1] == eos
    assert [kind for kind, _ in rec.calls] == ["put"] * (len(stopped) - len(prompt) + 1) + ["end"]
    np.testing.assert_array_equal(np.concatenate([v.reshape(-1) for _, v in rec.calls[:-1]]), stopped)
    if window_model == "gpt":
        tok = ByteTokenizer()
        force_tokens(monkeypatch, tok.encode("é✓😀 and on\nand on, 日本語 — done"))
        text = generate_text(model, tok, "añ", tokens=30, streamer=TextStreamer(tok))
        assert capsys.readouterr().out == text + "\n"
        assert text.startswith("añé✓😀 and on\n")


# ---- against transformers --------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_pair(tmp_path_factory):
    """(the fp64 tiny GPT, the same weights as a float64 transformers LlamaForCausalLM)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ours = tiny_gpt()
    path = str(tmp_path_factory.mktemp("hf_gpt"))
    ours.save_hf(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("USE_HUB_KERNELS", "0")        # transformers 5 would try the (uninstalled) hub
        ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
    ref.generation_config.eos_token_id = None
    return ours, ref


def hf_generate(ref, ids, mask, n, streamer=None, **kw):
    import torch
    with torch.no_grad():
        out = ref.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), max_new_tokens=n,
                           do_sample=False, streamer=streamer, **kw)
    return out.numpy()


@pytest.mark.parametrize("kw", [{}, dict(repetition_penalty=1.5)])
def test_left_padded_batch_matches_transformers(hf_pair, kw):
    """A left-padded batch, greedy (and with a repetition penalty, which ignores the pads): transformers'
    LlamaForCausalLM.generate(input_ids, attention_mask=...) token for token."""
    ours, ref = hf_pair
    ids, mask = left_padded(PROMPTS)
    first = ours.generate(ids, 1, temperature=0, attention_mask=mask).numpy()[:, -1]
    ids, mask = left_padded(PROMPTS, pad_ids=first)     # pads a penalty counting them would punish
    want = hf_generate(ref, ids, mask, 10, pad_token_id=0, **kw)
    got = ours.generate(ids, 10, temperature=0, attention_mask=mask, pad_token_id=0, **kw).numpy()
    np.testing.assert_array_equal(got, want)


def test_streamer_calls_match_transformers(hf_pair):
    """The same calls, in the same order, as transformers' streamer gets: an early stop at eos with
    rows finishing at different steps (their later puts hold the pad id)."""
    ours, ref = hf_pair
    ids, mask = left_padded(PROMPTS)
    plain = ours.generate(ids, 8, temperature=0, attention_mask=mask).numpy()
    kw = dict(eos_token_id=sorted(set(plain[:, ids.shape[1] + 2].tolist())), pad_token_id=9)
    theirs, mine = Recorder(), Recorder()
    want = hf_generate(ref, ids, mask, 8, streamer=theirs, **kw)
    got = ours.generate(ids, 8, temperature=0, attention_mask=mask, streamer=mine, **kw).numpy()
    np.testing.assert_array_equal(got, want)
    new = got[:, ids.shape[1]:]
    assert new.shape[1] < 8 and (new == 9).any() and not (new == 9).all(0).any()   # finished apart
    assert [k for k, _ in mine.calls] == [k for k, _ in theirs.calls]
    for (_, a), (_, b) in zip(mine.calls[:-1], theirs.calls[:-1]):
        np.testing.assert_array_equal(a, b)


def test_penalty_ignores_pads_as_transformers_processor():
    """prompt_tokens + penalize_repetition = RepetitionPenaltyLogitsProcessor(prompt_ignore_length=pads)."""
    torch = pytest.importorskip("torch")
    RepetitionPenaltyLogitsProcessor = pytest.importorskip("transformers").RepetitionPenaltyLogitsProcessor
    ids, mask = left_padded(PROMPTS, pad_ids=[1, 2, 3, 4])
    pads = left_padding(mask, ids.shape)
    logits = np.random.default_rng(0).standard_normal((len(ids), V))
    proc = RepetitionPenaltyLogitsProcessor(1.7, prompt_ignore_length=torch.from_numpy(pads))
    want = proc(torch.from_numpy(ids), torch.from_numpy(logits.copy())).numpy()
    got = penalize_repetition(logits, prompt_tokens(ids, V, pads), 1.7)
    np.testing.assert_allclose(got, want, rtol=1e-15)
