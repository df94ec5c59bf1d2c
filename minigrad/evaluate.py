"""Measure a language model on text: the logic behind `python -m minigrad eval`.

    from minigrad.evaluate import evaluate_text
    result = evaluate_text(model, tokenizer, text, seq_len=128, batch_size=16)

The token stream ids[0..N-1] is cut into consecutive non-overlapping windows of `seq_len` inputs:
window k reads x = ids[kT : kT+T] and predicts y = ids[kT+1 : kT+T+1] (the last window may be
shorter), so every token but the first is predicted exactly once, from the context since the start
of its window (with `stateful`, a recurrent model's context since the start of the stream).

    loss        = total nats / (N - 1)          mean cross-entropy, nats/token
    perplexity  = exp(loss)
    bits/token  = loss / ln 2
    bits/byte   = total nats / ln 2 / bytes     bytes: UTF-8 bytes of the predicted text ids[1:]

Bits per byte do not depend on the tokenizer's vocabulary, so byte, char and BPE models compare.
"""
import inspect
import math
import os
import time
import warnings

import numpy as np

import minigrad as mg
from minigrad import io, pretrained
from minigrad.data import compact_ids, load_corpus
from minigrad.kernels.validate import check_int
from minigrad.train import TrainConfig, lm_loss, split_corpus

SPLITS = ("val", "train", "all")


def window_batches(ids, seq_len, batch_size):
    """(x, y) int64 batches of the consecutive windows x = ids[s:s+T], y = ids[s+1:s+T+1] for
    s = 0, T, 2T, ...: the full windows `batch_size` at a time, then the last, shorter one alone.
    Views of `ids` (kept in its compact dtype) until each batch is made."""
    ids = np.asarray(ids)
    n_full = (len(ids) - 1) // seq_len
    x = ids[:n_full * seq_len].reshape(n_full, seq_len)
    y = ids[1:n_full * seq_len + 1].reshape(n_full, seq_len)
    batches = [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, n_full, batch_size)]
    rest = ids[n_full * seq_len:]
    if len(rest) > 1:
        batches.append((rest[None, :-1], rest[None, 1:]))
    for x, y in batches:
        yield x.astype(np.int64), y.astype(np.int64)


class _Carried:
    """A recurrent `model` as a function of idx alone that carries its state from call to call, so
    consecutive windows read as one sequence."""

    def __init__(self, model):
        self.model, self.state = model, None

    def __call__(self, idx):
        logits, self.state = self.model(idx, state=self.state, return_state=True)
        return logits


def total_nats(model, batches):
    """Sum over every predicted token of -ln p(y | context), in float64: lm_loss (a batch mean) times
    the batch's token count. Stops at the first batch whose loss is not finite and returns it."""
    total = 0.0
    for x, y in batches:
        loss = lm_loss(model, x, y).item()
        if not math.isfinite(loss):
            return loss
        total += loss * y.size
    return total


def _token_ids(tokenizer, text_or_ids):
    """`text_or_ids` (a str, or token ids) as a 1-D token array checked against the vocabulary."""
    ids = tokenizer.encode(text_or_ids) if isinstance(text_or_ids, str) else text_or_ids
    ids = compact_ids(np.asarray(getattr(ids, "data", ids)).reshape(-1), tokenizer.vocab_size)
    if len(ids) < 2:
        raise ValueError(f"eval: the text has {len(ids)} token(s); at least 2 are needed "
                         "(the first is only read, the others are predicted)")
    return ids


def predicted_bytes(tokenizer, ids):
    """UTF-8 bytes of the predicted text ids[1:]: bytes(decode(ids)) - bytes(decode(ids[:1])); for the
    byte tokenizer simply one a token (even when ids[0] alone is part of a character)."""
    if getattr(tokenizer, "kind", None) == "byte":
        return len(ids) - 1
    size = lambda part: len(tokenizer.decode(part).encode("utf-8", "surrogatepass"))  # noqa: E731
    return size(ids) - size(ids[:1])


