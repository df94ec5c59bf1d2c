"""Next-token sampling, prompt padding and token streaming shared by every model's `generate`.

`sample` picks one token per row of logits; `Sampler` holds the state of one `generate` call (the
sequences so far, the rng, the rows finished by an eos id, the streamer) and applies the Hugging Face
controls in HF's order of processors: repetition penalty on the raw logits, then temperature, top-k,
top-p, min-p. `left_padding` reads HF's attention_mask of a batch of prompts of different lengths;
`TextStreamer` prints the text of a generation as it grows (HF's streamer protocol: put / end).
"""
import sys

import numpy as np

from minigrad.kernels.validate import check_finite_scalar, check_int, check_number, check_seed
from minigrad.tensor import Tensor


def parameter_bytes(model):
    """Bytes of a model's parameters: what one decoded token reads (threads.decode_blas)."""
    return sum(p.data.nbytes for p in model.parameters())


def check_sampling(temperature, top_k, top_p):
    """Raise TypeError naming the argument for a non-number (None, "1"), ValueError for settings
    that would sample noise or nothing."""
    t = check_number("generate", "temperature", temperature)
    if not np.isfinite(t) or t < 0:   # nan passes `< 0` and samples noise
        raise ValueError(f"generate: temperature must be finite and >= 0, got {temperature}")
    if top_k is not None:
        check_int("generate", "top_k", top_k, 1)
    if top_p is not None and not 0.0 < check_number("generate", "top_p", top_p) <= 1.0:
        raise ValueError(f"generate: top_p must be in (0, 1] or None, got {top_p}")


def check_new_tokens(max_new_tokens):
    """max_new_tokens as an int >= 0 (a float or bool is a caller's mistake, not a count)."""
    return check_int("generate", "max_new_tokens", max_new_tokens, 0)


def check_repetition_penalty(penalty):
    """repetition_penalty as a float, finite and > 0 (1.0 = off, < 1 favours repeats)."""
    return check_finite_scalar("generate", "repetition_penalty", penalty, positive=True)


def check_min_p(min_p):
    """min_p as None (off) or a float in [0, 1]."""
    if min_p is None:
        return None
    value = check_number("generate", "min_p", min_p)
    if not 0.0 <= value <= 1.0:        # nan fails too
        raise ValueError(f"generate: min_p must be in [0, 1] or None, got {min_p}")
    return value


def _check_token_id(name, value, vocab_size):
    """One token id: an int (not bool) in [0, vocab_size)."""
    value = check_int("generate", name, value)
    if not 0 <= value < vocab_size:
        raise ValueError(f"generate: {name} must be in [0, {vocab_size}), got {value}")
    return value


def check_suppress(suppress_tokens, vocab_size):
    """suppress_tokens (None, or ids in [0, vocab_size) as a list, range or int array) as None or a
    sorted int64 array; ValueError when it would leave no token to sample."""
    if suppress_tokens is None:
        return None
    if isinstance(suppress_tokens, (range, np.ndarray)):
        ids = np.asarray(suppress_tokens).ravel()
        if ids.dtype.kind not in "iu" and ids.size:
            raise TypeError(f"generate: suppress_tokens must hold token ids, got dtype {ids.dtype}")
        bad = ids[(ids < 0) | (ids >= vocab_size)]
        if bad.size:
            raise ValueError(f"generate: suppress_tokens must be in [0, {vocab_size}), got {bad[0]}")
    elif isinstance(suppress_tokens, (list, tuple, set)):
        ids = np.asarray([_check_token_id("suppress_tokens", i, vocab_size) for i in suppress_tokens])
    else:
        raise TypeError(f"generate: suppress_tokens must be a list of token ids, got "
                        f"{type(suppress_tokens).__name__}")
    ids = np.unique(ids).astype(np.int64)
    if len(ids) == vocab_size:
        raise ValueError(f"generate: suppress_tokens holds all {vocab_size} token ids: nothing left to "
                         "sample")
    return ids if len(ids) else None


def textless_ids(model, tokenizer):
    """The ids the model can sample but the tokenizer has no text for (a vocabulary padded beyond the
    tokenizer's, as RWKV-7's 65536 against the World tokenizer's 65530), for generate's
    suppress_tokens; None when there are none."""
    vocab = model.config.vocab_size
    return range(tokenizer.vocab_size, vocab) if tokenizer.vocab_size < vocab else None


def check_eos(eos_token_id, vocab_size):
    """eos_token_id (None, an int or a non-empty list of ints) as None or an int64 array of ids."""
    if eos_token_id is None:
        return None
    if isinstance(eos_token_id, np.ndarray):
        eos_token_id = eos_token_id.ravel().tolist()
    items = list(eos_token_id) if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]
    if not items:
        raise ValueError("generate: eos_token_id must be an int or a non-empty list of ints, got []")
    return np.array([_check_token_id("eos_token_id", i, vocab_size) for i in items], np.int64)


