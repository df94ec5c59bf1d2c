"""Regressions from an audit of the data pipeline (corpora, tokenizers, batching)."""
import os

import numpy as np
import pytest

from minigrad.data import (
    BatchSampler,
    BPETokenizer,
    compact_ids,
    eval_batches,
    load_corpus,
    make_tokenizer,
    tokenizer_from_dict,
)


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_a_directory_whose_name_has_glob_characters_is_read(tmp_path):
    _write(tmp_path / "books[1]" / "a.txt", b"bracketed")
    _write(tmp_path / "data*" / "a.txt", b"starred")
    _write(tmp_path / "data_old" / "b.txt", b"a sibling the * would have matched")
    assert load_corpus(str(tmp_path / "books[1]"))[0] == "bracketed"
    assert load_corpus(str(tmp_path / "data*"))[0] == "starred"


def test_a_symlink_loop_does_not_repeat_the_files(tmp_path):
    _write(tmp_path / "c" / "sub" / "t.txt", b"once")
    os.symlink(tmp_path / "c", tmp_path / "c" / "sub" / "back")
    assert load_corpus(str(tmp_path / "c"))[0] == "once"


def test_hidden_files_and_directories_stay_skipped(tmp_path):
    _write(tmp_path / "c" / "a.txt", b"seen")
    _write(tmp_path / "c" / ".hidden.txt", b"no")
    _write(tmp_path / "c" / ".git" / "x.txt", b"no")
    assert load_corpus(str(tmp_path / "c"))[0] == "seen"


def test_utf8_byte_order_marks_are_not_text(tmp_path):
    _write(tmp_path / "c" / "a.txt", "\ufeffhello".encode())
    _write(tmp_path / "c" / "b.txt", "\ufeffworld".encode())
    assert load_corpus(str(tmp_path / "c"))[0] == "hello\n\nworld"
    _write(tmp_path / "bom_only.txt", b"\xef\xbb\xbf")
    with pytest.raises(ValueError, match="is empty"):
        load_corpus(str(tmp_path / "bom_only.txt"))


def test_a_directory_of_empty_files_and_an_empty_list_are_errors(tmp_path):
    _write(tmp_path / "e" / "a.txt", b"")
    _write(tmp_path / "e" / "b.md", b"")
    with pytest.raises(ValueError, match="2 text files are all empty"):
        load_corpus(str(tmp_path / "e"))
    with pytest.raises(ValueError, match="list of corpora is empty"):
        load_corpus([])


def test_bpe_keeps_bos_eos_and_chat_template_through_to_dict():
    tok = BPETokenizer.train("hello world " * 20, 300)
    assert tok.bos_token_id is None and "bos_token_id" not in tok.to_dict()
    tok.bos_token_id, tok.eos_token_id, tok.chat_template = 1, [2, 3], "{{ messages }}"
    again = tokenizer_from_dict(tok.to_dict())
    assert (again.bos_token_id, again.eos_token_id, again.chat_template) == (1, [2, 3], "{{ messages }}")
    d = tok.to_dict()
    d["bos_token_id"] = "one"
    with pytest.raises(ValueError, match="bos_token_id"):
        tokenizer_from_dict(d)


def test_bpe_keeps_them_through_a_checkpoint(tmp_path):
    from minigrad import io
    from minigrad.models import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=300, d_model=16, n_layer=1, n_head=2, ffn_hidden=32))
    tok = BPETokenizer.train("hello world " * 20, 300)
    tok.bos_token_id, tok.eos_token_id = 0, 1
    io.save_checkpoint(str(tmp_path), 1, model, tokenizer=tok)
    loaded = io.load_checkpoint(str(tmp_path)).tokenizer
    assert (loaded.bos_token_id, loaded.eos_token_id) == (0, 1)


def test_bpe_vocab_zero_is_an_error_not_the_default():
    with pytest.raises(ValueError, match="vocab_size must be >= 256"):
        make_tokenizer("bpe", "hello", 0)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        BPETokenizer.train("hello", 300.5)
    with pytest.raises(TypeError, match="built from a text"):
        make_tokenizer("char", None)


def test_sampler_and_eval_batches_reject_non_integer_sizes():
    data = np.arange(50)
    for bad in (2.7, True, "3"):
        with pytest.raises(TypeError, match="seq_len must be an int"):
            BatchSampler(data, 2, bad)
        with pytest.raises(TypeError, match="batch_size must be an int"):
            eval_batches(data, bad, 4, 2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        eval_batches(data, 0, 4, 2)     # was: range() arg 3 must not be zero
    assert eval_batches(data, 2, 4, 0) == []


def test_float_token_streams_are_rejected_not_truncated():
    with pytest.raises(TypeError, match="integers"):
        compact_ids(np.array([1.7, np.nan]), 256)
    with pytest.raises(TypeError, match="integers"):
        BatchSampler(np.linspace(0, 9, 10), 2, 3)
    x, y = BatchSampler(list(range(10)), 2, 3, seed=0).next()   # a list of ints works
    assert x.dtype == y.dtype == np.int64 and np.array_equal(x + 1, y)


def test_a_short_validation_stream_names_the_fix():
    with pytest.raises(ValueError, match="validation stream has 5 tokens.*--val-fraction"):
        eval_batches(np.arange(5), 2, 8, 1)


def test_every_window_is_reachable_and_none_runs_past_the_end():
    n, t = 20, 5
    sampler = BatchSampler(np.arange(n), 64, t, seed=0)
    starts = set()
    for _ in range(100):
        x, y = sampler.next()
        assert y.max() <= n - 1
        starts |= set(x[:, 0].tolist())
    assert starts == set(range(n - t))