def check_settings(model, seq_len, batch_size, stateful):
    """(seq_len, batch_size) checked: sizes >= 1, seq_len within a GPT's max_seq_len, `stateful` only
    for a model with a recurrent state (then the batch is 1: one sequence)."""
    seq_len = check_int("eval", "seq_len", seq_len, 1)
    batch_size = check_int("eval", "batch_size", batch_size, 1)
    limit = getattr(getattr(model, "config", None), "max_seq_len", None)
    if limit is not None and seq_len > limit:
        raise ValueError(f"eval: seq_len {seq_len} exceeds the model's max_seq_len {limit}")
    if stateful and "state" not in inspect.signature(model.forward).parameters:
        raise ValueError(f"eval: --stateful carries a recurrent state across windows; "
                         f"{type(model).__name__} has none (its context is limited to its positions): "
                         "evaluate without it")
    return seq_len, 1 if stateful else batch_size


def _diverged(model, loss):
    """The error for a non-finite loss, naming a non-finite parameter if there is one."""
    bad = next((name for name, p in model.named_parameters() if not np.isfinite(p.data).all()), None)
    why = f"parameter {bad} holds nan/inf" if bad else "the logits overflowed"
    return ValueError(f"eval: the loss is {loss} ({why}): the model has diverged; "
                      "evaluate an earlier checkpoint")


def summarize(nats, tokens, n_bytes, seconds):
    """The metrics of `nats` summed over `tokens` predicted tokens standing for `n_bytes` bytes."""
    loss = nats / tokens
    return {"tokens": tokens, "bytes": n_bytes, "total_nats": nats, "loss": loss,
            "perplexity": math.exp(loss) if loss < 700 else math.inf,
            "bits_per_token": loss / math.log(2),
            "bits_per_byte": nats / math.log(2) / n_bytes if n_bytes else math.nan,
            "seconds": seconds, "tokens_per_s": tokens / seconds if seconds > 0 else math.inf}


def evaluate_text(model, tokenizer, text_or_ids, seq_len, batch_size=8, stateful=False):
    """Cross-entropy of `model` on a text (or its token ids) over consecutive non-overlapping windows
    of `seq_len` (see the module docstring), batched, in eval mode without a tape.

    `stateful` (recurrent models: RWKV-7) reads the windows one after another (batch 1) carrying the
    state, i.e. the whole text as one sequence. Returns a dict: tokens, bytes, total_nats, loss
    (nats/token), perplexity, bits_per_token, bits_per_byte, seconds, tokens_per_s, seq_len,
    batch_size, stateful. ValueError for a non-finite loss (a diverged model)."""
    seq_len, batch_size = check_settings(model, seq_len, batch_size, stateful)
    ids = _token_ids(tokenizer, text_or_ids)
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    try:
        with mg.no_grad():
            batches = window_batches(ids, seq_len, batch_size)
            nats = total_nats(_Carried(model) if stateful else model, batches)
    finally:
        model.train(was_training)
    seconds = time.perf_counter() - start
    if not math.isfinite(nats):
        raise _diverged(model, nats)
    return {**summarize(nats, len(ids) - 1, predicted_bytes(tokenizer, ids), seconds),
            "seq_len": seq_len, "batch_size": batch_size, "stateful": bool(stateful)}


# ---- checkpoints: the run's own validation split by default -----------------------------------------


def train_settings(ckpt):
    """The checkpoint's `extra["train"]` (the TrainConfig of the `minigrad train` run), or {}."""
    settings = (ckpt.extra or {}).get("train")
    return settings if isinstance(settings, dict) else {}


def _default(given, ckpt, name, fallback):
    """`given` if not None, else the int setting `name` the run recorded (checked), else `fallback`."""
    if given is not None:
        return given
    value = train_settings(ckpt).get(name)
    return fallback if value is None else check_int("eval", f"{ckpt.path}: extra.train.{name}", value, 1)