def check_pad(pad_token_id, eos, vocab_size):
    """pad_token_id as an int in [0, vocab_size); None means the first eos id (None without eos)."""
    if pad_token_id is not None:
        return _check_token_id("pad_token_id", pad_token_id, vocab_size)
    return None if eos is None else int(eos[0])


def left_padding(attention_mask, shape):
    """HF's attention_mask of a prompt batch of `shape` (B, T) as the number of left pads per row.

    attention_mask: None or (B, T) of 0/1 (ints or bools; array, Tensor or nested lists), 1 on the
    tokens and 0 on the padding, which must come first in its row (HF's padding_side="left": a
    decoder-only model's new tokens follow the last column). Returns pads (B,) int64, or None when
    there is no mask or no row is padded (then `generate` runs its unmasked path, unchanged).
    TypeError for another dtype; ValueError naming attention_mask for another shape, values other
    than 0/1, a 0 after a 1 (right or inner padding) or a row of zeros (a row without a prompt)."""
    if attention_mask is None:
        return None
    mask = attention_mask.data if isinstance(attention_mask, Tensor) else np.asarray(attention_mask)
    if mask.dtype.kind not in "biu":
        raise TypeError(f"generate: attention_mask must hold 0/1 as ints or bools, got dtype {mask.dtype}")
    if mask.shape != tuple(shape):
        raise ValueError(f"generate: attention_mask has shape {mask.shape}, the prompt has {tuple(shape)}")
    if not np.isin(mask, (0, 1)).all():
        raise ValueError(f"generate: attention_mask must hold only 0 and 1, got {np.unique(mask).tolist()}")
    mask = mask.astype(bool)
    empty = np.flatnonzero(~mask.any(-1))
    if empty.size:
        raise ValueError(f"generate: attention_mask row {empty[0]} is all zeros: every row needs at least "
                         "one prompt token")
    inner = np.flatnonzero((mask[:, :-1] & ~mask[:, 1:]).any(-1))
    if inner.size:
        raise ValueError(f"generate: attention_mask row {inner[0]} has a 0 after a 1: only left padding is "
                         "supported (pads first in each row, as tokenizers with padding_side='left')")
    pads = (~mask).sum(-1).astype(np.int64)
    return pads if pads.any() else None


def check_streamer(streamer):
    """streamer: None or an object with callable put(ids) and end() (HF's BaseStreamer protocol)."""
    if streamer is not None and not all(callable(getattr(streamer, m, None)) for m in ("put", "end")):
        raise TypeError("generate: streamer must have put(ids) and end() methods (Hugging Face's streamer "
                        f"protocol), got {type(streamer).__name__}")
    return streamer


def prompt_tokens(prompt, vocab_size, pads=None):
    """(B, vocab_size) bool: the tokens in each row of prompt (B, T), its `pads` left pads not counted
    (HF's repetition penalty ignores them: prompt_ignore_length = the attention_mask's pad counts)."""
    B, T = prompt.shape
    seen = np.zeros((B, vocab_size), bool)
    if pads is None:
        np.put_along_axis(seen, prompt, True, -1)
    else:
        real = np.arange(T) >= pads[:, None]
        seen[np.nonzero(real)[0], prompt[real]] = True
    return seen


def penalize_repetition(logits, seen, penalty):
    """HF's RepetitionPenaltyLogitsProcessor: where seen[b, v], l -> l / penalty if l > 0 else l * penalty."""
    return np.where(seen, np.where(logits > 0, logits / penalty, logits * penalty), logits)


def _top_k(z, top_k):
    """-inf below the k-th largest value of each row (ties with it stay)."""
    kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
    return np.where(z < kth, -np.inf, z)


def _top_p(probs, top_p):
    """Nucleus: keep the most likely tokens until their total reaches top_p (the top one always stays),
    then renormalise."""
    order = np.argsort(-probs, axis=-1)
    sorted_p = np.take_along_axis(probs, order, -1)
    keep_sorted = np.cumsum(sorted_p, -1) - sorted_p < top_p
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, -1)
    probs = np.where(keep, probs, 0.0)
    return probs / probs.sum(-1, keepdims=True)


def _min_p(probs, min_p):
    """HF's MinPLogitsWarper: keep p >= min_p * max(p) (so the top token always), then renormalise."""
    probs = np.where(probs >= min_p * probs.max(-1, keepdims=True), probs, 0.0)
    return probs / probs.sum(-1, keepdims=True)


def _check_logits(logits):
    """NaN or +inf logits, or a row with every logit -inf, raise ValueError naming the row."""
    bad = np.isnan(logits) | (logits == np.inf)
    bad[(logits == -np.inf).all(-1)] = True     # a row with no token left to choose
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"generate: the logits of row {row} hold {logits[row, col]} (token {col}); "
                         "the model's weights or inputs are not finite")


def probabilities(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """The distribution `sample` draws from, (B, V) float64: softmax(logits / temperature) after top-k,
    then nucleus (top-p), then min-p filtering (HF's warper order; the top token always stays)."""
    logits = np.asarray(logits, np.float64)
    # shift before dividing: a tiny temperature must not overflow the logits to inf - inf
    with np.errstate(over="ignore"):
        z = (logits - logits.max(-1, keepdims=True)) / temperature
    if top_k is not None and top_k < z.shape[-1]:
        z = _top_k(z, top_k)
    probs = np.exp(z - z.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        probs = _top_p(probs, top_p)
    if min_p:                                   # None or 0 keeps every token
        probs = _min_p(probs, min_p)
    return probs


def sample(logits, temperature=1.0, top_k=None, top_p=None, rng=None, min_p=None):
    """One int64 token id per row of logits (B, V): greedy at temperature 0, else one draw from
    `probabilities` (temperature, top-k, top-p, min-p). NaN or +inf logits (a diverged model) raise
    ValueError instead of sampling token 0."""
    logits = np.asarray(logits, np.float64)
    _check_logits(logits)
    if temperature == 0:
        return logits.argmax(-1)
    rng = rng if rng is not None else np.random.default_rng()
    probs = probabilities(logits, temperature, top_k, top_p, min_p)
    cdf = np.cumsum(probs, -1)
    u = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    # the first token whose cdf exceeds u: with u = 0 (random() can return 0.0) a filtered-out
    # leading token (cdf 0) is skipped, as it would not be by the first cdf >= u
    return np.minimum((cdf <= u).sum(-1), probs.shape[-1] - 1).astype(np.int64)


class Sampler:
    """One `generate` call's token choice, with Hugging Face `generate` semantics.

    Holds the sequences (up to B x (T + max_new_tokens), a buffer grown as they come), the rng, and for the
    repetition penalty the tokens present in each row (prompt included, its `pads` left pads (B,)
    not: `left_padding`). `push(logits)` appends one id per row; once a row samples an eos id it is
    finished and gets pad_token_id ever after, and generation is `done` when every row has finished
    or max_new_tokens are in. suppress_tokens are never sampled (their logits -inf, as HF's
    SuppressTokensLogitsProcessor; e.g. a model's padded vocabulary beyond its tokenizer's).
    Every argument is validated here (TypeError / ValueError naming it).

    A streamer gets HF's calls in HF's order: put(prompt (B, T)) here, put(new ids (B,)) at every
    push (a finished row's pad_token_id included), both int64 numpy copies, and end() at `finish()`.
    """
    CHUNK = 4096        # the first allocation holds the prompt and this many new ids

    def __init__(self, prompt, max_new_tokens, vocab_size, temperature=1.0, top_k=None, top_p=None,
                 seed=None, eos_token_id=None, pad_token_id=None, repetition_penalty=1.0, min_p=None,
                 pads=None, streamer=None, suppress_tokens=None):
        check_sampling(temperature, top_k, top_p)
        self.rng = np.random.default_rng(check_seed("generate", seed))
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.eos = check_eos(eos_token_id, vocab_size)
        self.pad = check_pad(pad_token_id, self.eos, vocab_size)
        self.penalty = check_repetition_penalty(repetition_penalty)
        self.min_p = check_min_p(min_p)
        self.suppress = check_suppress(suppress_tokens, vocab_size)
        self.streamer = check_streamer(streamer)
        B, T = prompt.shape
        # grown as tokens come (`_room`): a recurrent model takes any max_new_tokens, which must not
        # allocate B x max_new_tokens ids up front (--tokens 10**11 was a MemoryError before the first)
        self.total = T + max_new_tokens
        self.out = np.empty((B, min(self.total, T + self.CHUNK)), np.int64)
        self.out[:, :T] = prompt
        self.length = T
        self.finished = np.zeros(B, bool)
        self.seen = None
        if self.penalty != 1.0:
            self.seen = prompt_tokens(self.out[:, :T], vocab_size, pads)
        if self.streamer is not None:
            self.streamer.put(self.out[:, :T].copy())

    @property
    def done(self):
        """True once max_new_tokens are in or every row has sampled an eos id."""
        return self.length == self.total or (self.eos is not None and bool(self.finished.all()))

    @property
    def last(self):
        """The newest id of each row (B,): the next input of the model."""
        return self.out[:, self.length - 1]

    def push(self, logits):
        """Append the ids chosen from next-token logits (B, V) unless done; True while more are wanted."""
        if not self.done:
            self._room()
            self.out[:, self.length] = self._choose(logits)
            if self.streamer is not None:
                self.streamer.put(self.out[:, self.length].copy())
            self.length += 1
        return not self.done

    def _room(self):
        """Make room for one more column: the buffer doubles, up to the prompt + max_new_tokens."""
        if self.length == self.out.shape[1]:
            grown = np.empty((len(self.out), min(self.total, 2 * self.out.shape[1])), np.int64)
            grown[:, :self.length] = self.out
            self.out = grown

    def finish(self):
        """The end of generation: the streamer's end()."""
        if self.streamer is not None:
            self.streamer.end()

    def sequences(self):
        """The prompt and the new ids, (B, T + n) int64 with n <= max_new_tokens."""
        return self.out if self.length == self.out.shape[1] else self.out[:, :self.length].copy()

    def _choose(self, logits):
        """Penalise repeats, suppress, sample, then pad the finished rows and mark the rows that
        sampled eos."""
        logits = np.asarray(logits, np.float64)
        if self.seen is not None:
            logits = penalize_repetition(logits, self.seen, self.penalty)
        if self.suppress is not None:       # HF's SuppressTokensLogitsProcessor
            logits = logits.copy()
            logits[:, self.suppress] = -np.inf
        nxt = sample(logits, self.temperature, self.top_k, self.top_p, self.rng, self.min_p)
        if self.eos is not None:
            nxt = np.where(self.finished, self.pad, nxt)
            self.finished |= np.isin(nxt, self.eos)
        if self.seen is not None:
            self.seen[np.arange(len(nxt)), nxt] = True
        return nxt


class TextStreamer:
    """Prints a generation's text as it grows: pass it as `generate(..., streamer=TextStreamer(tok))`
    (or to train.generate_text). Hugging Face's TextStreamer protocol, batch size 1 only.

    put(ids) takes the prompt (1, T) first (skipped with skip_prompt), then each step's new ids (1,);
    end() prints what is left and a newline (as HF's). Each put decodes the ids since the last
    newline and prints only the text that can no longer change: a token need not be a whole
    character (ByteTokenizer: one byte of a multi-byte UTF-8 character), and a trailing incomplete
    one decodes to U+FFFD, which is held back until the next token completes it. So everything
    printed, joined, is tokenizer.decode(every id) followed by the newline. file: where to print
    (None: sys.stdout at print time); decode_kwargs go to tokenizer.decode (HF tokenizers'
    skip_special_tokens); override `on_finalized_text(text, stream_end)` to send the text elsewhere.
    """

    def __init__(self, tokenizer, skip_prompt=False, file=None, **decode_kwargs):
        if not callable(getattr(tokenizer, "decode", None)):
            raise TypeError("TextStreamer: tokenizer must have a decode(ids) method, got "
                            f"{type(tokenizer).__name__}")
        self.tokenizer, self.skip_prompt, self.file = tokenizer, bool(skip_prompt), file
        self.decode_kwargs = decode_kwargs
        self._reset()

    def _reset(self):
        """Ready for a new generation: nothing held, the next put is a prompt."""
        self.token_cache, self.print_len, self.next_tokens_are_prompt = [], 0, True

    def put(self, value):
        """Take the ids (1, T) or (1,) / (T,) of one call, print the text that is final."""
        value = value.data if isinstance(value, Tensor) else np.asarray(value)
        if value.ndim > 1 and value.shape[0] > 1:
            raise ValueError("TextStreamer only supports batch size 1")
        is_prompt, self.next_tokens_are_prompt = self.next_tokens_are_prompt, False
        if self.skip_prompt and is_prompt:
            return
        self.token_cache.extend(value.reshape(-1).tolist())
        text = self._decode(self.token_cache)
        if text.endswith("\n"):         # final: restart the cache, keeping the last token as context
            printable = text[self.print_len:]
            self.token_cache = self.token_cache[-1:]
            self.print_len = len(self._decode(self.token_cache))
        else:
            printable = text[self.print_len:len(text.rstrip("\ufffd"))]
            self.print_len += len(printable)
        self.on_finalized_text(printable)

    def end(self):
        """Print the rest (held back characters included) and a newline; ready for the next generation."""
        printable = self._decode(self.token_cache)[self.print_len:] if self.token_cache else ""
        self._reset()
        self.on_finalized_text(printable, stream_end=True)

    def _decode(self, ids):
        return self.tokenizer.decode(np.asarray(ids, np.int64), **self.decode_kwargs)

    def on_finalized_text(self, text, stream_end=False):
        """Print `text` (a newline after it at the end of the stream) and flush."""
        print(text, file=self.file if self.file is not None else sys.stdout, flush=True,
              end=None if stream_end else "")