def checkpoint_split(ckpt, data=None, split=None):
    """(token ids, description) of the text to evaluate with the checkpoint's tokenizer.

    Without `data`: the run's corpus (extra.train.corpus) split exactly as `train` split it (the same
    tokenizer, `split_corpus` and val_fraction), `split` "val" by default. With `data` (a text file or
    a directory of them): that text, `split` "all" by default ("val"/"train" use the run's
    val_fraction, else TrainConfig's default)."""
    settings = train_settings(ckpt)
    split = split or ("val" if data is None else "all")
    _check_split(split)
    source = data if data is not None else settings.get("corpus")
    if source is None:
        raise ValueError(f"eval: {ckpt.path} records no training corpus (not a `minigrad train` run); "
                         "give the text with --data PATH")
    try:
        text, desc = load_corpus(source)
    except (OSError, ValueError) as e:
        if data is not None:
            raise
        raise type(e)(f"{e}; the run was trained on it: give its text with --data PATH") from None
    fraction = settings.get("val_fraction", TrainConfig.val_fraction)
    return text_split(ckpt.tokenizer, text, desc, split, fraction)


def _check_split(split):
    if split not in SPLITS:
        raise ValueError(f"eval: unknown split {split!r}; choose from {', '.join(SPLITS)}")


def text_split(tokenizer, text, desc, split, val_fraction):
    """(token ids, description) of one part of `text` (described by `desc`) as `train` splits a corpus:
    the trailing `val_fraction` of its tokens ("val"), the rest ("train"), or all of them ("all")."""
    fraction = 0.0 if split == "all" else val_fraction
    train_ids, val_ids = split_corpus(tokenizer, text, fraction)
    ids = {"val": val_ids, "train": train_ids, "all": train_ids}[split]
    part = "all" if split == "all" else f"{split} split (val_fraction {fraction:g})"
    if len(ids) == 0:
        raise ValueError(f"eval: the {part} of {desc} is empty"
                         + (" (the run held out no validation text)" if split == "val" else ""))
    return ids, f"{part} of {desc}"


def _check_exists(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"eval: no checkpoint at {path!r} (accepted: {pretrained.ACCEPTED})")


def load_for_eval(path, tokenizer=None):
    """The checkpoint at `path` (a run directory or a file) with its tokenizer, or the one read from
    the file `tokenizer` (a tokenizer.json or an RWKV vocabulary .txt) instead."""
    _check_exists(path)
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        ckpt = io.load_checkpoint(path)     # when it fails, its error names every damaged file
    for w in skipped:                       # a damaged newest checkpoint passed over for an older one
        warnings.warn(w.message, w.category, stacklevel=2)
    if tokenizer is not None:
        ckpt.tokenizer = pretrained.load_tokenizer_file(tokenizer)
    if ckpt.tokenizer is None:
        raise ValueError(f"eval: {ckpt.path} has no tokenizer, so there is no way to read text with it "
                         f"(give one with --tokenizer PATH)")
    return ckpt


def _checked_max_tokens(max_tokens):
    return None if max_tokens is None else check_int("eval", "max_tokens", max_tokens, 1)


def evaluate_checkpoint(path, data=None, split=None, seq_len=None, batch_size=None, max_tokens=None,
                        stateful=False, tokenizer=None):
    """`evaluate_text` of the checkpoint at `path` on `checkpoint_split(ckpt, data, split)` (its first
    max_tokens + 1 tokens if given). seq_len and batch_size default to the run's (else the model's
    max_seq_len up to 1024, and 8). `tokenizer`: a tokenizer file to read the text with instead of the
    checkpoint's. The result also names the checkpoint, step, model and data."""
    ckpt = load_for_eval(path, tokenizer)
    limit = ckpt.config.get("max_seq_len") if isinstance(ckpt.config, dict) else None
    seq_len = _default(seq_len, ckpt, "seq_len", min(limit or 1024, 1024))
    batch_size = _default(batch_size, ckpt, "batch_size", 8)
    max_tokens = _checked_max_tokens(max_tokens)
    model = ckpt.build_model()
    check_settings(model, seq_len, batch_size, stateful)      # before reading the text
    if tokenizer is not None:
        pretrained.check_vocab_fits(model, ckpt.tokenizer, f"--tokenizer {tokenizer}")
    ids, desc = checkpoint_split(ckpt, data, split)
    ids = ids if max_tokens is None else ids[:max_tokens + 1]
    result = evaluate_text(model, ckpt.tokenizer, ids, seq_len, batch_size, stateful)
    return {"checkpoint": ckpt.path, "step": ckpt.step, "model": ckpt.model_type,
            "tokenizer": repr(ckpt.tokenizer), "data": desc, **result}


# ---- pretrained models (Hugging Face, GGUF, official RWKV-7): text given with --data ------------------

PRETRAINED_SEQ_LEN = 1024      # windows of a pretrained model: at most this (GPT: also its max_seq_len)
PRETRAINED_BATCH_SIZE = 1      # a large vocabulary makes the logits of a window big


def pretrained_seq_len(model):
    """Default window of a pretrained model: min(max_seq_len, 1024) for a GPT, 1024 for RWKV-7."""
    limit = getattr(model.config, "max_seq_len", None)
    return min(limit, PRETRAINED_SEQ_LEN) if limit is not None else PRETRAINED_SEQ_LEN


def evaluate_pretrained(loaded, text, desc="the text", split=None, seq_len=None, batch_size=None,
                        max_tokens=None, stateful=False):
    """`evaluate_text` of a `minigrad.pretrained.Loaded` model on `text` (described by `desc`; `split`
    "all" by default, "val"/"train" split it with TrainConfig's val_fraction). seq_len defaults to
    `pretrained_seq_len`, batch_size to 1. Besides evaluate_text's numbers the result has checkpoint
    (the path), step (None), model ("gpt"/"rwkv7"), format (the `pretrained.detect` kind), description,
    tokenizer and data."""
    seq_len = pretrained_seq_len(loaded.model) if seq_len is None else seq_len
    batch_size = PRETRAINED_BATCH_SIZE if batch_size is None else batch_size
    max_tokens = _checked_max_tokens(max_tokens)
    split = split or "all"
    _check_split(split)
    check_settings(loaded.model, seq_len, batch_size, stateful)      # before tokenizing the text
    ids, desc = text_split(loaded.tokenizer, text, desc, split, TrainConfig.val_fraction)
    ids = ids if max_tokens is None else ids[:max_tokens + 1]
    result = evaluate_text(loaded.model, loaded.tokenizer, ids, seq_len, batch_size, stateful)
    return {"checkpoint": loaded.path, "step": None, "model": io.model_type_of(loaded.model),
            "format": loaded.kind, "description": loaded.description, "tokenizer": repr(loaded.tokenizer),
            "data": desc, **result}


def evaluate_path(path, data=None, split=None, seq_len=None, batch_size=None, max_tokens=None,
                  stateful=False, tokenizer=None):
    """What `python -m minigrad eval` runs: `evaluate_checkpoint` for a minigrad checkpoint,
    `evaluate_pretrained` for any other model `minigrad.pretrained` recognises, on the text at `data`
    (required there, and read before the model loads, so that a wrong path fails at once)."""
    _check_exists(path)
    kind = pretrained.detect(path)
    if kind == "minigrad":
        return evaluate_checkpoint(path, data, split, seq_len, batch_size, max_tokens, stateful, tokenizer)
    if data is None:
        raise ValueError(f"eval: {path} is a pretrained model ({pretrained.LABELS[kind]}), not a "
                         "`minigrad train` run, so there is no run corpus to evaluate on: give the text "
                         "with --data PATH")
    text, desc = load_corpus(data)
    loaded = pretrained.load_pretrained(path, tokenizer)
    return evaluate_pretrained(loaded, text, desc, split, seq_len, batch_size, max_tokens, stateful)


def format_report(r):
    """The text lines `minigrad eval` prints for a result of `evaluate_checkpoint` (its first line names
    the checkpoint) or `evaluate_pretrained` (its first line describes the model)."""
    mode = "stateful, one sequence" if r["stateful"] else f"batch {r['batch_size']}"
    first = (f"model: {r['description']}" if r.get("description") else
             f"checkpoint: {r['checkpoint']} ({r['model']}, step {r['step']}, {r['tokenizer']})")
    return "\n".join([
        first,
        f"data: {r['data']}",
        f"windows: {r['seq_len']} tokens ({mode})",
        f"tokens: {r['tokens']:,} ({r['bytes']:,} bytes)",
        f"loss: {r['loss']:.4f} nats/token",
        f"perplexity: {r['perplexity']:.3f}",
        f"bits/token: {r['bits_per_token']:.4f}",
        f"bits/byte: {r['bits_per_byte']:.4f}",
        f"speed: {r['tokens_per_s']:,.0f} tokens/s ({r['seconds']:.2f} s)",
    ])
